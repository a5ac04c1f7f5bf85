"""The OpenTelemetry observer records request events as span events on the call span."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan

from advisors import QuestionAnswerAdvisor, SafeGuardAdvisor
from chatclient import ChatClient
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.observability.otel import uninstrument
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.unit.test_otel import Telemetry


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    uninstrument()


@pytest.fixture
def otel_content() -> Iterator[Telemetry]:
    telemetry = Telemetry(capture_content=True)
    yield telemetry
    uninstrument()


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def call_span(t: Telemetry) -> ReadableSpan:
    spans = [s for s in t.spans if s.name.startswith("chat")]
    assert len(spans) == 1, [s.name for s in t.spans]
    return spans[0]


def events_of(span: ReadableSpan) -> list[tuple[str, dict[str, object]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def run(spec: object, mode: str) -> None:
    if mode == "call":
        spec.call().content()  # type: ignore[attr-defined]
    elif mode == "acall":
        asyncio.run(spec.acall().content())  # type: ignore[attr-defined]
    elif mode == "stream":
        list(spec.stream().events())  # type: ignore[attr-defined]
    else:

        async def go() -> None:
            async for _ in spec.astream().events():  # type: ignore[attr-defined]
                pass

        asyncio.run(go())


@pytest.mark.parametrize("mode", ["call", "acall", "stream", "astream"])
def test_tool_results_become_gen_ai_tool_message_events(otel: Telemetry, mode: str) -> None:
    calls = AssistantMessage(None, (ToolCall("c1", "add", '{"a": 1, "b": 2}'),))
    run(ChatClient.create(ScriptedChatModel([calls, "3"])).prompt("1+2").tools(add), mode)
    recorded = events_of(call_span(otel))
    names = [n for n, _ in recorded]
    assert names[:2] == ["chatclient.tool_call.started", "gen_ai.tool.message"]
    tool_message = recorded[1][1]
    assert tool_message["gen_ai.tool.call.id"] == "c1" and tool_message["gen_ai.tool.name"] == "add"
    assert tool_message["error"] is False
    assert "content" not in tool_message  # content is opt-in
    if mode in ("call", "acall"):
        assert names[-1] == "gen_ai.choice" and recorded[-1][1]["finish_reason"] == "stop"


def test_content_is_recorded_only_when_asked(otel_content: Telemetry) -> None:
    calls = AssistantMessage(None, (ToolCall("c1", "add", '{"a": 1, "b": 2}'),))
    ChatClient.create(ScriptedChatModel([calls, "3"])).prompt("1+2").tools(add).call().content()
    recorded = dict(events_of(call_span(otel_content)))
    assert recorded["gen_ai.tool.message"]["content"] == "3"
    assert recorded["chatclient.tool_call.started"]["gen_ai.tool.call.arguments"] == '{"a": 1, "b": 2}'
    assert "3" in str(recorded["gen_ai.choice"]["message"])


def test_retrieval_and_advisor_events_use_chatclient_names(otel: Telemetry) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=64))
    store.add([Document("Paris is in France.", id="d1")])
    qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=1))
    ChatClient.create(ScriptedChatModel(["France."])).prompt("Where is Paris?").advisors(qa).call().content()
    recorded = dict(events_of(call_span(otel)))
    docs = recorded["chatclient.documents_retrieved"]
    assert docs["chatclient.documents.count"] == 1 and list(docs["chatclient.documents.ids"]) == ["d1"]  # type: ignore[call-overload]
    otel.exporter.clear()
    ChatClient.create(ScriptedChatModel([])).prompt("password").advisors(
        SafeGuardAdvisor(["password"])
    ).call().content()
    recorded = dict(events_of(call_span(otel)))
    assert recorded["chatclient.advisor_event"] == {"chatclient.event.name": "safeguard.refused"}


def test_text_deltas_are_not_recorded(otel: Telemetry) -> None:
    list(ChatClient.create(ScriptedChatModel([["a", "b", "c"]])).prompt("q").stream().events())
    assert events_of(call_span(otel)) == []
