"""Decoding AWS's binary event stream (``application/vnd.amazon.eventstream``), sans-IO.

Bedrock's ConverseStream answers with a sequence of messages, each framed as::

    total length (uint32) | headers length (uint32) | prelude CRC32 (of the 8 bytes before)
    headers (name length uint8, name, value type uint8, value) ... | payload | message CRC32

all big-endian, the message CRC covering everything before it. ``EventStreamDecoder.feed`` takes
body bytes as they arrive (cut anywhere) and returns the whole messages they complete; a bad CRC,
an impossible length or a message larger than the bound raises ``ModelResponseError`` before any
of that message is used.

    >>> EventStreamDecoder().feed(b"")
    []
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from chatclient.errors import ModelResponseError

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "EventStreamDecoder", "EventStreamMessage"]

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Largest accepted message (AWS caps an event's payload at 16 MiB as well)."""

_PRELUDE = 12  # total length, headers length, prelude CRC
_OVERHEAD = 16  # prelude + message CRC
_MAX_HEADERS_BYTES = 128 * 1024  # AWS's own bound on a message's headers
_FIXED_SIZES = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


@dataclass(frozen=True, slots=True)
class EventStreamMessage:
    """One decoded message: its headers (name -> value) and raw payload bytes."""

    headers: Mapping[str, Any]
    payload: bytes

    @property
    def message_type(self) -> str:
        """``event``, ``exception`` or ``error`` (``:message-type``)."""
        value = self.headers.get(":message-type", "event")
        return value if isinstance(value, str) else "event"

    @property
    def event_type(self) -> str | None:
        """The event's name (``:event-type``), e.g. ``contentBlockDelta``."""
        value = self.headers.get(":event-type")
        return value if isinstance(value, str) else None

    @property
    def exception_type(self) -> str | None:
        """The exception's name for ``exception`` messages (``:exception-type``), e.g. ``throttlingException``."""
        value = self.headers.get(":exception-type") or self.headers.get(":error-code")
        return value if isinstance(value, str) else None


def _headers(data: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pos, end = 0, len(data)
    try:
        while pos < end:
            size = data[pos]
            name = data[pos + 1 : pos + 1 + size].decode("utf-8", "replace")
            pos += 1 + size
            kind = data[pos]
            pos += 1
            value: Any
            if kind == 7 or kind == 6:  # string, bytes: the common case first
                length = (data[pos] << 8) | data[pos + 1]
                raw = data[pos + 2 : pos + 2 + length]
                if len(raw) != length:
                    raise IndexError
                value = raw.decode("utf-8", "replace") if kind == 7 else raw
                pos += 2 + length
            elif kind in (0, 1):
                value = kind == 0
            elif kind in _FIXED_SIZES:
                fmt = _FIXED_SIZES[kind]
                value = struct.unpack_from(fmt, data, pos)[0]
                pos += struct.calcsize(fmt)
                if kind == 8:
                    value = datetime.fromtimestamp(value / 1000, UTC)
            elif kind == 9:
                if pos + 16 > end:
                    raise IndexError
                value = uuid.UUID(bytes=data[pos : pos + 16])
                pos += 16
            else:
                raise ModelResponseError(f"event stream header {name!r} has an unknown value type {kind}")
            if pos > end:
                raise IndexError
            out[name] = value
    except (IndexError, struct.error):
        raise ModelResponseError("event stream message has a truncated header") from None
    return out


class EventStreamDecoder:
    """Splits event-stream bytes into checked messages; ``feed`` as bytes arrive.

    ``max_message_bytes`` bounds one message (its declared total length is checked against it
    before anything is buffered beyond the prelude). ``pending`` tells whether a message is cut
    off at the current position (so the end of the body would be a truncated stream).
    """

    __slots__ = ("_buffer", "_max")

    def __init__(self, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> None:
        if max_message_bytes < _OVERHEAD:
            raise ValueError(f"max_message_bytes must be at least {_OVERHEAD}")
        self._max = max_message_bytes
        self._buffer = bytearray()

    @property
    def pending(self) -> bool:
        """Whether bytes of an unfinished message are buffered."""
        return bool(self._buffer)

    def feed(self, data: bytes) -> list[EventStreamMessage]:
        """Consume ``data``; return the messages it completes, in order."""
        buffer = self._buffer
        buffer += data
        out: list[EventStreamMessage] = []
        while len(buffer) >= _PRELUDE:
            total, headers_len, prelude_crc = struct.unpack_from(">III", buffer)
            if zlib.crc32(memoryview(buffer)[:8]) != prelude_crc:
                raise ModelResponseError(
                    "event stream prelude CRC mismatch: the stream is corrupted (or not an AWS event stream)"
                )
            if total < _OVERHEAD or headers_len > total - _OVERHEAD or headers_len > _MAX_HEADERS_BYTES:
                raise ModelResponseError(
                    f"event stream message declares impossible lengths (total {total}, headers {headers_len})"
                )
            if total > self._max:
                raise ModelResponseError(
                    f"event stream message of {total} bytes is larger than the {self._max}-byte bound "
                    "(raise ResponseLimits.max_event_bytes if such events are expected)"
                )
            if len(buffer) < total:
                break
            frame = bytes(buffer[:total])
            del buffer[:total]
            (message_crc,) = struct.unpack_from(">I", frame, total - 4)
            if zlib.crc32(frame[:-4]) != message_crc:
                raise ModelResponseError("event stream message CRC mismatch: the stream is corrupted")
            headers = _headers(frame[_PRELUDE : _PRELUDE + headers_len])
            out.append(EventStreamMessage(MappingProxyType(headers), frame[_PRELUDE + headers_len : -4]))
        return out
