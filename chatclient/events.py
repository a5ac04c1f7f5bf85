"""Typed events of a request: what a chat UI shows besides the answer text.

A request produces a sequence of immutable events. Some come from the model's stream
(``TextDelta``, ``ReasoningDelta``, ``HostedToolUsed``, ``UsageUpdate``, ``Finished``); others are emitted by advisors
while they work (``DocumentsRetrieved`` from retrieval advisors, ``ToolCallStarted`` /
``ToolCallFinished`` from the tool loop, ``AdvisorEvent`` for anything else). Read them with
``spec.stream().events()`` / ``spec.astream().events()``, or register ``spec.on_event(callback)``
(``builder.default_on_event(callback)`` for every request) and read
``call().chat_client_response().events`` afterwards.

An advisor emits with ``request.emit(event)`` (or ``chain.emit(event)``) from ``before``/``after`` or
its own ``advise_*`` code, in every mode. When nobody listens, an emitted event is only kept in a list.

    >>> from chatclient import ChatClient
    >>> from chatclient.testing import ScriptedChatModel
    >>> client = ChatClient.create(ScriptedChatModel([["Hel", "lo"]]))
    >>> [type(e).__name__ for e in client.prompt("hi").stream().events()]
    ['TextDelta', 'TextDelta', 'UsageUpdate', 'Finished']

The chain carries events; it does not define them. The ``EventSink`` of a request travels in the
request context (``ContextKeys.EVENTS``), so every copy of the chain (tool loop iterations,
validation re-asks) emits into the same place.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from chatclient import observation
from chatclient.errors import DeadlineExceededError
from chatclient.event_types import (  # the event types, handed on: users import them from here
    AdvisorEvent,
    DocumentsRetrieved,
    EventCallback,
    Finished,
    HostedToolUsed,
    RawProviderEvent,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
    UsageUpdate,
)
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys

if TYPE_CHECKING:
    import asyncio

    from chatclient.models.base import ChatResponse


T = TypeVar("T")


class EventSink:
    """Where the events of one request go: the ``on_event`` callbacks, the collected list
    (``ChatClientResponse.events``) and, for ``events()`` streams, a buffer the stream drains.

    Created by the response spec for each run and placed in the request context under
    ``ContextKeys.EVENTS``; advisors never build one, they call ``request.emit(event)``.
    Async callbacks are scheduled as tasks in async modes (awaited before the request returns)
    and run to completion in sync modes.
    """

    __slots__ = ("_buffer", "_loop", "_tasks", "async_mode", "callbacks", "events")

    def __init__(
        self, callbacks: Sequence[EventCallback] = (), *, buffered: bool = False, async_mode: bool = False
    ) -> None:
        self.callbacks = tuple(callbacks)
        self.events: list[StreamEvent] = []
        self.async_mode = async_mode
        self._buffer: list[StreamEvent] | None = [] if buffered else None
        self._tasks: list[asyncio.Task[Any]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        if async_mode:
            import asyncio

            self._loop = asyncio._get_running_loop()

    def __repr__(self) -> str:
        return f"EventSink(events={len(self.events)}, callbacks={len(self.callbacks)})"

    @property
    def pending(self) -> bool:
        """True when a stream has events it has not handed to its consumer yet."""
        return bool(self._buffer)

    def emit(self, event: StreamEvent) -> None:
        """Record ``event``, queue it for the stream consumer, and hand it to the callbacks."""
        if not isinstance(event, StreamEvent):
            raise TypeError(
                f"emit() takes an event from chatclient.events (e.g. AdvisorEvent(name, data)), got {type(event).__name__}"
            )
        self.events.append(event)
        if self._buffer is not None:
            self._buffer.append(event)
        if self.callbacks:
            self.notify(event)

    def notify(self, event: StreamEvent) -> None:
        """Hand ``event`` to the callbacks only (events a stream derives from chunks).

        In async modes callbacks always run on the event loop: an event emitted from a worker
        thread (an advisor's blocking step run with ``asyncio.to_thread``) is handed over to the
        loop, ahead of the result of that step, so the order is kept.
        """
        if self.async_mode:
            import asyncio

            running = asyncio._get_running_loop()
            if running is not None:
                self._loop = running
            elif self._loop is not None and not self._loop.is_closed():
                self._loop.call_soon_threadsafe(self._notify_now, event)
                return
        self._notify_now(event)

    def _notify_now(self, event: StreamEvent) -> None:
        for callback in self.callbacks:
            result = callback(event)
            if inspect.isawaitable(result):
                self._schedule(result)

    def _schedule(self, awaitable: Awaitable[Any]) -> None:
        import asyncio

        if self.async_mode:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None  # emitted from a worker thread (an advisor's blocking step run off the loop)
            if loop is not None:
                self._tasks.append(loop.create_task(_awaited(awaitable)))
                return
        from chatclient.models.base import run_sync

        run_sync(awaitable)

    def drain(self) -> list[StreamEvent]:
        """The buffered events, oldest first; the buffer is emptied."""
        buffer = self._buffer
        if not buffer:
            return []
        out = list(buffer)
        buffer.clear()
        return out

    async def settle(self) -> None:
        """Await the async callbacks scheduled so far (their errors propagate)."""
        while self._tasks:
            tasks, self._tasks = self._tasks, []
            for task in tasks:
                await task

    def cancel(self) -> None:
        """Cancel async callbacks still running (the request was cancelled)."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def sink_of(context: Mapping[str, Any]) -> EventSink | None:
    """The request's event sink, or None when nothing listens."""
    sink = context.get(ContextKeys.EVENTS)
    return sink if isinstance(sink, EventSink) else None


def flush_marker(request: ChatClientRequest) -> ChatClientResponse | None:
    """An empty chunk to yield before blocking work when an ``events()`` consumer has events waiting.

    Stream advisors that are about to block (the terminal advisor before the model's first token,
    the tool loop before running tools) yield it so the waiting events reach the consumer first.
    Chunks without a ``chat_response`` are skipped by ``content()`` and ``chat_response()``.
    """
    sink = request.context.get(ContextKeys.EVENTS)
    if sink is not None and sink._buffer:
        return ChatClientResponse(None, request.context)
    return None


# -- deadline ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Deadline:
    """The end of a request's ``max_duration`` on the ``time.monotonic`` clock."""

    seconds: float
    at: float

    @staticmethod
    def start(seconds: float) -> Deadline:
        """A deadline ``seconds`` from now."""
        return Deadline(seconds, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    def check(self, where: str = "") -> None:
        """Raise ``DeadlineExceededError`` when the time is up."""
        if time.monotonic() >= self.at:
            raise DeadlineExceededError(self.seconds, where)


def check_deadline(context: Mapping[str, Any], where: str = "") -> None:
    """Raise ``DeadlineExceededError`` when the request in ``context`` ran past its ``max_duration``."""
    deadline = context.get(ContextKeys.DEADLINE)
    if deadline is not None:
        deadline.check(where)


def check_max_duration(seconds: Any) -> float:
    """Validate a ``max_duration`` argument."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise ValueError(f"max_duration must be a positive number of seconds, got {seconds!r}")
    return float(seconds)


# -- what the response specs use ----------------------------------------------------------------


def attach(
    request: ChatClientRequest, *, buffered: bool = False, async_mode: bool = False, always: bool = False
) -> tuple[ChatClientRequest, EventSink | None]:
    """Prepare the request's sink (and deadline) for one run.

    The client puts a sink in every request it builds; it is set up here for the mode (``buffered``
    for ``events()`` streams, ``async_mode`` for async callbacks). A request built by other code
    gets a sink only when something listens (``buffered``, ``always``, an installed observer).
    """
    ctx = request.context
    sink = ctx.get(ContextKeys.EVENTS)
    seconds = ctx.get(ContextKeys.MAX_DURATION)
    extra: dict[str, Any] | None = None
    if sink is None:
        if buffered or always or observation._observer is not None:
            sink = EventSink(buffered=buffered, async_mode=async_mode)
            extra = {ContextKeys.EVENTS: sink}
    else:
        if buffered and sink._buffer is None:
            sink._buffer = []
        if async_mode and not sink.async_mode:
            import asyncio

            sink.async_mode = True
            sink._loop = asyncio._get_running_loop()
    if seconds is not None:
        extra = extra or {}
        extra[ContextKeys.DEADLINE] = Deadline.start(seconds)
    if extra:
        request = request.mutate(context=extra)
    return request, sink


def observe(sink: EventSink | None, obs: Any) -> None:
    """Hand the request's events to an observation that records them (the OTel call span)."""
    record = getattr(obs, "record_event", None)
    if sink is not None and record is not None:
        sink.callbacks = (*sink.callbacks, record)


def finish_call(sink: EventSink | None, response: ChatClientResponse) -> ChatClientResponse:
    """Emit the closing ``UsageUpdate`` and ``Finished`` of a call-mode request; the response
    carries the sink (for ``response.events``) even when an advisor replaced its context."""
    if sink is None:
        return response
    cr = response.chat_response
    if cr is not None and not cr.metadata.usage.is_empty():
        sink.emit(UsageUpdate(cr.metadata.usage))
    sink.emit(Finished(cr))
    if response.context.get(ContextKeys.EVENTS) is not sink:
        response = response.mutate(context={ContextKeys.EVENTS: sink})
    return response


async def within_deadline(awaitable: Awaitable[T], request: ChatClientRequest) -> T:
    """Await ``awaitable``, cancelling it at the request's deadline (``DeadlineExceededError``)."""
    deadline = request.context.get(ContextKeys.DEADLINE)
    if deadline is None:
        return await awaitable
    import asyncio

    timeout = asyncio.timeout(deadline.remaining())
    try:
        async with timeout:
            return await awaitable
    except TimeoutError:
        if timeout.expired():
            raise DeadlineExceededError(deadline.seconds) from None
        raise


def deadline_stream(chunks: Iterator[ChatClientResponse], deadline: Deadline) -> Iterator[ChatClientResponse]:
    """Pass chunks through, raising ``DeadlineExceededError`` (and closing ``chunks``) past the deadline."""
    try:
        for chunk in chunks:
            deadline.check("while streaming")
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


async def adeadline_stream(
    chunks: AsyncIterator[ChatClientResponse], deadline: Deadline
) -> AsyncIterator[ChatClientResponse]:
    """Async ``deadline_stream``: waiting for a chunk is cancelled at the deadline."""
    import asyncio

    try:
        while True:
            timeout = asyncio.timeout(deadline.remaining())
            try:
                async with timeout:
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if timeout.expired():
                    raise DeadlineExceededError(deadline.seconds, "while streaming") from None
                raise
            yield chunk
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


__all__ = [
    "AdvisorEvent",
    "Deadline",
    "DocumentsRetrieved",
    "EventCallback",
    "EventSink",
    "Finished",
    "HostedToolUsed",
    "RawProviderEvent",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "UsageUpdate",
    "attach",
    "check_deadline",
    "check_max_duration",
    "flush_marker",
    "sink_of",
]


async def closing_astream(
    chunks: AsyncIterator[ChatClientResponse], opened: list[Any]
) -> AsyncIterator[ChatClientResponse]:
    """Pass chunks through; when the stream ends in any way, close every async stream the chain
    opened (``ContextKeys.ASYNC_STREAMS``), outermost first, so each advisor's cleanup runs and
    the model's HTTP response is closed now rather than whenever the event loop finalizes them."""
    try:
        async for chunk in chunks:
            yield chunk
    finally:
        streams = [chunks, *opened]
        opened.clear()
        for stream in streams:
            aclose = getattr(stream, "aclose", None)
            # A running stream is the one being unwound right now (an exception passing through
            # it): it closes itself, and aclose() on it would raise.
            if aclose is not None and not getattr(stream, "ag_running", False):
                await aclose()


# -- stream -> events ---------------------------------------------------------------------------


def stream_events(chunks: Iterator[ChatClientResponse], sink: EventSink) -> Iterator[StreamEvent]:
    """The events of a blocking stream: emitted events merged in order with the chunks' deltas."""
    from chatclient.models.base import ResponseAggregator

    buffer = sink._buffer
    notify = sink.notify if sink.callbacks else None
    aggregator = ResponseAggregator()
    add = aggregator.add
    try:
        for cr in chunks:
            if buffer:
                yield from sink.drain()
            r = cr.chat_response
            if r is None:
                continue
            add(r)
            for event in _deltas(r):
                if notify is not None:
                    notify(event)
                yield event
        if buffer:
            yield from sink.drain()
        last = Finished(aggregator.result())
        sink.events.append(last)
        if notify is not None:
            notify(last)
        yield last
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


async def astream_events(chunks: AsyncIterator[ChatClientResponse], sink: EventSink) -> AsyncIterator[StreamEvent]:
    """Async ``stream_events``; async callbacks are awaited before ``Finished`` and cancelled on close."""
    from chatclient.models.base import ResponseAggregator

    buffer = sink._buffer
    notify = sink.notify if sink.callbacks else None
    aggregator = ResponseAggregator()
    add = aggregator.add
    done = False
    try:
        async for cr in chunks:
            if buffer:
                for event in sink.drain():
                    yield event
            r = cr.chat_response
            if r is None:
                continue
            add(r)
            for event in _deltas(r):
                if notify is not None:
                    notify(event)
                yield event
        if buffer:
            for event in sink.drain():
                yield event
        last = Finished(aggregator.result())
        sink.events.append(last)
        if notify is not None:
            notify(last)
        await sink.settle()
        done = True
        yield last
    finally:
        if not done:
            sink.cancel()
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()


def _deltas(r: ChatResponse) -> tuple[StreamEvent, ...]:
    """The text, reasoning and usage events one chunk carries (first generation, like ``content()``)."""
    generations = r.generations
    message = generations[0].output if generations else None
    usage = r.metadata.usage
    if message is not None and not message.reasoning and not message.hosted_tool_calls and usage.is_empty():
        # The common chunk: one piece of text and nothing else.
        text = message.text
        return (TextDelta(text),) if text else ()
    out: list[StreamEvent] = []
    if message is None:
        provider = getattr(r, "provider", None)  # a RawEventChunk (chatclient.models.raw_events)
        if provider is not None:
            return (RawProviderEvent(provider, getattr(r, "type", ""), getattr(r, "data", {})),)
    else:
        for reasoning in message.reasoning:
            if reasoning.text:
                out.append(ReasoningDelta(reasoning.text))
        out.extend(HostedToolUsed(call) for call in message.hosted_tool_calls)
        if message.text:
            out.append(TextDelta(message.text))
    if not usage.is_empty():
        out.append(UsageUpdate(usage))
    return tuple(out)
