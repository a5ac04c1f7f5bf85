"""Request bodies that are not JSON: ``EncodedBody`` and ``multipart/form-data`` encoding.

``HTTPTransport`` sends a plain value as JSON; an ``EncodedBody`` goes out as its bytes with its own
``content-type`` (file uploads to the image-edit and transcription endpoints).

    body = multipart_body({"model": "whisper-1"}, [FilePart("file", "call.mp3", "audio/mpeg", data)])

The body is encoded once per call, so a retry sends exactly the bytes of the first attempt. The
boundary is 128 random bits, as browsers and httpx make it (cassettes match uploads by their parts,
not by the boundary).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["EncodedBody", "FilePart", "multipart_body"]


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A request body already encoded, sent as is with ``content_type``."""

    content: bytes
    content_type: str

    def __repr__(self) -> str:
        # Uploads are megabytes of audio or images: the repr says what, not the bytes.
        return f"EncodedBody(content_type={self.content_type!r}, {len(self.content)} bytes)"


@dataclass(frozen=True, slots=True)
class FilePart:
    """One uploaded file of a multipart form: field ``name``, ``filename``, ``mime_type`` and bytes."""

    name: str
    filename: str
    mime_type: str
    data: bytes

    def __repr__(self) -> str:
        return f"FilePart(name={self.name!r}, filename={self.filename!r}, mime_type={self.mime_type!r}, {len(self.data)} bytes)"


def _quoted(value: str) -> str:
    # RFC 7578: names are quoted strings; a quote or line break in them would end the header early.
    return value.replace("\\", "\\\\").replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")


def _token(value: str, what: str) -> str:
    if any(c in value for c in "\r\n") or not value.isprintable():
        raise ValueError(f"a multipart {what} must be printable text without line breaks, got {value!r}")
    return value


def multipart_body(
    fields: Mapping[str, str | Sequence[str]] | Iterable[tuple[str, str]], files: Sequence[FilePart] = ()
) -> EncodedBody:
    """``fields`` (text; a sequence value repeats its field, as ``timestamp_granularities[]``) and
    ``files`` as one ``multipart/form-data`` body."""
    pairs: list[tuple[str, str]] = []
    items = fields.items() if isinstance(fields, Mapping) else fields
    for name, value in items:
        if isinstance(value, str):
            pairs.append((name, value))
        else:
            pairs.extend((name, str(v)) for v in value)
    boundary = f"chatclient-{secrets.token_hex(16)}"
    marker = f"--{boundary}\r\n".encode("ascii")
    pieces: list[bytes] = []
    for name, value in pairs:
        pieces += (marker, f'Content-Disposition: form-data; name="{_quoted(name)}"\r\n\r\n'.encode())
        pieces += (value.encode("utf-8"), b"\r\n")
    for part in files:
        head = (
            f'Content-Disposition: form-data; name="{_quoted(part.name)}"; filename="{_quoted(part.filename)}"\r\n'
            f"Content-Type: {_token(part.mime_type, 'content type')}\r\n\r\n"
        )
        pieces += (marker, head.encode(), part.data, b"\r\n")
    pieces.append(f"--{boundary}--\r\n".encode("ascii"))
    # One join: a file of megabytes is copied once into the body.
    return EncodedBody(b"".join(pieces), f"multipart/form-data; boundary={boundary}")
