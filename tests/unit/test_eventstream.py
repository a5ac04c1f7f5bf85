"""The AWS event-stream decoder on frames built byte by byte (lengths, headers, CRC32s by hand)."""

from __future__ import annotations

import random
import struct
import uuid
import zlib
from datetime import UTC, datetime

import pytest

from chatclient.errors import ModelResponseError
from chatclient.models.http.eventstream import EventStreamDecoder, EventStreamMessage


def _string_header(name: bytes, value: bytes) -> bytes:
    return bytes([len(name)]) + name + b"\x07" + struct.pack(">H", len(value)) + value


def _frame(headers: bytes, payload: bytes) -> bytes:
    total = 4 + 4 + 4 + len(headers) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(headers).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + headers + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


DELTA = _frame(
    _string_header(b":event-type", b"contentBlockDelta")
    + _string_header(b":content-type", b"application/json")
    + _string_header(b":message-type", b"event"),
    b'{"contentBlockIndex":0,"delta":{"text":"Hi \xc3\xa9"},"p":"abcd"}',
)


def test_a_hand_built_frame_decodes() -> None:
    (message,) = EventStreamDecoder().feed(DELTA)
    assert message.event_type == "contentBlockDelta"
    assert message.message_type == "event"
    assert message.headers[":content-type"] == "application/json"
    assert message.payload == b'{"contentBlockIndex":0,"delta":{"text":"Hi \xc3\xa9"},"p":"abcd"}'


def test_the_empty_frame_of_the_spec() -> None:
    # No headers, no payload: 16 bytes, total length 0x10, both CRCs over what precedes them.
    frame = bytes.fromhex("00000010 00000000 05c248eb 7d98c8ff".replace(" ", ""))
    assert EventStreamDecoder().feed(frame) == [EventStreamMessage({}, b"")]


def test_every_header_value_type() -> None:
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    headers = (
        b"\x01t\x00"  # true
        + b"\x01f\x01"  # false
        + b"\x01b\x02\xff"  # byte -1
        + b"\x01s\x03\x01\x00"  # short 256
        + b"\x01i\x04\x00\x01\x00\x00"  # int 65536
        + b"\x01l\x05"
        + struct.pack(">q", -2)  # long
        + b"\x01y\x06\x00\x02\x00\xff"  # bytes
        + b"\x01z\x07\x00\x03abc"  # string
        + b"\x01d\x08"
        + struct.pack(">q", 1_700_000_000_000)  # timestamp (ms)
        + b"\x01u\x09"
        + ident.bytes  # uuid
    )
    (message,) = EventStreamDecoder().feed(_frame(headers, b"x"))
    assert dict(message.headers) == {
        "t": True, "f": False, "b": -1, "s": 256, "i": 65536, "l": -2, "y": b"\x00\xff", "z": "abc",
        "d": datetime.fromtimestamp(1_700_000_000, UTC), "u": ident,
    }  # fmt: skip


def test_frames_cut_anywhere_decode_the_same() -> None:
    second = _frame(_string_header(b":event-type", b"messageStop"), b'{"stopReason":"end_turn"}')
    body = DELTA + second
    rng = random.Random(7)
    for _ in range(50):
        decoder = EventStreamDecoder()
        got: list[EventStreamMessage] = []
        pos = 0
        while pos < len(body):
            step = rng.randint(1, 9)
            got += decoder.feed(body[pos : pos + step])
            pos += step
        assert [m.event_type for m in got] == ["contentBlockDelta", "messageStop"]
        assert not decoder.pending
    decoder = EventStreamDecoder()
    assert decoder.feed(body[:-3]) == EventStreamDecoder().feed(DELTA)
    assert decoder.pending


@pytest.mark.parametrize("where", ["prelude", "headers", "payload", "message_crc"])
def test_a_flipped_bit_is_a_typed_error(where: str) -> None:
    offsets = {"prelude": 2, "headers": 14, "payload": len(DELTA) - 8, "message_crc": len(DELTA) - 1}
    broken = bytearray(DELTA)
    broken[offsets[where]] ^= 0x01
    with pytest.raises(ModelResponseError, match="CRC mismatch"):
        EventStreamDecoder().feed(bytes(broken))


def test_an_oversized_frame_fails_before_it_is_buffered() -> None:
    prelude = (50 * 1024 * 1024).to_bytes(4, "big") + (0).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    with pytest.raises(ModelResponseError, match="larger than the 1048576-byte bound"):
        EventStreamDecoder(max_message_bytes=1024 * 1024).feed(prelude)


@pytest.mark.parametrize(("total", "headers"), [(8, 0), (40, 30), (16 + 200_000, 200_000)])
def test_impossible_lengths_are_typed_errors(total: int, headers: int) -> None:
    prelude = total.to_bytes(4, "big") + headers.to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    with pytest.raises(ModelResponseError, match="impossible lengths"):
        EventStreamDecoder().feed(prelude + b"\x00" * 40)


def test_bad_headers_are_typed_errors() -> None:
    with pytest.raises(ModelResponseError, match="unknown value type 42"):
        EventStreamDecoder().feed(_frame(b"\x01a\x2a", b""))
    with pytest.raises(ModelResponseError, match="truncated header"):
        EventStreamDecoder().feed(_frame(b"\x01a\x07\x00\x09abc", b""))


def test_the_support_encoder_builds_the_same_bytes() -> None:
    from tests.support.eventstream import frame

    headers = {":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"}
    assert frame(headers, b'{"contentBlockIndex":0,"delta":{"text":"Hi \xc3\xa9"},"p":"abcd"}') == DELTA
