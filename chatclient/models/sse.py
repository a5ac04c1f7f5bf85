"""Line-level parsing of streamed model responses: Server-Sent Events and newline-delimited JSON.

The parsers work on already-split text lines (``httpx.Response.iter_lines`` does the splitting and
decoding), so one incremental decoder serves both the sync and the async stream helpers.

>>> list(iter_sse(["event: ping", "data: {}", ""]))
[SSEEvent(data='{}', event='ping', id=None)]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from chatclient.errors import ModelResponseError

__all__ = [
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
    "aiter_ndjson",
    "aiter_sse",
    "iter_ndjson",
    "iter_sse",
    "parse_json",
]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event; multi-line ``data`` fields are joined with ``"\\n"``."""

    data: str
    event: str | None = None
    id: str | None = None

    def json(self) -> Any:
        """The event data parsed as JSON; malformed data raises ``ModelResponseError``."""
        return parse_json(self.data, what="stream event")


def parse_json(text: str, *, what: str = "response") -> Any:
    """Parse JSON text, turning a decoding failure into ``ModelResponseError`` with a short excerpt."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        excerpt = text[:200]
        raise ModelResponseError(f"malformed JSON in {what}: {exc.msg} (got {excerpt!r})") from None


class SSEDecoder:
    """Incremental SSE parser following the WHATWG event-stream rules.

    Feed it lines without their terminators; it returns an event whenever a blank line ends one.
    Comments (``:`` lines) and ``retry`` fields are ignored; an event without data is dropped.
    """

    __slots__ = ("_data", "_event", "_id")

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None

    def feed(self, line: str) -> SSEEvent | None:
        """Consume one line; return the event it completes, if any."""
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None

    def flush(self) -> SSEEvent | None:
        """End of stream: dispatch a last event that was not followed by a blank line.

        The standard would drop it; keeping it is harmless because completeness is judged by the
        provider's own end marker (``[DONE]``, ``message_stop``), never by the framing.
        """
        return self._dispatch()

    def _dispatch(self) -> SSEEvent | None:
        if not self._data:
            self._event = None
            return None
        event = SSEEvent("\n".join(self._data), self._event, self._id)
        self._data = []
        self._event = None
        return event


class NDJSONDecoder:
    """Parses newline-delimited JSON: one object per non-blank line."""

    __slots__ = ()

    def feed(self, line: str) -> Any | None:
        """Return the parsed object, or ``None`` for a blank line; malformed lines raise."""
        if not line.strip():
            return None
        return parse_json(line, what="stream line")


def iter_sse(lines: Iterable[str]) -> Iterator[SSEEvent]:
    """Events from an iterable of lines."""
    decoder = SSEDecoder()
    for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event
    last = decoder.flush()
    if last is not None:
        yield last


async def aiter_sse(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Events from an async iterable of lines."""
    decoder = SSEDecoder()
    async for line in lines:
        event = decoder.feed(line)
        if event is not None:
            yield event
    last = decoder.flush()
    if last is not None:
        yield last


def iter_ndjson(lines: Iterable[str]) -> Iterator[Any]:
    """JSON objects from an iterable of lines."""
    decoder = NDJSONDecoder()
    for line in lines:
        obj = decoder.feed(line)
        if obj is not None:
            yield obj


async def aiter_ndjson(lines: AsyncIterable[str]) -> AsyncIterator[Any]:
    """JSON objects from an async iterable of lines."""
    decoder = NDJSONDecoder()
    async for line in lines:
        obj = decoder.feed(line)
        if obj is not None:
            yield obj
