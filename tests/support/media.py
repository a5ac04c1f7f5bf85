"""Test support for the image and audio models: the documented example answers, multipart parsing,
and small real media files (a PNG, a WAV)."""

from __future__ import annotations

import email.parser
import email.policy
import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.loopback import Recorded

DATA = Path(__file__).resolve().parent.parent / "data" / "openai_media"


def documented(name: str) -> Any:
    """One documented example response from ``tests/data/openai_media`` (see its README)."""
    return json.loads((DATA / f"{name}.json").read_text())


@dataclass(frozen=True)
class Part:
    """One part of a multipart/form-data request, as an independent parser (the stdlib's email
    package) reads it."""

    name: str
    filename: str | None
    content_type: str | None
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


def form_parts(rec: Recorded) -> list[Part]:
    """The parts of a recorded multipart request, in order."""
    content_type = rec.headers["content-type"]
    assert content_type.startswith("multipart/form-data; boundary="), content_type
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + rec.raw)
    assert message.is_multipart()
    parts = []
    for part in message.iter_parts():
        disposition = part.get("content-disposition", "")
        name = part.get_param("name", header="content-disposition")
        assert isinstance(name, str), disposition
        filename = part.get_param("filename", header="content-disposition")
        payload = part.get_payload(decode=True)
        assert isinstance(payload, bytes)
        ctype = part.get("content-type")
        parts.append(Part(name, filename if isinstance(filename, str) else None, ctype and str(ctype), payload))
    return parts


def fields(parts: list[Part]) -> dict[str, list[str]]:
    """The text fields (parts without a filename) by name, each with its values in order."""
    out: dict[str, list[str]] = {}
    for p in parts:
        if p.filename is None:
            out.setdefault(p.name, []).append(p.text)
    return out


def png(width: int = 1, height: int = 1, rgba: tuple[int, int, int, int] = (255, 0, 0, 255)) -> bytes:
    """A real PNG image of one colour."""
    row = b"\x00" + bytes(rgba) * width
    raw = row * height

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def wav(seconds: float = 1.0, rate: int = 8000) -> bytes:
    """A real mono 16-bit PCM WAV file of silence, ``seconds`` long."""
    frames = int(seconds * rate)
    data = b"\x00\x00" * frames
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body
