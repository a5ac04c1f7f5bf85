"""Listeners: callbacks around model calls and streams, for code that wants hooks rather than advisors.

* ``ListeningChatModel(model, listeners)`` calls each listener's ``on_request``, ``on_response`` and
  ``on_error`` around every model call, in every mode (LangChain4j's ``ChatModelListener``). A
  listener implements only the hooks it needs; what a hook returns is ignored; an exception in a
  listener is logged and the next listener still runs. The three contexts share one ``attributes``
  dict per call, to carry a start time or a span from ``on_request`` to ``on_response``.
* ``handle_stream(source, handler)`` drives a stream with callbacks — ``on_partial(text)``,
  ``on_complete(response)``, ``on_error(error)`` and optional others (LangChain4j's
  ``StreamingChatResponseHandler``); ``StreamHandler(on_partial=..., ...)`` builds one from functions.
* ``raw_provider_events()``: streams inside it also carry ``RawProviderEvent`` for provider events
  chatclient does not map (Anthropic's ``ping``, Responses API events without a field).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from chatclient.events import (
    Finished,
    RawProviderEvent,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chatclient.models.base import ChatModel, ChatResponse, ResponseAggregator
from chatclient.models.raw_events import raw_events_wanted, raw_provider_events
from chatclient.prompt import Prompt

log = logging.getLogger(__name__)

__all__ = [
    "ChatModelErrorContext",
    "ChatModelListener",
    "ChatModelRequestContext",
    "ChatModelResponseContext",
    "ListeningChatModel",
    "RawProviderEvent",
    "StreamHandler",
    "ahandle_stream",
    "handle_stream",
    "raw_provider_events",
]


class _ModelContext:
    """The ``provider`` of the three listener contexts (each a dataclass with a ``model``)."""

    __slots__ = ()
    model: ChatModel

    @property
    def provider(self) -> str:
        """The model's class name (e.g. ``"AnthropicChatModel"``)."""
        return type(self.model).__name__


@dataclass(frozen=True, slots=True)
class ChatModelRequestContext(_ModelContext):
    """What ``on_request`` sees: the prompt sent (after every advisor), the model, shared ``attributes``."""

    prompt: Prompt
    model: ChatModel
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatModelResponseContext(_ModelContext):
    """What ``on_response`` sees: the prompt, the whole response (aggregated for streams), ``attributes``."""

    prompt: Prompt
    response: ChatResponse
    model: ChatModel
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatModelErrorContext(_ModelContext):
    """What ``on_error`` sees: the prompt, the error the model raised, ``attributes``."""

    prompt: Prompt
    error: BaseException
    model: ChatModel
    attributes: dict[str, Any] = field(default_factory=dict)


class ChatModelListener:
    """A base to subclass (optional: any object with some of these methods is a listener).

    Override only the hooks you need; each may return ``None``. Hooks run synchronously on the
    caller's thread (in async modes, on the event loop), so they must not block.
    """

    def on_request(self, context: ChatModelRequestContext) -> None:
        """Before the model is called (once per call; the model's own retries are not repeated here)."""

    def on_response(self, context: ChatModelResponseContext) -> None:
        """After the model answered (for streams: once, after the last chunk)."""

    def on_error(self, context: ChatModelErrorContext) -> None:
        """When the model raised; the error still propagates to the caller."""


_HOOKS = ("on_request", "on_response", "on_error")


class ListeningChatModel:
    """A ``ChatModel`` that tells ``listeners`` about every call of ``model`` it forwards.

    It is a model wrapper, so every advisor and the whole client work on top of it unchanged:
    ``ChatClient.create(ListeningChatModel(model, [MyListener()]))``. A stream that the consumer
    abandons before the end reports neither a response nor an error.
    """

    def __init__(self, model: ChatModel, listeners: Iterable[Any]) -> None:
        if model is None or not callable(getattr(model, "call", None)):
            raise TypeError(f"ListeningChatModel wraps a chat model, not {model!r}")
        chosen = tuple(listeners) if not isinstance(listeners, (str, bytes)) else ()
        if not chosen:
            raise ValueError("ListeningChatModel needs at least one listener")
        for listener in chosen:
            if not any(callable(getattr(listener, hook, None)) for hook in _HOOKS):
                raise TypeError(
                    f"{type(listener).__name__} is not a listener: give it on_request, on_response or on_error"
                )
        self.model = model
        self.listeners = chosen
        self.capabilities = model.capabilities
        self.default_options = model.default_options

    def __getattr__(self, name: str) -> Any:
        # Anything else a model offers (count_tokens, token_counter, close...) is the wrapped model's.
        if name.startswith("__") or name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)

    def __repr__(self) -> str:
        return f"ListeningChatModel({self.model!r}, listeners={len(self.listeners)})"

    def _notify(self, hook: str, context: Any) -> None:
        for listener in self.listeners:
            method = getattr(listener, hook, None)
            if method is None:
                continue
            try:
                method(context)
            except Exception:  # a listener must never break the call it watches
                log.warning(
                    "listener %s.%s raised; the next listener still runs", type(listener).__name__, hook, exc_info=True
                )

    def _start(self, prompt: Prompt) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        self._notify("on_request", ChatModelRequestContext(prompt, self.model, attributes))
        return attributes

    def _failed(self, prompt: Prompt, error: BaseException, attributes: dict[str, Any]) -> None:
        self._notify("on_error", ChatModelErrorContext(prompt, error, self.model, attributes))

    def _answered(self, prompt: Prompt, response: ChatResponse, attributes: dict[str, Any]) -> None:
        self._notify("on_response", ChatModelResponseContext(prompt, response, self.model, attributes))

    def call(self, prompt: Prompt) -> ChatResponse:
        attributes = self._start(prompt)
        try:
            response = self.model.call(prompt)
        except Exception as exc:
            self._failed(prompt, exc, attributes)
            raise
        self._answered(prompt, response, attributes)
        return response

    async def acall(self, prompt: Prompt) -> ChatResponse:
        attributes = self._start(prompt)
        try:
            response = await self.model.acall(prompt)
        except Exception as exc:
            self._failed(prompt, exc, attributes)
            raise
        self._answered(prompt, response, attributes)
        return response

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        attributes = self._start(prompt)
        aggregator = ResponseAggregator()
        try:
            for chunk in self.model.stream(prompt):
                aggregator.add(chunk)
                yield chunk
        except Exception as exc:
            self._failed(prompt, exc, attributes)
            raise
        self._answered(prompt, aggregator.result(), attributes)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        attributes = self._start(prompt)
        aggregator = ResponseAggregator()
        try:
            async for chunk in self.model.astream(prompt):
                aggregator.add(chunk)
                yield chunk
        except Exception as exc:
            self._failed(prompt, exc, attributes)
            raise
        self._answered(prompt, aggregator.result(), attributes)


# -- callback-style streams -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamHandler:
    """A stream handler built from functions (LangChain4j's ``LambdaStreamingResponseHandler``).

    Each field is optional: ``on_partial(text)``, ``on_partial_thinking(text)``,
    ``on_tool_call(ToolCallStarted)``, ``on_tool_result(ToolCallFinished)``,
    ``on_raw_event(RawProviderEvent)``, ``on_complete(ChatResponse | None)``, ``on_error(error)``.
    """

    on_partial: Callable[[str], Any] | None = None
    on_complete: Callable[[ChatResponse | None], Any] | None = None
    on_error: Callable[[BaseException], Any] | None = None
    on_partial_thinking: Callable[[str], Any] | None = None
    on_tool_call: Callable[[ToolCallStarted], Any] | None = None
    on_tool_result: Callable[[ToolCallFinished], Any] | None = None
    on_raw_event: Callable[[RawProviderEvent], Any] | None = None


def _hook(handler: Any, name: str) -> Callable[..., Any] | None:
    method = getattr(handler, name, None)
    return method if callable(method) else None


_DISPATCH: tuple[tuple[type[StreamEvent], str, Callable[[Any], Any]], ...] = (
    (TextDelta, "on_partial", lambda e: e.text),
    (ReasoningDelta, "on_partial_thinking", lambda e: e.text),
    (ToolCallStarted, "on_tool_call", lambda e: e),
    (ToolCallFinished, "on_tool_result", lambda e: e),
    (RawProviderEvent, "on_raw_event", lambda e: e),
    (Finished, "on_complete", lambda e: e.response),
)


def _check_handler(handler: Any) -> None:
    hooks = ("on_error", *(name for _, name, _ in _DISPATCH))
    if handler is None or not any(_hook(handler, name) for name in hooks):
        raise TypeError(f"{handler!r} is not a stream handler: give it on_partial, on_complete or on_error")


def _events_of(source: Any, *, async_mode: bool) -> Any:
    """``source`` itself when it is an iterable of events, else ``source.stream().events()``."""
    opener = getattr(source, "astream" if async_mode else "stream", None)
    if callable(opener) and not isinstance(source, (Iterator, AsyncIterator)):
        return opener().events()
    return source


def _dispatch(handler: Any, event: StreamEvent) -> None:
    for event_type, name, value in _DISPATCH:
        if isinstance(event, event_type):
            method = _hook(handler, name)
            if method is not None:
                method(value(event))
            return


def handle_stream(source: Any, handler: Any) -> None:
    """Stream ``source`` and hand its events to ``handler``'s callbacks; returns when the stream ends.

    ``source`` is a request spec (``client.prompt("...")``: its ``stream().events()`` is used) or an
    iterable of ``chatclient.events``. An error ends the stream with ``on_error(error)`` when the
    handler has it (nothing is raised then); without it the error propagates. A handler with
    ``on_raw_event`` also receives provider events chatclient does not map. The stream is closed
    when this returns or raises (a callback that raises ends it too).
    """
    _check_handler(handler)
    on_error = _hook(handler, "on_error")
    with _raw_if(handler):
        events = _events_of(source, async_mode=False)
        try:
            for event in events:
                _dispatch(handler, event)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(exc)
        finally:
            # A callback that raised left the stream unread: close it now (its HTTP response with it),
            # not whenever the garbage collector finds the abandoned generator.
            close = getattr(events, "close", None)
            if callable(close):
                close()


async def ahandle_stream(source: Any, handler: Any) -> None:
    """Async ``handle_stream``: ``source`` is a request spec (``astream().events()``) or an async iterable
    of events. Callbacks are plain functions, called on the event loop."""
    _check_handler(handler)
    on_error = _hook(handler, "on_error")
    with _raw_if(handler):
        events: AsyncIterable[StreamEvent] = _events_of(source, async_mode=True)
        try:
            async for event in events:
                _dispatch(handler, event)
        except Exception as exc:
            if on_error is None:
                raise
            on_error(exc)
        finally:
            # as in handle_stream: an abandoned async generator would otherwise stay open until the
            # event loop's finalizer runs, holding its connection
            aclose = getattr(events, "aclose", None)
            if callable(aclose):
                await aclose()


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _raw_if(handler: Any) -> Any:
    wanted = _hook(handler, "on_raw_event") is not None and not raw_events_wanted()
    return raw_provider_events() if wanted else _Nothing()
