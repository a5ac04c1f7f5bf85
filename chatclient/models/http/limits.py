"""Bounds on time and size: the default timeout, ``ResponseLimits`` and the bounded body reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from chatclient.errors import ModelResponseError
from chatclient.models.http.sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)
ERROR_BODY_BYTES = 64 * 1024  # enough for any real error body; the excerpt keeps 1000 chars


@dataclass(frozen=True, slots=True)
class ResponseLimits:
    """Bounds on what a provider may send back; past one, the call raises ``ModelResponseError``.

    ``max_line_bytes`` bounds one SSE/NDJSON line, ``max_event_bytes`` one SSE event (its data
    lines together), ``max_response_bytes`` a whole body, streamed or not (after decompression).

    >>> ResponseLimits(max_line_bytes=1024).max_event_bytes == DEFAULT_MAX_EVENT_BYTES
    True
    """

    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    max_response_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_line_bytes", "max_event_bytes", "max_response_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ResponseLimits.{name} must be a positive int, got {value!r}")


def as_timeout(timeout: float | httpx.Timeout | None) -> httpx.Timeout:
    """Normalise the ``timeout`` constructor argument."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    if timeout is None:
        return httpx.Timeout(None)
    if timeout <= 0:
        raise ValueError("timeout must be positive")
    return httpx.Timeout(float(timeout), connect=min(float(timeout), 10.0))


class _Encoded(Protocol):
    @property
    def encoding(self) -> str | None: ...


class _Body:
    """Bounded accumulation of a response body (after content decoding)."""

    __slots__ = ("_limit", "_parts", "_size", "what")

    def __init__(self, limit: int, what: str) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self.what = what

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            raise ModelResponseError(
                f"{self.what} is larger than {self._limit} bytes (raise ResponseLimits.max_response_bytes if "
                "such answers are expected)"
            )
        self._parts.append(chunk)

    def data(self) -> bytes:
        """The bytes collected."""
        return b"".join(self._parts)

    def text(self, response: _Encoded) -> str:
        data = self.data()
        try:
            return data.decode(response.encoding or "utf-8", "replace")
        except LookupError:  # a charset Python does not know: UTF-8, as httpx falls back (direct paths pass it raw)
            return data.decode("utf-8", "replace")
