"""Embedding models turn texts into vectors; vector stores call them on add and on search.

``HashingEmbeddingModel`` is a real, dependency-free embedding (feature hashing of word and
character n-grams). It captures lexical overlap only, but it is deterministic and instant, which
makes it the right choice for tests and demos; use ``LocalEmbeddingModel`` or a provider for meaning.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray


@runtime_checkable
class EmbeddingModel(Protocol):
    """Embeds texts into an ``(n, dimensions)`` float array."""

    @property
    def dimensions(self) -> int:
        """Length of each embedding vector."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text, shape ``(len(texts), dimensions)``."""
        ...

    async def aembed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Async :meth:`embed`."""
        ...


class BaseEmbeddingModel:
    """Supplies ``aembed`` (in a worker thread) and ``embed_one`` for models that implement ``embed``."""

    @property
    def dimensions(self) -> int:
        """Length of each embedding vector."""
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One row per text."""
        raise NotImplementedError

    async def aembed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """``embed`` in a worker thread."""
        # the default embed is CPU/IO bound and blocking; keep it off the event loop
        return await asyncio.to_thread(self.embed, texts)

    def embed_one(self, text: str) -> NDArray[np.float32]:
        """The embedding of one text, shape ``(dimensions,)``."""
        row: NDArray[np.float32] = self.embed([text])[0]
        return row


def check_texts(texts: Sequence[str]) -> list[str]:
    """Validate an ``embed`` argument (a sequence of strings, not a bare string)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str; wrap it in a list")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"texts must be str, got {type(t).__name__}")
    return out


def as_matrix(vectors: Any, expected_rows: int | None = None) -> NDArray[np.float32]:
    """Coerce an embedding result to a 2-D float32 array and check its row count."""
    m = np.asarray(vectors, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    if m.ndim != 2:
        raise ValueError(f"an embedding model must return a 2-D array, got shape {m.shape}")
    if expected_rows is not None and m.shape[0] != expected_rows:
        raise ValueError(f"the embedding model returned {m.shape[0]} vectors for {expected_rows} texts")
    return m


def normalize_rows(m: NDArray[np.float32]) -> NDArray[np.float32]:
    """L2-normalise each row; all-zero rows stay zero (their cosine with anything is 0)."""
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = (m / norms).astype(np.float32, copy=False)
    return out


async def aembed_with(model: Any, texts: Sequence[str]) -> NDArray[np.float32]:
    """``model.aembed`` when it has one, else ``model.embed`` in a worker thread."""
    aembed = getattr(model, "aembed", None)
    if aembed is not None:
        result = await aembed(texts)
    else:
        result = await asyncio.to_thread(model.embed, texts)
    return as_matrix(result, len(texts))


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddingModel(BaseEmbeddingModel):
    """Feature-hashing embedding of lower-cased words (and, optionally, character trigrams).

    Each feature is hashed (blake2b, so results are stable across processes) to a signed bucket;
    rows are L2-normalised. Texts sharing words get a positive cosine similarity.

    >>> m = HashingEmbeddingModel(dimensions=64)
    >>> v = m.embed(["red apple", "green apple", "fast car"])
    >>> float(v[0] @ v[1]) > float(v[0] @ v[2])
    True
    """

    def __init__(self, dimensions: int = 256, *, char_ngrams: bool = False, signed: bool = False) -> None:
        if dimensions <= 0:
            raise ValueError("dimensions must be positive")
        self._dimensions = dimensions
        self._char_ngrams = char_ngrams
        # unsigned buckets keep every cosine >= 0, which makes thresholds easy to reason about in tests
        self._signed = signed
        self.calls = 0  # number of embed() calls, handy for asserting caching behaviour

    @property
    def dimensions(self) -> int:
        """The configured number of hash buckets."""
        return self._dimensions

    def _features(self, text: str) -> list[str]:
        words = [w.lower() for w in _WORD.findall(text)]
        feats = list(words)
        if self._char_ngrams:
            for w in words:
                padded = f"#{w}#"
                feats.extend(padded[i : i + 3] for i in range(len(padded) - 2))
        return feats

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Hashed, L2-normalised feature vectors."""
        items = check_texts(texts)
        self.calls += 1
        out = np.zeros((len(items), self._dimensions), dtype=np.float32)
        for row, text in enumerate(items):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                sign = -1.0 if (self._signed and (h >> 63) & 1) else 1.0
                out[row, h % self._dimensions] += sign
        return normalize_rows(out)
