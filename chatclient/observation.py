"""Observation hooks: where tracing and metrics plug in.

chatclient reports four kinds of work to an installed ``Observer``: a client call (one per terminal
method), each advisor invocation, each tool execution and each HTTP attempt. With no observer
installed (the default) every hook is a single ``None`` check, so the hooks cost nothing measurable.
``chatclient.observability.otel`` provides an OpenTelemetry observer (extra ``otel``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol


class Observation(Protocol):
    """One unit of observed work; ``finish`` is called exactly once."""

    def finish(self, result: Any = None, error: BaseException | None = None) -> None: ...


class Observer(Protocol):
    """Receives the start of each unit of work and returns its Observation."""

    def start_call(self, mode: str, request: Any, model: Any) -> Observation: ...

    def start_advisor(self, advisor: Any, mode: str) -> Observation: ...

    def start_tool(self, name: str, call_id: str, arguments: str) -> Observation: ...

    def start_http_attempt(self, provider: str, method: str, url: str, attempt: int) -> Observation: ...


_observer: Observer | None = None


def set_observer(observer: Observer | None) -> Observer | None:
    """Install ``observer`` process-wide (``None`` uninstalls); returns the previous one."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def get_observer() -> Observer | None:
    return _observer


def observe_embedding(model: Any, count: int) -> Observation | None:
    """Start an embedding observation (``count`` texts to ``model``) when the observer has the
    optional hook ``start_embedding(model, count)``; ``None`` otherwise (finish nothing then)."""
    observer = _observer
    start = getattr(observer, "start_embedding", None) if observer is not None else None
    return None if start is None else start(model, count)  # type: ignore[no-any-return]


def observe_media(model: Any, operation: str, attributes: Mapping[str, Any]) -> Observation | None:
    """Start an observation of one image, transcription or speech call (``operation`` such as
    ``"generate_image"``, ``attributes`` the request's size, format and the like) when the observer
    has the optional hook ``start_media(model, operation, attributes)``; it finishes with the result."""
    observer = _observer
    start = getattr(observer, "start_media", None) if observer is not None else None
    return None if start is None else start(model, operation, attributes)  # type: ignore[no-any-return]


def observe_retrieval(store: Any, request: Any) -> Observation | None:
    """Start a retrieval observation (a vector-store search for ``request``) when the observer has
    the optional hook ``start_retrieval(store, request)``; it finishes with the documents found."""
    observer = _observer
    start = getattr(observer, "start_retrieval", None) if observer is not None else None
    return None if start is None else start(store, request)  # type: ignore[no-any-return]


@contextmanager
def observed(observation: Observation | None) -> Iterator[Callable[[Any], None]]:
    """Finish ``observation`` (possibly ``None``: nothing to do) with the work's outcome.

    ``with observed(observe_retrieval(store, request)) as done: ...; done(result)`` finishes it with
    the result, or with the error that leaves the block.
    """
    if observation is None:
        yield _ignore
        return
    try:
        yield observation.finish
    except BaseException as exc:
        observation.finish(error=exc)
        raise


def _ignore(_: Any) -> None:
    pass


def observe_iterator(observation: Observation, iterator: Iterator[Any]) -> Iterator[Any]:
    """Pass ``iterator`` through, finishing ``observation`` with the last item (or the error)."""
    last = None
    try:
        for last in iterator:
            yield last
    except BaseException as exc:
        observation.finish(error=exc)
        raise
    observation.finish(last)


async def observe_async_iterator(observation: Observation, iterator: AsyncIterator[Any]) -> AsyncIterator[Any]:
    last = None
    try:
        async for last in iterator:
            yield last
    except BaseException as exc:
        observation.finish(error=exc)
        raise
    observation.finish(last)


def observe_response_stream(observation: Observation, iterator: Iterator[Any]) -> Iterator[Any]:
    """Like ``observe_iterator`` for a stream of ChatClientResponses: finishes with their aggregate."""
    from chatclient.models.base import ResponseAggregator
    from chatclient.request import ChatClientResponse

    aggregator = ResponseAggregator()
    last = None
    try:
        for last in iterator:
            aggregator.add(last.chat_response)
            yield last
    except BaseException as exc:
        observation.finish(error=exc)
        raise
    observation.finish(ChatClientResponse(aggregator.result(), last.context if last is not None else {}))


async def observe_async_response_stream(observation: Observation, iterator: AsyncIterator[Any]) -> AsyncIterator[Any]:
    from chatclient.models.base import ResponseAggregator
    from chatclient.request import ChatClientResponse

    aggregator = ResponseAggregator()
    last = None
    try:
        async for last in iterator:
            aggregator.add(last.chat_response)
            yield last
    except BaseException as exc:
        observation.finish(error=exc)
        raise
    observation.finish(ChatClientResponse(aggregator.result(), last.context if last is not None else {}))
