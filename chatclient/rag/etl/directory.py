"""``DirectoryReader``: every matching file under a folder, each read by the reader for its suffix."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from chatclient.errors import DocumentReadError
from chatclient.rag.documents import Document

log = logging.getLogger(__name__)

ReaderFactory = Callable[[Path], Any]
"""Makes a reader (an object with ``read()``, or a zero-argument callable) for one file."""

DEFAULT_MAX_FILES = 10_000
DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024


def _text(path: Path) -> Any:
    from chatclient.rag.etl.readers import TextReader

    return TextReader(path)


def _markdown(path: Path) -> Any:
    from chatclient.rag.etl.readers import MarkdownReader

    return MarkdownReader(path)


def _pdf(path: Path) -> Any:
    from chatclient.rag.etl.pdf import PdfReader

    return PdfReader(path)


def _html(path: Path) -> Any:
    from chatclient.rag.etl.html import HtmlReader

    return HtmlReader(path)


def _json(path: Path) -> Any:
    from chatclient.rag.etl.readers import JsonReader

    return JsonReader(path)


DEFAULT_READERS: Mapping[str, ReaderFactory] = {
    ".txt": _text,
    ".text": _text,
    ".rst": _text,
    ".md": _markdown,
    ".markdown": _markdown,
    ".pdf": _pdf,
    ".html": _html,
    ".htm": _html,
    ".json": _json,
}
"""Suffix (lower case) to reader factory; pass ``readers=`` to extend or replace it."""


class DirectoryReader:
    """Reads the files under ``root`` that match ``glob`` (e.g. ``"**/*.pdf"``), sorted by path.

    Each file goes to the reader for its suffix (``readers``, default :data:`DEFAULT_READERS`:
    text, Markdown, PDF, HTML, JSON); files with another suffix are skipped with a debug log, or
    raise when ``skip_unknown=False``. Every document gets metadata ``path`` (relative to ``root``,
    with ``/``) besides what its reader sets.

    Bounded and contained: more than ``max_files`` matches or a file over ``max_file_bytes``
    raises :class:`~chatclient.errors.DocumentReadError`; symbolic links (and anything resolving
    outside ``root``) are skipped unless ``follow_symlinks=True``. ``on_error="skip"`` logs and
    skips a file that fails to read instead of raising.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        glob: str = "**/*",
        *,
        readers: Mapping[str, ReaderFactory] | None = None,
        skip_unknown: bool = True,
        follow_symlinks: bool = False,
        max_files: int = DEFAULT_MAX_FILES,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        on_error: str = "raise",
    ) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError("on_error must be 'raise' or 'skip'")
        if max_files <= 0 or max_file_bytes <= 0:
            raise ValueError("max_files and max_file_bytes must be positive")
        self.root = Path(root)
        self.glob = glob
        self.readers = {k.lower(): v for k, v in (readers if readers is not None else DEFAULT_READERS).items()}
        self.skip_unknown = skip_unknown
        self.follow_symlinks = follow_symlinks
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.on_error = on_error

    def files(self) -> list[Path]:
        """The files that will be read, sorted."""
        if not self.root.is_dir():
            raise DocumentReadError(f"{self.root} is not a directory", str(self.root))
        base = self.root.resolve()
        found: list[Path] = []
        for p in self.root.glob(self.glob):
            if not self.follow_symlinks and (p.is_symlink() or not p.resolve().is_relative_to(base)):
                log.debug("skipping %s: a symbolic link or outside the root", p)
                continue
            if not p.is_file():
                continue
            found.append(p)
            if len(found) > self.max_files:
                raise DocumentReadError(
                    f"more than max_files={self.max_files} files under {self.root} match {self.glob!r}; "
                    "narrow the glob or raise max_files",
                    str(self.root),
                )
        return sorted(found)

    def read(self) -> list[Document]:
        """Documents of every matching file, in path order."""
        docs: list[Document] = []
        for path in self.files():
            docs.extend(self.read_file(path))
        return docs

    __call__ = read

    def read_file(self, path: Path) -> list[Document]:
        """The documents of one file (empty when skipped)."""
        rel = path.relative_to(self.root).as_posix()
        factory = self.readers.get(path.suffix.lower())
        if factory is None:
            if self.skip_unknown:
                log.debug("skipping %s: no reader for suffix %r", rel, path.suffix)
                return []
            raise DocumentReadError(
                f"no reader for {rel!r} (suffix {path.suffix!r}); pass readers={{...}} or skip_unknown=True", rel
            )
        try:
            size = path.stat().st_size
            if size > self.max_file_bytes:
                raise DocumentReadError(f"{rel} is {size} bytes, more than max_file_bytes={self.max_file_bytes}", rel)
            reader = factory(path)
            read = getattr(reader, "read", None)
            result: Sequence[Document] = read() if read is not None else reader()
        except Exception as exc:
            if self.on_error == "skip":
                log.warning("skipping %s: %s", rel, exc)
                return []
            if isinstance(exc, DocumentReadError):
                raise
            raise DocumentReadError(f"cannot read {rel}: {type(exc).__name__}: {str(exc)[:200]}", rel) from exc
        return [d.copy(metadata={**d.metadata, "path": rel}) for d in result]

    def __repr__(self) -> str:
        return f"DirectoryReader({str(self.root)!r}, {self.glob!r})"
