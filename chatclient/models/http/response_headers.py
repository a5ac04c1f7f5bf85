"""Let a caller see the status and headers of the HTTP responses a model call receives.

Rate-limit headers (``x-ratelimit-remaining-requests``, ``anthropic-ratelimit-tokens-reset`` …)
arrive on every provider response, but a ``ChatModel`` returns only a ``ChatResponse``. A wrapper
(the rate limiter) registers a listener for the duration of its inner call; the HTTP transport
reports every response it receives (retried ones included) to the listeners of the current
context. A context variable carries them, so concurrent threads and asyncio tasks each see only
their own calls' responses, and ``asyncio.to_thread`` carries them into worker threads.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

__all__ = ["ResponseListener", "listen_to_responses", "notify_response"]

ResponseListener = Callable[[int, Mapping[str, str]], None]
"""``listener(status, headers)``; headers are case-insensitive when they come from httpx."""

_LISTENERS: contextvars.ContextVar[tuple[ResponseListener, ...]] = contextvars.ContextVar(
    "chatclient_response_listeners", default=()
)


@contextmanager
def listen_to_responses(listener: ResponseListener) -> Iterator[None]:
    """Call ``listener(status, headers)`` for each HTTP response received inside the ``with`` block."""
    token = _LISTENERS.set((*_LISTENERS.get(), listener))
    try:
        yield
    finally:
        _LISTENERS.reset(token)


def notify_response(status: int, headers: Mapping[str, str]) -> None:
    """Report one received response to the current context's listeners (the transport calls this)."""
    for listener in _LISTENERS.get():
        listener(status, headers)
