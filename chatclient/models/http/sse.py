"""Line-level parsing of streamed model responses: Server-Sent Events and newline-delimited JSON.

Everything here is sans-IO: ``LineDecoder`` splits raw body bytes into text lines (with a bound on
the line length, so a server that never sends a newline cannot fill memory), and the SSE / NDJSON
decoders work on those lines, so one implementation serves both the sync and the async stream
helpers. JSON goes through ``chatclient.jsonsafe`` so hostile nesting is a ``ModelResponseError``.

>>> list(iter_sse(["event: ping", "data: {}", ""]))
[SSEEvent(data='{}', event='ping', id=None)]
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from chatclient import jsonsafe
from chatclient.errors import ModelResponseError

__all__ = [
    "DEFAULT_MAX_EVENT_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "LineDecoder",
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
    "aiter_ndjson",
    "aiter_sse",
    "iter_ndjson",
    "iter_sse",
    "parse_event_json",
    "parse_json",
]


DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
"""Longest accepted stream line (bytes, terminator excluded)."""

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""Largest accepted SSE event (the sum of its ``data`` lines, in characters)."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event; multi-line ``data`` fields are joined with ``"\\n"``."""

    data: str
    event: str | None = None
    id: str | None = None

    def json(self) -> Any:
        """The event data parsed as JSON; malformed data raises ``ModelResponseError``."""
        return parse_json(self.data, what="stream event")


_raw_decode = json.JSONDecoder().raw_decode


def parse_event_json(data: str) -> Any:
    """``parse_json(data, what="stream event")`` with a shortcut for the usual event: a short
    object (too short to nest past ``jsonsafe.MAX_JSON_DEPTH``) decoded without the depth scan; any
    other text, and every failure, takes the full path so results and errors are the same."""
    if len(data) <= jsonsafe.MAX_JSON_DEPTH and data[:1] == "{":
        try:
            value, end = _raw_decode(data)
        except (ValueError, RecursionError):
            pass
        else:
            if end == len(data):
                return value
    return parse_json(data, what="stream event")


def parse_json(text: str, *, what: str = "response") -> Any:
    """Parse JSON text, turning a decoding failure into ``ModelResponseError`` with a short excerpt."""
    try:
        return jsonsafe.loads(text)
    except jsonsafe.JSONDepthError as exc:
        raise ModelResponseError(f"{what} is nested too deeply to parse ({exc})") from None
    except ValueError as exc:  # json.JSONDecodeError, or invalid UTF-8 in bytes
        message = getattr(exc, "msg", None) or type(exc).__name__
        excerpt = text[:200]
        raise ModelResponseError(f"malformed JSON in {what}: {message} (got {excerpt!r})") from None


class LineDecoder:
    """Splits raw body bytes into text lines at ``\\n``, ``\\r\\n`` or ``\\r`` (the SSE rules).

    ``feed`` returns the lines completed by a chunk, ``flush`` the unterminated tail at end of
    stream. A line longer than ``max_line_bytes`` raises ``ModelResponseError`` as soon as the
    buffered part passes the bound, so memory stays bounded whatever the server sends.

    >>> d = LineDecoder()
    >>> d.feed(b"data: a\\r"), d.feed(b"\\ndata: b"), d.flush()
    (['data: a'], [], ['data: b'])
    """

    __slots__ = ("_first", "_max", "_skip_lf", "_tail", "_tail_len")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes <= 0:
            raise ValueError("max_line_bytes must be positive")
        self._max = max_line_bytes
        # The unterminated tail is kept as a list of chunks and joined only when its line ends, so
        # a long line arriving in many small reads costs linear, not quadratic, time.
        self._tail: list[bytes] = []
        self._tail_len = 0
        self._skip_lf = False  # a chunk ended in "\r": a "\n" opening the next one belongs to it
        self._first = True

    def feed(self, data: bytes) -> list[str]:
        """Consume a chunk of body bytes; return the complete lines in it."""
        if self._skip_lf and data:
            self._skip_lf = False
            if data.startswith(b"\n"):
                data = data[1:]
        if not data:
            return []
        if b"\n" not in data and b"\r" not in data:
            self._keep(data)
            return []
        buffer = b"".join([*self._tail, data]) if self._tail else data
        self._tail, self._tail_len = [], 0
        if b"\r" not in buffer and len(buffer) <= self._max:
            # The usual body: "\n" only, and no line can pass the bound. One decode for every line
            # of the read (UTF-8 never hides a "\n" byte inside a character, so the text is the same).
            end = buffer.rfind(b"\n") + 1
            if end < len(buffer):
                self._keep(buffer[end:])
            lines = buffer[:end].decode("utf-8", "replace").split("\n")
            lines.pop()  # the text after the last "\n" (empty)
            if self._first and lines:
                self._first = False
                if lines[0].startswith("\ufeff"):  # a byte-order mark is not part of the first line
                    lines[0] = lines[0][1:]
            return lines
        pieces = buffer.splitlines(keepends=True)
        tail = b""
        if not pieces[-1].endswith((b"\n", b"\r")):
            tail = pieces.pop()
        elif pieces[-1].endswith(b"\r"):
            self._skip_lf = True
        lines = [self._text(p[:-2] if p.endswith(b"\r\n") else p[:-1]) for p in pieces]
        if tail:
            self._keep(tail)
        return lines

    def flush(self) -> list[str]:
        """End of stream: the last line if it had no terminator."""
        tail = b"".join(self._tail)
        self._tail, self._tail_len = [], 0
        return [self._text(tail)] if tail else []

    def _keep(self, data: bytes) -> None:
        self._tail_len += len(data)
        if self._tail_len > self._max:
            self._tail, self._tail_len = [], 0
            self._too_long()
        self._tail.append(data)

    def _text(self, content: bytes) -> str:
        if len(content) > self._max:
            self._too_long()
        text = content.decode("utf-8", "replace")
        if self._first:
            self._first = False
            if text.startswith("\ufeff"):  # a byte-order mark is not part of the first line
                text = text[1:]
        return text

    def _too_long(self) -> None:
        raise ModelResponseError(
            f"a stream line is longer than {self._max} bytes; the server sent an oversized or unterminated "
            "line (raise ResponseLimits.max_line_bytes if such lines are expected)"
        )


class SSEDecoder:
    """Incremental SSE parser following the WHATWG event-stream rules.

    Feed it lines without their terminators; it returns an event whenever a blank line ends one.
    Comments (``:`` lines) and ``retry`` fields are ignored; an event without data is dropped.
    An event whose data grows past ``max_event_bytes`` characters raises ``ModelResponseError``.
    """

    __slots__ = ("_data", "_event", "_id", "_max", "_size", "last_event")

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        if max_event_bytes <= 0:
            raise ValueError("max_event_bytes must be positive")
        self._data: list[str] = []
        self._event: str | None = None
        self.last_event: str | None = None
        """The ``event`` field of the event ``feed_data`` completed last."""
        self._id: str | None = None
        self._max = max_event_bytes
        self._size = 0

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
            self._size += len(value) + 1
            if self._size > self._max:
                self._data, self._size = [], 0
                self._too_large()
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None

    def feed_data(self, line: str) -> str | None:
        """``feed`` for parsers that read only an event's data: the completed event's ``data`` (no
        ``SSEEvent`` is built). The same rules and bounds; the hot case, a ``data: `` line, is
        handled without splitting the line.
        """
        if not line:
            data = self._data
            self.last_event, self._event = self._event, None
            if not data:
                return None
            self._data = []
            self._size = 0
            return data[0] if len(data) == 1 else "\n".join(data)
        if line.startswith("data: "):
            value = line[6:]
            size = self._size + len(value) + 1
            if size > self._max:
                self._data, self._size = [], 0
                self._too_large()
            self._size = size
            self._data.append(value)
            return None
        self.feed(line)  # never dispatches: only a blank line does
        return None

    def _too_large(self) -> None:
        raise ModelResponseError(
            f"a stream event is larger than {self._max} bytes "
            "(raise ResponseLimits.max_event_bytes if such events are expected)"
        )

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
        self._size = 0
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
