"""``PdfReader``: one Document per PDF page, with ``page_number`` (1-based) in the metadata (extra ``rag``)."""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from chatclient.errors import DocumentReadError
from chatclient.rag.documents import Document
from chatclient.rag.etl._files import read_bounded

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PAGES = 5_000
DEFAULT_MAX_CHARS = 20_000_000
DEFAULT_TIMEOUT = 120.0


def _require_pypdf() -> Any:
    try:
        import pypdf
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("PdfReader needs the 'pypdf' package: pip install 'chatclient[rag]'") from exc
    return pypdf


class PdfReader:
    """Reads the text of a PDF, one Document per page (pages without text are skipped).

    Metadata: ``source`` (file name), ``page_number`` (1-based), ``total_pages``, ``title`` when the
    PDF declares one, plus ``metadata``. ``path`` may also be the PDF's bytes (``source`` is then
    ``"<bytes>"``).

    Reading is bounded: a file larger than ``max_bytes``, with more than ``max_pages`` pages, more
    than ``max_chars`` of text, or taking longer than ``timeout`` seconds (checked between pages)
    raises :class:`~chatclient.errors.DocumentReadError`, as does a malformed or encrypted PDF
    (pass ``password`` for the latter).

    >>> PdfReader("manual.pdf").read()[0].metadata["page_number"]  # doctest: +SKIP
    1
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | bytes,
        *,
        password: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_chars: int = DEFAULT_MAX_CHARS,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if max_bytes <= 0 or max_pages <= 0 or max_chars <= 0 or timeout <= 0:
            raise ValueError("max_bytes, max_pages, max_chars and timeout must be positive")
        self.path: Path | None = None if isinstance(path, (bytes, bytearray)) else Path(path)
        self._data = bytes(path) if isinstance(path, (bytes, bytearray)) else None
        self.password = password
        self.custom_metadata = dict(metadata or {})
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self.max_chars = max_chars
        self.timeout = timeout

    @property
    def source(self) -> str:
        """The file name, or ``"<bytes>"``."""
        return self.path.name if self.path is not None else "<bytes>"

    def _bytes(self) -> bytes:
        if self._data is None:
            assert self.path is not None
            return read_bounded(self.path, self.max_bytes, self.source)
        if len(self._data) > self.max_bytes:
            raise DocumentReadError(
                f"{self.source} is more than max_bytes={self.max_bytes} bytes; raise max_bytes to read it",
                self.source,
            )
        return self._data

    def read(self) -> list[Document]:
        """The pages with text, in order."""
        pypdf = _require_pypdf()
        data = self._bytes()
        started = time.monotonic()
        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            if reader.is_encrypted and (self.password is None or not reader.decrypt(self.password)):
                raise DocumentReadError(
                    f"{self.source} is encrypted; pass the right password=... to PdfReader", self.source
                )
            total = len(reader.pages)
            if total > self.max_pages:
                raise DocumentReadError(
                    f"{self.source} has {total} pages, more than max_pages={self.max_pages}; raise max_pages",
                    self.source,
                )
            title = _title(reader)
            docs: list[Document] = []
            chars = 0
            for number, page in enumerate(reader.pages, start=1):
                if time.monotonic() - started > self.timeout:
                    raise DocumentReadError(
                        f"reading {self.source} took more than timeout={self.timeout}s (at page {number}); "
                        "raise timeout or split the file",
                        self.source,
                    )
                text = (page.extract_text() or "").strip()
                chars += len(text)
                if chars > self.max_chars:
                    raise DocumentReadError(
                        f"{self.source} has more than max_chars={self.max_chars} characters of text; raise max_chars",
                        self.source,
                    )
                if not text:
                    continue
                metadata: dict[str, Any] = {"source": self.source, "page_number": number, "total_pages": total}
                if title:
                    metadata["title"] = title
                docs.append(Document(text, {**metadata, **self.custom_metadata}))
            return docs
        except DocumentReadError:
            raise
        except (RecursionError, MemoryError) as exc:
            raise DocumentReadError(f"{self.source} is too deeply nested or too large to parse", self.source) from exc
        except Exception as exc:  # pypdf raises many types (PdfReadError, ValueError, KeyError...) on bad input
            raise DocumentReadError(
                f"{self.source} is not a readable PDF ({type(exc).__name__}: {str(exc)[:200]})", self.source
            ) from exc

    __call__ = read

    def __repr__(self) -> str:
        return f"PdfReader({self.source!r})"


def _title(reader: Any) -> str | None:
    try:
        info = reader.metadata
        title = info.title if info is not None else None
    except Exception:  # a broken info dictionary must not stop the text from being read
        log.debug("could not read the PDF info dictionary", exc_info=True)
        return None
    return str(title).strip() or None if title else None
