"""``TokenTextSplitter``: split documents into chunks of about ``chunk_size`` tokens, cut at sentence ends."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from chatclient.rag.documents import Document

log = logging.getLogger(__name__)


class TokenEncoding(Protocol):
    """What the splitter needs from a tokenizer."""

    def encode(self, text: str) -> list[Any]:
        """Tokens of ``text``."""
        ...

    def decode(self, tokens: list[Any]) -> str:
        """Text of ``tokens``."""
        ...


class SimpleTokenEncoding:
    """A lossless regex tokenizer: words (with their leading space), single punctuation marks, runs of space.

    Used when tiktoken's ``cl100k_base`` cannot be loaded (it downloads its BPE file on first use).
    For English prose its counts are close to cl100k_base's, since common words are single BPE tokens.
    """

    name = "simple"
    _TOKEN = re.compile(r" ?\w+| ?[^\w\s]|\s+", re.UNICODE)

    def encode(self, text: str) -> list[str]:
        """Tokens whose concatenation is ``text``."""
        return self._TOKEN.findall(text)

    def decode(self, tokens: list[Any]) -> str:
        return "".join(tokens)


_default_encoding: TokenEncoding | None = None
_default_lock = threading.Lock()

# tiktoken keeps the BPE file of cl100k_base in its cache under the SHA-1 of this address.
_CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def _tiktoken_cache_file() -> Path | None:
    """Where tiktoken would find cl100k_base's BPE file on disk (its own lookup), or None when caching is off."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            folder = os.environ[variable]
            break
    else:
        folder = str(Path(tempfile.gettempdir()) / "data-gym-cache")
    if not folder:
        return None
    return Path(folder) / hashlib.sha1(_CL100K_URL.encode(), usedforsecurity=False).hexdigest()


def default_encoding() -> TokenEncoding:
    """tiktoken's ``cl100k_base`` when it is installed and its BPE file is already cached, else
    :class:`SimpleTokenEncoding`.

    Never reaches the network: tiktoken downloads the file on first use, which offline means a DNS
    error (and online a request nobody asked for). To split on cl100k_base tokens on a fresh
    machine, pass ``encoding=tiktoken.get_encoding("cl100k_base")`` to the splitter.
    """
    global _default_encoding
    with _default_lock:
        if _default_encoding is None:
            cached = _tiktoken_cache_file()
            try:
                if cached is None or not cached.is_file():
                    raise FileNotFoundError("its BPE file is not in the local cache")
                import tiktoken

                _default_encoding = tiktoken.get_encoding("cl100k_base")
            except Exception as exc:  # not installed, not cached, unreadable: use the fallback
                log.info("tiktoken cl100k_base not used (%s); TokenTextSplitter counts tokens with a regex", exc)
                _default_encoding = SimpleTokenEncoding()
        return _default_encoding


class TokenTextSplitter:
    """Splits each document's text into chunks of at most ``chunk_size`` tokens.

    A chunk taken from a longer text is cut after its last punctuation mark (``. ? ! \\n``) if that
    mark lies beyond ``min_chunk_size_chars``; a text of at most ``chunk_size`` tokens stays whole.
    Chunks are stripped (and, without ``keep_separator``, newlines become spaces); chunks of
    ``min_chunk_length_to_embed`` characters or fewer are dropped; at most ``max_num_chunks`` per
    document. Each chunk keeps the document's metadata plus ``parent_document_id``,
    ``chunk_index`` and ``total_chunks``.

    ``encoding``: ``None`` for the default (see :func:`default_encoding`), ``"simple"``, or any
    object with ``encode``/``decode``.
    """

    def __init__(
        self,
        chunk_size: int = 800,
        min_chunk_size_chars: int = 350,
        min_chunk_length_to_embed: int = 5,
        max_num_chunks: int = 10000,
        keep_separator: bool = True,
        punctuation_marks: Sequence[str] = (".", "?", "!", "\n"),
        *,
        encoding: TokenEncoding | str | None = None,
    ) -> None:
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        if min_chunk_size_chars < 0 or min_chunk_length_to_embed < 0:
            raise ValueError("minimum sizes cannot be negative")
        if max_num_chunks <= 0:
            raise ValueError("max_num_chunks must be positive")
        self.chunk_size = chunk_size
        self.min_chunk_size_chars = min_chunk_size_chars
        self.min_chunk_length_to_embed = min_chunk_length_to_embed
        self.max_num_chunks = max_num_chunks
        self.keep_separator = keep_separator
        self.punctuation_marks = tuple(punctuation_marks)
        if encoding == "simple":
            encoding = SimpleTokenEncoding()
        elif isinstance(encoding, str):
            raise ValueError(f"unknown encoding {encoding!r}: use None, 'simple' or an encoding object")
        self._encoding = encoding

    @property
    def encoding(self) -> TokenEncoding:
        """The tokenizer in use (resolved on first use)."""
        if self._encoding is None:
            self._encoding = default_encoding()
        return self._encoding

    def _last_punctuation(self, text: str) -> int:
        return max(text.rfind(p) for p in self.punctuation_marks) if self.punctuation_marks else -1

    def _clean(self, text: str) -> str:
        return text.strip() if self.keep_separator else text.replace("\n", " ").strip()

    def split_text(self, text: str) -> list[str]:
        """The chunks of one text."""
        enc = self.encoding
        tokens = enc.encode(text)
        chunks: list[str] = []
        taken = 0
        while tokens and taken < self.max_num_chunks:
            window = tokens[: self.chunk_size]
            chunk = enc.decode(window)
            if not chunk.strip():
                tokens = tokens[len(window) :]
                continue
            used = len(window)
            # only text longer than one chunk is cut at a sentence end; a short text stays whole
            if len(tokens) > self.chunk_size:
                cut = self._last_punctuation(chunk)
                if cut != -1 and cut > self.min_chunk_size_chars:
                    chunk = chunk[: cut + 1]
                    # the rest of the window starts the next chunk
                    used = min(max(len(enc.encode(chunk)), 1), len(window))
            cleaned = self._clean(chunk)
            if len(cleaned) > self.min_chunk_length_to_embed:
                chunks.append(cleaned)
            tokens = tokens[used:]
            taken += 1
        if tokens:
            rest = self._clean(enc.decode(tokens))
            if len(rest) > self.min_chunk_length_to_embed:
                chunks.append(rest)
        return chunks

    def split(self, documents: Sequence[Document]) -> list[Document]:
        """Chunks of every document, in order."""
        out: list[Document] = []
        for doc in documents:
            chunks = self.split_text(doc.text)
            for i, chunk in enumerate(chunks):
                metadata = {**doc.metadata, "parent_document_id": doc.id, "chunk_index": i, "total_chunks": len(chunks)}
                out.append(Document(chunk, metadata))
        return out

    transform = split
    __call__ = split
