"""Replay of real Anthropic Messages API responses (tests/data/providers/anthropic/) over real HTTP.

Each recorded body is served by the loopback server cut into small, irregular HTTP chunks (so SSE
frames, JSON documents and UTF-8 characters arrive split across network reads) and checked field
by field. Follow-up requests of a thinking + tool loop and of a server-tool turn are compared with
golden request bodies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import AuthenticationError, ModelHTTPError, RateLimitError
from chatclient.messages import AssistantMessage, Reasoning, SystemMessage, ToolCall, UserMessage
from chatclient.models.anthropic import CONTENT_KEY, AnthropicChatModel
from chatclient.models.base import ChatResponse, Usage
from chatclient.prompt import Prompt
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.recorded import recorded_file

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "anthropic"
PATH = "/v1/messages"
CALLS = ("call", "acall")
STREAMS = ("stream", "astream")
SIG = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYdsMxU3Qm3E2cJ0bgR5xWWd6k7XyGqn0Kx2rj0ZEhMOkX1yY2+8w=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj2pLmN8gFZq"


def recorded(name: str, seed: int = 0) -> Reply:
    """The fixture ``name`` as an HTTP answer, split into random 1..23 byte chunks."""
    return recorded_file(DATA / name, seed=f"{name}-{seed}")


def make_model(srv: LoopbackServer, **kw: Any) -> AnthropicChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return AnthropicChatModel("claude-sonnet-4-5", api_key="sk-ant-test-key-0123456789", base_url=srv.url, **kw)


def replay(srv: LoopbackServer, name: str, mode: str, prompt: Prompt | None = None) -> tuple[ChatResponse, list[Any]]:
    srv.script(PATH, recorded(name, seed=len(mode)))
    with make_model(srv) as model:
        return invoke(model, prompt or Prompt("hi"), mode)


def output(response: ChatResponse) -> AssistantMessage:
    assert response.result is not None
    return response.result.output


# -- plain answers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_plain_text(server: LoopbackServer, mode: str) -> None:
    response, chunks = replay(server, "text.json" if mode in CALLS else "text.sse", mode)
    message = output(response)
    assert message.text == "Hello! How can I help you today? 😊"
    assert message.tool_calls == () and message.reasoning == () and message.refusal is None
    assert dict(message.metadata) == {}  # nothing needed keeping beyond the text
    assert response.result is not None and response.result.finish_reason == "stop"
    assert response.result.metadata.extra["raw_finish_reason"] == "end_turn"
    assert "stop_sequence" not in response.result.metadata.extra
    assert response.metadata.usage == Usage(12, 14)
    assert response.metadata.extra["service_tier"] == "standard"
    if mode in STREAMS:
        assert [c.text for c in chunks if c.text] == ["Hello", "! How can I help", " you today? 😊"]
        assert response.metadata.id == "msg_01Y6V41gqPaKWEw7iPouH7iW"
    else:
        assert response.metadata.id == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert response.metadata.model == "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_tool_use(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "tool_use.json" if mode in CALLS else "tool_use.sse", mode)
    message = output(response)
    assert response.result is not None and response.result.finish_reason == "tool_calls"
    assert len(message.tool_calls) == 1
    call = message.tool_calls[0]
    assert call.name == "get_weather" and call.id.startswith("toolu_")
    args = json.loads(call.arguments)
    assert args["location"] == "San Francisco, CA"
    assert set(args) == {"location", "unit"}
    assert message.text and message.text.startswith(("I'll check", "Okay, let's check"))
    assert dict(call.metadata) == {}


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_parallel_tool_use(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "parallel_tool_use.json" if mode in CALLS else "parallel_tool_use.sse", mode)
    calls = output(response).tool_calls
    assert [(c.id, c.name) for c in calls] == [
        ("toolu_01Paris", "get_weather"),
        ("toolu_01Tokyo", "get_weather"),
        ("toolu_01Time", "get_time"),
    ]
    assert [json.loads(c.arguments) for c in calls] == [{"location": "Paris"}, {"location": "Tokyo"}, {}]


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_stop_sequence_is_reported(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "stop_sequence.json" if mode in CALLS else "stop_sequence.sse", mode)
    assert output(response).text == "1, 2, 3, 4"
    assert response.result is not None and response.result.finish_reason == "stop"
    assert response.result.metadata.extra["raw_finish_reason"] == "stop_sequence"
    assert response.result.metadata.extra["stop_sequence"] == "5"


def test_max_tokens_call(server: LoopbackServer) -> None:
    response, _ = replay(server, "max_tokens.json", "call")
    assert output(response).text == "Once upon a time, in a land far"
    assert response.result is not None and response.result.finish_reason == "length"


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_refusal_is_a_typed_value_not_an_empty_answer(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "refusal.json" if mode in CALLS else "refusal.sse", mode)
    message = output(response)
    assert message.refusal is not None and message.refusal.startswith("This request triggered restrictions")
    assert response.result is not None and response.result.finish_reason == "content_filter"
    assert response.result.metadata.extra["stop_details"]["category"] == "cyber"
    assert response.metadata.usage == Usage(18, 5)


# -- usage --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_cache_usage(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "cache_usage.json" if mode in CALLS else "cache_usage.sse", mode)
    usage = response.metadata.usage
    # prompt_tokens is the whole input: uncached 42 + read 18200 + written 1200.
    assert usage == Usage(19442, 17, cached_input_tokens=18200, cache_write_tokens=1200)
    assert usage.total_tokens == 19459


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_thinking_then_tool_use(server: LoopbackServer, mode: str) -> None:
    response, chunks = replay(server, "thinking_tool_use.json" if mode in CALLS else "thinking_tool_use.sse", mode)
    message = output(response)
    assert message.reasoning == (
        Reasoning("The user wants the weather in Paris. I should call get_weather.", SIG, provider="anthropic"),
    )
    assert message.reasoning_text.startswith("The user wants")
    assert message.text is None  # content() stays answer-only
    assert [(c.id, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("toolu_017R7ACrx7NF7sLDDtvdQ1u9", {"location": "Paris"})
    ]
    assert response.metadata.usage.prompt_tokens == 599
    assert response.metadata.usage.completion_tokens == 59
    if mode in CALLS:
        assert response.metadata.usage.reasoning_tokens == 18
    else:
        # Reasoning deltas stream apart from the answer text: thinking text, then the signature.
        deltas = [r for c in chunks if c.result is not None for r in c.result.output.reasoning]
        assert [r.text for r in deltas if r.text] == [
            "The user wants the weather",
            " in Paris. I should call get_weather.",
        ]
        assert [r.signature for r in deltas if r.signature] == [SIG]
        assert all(c.text is None for c in chunks if c.result is not None and c.result.output.reasoning)


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_redacted_thinking(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "redacted_thinking.json" if mode in CALLS else "redacted_thinking.sse", mode)
    message = output(response)
    assert message.text == "Based on my analysis, the answer is 42."
    assert [r.text for r in message.reasoning] == ["Let me analyze this step by step.", ""]
    assert message.reasoning[1].redacted == REDACTED and message.reasoning[1].signature is None
    assert all(r.provider == "anthropic" for r in message.reasoning)


# -- server tools and citations -----------------------------------------------------------------------


def test_web_search_with_citations_call(server: LoopbackServer) -> None:
    response, _ = replay(server, "web_search_citations.json", "call")
    message = output(response)
    assert message.text == "I'll search for that.Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
    assert message.tool_calls == ()  # a server tool is not the client's to run
    content = message.metadata[CONTENT_KEY]
    assert [b["type"] for b in content] == ["text", "server_tool_use", "web_search_tool_result", "text"]
    assert content[3]["citations"][0]["url"] == "https://en.wikipedia.org/wiki/Claude_Shannon"
    assert content[2]["content"][0]["encrypted_content"].startswith("EqMBCio")
    assert response.metadata.extra["server_tool_use"] == {"web_search_requests": 1}
    assert response.metadata.usage == Usage(6039, 931)


@pytest.mark.parametrize("mode", STREAMS)
def test_server_tool_next_to_client_tool_in_a_stream(server: LoopbackServer, mode: str) -> None:
    # Used to raise ModelResponseError (KeyError on the server_tool_use block index).
    response, _ = replay(server, "web_search_with_client_tool.sse", mode)
    message = output(response)
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("toolu_01SaveResults", "save_results", {"filename": "news.txt"})
    ]
    content = message.metadata[CONTENT_KEY]
    assert [b["type"] for b in content] == ["text", "tool_use", "server_tool_use", "web_search_tool_result"]
    assert content[2]["input"] == {"query": "latest news"}
    assert content[3]["content"][0]["url"] == "https://example.com/news"
    assert response.metadata.extra["server_tool_use"] == {"web_search_requests": 1}


@pytest.mark.parametrize("mode", STREAMS)
def test_citations_delta(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "citations.sse", mode)
    message = output(response)
    assert message.text == "According to the document, the grass is green."
    content = message.metadata[CONTENT_KEY]
    assert [b.get("citations") for b in content][1] == [
        {
            "type": "char_location",
            "cited_text": "The grass is green. ",
            "document_index": 0,
            "document_title": "My Document",
            "start_char_index": 0,
            "end_char_index": 20,
        }
    ]


# -- cut answers and errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", STREAMS)
def test_tool_input_cut_by_max_tokens_is_flagged_not_dropped(server: LoopbackServer, mode: str) -> None:
    response, _ = replay(server, "max_tokens_tool_cut.sse", mode)
    message = output(response)
    assert response.result is not None and response.result.finish_reason == "length"
    assert message.text == "Writing the file now."
    (call,) = message.tool_calls
    assert (call.id, call.name) == ("toolu_01WriteFileCut", "write_file")
    assert call.arguments.endswith("The first point is that")
    assert call.metadata["partial"] is True


def test_overloaded_error_event_mid_stream_is_the_529_error(server: LoopbackServer) -> None:
    server.set_default(PATH, recorded("overloaded_error.sse"))
    with make_model(server, max_retries=0) as model, pytest.raises(ModelHTTPError) as info:
        list(model.stream(Prompt("hi")))
    assert info.value.status == 529 and "overloaded_error" in str(info.value)


@pytest.mark.parametrize(
    ("name", "error", "fragment"),
    [
        ("error_400.json", ModelHTTPError, "must start with a thinking block"),
        ("error_401.json", AuthenticationError, "invalid x-api-key"),
        ("error_429.json", RateLimitError, "exceed the rate limit"),
        ("error_529.json", ModelHTTPError, "Overloaded"),
    ],
)
def test_error_bodies(server: LoopbackServer, name: str, error: type[Exception], fragment: str) -> None:
    server.set_default(PATH, recorded(name))
    with make_model(server, max_retries=0) as model, pytest.raises(error) as info:
        model.call(Prompt("hi"))
    assert isinstance(info.value, ModelHTTPError)
    assert info.value.status == int(name[6:9])
    assert fragment in str(info.value)


def test_529_then_success_is_retried(server: LoopbackServer) -> None:
    server.script(PATH, recorded("error_529.json"), recorded("text.json"))
    with make_model(server, max_retries=2) as model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today? 😊"
    assert len(server.requests_to(PATH)) == 2


# -- golden follow-up requests ------------------------------------------------------------------------


@tool
def get_weather(location: str) -> str:
    """Current weather for a location."""
    return f"18C and sunny in {location}"


def golden(name: str) -> Any:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("mode", ("call", "stream"))
def test_thinking_tool_loop_sends_the_signed_thinking_back(server: LoopbackServer, mode: str) -> None:
    first = "thinking_tool_use.json" if mode == "call" else "thinking_tool_use.sse"
    server.script(PATH, recorded(first), recorded("text.json" if mode == "call" else "text.sse"))
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt().system("Be brief.").user("Weather in Paris?").tools(get_weather)
        text = spec.call().content() if mode == "call" else "".join(spec.stream().content())
    assert text == "Hello! How can I help you today? 😊"
    bodies = [r.body for r in server.requests_to(PATH)]
    assert len(bodies) == 2
    # Extended thinking + tools: the thinking block, with its signature, precedes the tool_use.
    assert bodies[1]["messages"] == golden("golden_thinking_tool_followup.json")["messages"]


def test_server_tool_turn_is_sent_back_verbatim(server: LoopbackServer) -> None:
    server.script(PATH, recorded("web_search_citations.json"), recorded("text.json"))
    with make_model(server) as model:
        answer = model.call(Prompt("When was Claude Shannon born?"))
        follow = Prompt([UserMessage("When was Claude Shannon born?"), output(answer), UserMessage("And where?")])
        model.call(follow)
    assert server.requests_to(PATH)[1].body["messages"] == golden("golden_server_tool_followup.json")["messages"]


def test_stale_server_content_is_not_sent_when_an_advisor_rewrote_the_answer() -> None:
    from chatclient.models.anthropic import anthropic_messages

    blocks = golden("web_search_citations.json")["content"]
    edited = AssistantMessage("Shannon: 1916.", metadata={CONTENT_KEY: tuple(blocks)})
    _, messages = anthropic_messages([UserMessage("q"), edited])
    assert messages[1] == {"role": "assistant", "content": "Shannon: 1916."}


def test_reasoning_of_another_provider_is_not_sent() -> None:
    from chatclient.models.anthropic import anthropic_messages

    turn = AssistantMessage(
        None,
        (ToolCall("toolu_1", "get_weather", '{"location": "Paris"}'),),
        reasoning=(Reasoning("local thought"), Reasoning("gpt thought", signature="x", provider="openai")),
    )
    system, messages = anthropic_messages([SystemMessage("s"), UserMessage("q"), turn])
    assert system == "s"
    assert messages[1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}}
    ]
