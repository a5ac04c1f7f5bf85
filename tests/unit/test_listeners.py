"""Chat-model listeners, callback-style stream handlers, and raw provider events (unit level)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import ModelHTTPError
from chatclient.events import RawProviderEvent, TextDelta, ToolCallFinished, ToolCallStarted
from chatclient.listeners import (
    ChatModelErrorContext,
    ChatModelListener,
    ChatModelRequestContext,
    ChatModelResponseContext,
    ListeningChatModel,
    StreamHandler,
    ahandle_stream,
    handle_stream,
)
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.models.base import ChatResponse
from chatclient.models.raw_events import RawEventChunk, raw_event_chunks, raw_provider_events
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support import MODES, invoke


class OnlyResponses:
    """Implements one hook; returns something (ignored)."""

    def __init__(self) -> None:
        self.seen: list[ChatModelResponseContext] = []

    def on_response(self, context: ChatModelResponseContext) -> str:
        self.seen.append(context)
        return "ignored"


class Timing(ChatModelListener):
    def __init__(self) -> None:
        self.log: list[str] = []

    def on_request(self, context: ChatModelRequestContext) -> None:
        context.attributes["asked"] = context.prompt.messages[-1].text
        self.log.append(f"request {context.provider}")

    def on_response(self, context: ChatModelResponseContext) -> None:
        self.log.append(f"response to {context.attributes['asked']}: {context.response.text}")

    def on_error(self, context: ChatModelErrorContext) -> None:
        self.log.append(f"error {type(context.error).__name__} after {context.attributes['asked']}")


@pytest.mark.parametrize("mode", MODES)
async def test_listeners_see_each_call_in_every_mode(mode: str) -> None:
    only, timing = OnlyResponses(), Timing()
    model = ListeningChatModel(ScriptedChatModel([["Hel", "lo"]]), [only, timing])
    if mode in ("call", "stream"):
        response, _ = invoke(model, Prompt("hi"), mode)
    else:
        response, _ = await _ainvoke(model, mode)
    assert response.text == "Hello"
    assert timing.log == ["request ScriptedChatModel", "response to hi: Hello"]
    (ctx,) = only.seen
    assert ctx.response.text == "Hello" and ctx.prompt.messages[-1].text == "hi"


async def _ainvoke(model: Any, mode: str) -> tuple[ChatResponse, list[ChatResponse]]:
    if mode == "acall":
        return await model.acall(Prompt("hi")), []
    chunks = [c async for c in model.astream(Prompt("hi"))]
    from chatclient.models.base import ResponseAggregator

    agg = ResponseAggregator()
    for c in chunks:
        agg.add(c)
    return agg.result(), chunks


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_on_error_then_the_error_propagates(mode: str) -> None:
    timing = Timing()
    boom = ModelHTTPError("upstream 500", status=500)
    model = ListeningChatModel(ScriptedChatModel([boom]), [timing])
    with pytest.raises(ModelHTTPError):
        invoke(model, Prompt("hi"), mode)
    assert timing.log == ["request ScriptedChatModel", "error ModelHTTPError after hi"]


def test_a_failing_listener_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def on_request(self, context: ChatModelRequestContext) -> None:
            raise RuntimeError("listener bug")

    timing = Timing()
    client = ChatClient.create(ListeningChatModel(ScriptedChatModel(["ok"]), [Broken(), timing]))
    with caplog.at_level(logging.WARNING, logger="chatclient.listeners"):
        assert client.prompt("hi").call().content() == "ok"
    assert "Broken.on_request raised" in caplog.text
    assert timing.log == ["request ScriptedChatModel", "response to hi: ok"]


def test_listeners_see_every_turn_of_the_tool_loop_with_the_final_prompt() -> None:
    @tool
    def clock() -> str:
        """Time now."""
        return "12:00"

    only = OnlyResponses()
    inner = ScriptedChatModel([AssistantMessage(tool_calls=(ToolCall("1", "clock", "{}"),)), "noon"])
    client = ChatClient.builder(ListeningChatModel(inner, [only])).default_system("Be brief.").build()
    assert client.prompt("time?").tools(clock).call().content() == "noon"
    assert len(only.seen) == 2
    assert only.seen[1].prompt.messages[0].text == "Be brief." and only.seen[1].prompt.tools[0].name == "clock"


def test_listening_model_delegates_other_attributes_and_bad_input() -> None:
    inner = ScriptedChatModel(["x"])
    model = ListeningChatModel(inner, [OnlyResponses()])
    assert model.remaining == 1 and model.capabilities is inner.capabilities
    with pytest.raises(TypeError, match="wraps a chat model"):
        ListeningChatModel("gpt-4o", [OnlyResponses()])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one listener"):
        ListeningChatModel(inner, [])
    with pytest.raises(TypeError, match="is not a listener"):
        ListeningChatModel(inner, [object()])


# -- stream handlers --------------------------------------------------------------------------------


def test_handle_stream_calls_partial_then_complete() -> None:
    out: list[str] = []
    handler = StreamHandler(on_partial=out.append, on_complete=lambda r: out.append(f"[done: {r.text if r else None}]"))
    handle_stream(ChatClient.create(ScriptedChatModel([["Hel", "lo"]])).prompt("hi"), handler)
    assert out == ["Hel", "lo", "[done: Hello]"]


def test_a_handler_class_with_tool_hooks() -> None:
    @tool
    def clock() -> str:
        """Time now."""
        return "12:00"

    class Handler:
        def __init__(self) -> None:
            self.log: list[str] = []

        def on_partial(self, text: str) -> None:
            self.log.append(text)

        def on_tool_call(self, event: ToolCallStarted) -> None:
            self.log.append(f"call {event.name}")

        def on_tool_result(self, event: ToolCallFinished) -> None:
            self.log.append(f"result {event.result}")

        def on_complete(self, response: ChatResponse | None) -> None:
            self.log.append("complete")

    model = ScriptedChatModel([AssistantMessage(tool_calls=(ToolCall("1", "clock", "{}"),)), ["It is ", "noon"]])
    handler = Handler()
    handle_stream(ChatClient.create(model).prompt("time?").tools(clock), handler)
    assert handler.log == ["call clock", "result 12:00", "It is ", "noon", "complete"]


def test_on_error_receives_the_error_and_without_it_the_error_propagates() -> None:
    errors: list[BaseException] = []
    boom = ModelHTTPError("bad gateway", status=502)
    handle_stream(ChatClient.create(ScriptedChatModel([boom])).prompt("hi"), StreamHandler(on_error=errors.append))
    assert errors == [boom]
    with pytest.raises(ModelHTTPError):
        handle_stream(ChatClient.create(ScriptedChatModel([boom])).prompt("hi"), StreamHandler(on_partial=print))


async def test_ahandle_stream() -> None:
    out: list[str] = []
    done: list[ChatResponse | None] = []
    await ahandle_stream(
        ChatClient.create(ScriptedChatModel([["a", "b"]])).prompt("hi"),
        StreamHandler(on_partial=out.append, on_complete=done.append),
    )
    assert out == ["a", "b"] and done[0] is not None and done[0].text == "ab"
    errors: list[BaseException] = []
    await ahandle_stream(
        ChatClient.create(ScriptedChatModel([ValueError("x")])).prompt("hi"), StreamHandler(on_error=errors.append)
    )
    assert isinstance(errors[0], ValueError)


def test_handle_stream_bad_handler() -> None:
    with pytest.raises(TypeError, match="not a stream handler"):
        handle_stream([], StreamHandler())
    with pytest.raises(TypeError, match="not a stream handler"):
        handle_stream([], object())


def test_handle_stream_accepts_plain_event_iterables() -> None:
    got: list[str] = []
    handle_stream([TextDelta("x"), TextDelta("y")], StreamHandler(on_partial=got.append))
    assert got == ["x", "y"]


# -- raw provider events (the chunk and its event) --------------------------------------------------


def test_raw_chunks_only_inside_raw_provider_events_and_they_aggregate_to_nothing() -> None:
    assert raw_event_chunks("anthropic", "ping", {"type": "ping"}) == []
    with raw_provider_events():
        (chunk,) = raw_event_chunks("anthropic", "ping", {"type": "ping"})
        (odd,) = raw_event_chunks("x", None, [1, 2])
    assert isinstance(chunk, RawEventChunk) and chunk.generations == () and chunk.type == "ping"
    assert dict(odd.data) == {"data": [1, 2]} and odd.type == ""  # type: ignore[attr-defined]


def test_raw_chunk_becomes_a_raw_provider_event_in_the_events_stream() -> None:
    from chatclient.events import _deltas

    with raw_provider_events():
        (chunk,) = raw_event_chunks("openai_responses", "response.web_search_call.searching", {"item_id": "ws_1"})
    assert _deltas(chunk) == (RawProviderEvent("openai_responses", "response.web_search_call.searching", chunk.data),)  # type: ignore[attr-defined]


def test_a_raising_callback_closes_the_stream_at_once() -> None:
    # The stream (an HTTP response in real use) is closed when a callback raises, not left to the GC:
    # the test keeps a reference to the generator, so only an explicit close runs its ``finally``.
    closed: list[str] = []

    def events() -> Any:
        try:
            yield TextDelta("a")
            yield TextDelta("b")
        finally:
            closed.append("sync")

    def explode(text: str) -> None:
        raise RuntimeError("callback failed")

    source = events()
    with pytest.raises(RuntimeError, match="callback failed"):
        handle_stream(source, StreamHandler(on_partial=explode))
    assert closed == ["sync"]
    errors: list[BaseException] = []
    source = events()
    handle_stream(source, StreamHandler(on_partial=explode, on_error=errors.append))
    assert closed == ["sync", "sync"] and isinstance(errors[0], RuntimeError)


async def test_a_raising_callback_closes_the_async_stream_at_once() -> None:
    closed: list[str] = []

    async def events() -> Any:
        try:
            yield TextDelta("a")
            yield TextDelta("b")
        finally:
            closed.append("async")

    def explode(text: str) -> None:
        raise RuntimeError("callback failed")

    source = events()
    with pytest.raises(RuntimeError, match="callback failed"):
        await ahandle_stream(source, StreamHandler(on_partial=explode))
    assert closed == ["async"]
    errors: list[BaseException] = []
    source = events()
    await ahandle_stream(source, StreamHandler(on_partial=explode, on_error=errors.append))
    assert closed == ["async", "async"] and isinstance(errors[0], RuntimeError)
