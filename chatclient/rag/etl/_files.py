"""Reading a document file with a size bound, for the readers of outside documents."""

from __future__ import annotations

from pathlib import Path

from chatclient.errors import DocumentReadError


def read_bounded(path: Path, max_bytes: int, source: str) -> bytes:
    """The bytes of ``path``; more than ``max_bytes`` (checked before and while reading) or an
    unreadable file is a ``DocumentReadError`` naming ``source``."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DocumentReadError(
                f"{source} is {size} bytes, more than max_bytes={max_bytes}; raise max_bytes to read it", source
            )
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)  # the file may have grown since stat()
    except OSError as exc:
        raise DocumentReadError(f"cannot read {source}: {exc.strerror or exc}", source) from exc
    if len(data) > max_bytes:
        raise DocumentReadError(f"{source} is more than max_bytes={max_bytes} bytes; raise max_bytes to read it", source)
    return data
