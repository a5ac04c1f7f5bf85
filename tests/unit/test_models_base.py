"""Responses, usage, stream aggregation, derived model modes and the scripted test doubles."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from chatclient import AssistantMessage, ChatResponse, Generation, GenerationMetadata, Prompt, ToolCall, Usage
from chatclient.models.base import BaseChatModel, ChatResponseMetadata, aggregate
from chatclient.testing import FunctionChatModel, ScriptedChatModel, ScriptExhaustedError


def test_usage_sums_and_totals() -> None:
    u = Usage(3, 4) + Usage(10, 1)
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens) == (13, 5, 18)
    assert sum([Usage(1, 1), Usage(2, 2)], Usage()) == Usage(3, 3)


def test_chat_response_accessors() -> None:
    r = ChatResponse.of_text("hi")
    assert r.result is not None and r.result.output.text == "hi"
    assert r.text == "hi" and not r.has_tool_calls() and r.has_finish_reason()
    assert ChatResponse().result is None and ChatResponse().text is None
    tool = ChatResponse((Generation(AssistantMessage(None, (ToolCall("1", "f", "{}"),))),))
    assert tool.has_tool_calls()
    assert r.with_metadata(k=1).metadata.extra["k"] == 1
    assert r.with_usage(Usage(1, 2)).metadata.usage.total_tokens == 3


def chunk(
    text: str | None = None, calls: tuple[ToolCall, ...] = (), finish: str | None = None, **md: object
) -> ChatResponse:
    return ChatResponse(
        (Generation(AssistantMessage(text, calls), GenerationMetadata(finish)),), ChatResponseMetadata(**md)
    )  # type: ignore[arg-type]


def test_aggregator_concatenates_text_and_keeps_last_metadata() -> None:
    out = aggregate([chunk("Hel", id="r1", model="m"), chunk("lo"), chunk(None, finish="stop", usage=Usage(5, 2))])
    assert out.text == "Hello"
    assert out.result is not None and out.result.finish_reason == "stop"
    assert out.metadata.id == "r1" and out.metadata.model == "m" and out.metadata.usage == Usage(5, 2)


def test_aggregator_assembles_tool_call_deltas() -> None:
    out = aggregate(
        [
            chunk(calls=(ToolCall("a", "weather", '{"ci'),)),
            chunk(calls=(ToolCall("", "", 'ty": "Oslo"}'),)),
            chunk(calls=(ToolCall("b", "time", "{}"),)),
            chunk(calls=(ToolCall("a", "", ""),), finish="tool_calls"),
        ]
    )
    assert out.result is not None
    assert out.result.output.tool_calls == (
        ToolCall("a", "weather", '{"city": "Oslo"}'),
        ToolCall("b", "time", "{}"),
    )
    assert out.result.finish_reason == "tool_calls"


def test_aggregate_of_no_text_is_none() -> None:
    assert aggregate([chunk(None, finish="stop")]).text is None


class SyncOnly(BaseChatModel):
    def __init__(self) -> None:
        self.threads: list[str] = []

    def call(self, prompt: Prompt) -> ChatResponse:
        self.threads.append(threading.current_thread().name)
        return ChatResponse.of_text("sync:" + prompt.user_message.text)


class AsyncOnly(BaseChatModel):
    async def acall(self, prompt: Prompt) -> ChatResponse:
        await asyncio.sleep(0)
        return ChatResponse.of_text("async:" + prompt.user_message.text)


class StreamOnly(BaseChatModel):
    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        yield chunk("a")
        yield chunk("b", finish="stop")


def test_stream_derived_from_call_is_one_chunk() -> None:
    chunks = list(SyncOnly().stream(Prompt("x")))
    assert [c.text for c in chunks] == ["sync:x"]


def test_async_derived_from_sync_runs_in_a_worker_thread() -> None:
    model = SyncOnly()
    main = threading.current_thread().name
    assert asyncio.run(model.acall(Prompt("x"))).text == "sync:x"
    assert model.threads and model.threads[0] != main


def test_sync_derived_from_async_works_inside_and_outside_a_loop() -> None:
    model = AsyncOnly()
    assert model.call(Prompt("x")).text == "async:x"

    async def inside() -> str | None:
        return model.call(Prompt("y")).text

    assert asyncio.run(inside()) == "async:y"
    chunks = list(model.stream(Prompt("z")))
    assert [c.text for c in chunks] == ["async:z"]


def test_call_and_astream_derived_from_stream() -> None:
    model = StreamOnly()
    assert model.call(Prompt("x")).text == "ab"

    async def collect() -> list[str | None]:
        return [c.text async for c in model.astream(Prompt("x"))]

    assert asyncio.run(collect()) == ["a", "b"]
    assert asyncio.run(model.acall(Prompt("x"))).text == "ab"


def test_model_with_no_mode_says_so() -> None:
    with pytest.raises(NotImplementedError, match="neither"):
        BaseChatModel().call(Prompt("x"))


def test_scripted_model_replays_and_records() -> None:
    call = ToolCall("1", "f", "{}")
    model = ScriptedChatModel(
        ["one", AssistantMessage(None, (call,)), ChatResponse.of_text("three"), ValueError("boom")]
    )
    r1 = model.call(Prompt("first"))
    assert r1.text == "one" and r1.result is not None and r1.result.finish_reason == "stop"
    assert r1.metadata.usage.total_tokens > 0
    r2 = model.call(Prompt("second"))
    assert r2.has_tool_calls() and r2.result is not None and r2.result.finish_reason == "tool_calls"
    assert model.call(Prompt("third")).text == "three"
    with pytest.raises(ValueError, match="boom"):
        model.call(Prompt("fourth"))
    assert [p.user_message.text for p in model.prompts] == ["first", "second", "third", "fourth"]


def test_scripted_chunks_stream_and_join() -> None:
    model = ScriptedChatModel([["a", "b", "c"], ["x", "y"]])
    chunks = list(model.stream(Prompt("q")))
    assert [c.text for c in chunks] == ["a", "b", "c"]
    assert [c.result.finish_reason for c in chunks if c.result] == [None, None, "stop"]
    assert chunks[-1].metadata.usage.completion_tokens == 1
    assert model.call(Prompt("q")).text == "xy"


def test_scripted_async_modes() -> None:
    model = ScriptedChatModel(["a", ["b", "c"]])

    async def run() -> tuple[str | None, list[str | None]]:
        first = await model.acall(Prompt("q"))
        chunks: AsyncIterator[ChatResponse] = model.astream(Prompt("q"))
        return first.text, [c.text async for c in chunks]

    assert asyncio.run(run()) == ("a", ["b", "c"])


def test_script_running_out_is_a_clear_error() -> None:
    model = ScriptedChatModel(["only"])
    model.call(Prompt("q"))
    with pytest.raises(ScriptExhaustedError, match="ran out of responses after 1 call"):
        model.call(Prompt("again"))


def test_function_model() -> None:
    model = FunctionChatModel(lambda p: p.user_message.text.upper())
    assert model.call(Prompt("shout")).text == "SHOUT"
    assert asyncio.run(model.acall(Prompt("x"))).text == "X"
    assert len(model.prompts) == 2
