"""``spec.max_duration(seconds)``: one deadline over the whole chain, in the four modes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator

import pytest
from pydantic import BaseModel

from advisors import StructuredOutputValidationAdvisor
from chatclient import ChatClient
from chatclient.errors import ChatClientError, DeadlineExceededError
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.models.base import BaseChatModel, ChatResponse, Generation, GenerationMetadata
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool


def tool_turn(i: int) -> AssistantMessage:
    return AssistantMessage(None, (ToolCall(f"c{i}", "slow_lookup", '{"key": "k"}'),))


@tool
def slow_lookup(key: str) -> str:
    """Look something up, slowly."""
    time.sleep(0.1)
    return "value"


class SlowModel(BaseChatModel):
    """Answers after ``delay`` seconds; streams ``chunks`` pieces ``delay`` seconds apart."""

    def __init__(self, delay: float, chunks: int = 3) -> None:
        self.delay = delay
        self.chunks = chunks
        self.calls = 0
        self.cancelled = False

    def call(self, prompt: Prompt) -> ChatResponse:
        self.calls += 1
        time.sleep(self.delay)
        return ChatResponse.of_text("late")

    async def acall(self, prompt: Prompt) -> ChatResponse:
        self.calls += 1
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return ChatResponse.of_text("late")

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        for i in range(self.chunks):
            time.sleep(self.delay)
            last = i == self.chunks - 1
            yield ChatResponse((Generation(AssistantMessage(f"p{i} "), GenerationMetadata("stop" if last else None)),))

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for i in range(self.chunks):
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            last = i == self.chunks - 1
            yield ChatResponse((Generation(AssistantMessage(f"p{i} "), GenerationMetadata("stop" if last else None)),))


def test_the_error_is_typed_and_says_what_to_do() -> None:
    error = DeadlineExceededError(1.5, "before ToolCallAdvisor")
    assert isinstance(error, ChatClientError) and isinstance(error, TimeoutError)
    assert "max_duration of 1.5 s" in str(error) and "before ToolCallAdvisor" in str(error)
    assert error.seconds == 1.5


@pytest.mark.parametrize("bad", [0, -1, "5", None, True, float("nan")])
def test_max_duration_must_be_positive(bad: object) -> None:
    with pytest.raises(ValueError, match="max_duration"):
        ChatClient.create(ScriptedChatModel([])).prompt("q").max_duration(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_the_deadline_covers_the_whole_tool_loop(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(i) for i in range(10)] + ["done"])
    spec = ChatClient.create(model).prompt("q").tools(slow_lookup).max_duration(0.25)
    start = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        if mode == "call":
            spec.call().content()
        elif mode == "stream":
            list(spec.stream().content())
        elif mode == "acall":
            asyncio.run(spec.acall().content())
        else:

            async def go() -> None:
                async for _ in spec.astream().content():
                    pass

            asyncio.run(go())
    elapsed = time.monotonic() - start
    # each tool takes 0.1 s: the loop stops after about three of them, far before all ten
    assert 0.25 <= elapsed < 0.8
    assert 2 <= len(model.prompts) <= 5


def test_the_deadline_covers_validation_re_asks() -> None:
    class Actor(BaseModel):
        name: str

    class SlowBadModel(SlowModel):
        def call(self, prompt: Prompt) -> ChatResponse:
            self.calls += 1
            time.sleep(self.delay)
            return ChatResponse.of_text(f"not json {self.calls}")  # differs, so re-asking is not pointless

    model = SlowBadModel(0.1)
    advisor = StructuredOutputValidationAdvisor(Actor, max_repeat_attempts=10)
    with pytest.raises(DeadlineExceededError):
        ChatClient.create(model).prompt("q").advisors(advisor).max_duration(0.25).call().content()
    assert 2 <= model.calls <= 4


def test_async_call_is_cancelled_at_the_deadline() -> None:
    model = SlowModel(5.0)
    start = time.monotonic()
    with pytest.raises(DeadlineExceededError):
        asyncio.run(ChatClient.create(model).prompt("q").max_duration(0.2).acall().content())
    assert time.monotonic() - start < 1.0
    assert model.cancelled


def test_async_stream_is_cancelled_at_the_deadline_mid_stream() -> None:
    model = SlowModel(0.15, chunks=10)
    received: list[str] = []

    async def go() -> None:
        async for text in ChatClient.create(model).prompt("q").max_duration(0.4).astream().content():
            received.append(text)

    start = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="while streaming"):
        asyncio.run(go())
    assert time.monotonic() - start < 0.8
    assert 1 <= len(received) < 10 and model.cancelled


def test_sync_stream_checks_the_deadline_between_chunks() -> None:
    model = SlowModel(0.1, chunks=20)
    received: list[str] = []
    with pytest.raises(DeadlineExceededError):
        for text in ChatClient.create(model).prompt("q").max_duration(0.35).stream().content():
            received.append(text)
    assert 2 <= len(received) <= 4


@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_a_request_within_its_deadline_is_unaffected(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(0), ["fi", "ne"] if "stream" in mode else "fine"])
    spec = ChatClient.create(model).prompt("q").tools(slow_lookup).max_duration(5)
    if mode == "call":
        assert spec.call().content() == "fine"
    elif mode == "stream":
        assert "".join(spec.stream().content()) == "fine"
    elif mode == "acall":
        assert asyncio.run(spec.acall().content()) == "fine"
    else:

        async def go() -> str:
            return "".join([t async for t in spec.astream().content()])

        assert asyncio.run(go()) == "fine"


def test_default_deadline_from_the_builder_is_not_shared_between_requests() -> None:
    # the deadline starts when a request runs, not when the spec is built
    client = ChatClient.create(ScriptedChatModel(["a", "b"]))
    spec = client.prompt("q").max_duration(0.2)
    time.sleep(0.3)
    assert spec.call().content() == "a"
