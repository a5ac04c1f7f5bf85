"""ai_sdk_app on a loopback Uvicorn: the AI SDK UI message stream (v1) for text, reasoning, tools, sources,
agents, memory by chat id, UI message history, and every fault."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")

import httpx

from advisors.memory import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.agents import agent_function, human_input, sequence
from chatclient.events import DocumentsRetrieved
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import (
    AssistantMessage,
    Citation,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.rag import Document
from chatclient.request import ChatClientRequest
from chatclient.serving import ai_sdk_app
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support.serving import (
    FailsAfterFirstChunk,
    SlowAfterFirstChunk,
    read_until_then_hang_up,
    running,
    wait_until,
    with_memory,
)

PNG_DATA_URL = "data:image/png;base64,iVBORw0KGgo="


def ui_user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chat(*messages: dict[str, Any], id: str = "chat-1") -> dict[str, Any]:
    return {"id": id, "messages": list(messages), "trigger": "submit-message"}


def chunks_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The chunks of a UI message stream; checks the header and the closing ``[DONE]``."""
    assert response.status_code == 200, response.text
    assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert response.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in response.text.split("\n\n") if f.strip()]
    assert frames[-1] == "data: [DONE]"
    assert all(f.startswith("data: ") for f in frames)
    return [json.loads(f[len("data: ") :]) for f in frames[:-1]]


def kinds(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in chunks]


def post(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(url + "/", json=body, timeout=10, **kwargs)


# -- text and reasoning ----------------------------------------------------------------------------


def test_a_text_answer_streams_as_one_text_part() -> None:
    model = ScriptedChatModel([["Hel", "lo"]])
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        chunks = chunks_of(post(url, chat(ui_user("hi"))))
    assert kinds(chunks) == [
        "start",
        "start-step",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert chunks[0]["messageId"].startswith("msg-")
    text_id = chunks[2]["id"]
    assert [c["delta"] for c in chunks[3:5]] == ["Hel", "lo"]
    assert all(c["id"] == text_id for c in chunks[2:6])
    assert chunks[-1]["finishReason"] == "stop"
    assert model.last_prompt.messages == (UserMessage("hi"),)


def test_reasoning_comes_as_a_reasoning_part() -> None:
    model = ScriptedChatModel([AssistantMessage("42", reasoning=(Reasoning("adding up"),))])
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        chunks = chunks_of(post(url, chat(ui_user("sum?"))))
    assert kinds(chunks)[2:8] == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
        "text-start",
        "text-delta",
        "text-end",
    ]
    assert chunks[3]["delta"] == "adding up" and chunks[6]["delta"] == "42"


def test_ui_message_history_becomes_the_conversation() -> None:
    model = ScriptedChatModel(["done"])
    history = chat(
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        ui_user("weather in Oslo?"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "hidden"},
                {
                    "type": "tool-weather",
                    "toolCallId": "call-1",
                    "state": "output-available",
                    "input": {"city": "Oslo"},
                    "output": "sunny",
                },
                {"type": "step-start"},
                {"type": "text", "text": "Sunny."},
                {"type": "source-document", "sourceId": "d", "mediaType": "text/plain", "title": "t"},
            ],
        },
        {
            "id": "u2",
            "role": "user",
            "parts": [
                {"type": "text", "text": "and this?"},
                {"type": "file", "mediaType": "image/png", "url": PNG_DATA_URL},
            ],
        },
    )
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        chunks_of(post(url, history))
    sent: Any = model.last_prompt.messages
    assert [type(m) for m in sent] == [
        SystemMessage,
        UserMessage,
        AssistantMessage,
        ToolResponseMessage,
        AssistantMessage,
        UserMessage,
    ]
    call = sent[2].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == ("call-1", "weather", {"city": "Oslo"})
    assert sent[3].responses[0].response_data == "sunny"
    assert sent[4].text == "Sunny."
    assert sent[5].text == "and this?" and sent[5].media[0].mime_type == "image/png"


def test_a_file_part_keeps_its_media_type_when_the_url_has_no_extension() -> None:
    # Blob stores hand out URLs without a file extension; the part's mediaType says what it is.
    model = ScriptedChatModel(["a cat"])
    part = {"type": "file", "mediaType": "image/webp", "url": "https://blobs.example.com/u/8f3a2c"}
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        chunks_of(post(url, chat({"id": "u", "role": "user", "parts": [{"type": "text", "text": "what?"}, part]})))
        bad = dict(part, mediaType="image/<svg onload=x>")
        refused = post(url, chat({"id": "u", "role": "user", "parts": [bad]}))
    (media,) = model.last_prompt.messages[-1].media
    assert (media.mime_type, media.data) == ("image/webp", "https://blobs.example.com/u/8f3a2c")
    assert refused.status_code == 400 and "media type" in refused.text


def test_memory_takes_the_history_by_chat_id() -> None:
    model = ScriptedChatModel(["one", "two"])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    with running(ai_sdk_app(client)) as url:
        chunks_of(post(url, chat(ui_user("first"), id="c-1")))
        answer = {"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "one"}]}
        chunks_of(post(url, chat(ui_user("first"), answer, ui_user("second", "u2"), id="c-1")))
    assert [m.text for m in model.last_prompt.messages] == ["first", "one", "second"]
    assert [m.text for m in memory.get("c-1")] == ["first", "one", "second", "two"]


# -- tools and sources -----------------------------------------------------------------------------


@tool
def weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return {"city": city, "sky": "sunny"}


def test_server_tools_stream_as_tool_parts_in_their_own_step() -> None:
    call = ToolCall("call-7", "weather", '{"city": "Oslo"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), "Sunny."])
    with running(ai_sdk_app(ChatClient.builder(model).default_tools(weather).build())) as url:
        chunks = chunks_of(post(url, chat(ui_user("weather?"))))
    assert kinds(chunks) == [
        "start",
        "start-step",
        "tool-input-start",
        "tool-input-delta",
        "tool-input-available",
        "tool-output-available",
        "finish-step",
        "start-step",
        "text-start",
        "text-delta",
        "text-end",
        "finish-step",
        "finish",
    ]
    assert chunks[2] == {"type": "tool-input-start", "toolCallId": "call-7", "toolName": "weather"}
    assert json.loads(chunks[3]["inputTextDelta"]) == {"city": "Oslo"}
    assert chunks[4]["input"] == {"city": "Oslo"} and chunks[4]["toolName"] == "weather"
    assert chunks[5] == {
        "type": "tool-output-available",
        "toolCallId": "call-7",
        "output": {"city": "Oslo", "sky": "sunny"},
    }


def test_a_failing_tool_is_a_tool_output_error() -> None:
    call = ToolCall("call-8", "weather", '{"city": "Atlantis"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), "Sorry."])
    with running(ai_sdk_app(ChatClient.builder(model).default_tools(weather).build())) as url:
        chunks = chunks_of(post(url, chat(ui_user("weather?"))))
    (error,) = [c for c in chunks if c["type"] == "tool-output-error"]
    assert error["toolCallId"] == "call-8" and error["errorText"]
    assert "tool-output-available" not in kinds(chunks)


class Retrieval:
    """An advisor that finds two documents, like a RAG advisor does, and says so."""

    name = "retrieval"
    order = 0

    def __init__(self) -> None:
        self.documents = (
            Document("Open 9-19.", {"title": "Opening hours", "filename": "hours.md"}, id="hours"),
            Document("See the site.", {"title": "Website", "url": "https://library.example/about"}, id="web"),
        )

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        request.emit(DocumentsRetrieved(self.documents, source="retrieval"))
        return request

    def after(self, response: Any, chain: Any) -> Any:
        return response


def test_retrieved_documents_and_citations_are_source_parts() -> None:
    from chatclient import BaseAdvisor

    class Finder(Retrieval, BaseAdvisor):
        pass

    cited = AssistantMessage("Open 9-19 [1].", citations=(Citation("https://cite.example/page", "A page"),))
    client = ChatClient.builder(ScriptedChatModel([cited])).default_advisors(Finder()).build()
    with running(ai_sdk_app(client)) as url:
        chunks = chunks_of(post(url, chat(ui_user("hours?"))))
    sources = [c for c in chunks if c["type"].startswith("source-")]
    assert sources == [
        {
            "type": "source-document",
            "sourceId": "hours",
            "mediaType": "text/plain",
            "title": "Opening hours",
            "filename": "hours.md",
        },
        {"type": "source-url", "sourceId": "web", "url": "https://library.example/about", "title": "Website"},
        {
            "type": "source-url",
            "sourceId": "https://cite.example/page",
            "url": "https://cite.example/page",
            "title": "A page",
        },
    ]
    assert kinds(chunks).index("source-document") < kinds(chunks).index("text-start")


# -- agents ----------------------------------------------------------------------------------------


@agent_function(output_key="greeting")
def greet(name: str) -> str:
    return f"Hello {name}!"


def test_an_agent_answers_with_its_output_and_a_human_input_question_is_the_answer() -> None:
    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    with running(ai_sdk_app({"greet": greet, "flow": flow})) as url:
        direct = chunks_of(httpx.post(url + "/greet", json=chat(ui_user("Ann")), timeout=10))
        asked = chunks_of(httpx.post(url + "/flow", json=chat(ui_user("hi"), id="f"), timeout=10))
        answered = chunks_of(
            httpx.post(url + "/flow", json=chat(ui_user("hi"), ui_user("Bo", "u2"), id="f"), timeout=10)
        )
    assert [c["delta"] for c in direct if c["type"] == "text-delta"] == ["Hello Ann!"]
    assert [c["delta"] for c in asked if c["type"] == "text-delta"] == ["What is your name?"]
    assert [c["delta"] for c in answered if c["type"] == "text-delta"] == ["Hello Bo!"]


# -- faults ----------------------------------------------------------------------------------------


def test_a_model_failing_after_the_first_chunk_is_an_error_part() -> None:
    with running(ai_sdk_app(ChatClient.create(FailsAfterFirstChunk()))) as url:
        response = post(url, chat(ui_user("hi")))
    chunks = chunks_of(response)
    assert kinds(chunks)[:4] == ["start", "start-step", "text-start", "text-delta"]
    assert chunks[3]["delta"] == "partial"
    assert chunks[-1]["type"] == "error" and "finish" not in kinds(chunks)
    assert "upstream model failed" in chunks[-1]["errorText"]
    assert FailsAfterFirstChunk.secret not in response.text


def test_a_disconnect_cancels_the_model_call_and_memory_keeps_the_question() -> None:
    model = SlowAfterFirstChunk()
    client, memory = with_memory(model)
    with running(ai_sdk_app(client)) as url:
        closed_at = read_until_then_hang_up(url + "/", chat(ui_user("long?"), id="gone"), "thinking")
        wait_until(lambda: model.cancelled_at is not None)
    assert model.cancelled_at is not None, "the model call was not cancelled"
    assert model.cancelled_at - closed_at < 1.0
    assert [(type(m), m.text) for m in memory.get("gone")] == [(UserMessage, "long?")]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"messages": [ui_user("x")]}).encode(), "id must be"),
        (json.dumps(chat()).encode(), "non-empty list"),
        (json.dumps(chat({"id": "x", "role": "wizard", "parts": []})).encode(), "role"),
        (json.dumps(chat({"id": "x", "role": "user", "content": "old style"})).encode(), "list of parts"),
        (
            json.dumps(
                chat(
                    {"id": "x", "role": "user", "parts": [{"type": "file", "mediaType": "application/pdf", "url": "x"}]}
                )
            ).encode(),
            "image",
        ),
        (json.dumps(chat({"id": "x", "role": "user", "parts": [{"type": "video"}]})).encode(), "Unsupported part"),
        (
            json.dumps(
                chat({"id": "x", "role": "assistant", "parts": [{"type": "tool-x", "state": "output-available"}]})
            ).encode(),
            "toolCallId",
        ),
        (b"[" * 100 + b"]" * 100, "nested"),
    ],
)
def test_malformed_bodies_are_a_400_error_part(body: bytes, fragment: str) -> None:
    with running(ai_sdk_app(ChatClient.create(ScriptedChatModel(["unused"])))) as url:
        response = httpx.post(url + "/", content=body, headers={"content-type": "application/json"}, timeout=10)
    assert response.status_code == 400
    assert response.json()["type"] == "error" and fragment in response.json()["errorText"]


def test_bodies_over_the_cap_are_a_413() -> None:
    with running(ai_sdk_app(ChatClient.create(ScriptedChatModel(["x"])), max_body_bytes=2_000)) as url:
        response = post(url, chat(ui_user("x" * 5_000)))
    assert response.status_code == 413 and response.json()["type"] == "error"


def test_foreign_host_and_origin_are_refused_and_auth_is_401() -> None:
    with running(ai_sdk_app(ChatClient.create(ScriptedChatModel(["x"])))) as url:
        host = post(url, chat(ui_user("x")), headers={"host": "evil.example"})
        origin = post(url, chat(ui_user("x")), headers={"origin": "https://evil.example"})
    assert host.status_code == 421 and host.json()["type"] == "error"
    assert origin.status_code == 403 and origin.json()["type"] == "error"
    with running(ai_sdk_app(ChatClient.create(ScriptedChatModel(["x"])), auth=lambda request: None)) as url:
        refused = post(url, chat(ui_user("x")))
    assert refused.status_code == 401 and refused.json()["type"] == "error"


def test_a_hosted_tool_the_provider_ran_is_a_provider_executed_tool_part() -> None:
    from chatclient.messages import HostedToolCall

    search = HostedToolCall("ws_1", "web_search", {"query": "library hours"}, {"sources": ["https://library.example"]})
    model = ScriptedChatModel([AssistantMessage("Open 9-19.", hosted_tool_calls=(search,))])
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        chunks = chunks_of(post(url, chat(ui_user("hours?"))))
    tool_chunks = [c for c in chunks if c["type"].startswith("tool-")]
    assert tool_chunks == [
        {
            "type": "tool-input-available",
            "toolCallId": "ws_1",
            "providerExecuted": True,
            "toolName": "web_search",
            "input": {"query": "library hours"},
        },
        {
            "type": "tool-output-available",
            "toolCallId": "ws_1",
            "providerExecuted": True,
            "output": {"sources": ["https://library.example"]},
        },
    ]


def test_a_turn_the_target_cannot_take_is_refused_before_the_stream() -> None:
    @agent_function(output_key="sum")
    def add(a: int, b: int) -> int:
        return a + b

    with running(ai_sdk_app(add)) as url:
        refused = post(url, chat(ui_user("1 and 2")))
        summed = chunks_of(post(url, {**chat(ui_user("go")), "inputs": {"a": 1, "b": 2}}))
    assert [c["delta"] for c in summed if c["type"] == "text-delta"] == ["3"]
    assert refused.status_code == 400
    assert refused.json()["type"] == "error" and "several inputs" in refused.json()["errorText"]


class Login:
    def __init__(self, tenant: str, name: str) -> None:
        self.tenant, self.name = tenant, name


def test_chats_are_bound_to_the_user_the_namespace_hook_names() -> None:
    model = ScriptedChatModel(["for ann", "for bob", "again ann"])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()

    def auth(request: Any) -> Login | None:
        return {"Bearer ann": Login("acme", "ann"), "Bearer bob": Login("acme", "bob")}.get(
            request.headers.get("authorization", "")
        )

    app = ai_sdk_app(client, auth=auth, conversation_namespace=lambda login: f"{login.tenant}/{login.name}")
    with running(app) as url:
        chunks_of(post(url, chat(ui_user("ann's secret"), id="same"), headers={"authorization": "Bearer ann"}))
        chunks_of(post(url, chat(ui_user("bob here"), id="same"), headers={"authorization": "Bearer bob"}))
        assert [m.text for m in model.last_prompt.messages] == ["bob here"]  # nothing of ann's
        chunks_of(post(url, chat(ui_user("me again"), id="same"), headers={"authorization": "Bearer ann"}))
        assert [m.text for m in model.last_prompt.messages] == ["ann's secret", "for ann", "me again"]
    with running(ai_sdk_app(client, auth=auth)) as url:  # a principal that names nobody, and no hook
        unnamed = post(url, chat(ui_user("x"), id="same"), headers={"authorization": "Bearer ann"})
    assert unnamed.status_code == 500 and unnamed.json() == {"type": "error", "errorText": "Internal error."}
