"""Building AWS event-stream frames for tests (the encoder side that chatclient itself never needs).

frame({":event-type": "messageStart", ":message-type": "event"}, b'{"role":"assistant"}')
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any


def header_bytes(headers: Mapping[str, str | bytes | bool | int]) -> bytes:
    """Headers encoded: strings as type 7, bytes as 6, booleans as 0/1, ints as 4 (int32)."""
    out = bytearray()
    for name, value in headers.items():
        raw = name.encode("utf-8")
        out += bytes([len(raw)]) + raw
        if isinstance(value, bool):
            out.append(0 if value else 1)
        elif isinstance(value, int):
            out.append(4)
            out += struct.pack(">i", value)
        elif isinstance(value, bytes):
            out.append(6)
            out += struct.pack(">H", len(value)) + value
        else:
            data = value.encode("utf-8")
            out.append(7)
            out += struct.pack(">H", len(data)) + data
    return bytes(out)


def frame(headers: Mapping[str, Any], payload: bytes) -> bytes:
    """One whole message with both CRCs."""
    head = header_bytes(headers)
    total = 16 + len(head) + len(payload)
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + head + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event(event_type: str, payload: Any) -> bytes:
    """A Bedrock stream event (JSON payload)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return frame(headers, json.dumps(payload).encode("utf-8"))


def exception(exception_type: str, message: str) -> bytes:
    """A Bedrock stream exception message."""
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return frame(headers, json.dumps({"message": message}).encode("utf-8"))


def stream_body(events: Sequence[tuple[str, Any]]) -> bytes:
    """A whole ConverseStream body from (event type, payload) pairs; ``("!exception", (type, text))`` for exceptions."""
    parts = []
    for name, payload in events:
        if name == "!exception":
            parts.append(exception(*payload))
        else:
            parts.append(event(name, payload))
    return b"".join(parts)
