"""Usage meters: see (and veto) every model call a request makes, wherever it is made.

A budget must count the tool loop's turns, a validation advisor's re-asks and the calls a RAG query
transformer makes through its own ``ChatClient``. All of them end in a terminal
``ChatModelAdvisor``, which asks the meters in scope before each model call (a meter may refuse by
raising) and reports each call's response after it. A meter is in scope when it is

* in the request context under ``USAGE_METERS`` (a tuple; it travels with the request through
  ``chain.copy`` re-runs), or
* installed with ``with metering(meter):`` in the current thread/task context (so clients that are
  called while the request runs, like a query transformer's, are counted too; ``asyncio.to_thread``
  carries it into worker threads).

A meter that appears both ways counts a call once.

Image, transcription and speech calls (``chatclient.models.images`` / ``.audio``) are not chat calls:
they report to the meters in scope that also implement ``MediaUsageMeter`` (``BudgetAdvisor``'s
does), with the call's price instead of a prompt, so a budget counts the images an agent draws
through a tool as well.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from chatclient.models.base import ChatModel, ChatResponse, Usage
    from chatclient.prompt import Prompt

__all__ = [
    "USAGE_METERS",
    "MediaUsageMeter",
    "UsageMeter",
    "media_meters",
    "metered_acall",
    "metered_astream",
    "metered_call",
    "metered_stream",
    "metering",
]

USAGE_METERS = "chatclient.usage.meters"
"""Request-context key: a tuple of ``UsageMeter`` objects."""


@runtime_checkable
class UsageMeter(Protocol):
    """Told about every model call in its scope."""

    def before_call(self, prompt: Prompt, model: ChatModel) -> None:
        """Called before the model is called; raise to stop the call (e.g. ``BudgetExceededError``)."""

    def after_call(self, response: ChatResponse, model: ChatModel) -> None:
        """Called with the whole response (a stream's aggregate) once the call has answered."""


@runtime_checkable
class MediaUsageMeter(Protocol):
    """A meter that also counts image, transcription and speech calls."""

    def before_media(self, model: str, cost: float | None) -> None:
        """Called before a media call that may cost ``cost`` dollars (``None``: no price known);
        raise to stop it."""

    def after_media(self, model: str, usage: Usage, cost: float | None) -> None:
        """Called once the media call has answered, with its token usage (often none) and cost."""


_SCOPE: contextvars.ContextVar[tuple[UsageMeter, ...]] = contextvars.ContextVar("chatclient_usage_meters", default=())


@contextmanager
def metering(meter: UsageMeter) -> Iterator[None]:
    """Put ``meter`` in scope for every model call made inside the ``with`` block (this thread/task)."""
    token = _SCOPE.set((*_SCOPE.get(), meter))
    try:
        yield
    finally:
        try:
            _SCOPE.reset(token)
        except ValueError:  # ended from another context (an abandoned stream): drop it there
            _SCOPE.set(tuple(m for m in _SCOPE.get() if m is not meter))


def media_meters() -> tuple[MediaUsageMeter, ...]:
    """The meters in scope here (``with metering(...)``) that count media calls too."""
    return tuple(m for m in _SCOPE.get() if isinstance(m, MediaUsageMeter))


def meters_for(context: Mapping[str, Any] | None) -> tuple[UsageMeter, ...]:
    """The meters in scope for a request with ``context``, each once."""
    scoped = _SCOPE.get()
    attached = context.get(USAGE_METERS) if context else None
    if not attached:
        return scoped
    out = list(scoped)
    for m in attached:
        if not any(m is x for x in out):
            out.append(m)
    return tuple(out)


def metered_call(model: ChatModel, prompt: Prompt, context: Mapping[str, Any] | None) -> ChatResponse:
    """``model.call(prompt)``, reported to the meters in scope."""
    meters = meters_for(context)
    if not meters:
        return model.call(prompt)
    for m in meters:
        m.before_call(prompt, model)
    response = model.call(prompt)
    for m in meters:
        m.after_call(response, model)
    return response


async def metered_acall(model: ChatModel, prompt: Prompt, context: Mapping[str, Any] | None) -> ChatResponse:
    """``await model.acall(prompt)``, reported to the meters in scope."""
    meters = meters_for(context)
    if not meters:
        return await model.acall(prompt)
    for m in meters:
        m.before_call(prompt, model)
    response = await model.acall(prompt)
    for m in meters:
        m.after_call(response, model)
    return response


def metered_stream(model: ChatModel, prompt: Prompt, context: Mapping[str, Any] | None) -> Iterator[ChatResponse]:
    """``model.stream(prompt)``, reported to the meters in scope when it ends (or is closed early)."""
    meters = meters_for(context)
    if not meters:
        return model.stream(prompt)
    return _metered_stream(model, prompt, meters)


def _metered_stream(model: ChatModel, prompt: Prompt, meters: tuple[UsageMeter, ...]) -> Iterator[ChatResponse]:
    from chatclient.models.base import ResponseAggregator

    for m in meters:
        m.before_call(prompt, model)
    aggregator = ResponseAggregator()
    answered = False
    chunks = iter(model.stream(prompt))
    try:
        for chunk in chunks:
            answered = True
            aggregator.add(chunk)
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
        if answered:
            whole = aggregator.result()
            for m in meters:
                m.after_call(whole, model)


def metered_astream(model: ChatModel, prompt: Prompt, context: Mapping[str, Any] | None) -> AsyncIterator[ChatResponse]:
    """``model.astream(prompt)``, reported to the meters in scope when it ends (or is closed early)."""
    meters = meters_for(context)
    if not meters:
        return model.astream(prompt)
    return _metered_astream(model, prompt, meters)


async def _metered_astream(
    model: ChatModel, prompt: Prompt, meters: tuple[UsageMeter, ...]
) -> AsyncIterator[ChatResponse]:
    from chatclient.models.base import ResponseAggregator

    for m in meters:
        m.before_call(prompt, model)
    aggregator = ResponseAggregator()
    answered = False
    chunks = aiter(model.astream(prompt))
    try:
        async for chunk in chunks:
            answered = True
            aggregator.add(chunk)
            yield chunk
    finally:
        aclose = getattr(chunks, "aclose", None)
        if aclose is not None:
            await aclose()
        if answered:
            whole = aggregator.result()
            for m in meters:
                m.after_call(whole, model)
