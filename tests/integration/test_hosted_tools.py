"""Hosted tools (chatclient.tools.builtin) end to end over real HTTP against the loopback server.

Declarations (with Anthropic's beta headers), typed ``HostedToolCall`` parts and citations from
recorded Anthropic and OpenAI Responses answers, their stream events, and the follow-up turn that
sends them back verbatim, also after a round trip through a SQLite memory. A model that cannot run
a hosted tool fails before any HTTP request.
"""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from advisors import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.errors import UnsupportedFeatureError
from chatclient.events import HostedToolUsed
from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from chatclient.models.anthropic import CONTENT_KEY, AnthropicChatModel
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.models.openai_responses import OpenAIResponsesModel
from chatclient.prompt import Prompt
from chatclient.tools.builtin import DECLARATIONS, CodeExecution, WebFetch, WebSearch
from tests.conftest import run_spec
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.responses_replay import load as load_fixture
from tests.support.responses_replay import recorded as responses_recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "anthropic"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"


def anthropic_reply(name: str, seed: int = 0) -> Reply:
    rng = random.Random(f"{name}-{seed}")
    sizes = [rng.randint(1, 23) for _ in range(64)]
    body = (DATA / name).read_bytes()
    ctype = "text/event-stream" if name.endswith(".sse") else "application/json"
    return Reply(200, body=body, headers={"content-type": ctype}, split=sizes)


def anthropic(srv: LoopbackServer, **kw: Any) -> AnthropicChatModel:
    return AnthropicChatModel(
        "claude-sonnet-4-5", api_key="sk-ant-test-0123456789", base_url=srv.url, timeout=10.0, **kw
    )


def responses(srv: LoopbackServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-4.1", api_key="sk-test-0123456789", base_url=srv.url + "/v1", timeout=10.0)


# -- declarations ---------------------------------------------------------------------------------------


def test_anthropic_declarations_and_beta_headers(server: LoopbackServer) -> None:
    server.script(MESSAGES, anthropic_reply("code_execution_bash.json"), anthropic_reply("web_search_citations.json"))
    with anthropic(server) as model:
        client = ChatClient.create(model)
        client.prompt("10!").tools(CodeExecution(), WebFetch(max_uses=2)).call().content()
        client.prompt("Shannon?").tools(WebSearch(max_uses=3, allowed_domains=["wikipedia.org"])).call().content()
    first, second = server.requests_to(MESSAGES)
    assert first.body["tools"] == [
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 2},
    ]
    assert first.headers["anthropic-beta"] == "code-execution-2025-08-25,web-fetch-2025-09-10"
    assert first.headers["x-api-key"] == "sk-ant-test-0123456789"
    assert second.body["tools"] == [
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["wikipedia.org"]}
    ]
    assert "anthropic-beta" not in second.headers  # web search needs no beta


def test_betas_given_by_the_caller_are_kept(server: LoopbackServer) -> None:
    server.script(MESSAGES, anthropic_reply("code_execution_bash.json"))
    with anthropic(server, headers={"anthropic-beta": "context-1m-2025-08-07"}) as model:
        model.call(Prompt("10!", tools=(CodeExecution().definition,)))
    assert (
        server.requests_to(MESSAGES)[0].headers["anthropic-beta"] == "context-1m-2025-08-07,code-execution-2025-08-25"
    )


def test_the_table_holds_every_dated_type_once() -> None:
    anthropic_types = [kind for (api, _), (kind, _) in DECLARATIONS.items() if api == "anthropic"]
    assert all(k.rsplit("_", 1)[1].isdigit() for k in anthropic_types)
    assert len(set(anthropic_types)) == len(anthropic_types)


@pytest.mark.parametrize(
    ("make", "path"),
    [
        (
            lambda s: OpenAIChatModel("gpt-4o", api_key="sk-test-0123456789", base_url=s.url + "/v1"),
            "/v1/chat/completions",
        ),
        (lambda s: OllamaChatModel("llama3", base_url=s.url), "/api/chat"),
        (lambda s: OpenAIResponsesModel("gpt-4.1", api_key="sk-test-0123456789", base_url=s.url + "/v1"), RESPONSES),
    ],
)
@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_a_model_without_the_tool_fails_before_http(server: LoopbackServer, make: Any, path: str, mode: str) -> None:
    hosted = WebFetch() if path == RESPONSES else WebSearch()
    with make(server) as model, pytest.raises(UnsupportedFeatureError) as info:
        run_spec(ChatClient.create(model).prompt("hi").tools(hosted), mode)
    assert info.value.feature == hosted.tool_name
    assert server.requests_to(path) == []


def test_hosted_tools_pickle_and_compare_by_value() -> None:
    for tool in (WebSearch(max_uses=2, allowed_domains=["a.org"]), CodeExecution(), WebFetch(max_uses=1)):
        again = pickle.loads(pickle.dumps(tool))
        assert again == tool and again.definition == tool.definition
    with pytest.raises(ValueError):
        WebSearch(max_uses=0)
    with pytest.raises(TypeError):
        WebSearch(allowed_domains="a.org")


# -- typed parts ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_anthropic_code_execution_becomes_a_typed_part(server: LoopbackServer, mode: str) -> None:
    server.script(MESSAGES, anthropic_reply("code_execution_bash.json", len(mode)))
    with anthropic(server) as model:
        response, _ = invoke(model, Prompt("10!", tools=(CodeExecution().definition,)), mode)
    message = response.generations[0].output
    (call,) = message.hosted_tool_calls
    assert (call.id, call.name, call.status, call.provider) == (
        "srvtoolu_01BashRun9Kd",
        "code_execution",
        "completed",
        "anthropic",
    )
    assert call.input == {"command": 'python3 -c "import math; print(math.factorial(10))"'}
    assert call.output["stdout"] == "3628800\n" and call.output["return_code"] == 0
    assert [b["type"] for b in call.raw] == ["server_tool_use", "bash_code_execution_tool_result"]
    assert message.text == "I'll compute that in the sandbox.10! = 3628800."


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_anthropic_web_fetch_stream(server: LoopbackServer, mode: str) -> None:
    server.script(MESSAGES, anthropic_reply("web_fetch.sse", len(mode)))
    with anthropic(server) as model:
        response, chunks = invoke(model, Prompt("fetch", tools=(WebFetch().definition,)), mode)
    message = response.generations[0].output
    (call,) = message.hosted_tool_calls
    assert call.name == "web_fetch" and call.input == {"url": "https://example.com/article"}
    assert call.output == {
        "url": "https://example.com/article",
        "retrieved_at": "2025-08-25T10:30:00Z",
        "title": "Article Title",
    }
    assert message.text == "I'll fetch the article.The article is about ü."
    # the part arrives in its own chunk as soon as the result block starts, not only at the end
    assert any(c.generations[0].output.hosted_tool_calls for c in chunks[:-1])
    assert response.metadata.extra["server_tool_use"] == {"web_fetch_requests": 1}


def test_anthropic_web_search_citations(server: LoopbackServer) -> None:
    server.script(MESSAGES, anthropic_reply("web_search_citations.json"))
    with anthropic(server) as model:
        message = model.call(Prompt("Shannon?", tools=(WebSearch().definition,))).generations[0].output
    (call,) = message.hosted_tool_calls
    assert call.input == {"query": "claude shannon birth date"}
    assert call.output["sources"] == [
        {
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "page_age": "April 30, 2025",
        }
    ]
    (citation,) = message.citations
    assert citation.url == "https://en.wikipedia.org/wiki/Claude_Shannon"
    assert citation.cited_text.startswith("Claude Elwood Shannon")


def test_stream_events_surface_hosted_tool_calls(server: LoopbackServer) -> None:
    server.script(RESPONSES, responses_recorded(load_fixture("responses", "responses_web_search_stream"), seed="ev"))
    with responses(server) as model:
        events = list(ChatClient.create(model).prompt("chatclient?").tools(WebSearch()).stream().events())
    used = [e for e in events if isinstance(e, HostedToolUsed)]
    assert [e.call.name for e in used] == ["web_search"]
    assert used[0].call.input["query"] == "chatclient python"
    assert events[-1].response.generations[0].output.hosted_tool_calls == (used[0].call,)


# -- sent back next turn, through memory ------------------------------------------------------------------


def test_anthropic_server_blocks_survive_sqlite_memory_and_go_back_verbatim(
    server: LoopbackServer, tmp_path: Path
) -> None:
    server.script(MESSAGES, anthropic_reply("code_execution_bash.json"), anthropic_reply("text.json"))
    memory = MessageWindowChatMemory(SqliteChatMemoryRepository(str(tmp_path / "m.db")))
    with anthropic(server) as model:
        client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
        client.prompt("10!").tools(CodeExecution()).call().content()
        stored = memory.get("default")[-1]
        assert stored.hosted_tool_calls[0].output["stdout"] == "3628800\n"
        client.prompt("and 11!?").tools(CodeExecution()).call().content()
    follow = server.requests_to(MESSAGES)[1].body["messages"]
    original = json.loads((DATA / "code_execution_bash.json").read_text())["content"]
    assert follow[1] == {"role": "assistant", "content": original}
    assert follow[2] == {"role": "user", "content": "and 11!?"}


def test_anthropic_rebuilds_a_rewritten_turn_with_its_server_blocks(server: LoopbackServer) -> None:
    server.script(MESSAGES, anthropic_reply("code_execution_bash.json"), anthropic_reply("text.json"))
    with anthropic(server) as model:
        answer = model.call(Prompt("10!")).generations[0].output
        from chatclient.messages import AssistantMessage, UserMessage

        edited = AssistantMessage(
            "It is 3628800.", metadata=answer.metadata, hosted_tool_calls=answer.hosted_tool_calls
        )
        model.call(Prompt([UserMessage("10!"), edited, UserMessage("thanks")]))
    content = server.requests_to(MESSAGES)[1].body["messages"][1]["content"]
    assert [b["type"] for b in content] == ["server_tool_use", "bash_code_execution_tool_result", "text"]
    assert CONTENT_KEY in answer.metadata


def test_responses_hosted_items_survive_memory(server: LoopbackServer, tmp_path: Path) -> None:
    fixture = load_fixture("responses", "responses_web_search")
    server.script(
        RESPONSES,
        responses_recorded(fixture, seed="m1"),
        responses_recorded(load_fixture("responses", "responses_text"), seed="m2"),
    )
    memory = MessageWindowChatMemory(SqliteChatMemoryRepository(str(tmp_path / "r.db")))
    with responses(server) as model:
        client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
        first = client.prompt("When?").tools(WebSearch()).call().chat_response()
        assert memory.get("default")[-1] == first.generations[0].output
        client.prompt("Where?").tools(WebSearch()).call().content()
    follow = server.requests_to(RESPONSES)[1].body["input"]
    assert follow[1:3] == fixture["body"]["output"]
    assert server.requests_to(RESPONSES)[1].body["tools"] == [{"type": "web_search"}]


def test_the_embedded_llama_cpp_model_refuses_hosted_tools_before_generating() -> None:
    from chatclient.models.llamacpp import tool_forcing

    with pytest.raises(UnsupportedFeatureError) as info:
        tool_forcing(Prompt("x", tools=(CodeExecution().definition,)), None)
    assert info.value.provider == "llama.cpp"


# -- turns the API paused (pause_turn) ---------------------------------------------------------------------


def message_sse(message: dict[str, Any]) -> bytes:
    """A Messages API answer as the event stream the API sends for it."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                )
            )
            for c in block.get("citations") or ():
                events.append(
                    (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "citations_delta", "citation": c},
                        },
                    )
                )
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": block["text"]}},
                )
            )
        elif kind == "server_tool_use":
            events.append(
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": i, "content_block": {**block, "input": {}}},
                )
            )
            partial = json.dumps(block["input"])
            events.append(
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": partial},
                    },
                )
            )
        else:
            events.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": block}))
        events.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    events += [("message_delta", delta), ("message_stop", {"type": "message_stop"})]
    return "".join(f"event: {n}\ndata: {json.dumps(d, ensure_ascii=False)}\n\n" for n, d in events).encode()


def paused_reply(name: str, stream: bool, seed: int) -> Reply:
    if not stream:
        return anthropic_reply(name, seed)
    rng = random.Random(f"{name}-{seed}")
    body = message_sse(json.loads((DATA / name).read_text()))
    return Reply(
        200, body=body, headers={"content-type": "text/event-stream"}, split=[rng.randint(1, 23) for _ in range(64)]
    )


@pytest.mark.parametrize("mode", ["call", "acall", "stream", "astream"])
def test_a_paused_turn_is_continued_and_joined(server: LoopbackServer, mode: str) -> None:
    stream = mode.endswith("stream")
    server.script(
        MESSAGES,
        paused_reply("pause_turn_web_search.json", stream, 1),
        paused_reply("pause_turn_continued.json", stream, 2),
    )
    with anthropic(server) as model:
        response, chunks = invoke(model, Prompt("When was 3.14 released?", tools=(WebSearch().definition,)), mode)
    message = response.generations[0].output
    assert message.text == "Let me search for the latest figures.Python 3.14.0 was released on 7 October 2025."
    assert [h.name for h in message.hosted_tool_calls] == ["web_search"]
    assert [c.url for c in message.citations] == ["https://peps.python.org/pep-0745/"]
    assert response.generations[0].finish_reason == "stop"
    assert response.generations[0].metadata.extra["raw_finish_reason"] == "end_turn"
    assert (response.metadata.usage.prompt_tokens, response.metadata.usage.completion_tokens) == (5148, 136)
    paused = json.loads((DATA / "pause_turn_web_search.json").read_text())
    continued = json.loads((DATA / "pause_turn_continued.json").read_text())
    assert [b["type"] for b in message.metadata[CONTENT_KEY]] == [
        b["type"] for b in paused["content"] + continued["content"]
    ]
    # the paused content went back as is, as the last (assistant) turn of the continuation request
    second = server.requests_to(MESSAGES)[1].body["messages"]
    assert second[-1] == {"role": "assistant", "content": paused["content"]}
    if chunks:
        assert [c for c in chunks if c.has_finish_reason()] == [chunks[-1]]


def test_the_joined_turn_goes_back_whole_next_time(server: LoopbackServer) -> None:
    server.script(
        MESSAGES,
        anthropic_reply("pause_turn_web_search.json"),
        anthropic_reply("pause_turn_continued.json"),
        anthropic_reply("text.json"),
    )
    with anthropic(server) as model:
        answer = model.call(Prompt("When?", tools=(WebSearch().definition,))).generations[0].output
        from chatclient.messages import UserMessage

        model.call(Prompt([UserMessage("When?"), answer, UserMessage("Thanks")], tools=(WebSearch().definition,)))
    third = server.requests_to(MESSAGES)[2].body["messages"]
    assert [b["type"] for b in third[1]["content"]] == ["text", "server_tool_use", "web_search_tool_result", "text"]


def test_continuations_are_bounded(server: LoopbackServer) -> None:
    server.script(MESSAGES, *(anthropic_reply("pause_turn_web_search.json", i) for i in range(3)))
    with anthropic(server) as model:
        model.pause_continuations = 2
        response = model.call(Prompt("When?"))
    assert len(server.requests_to(MESSAGES)) == 3
    assert response.generations[0].metadata.extra["raw_finish_reason"] == "pause_turn"
    assert [h.id for h in response.generations[0].output.hosted_tool_calls] == ["srvtoolu_01PauseA"] * 3


def test_anthropic_count_tokens_sends_the_betas_hosted_tools_need(server: LoopbackServer) -> None:
    server.script("/v1/messages/count_tokens", Reply(json={"input_tokens": 1234}))
    with anthropic(server) as model:
        assert model.count_tokens(Prompt("10!", tools=(CodeExecution().definition,))) == 1234
    request = server.requests_to("/v1/messages/count_tokens")[0]
    assert request.headers["anthropic-beta"] == "code-execution-2025-08-25"
    assert request.body["tools"] == [{"type": "code_execution_20250825", "name": "code_execution"}]
