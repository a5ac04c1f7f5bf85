"""``SimpleVectorStore``: an in-memory store — a numpy matrix of normalised embeddings, cosine scores.

Good up to a few hundred thousand vectors (a search is one matrix-vector product and an
``argpartition``). ``save``/``load`` use a single ``.npz`` file holding the float32 matrix and the
documents as UTF-8 JSON — no pickle, so loading an untrusted file cannot run code.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from chatclient import jsonsafe
from chatclient._pickling import PicklesWithoutLocks
from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression, evaluate
from chatclient.rag.stores.base import BaseVectorStore, top_k

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

_FORMAT = "chatclient.SimpleVectorStore/1"


class _Load:
    """``store.load(path)`` replaces a store's contents; ``SimpleVectorStore.load(path, model)`` makes a new store."""

    def __get__(
        self, obj: SimpleVectorStore | None, owner: type[SimpleVectorStore]
    ) -> Callable[..., SimpleVectorStore]:
        if obj is not None:
            return obj._load

        def load(path: str | os.PathLike[str], embedding_model: EmbeddingModel) -> SimpleVectorStore:
            return owner(embedding_model)._load(path)

        return load


class SimpleVectorStore(PicklesWithoutLocks, BaseVectorStore):
    """In-memory vector store; thread-safe (adds, deletes and searches may run concurrently).

    >>> from chatclient.rag import HashingEmbeddingModel
    >>> store = SimpleVectorStore(HashingEmbeddingModel())
    >>> store.add([Document("cats purr", id="a"), Document("dogs bark", id="b")])
    >>> [d.id for d in store.similarity_search("why do cats purr")][:1]
    ['a']
    """

    def __init__(self, embedding_model: EmbeddingModel, *, embed_batch_size: int = 256) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        self._lock = threading.RLock()
        self._docs: list[Document] = []
        self._row_of: dict[str, int] = {}
        self._matrix: NDArray[np.float32] | None = None  # capacity rows; the first len(_docs) are live

    def __len__(self) -> int:
        return len(self._docs)

    @property
    def documents(self) -> list[Document]:
        """A snapshot of the stored documents, in insertion order."""
        with self._lock:
            return list(self._docs)

    # -- storage hooks --------------------------------------------------------------------------
    def _ensure_capacity(self, extra: int, dim: int) -> NDArray[np.float32]:
        m = self._matrix
        n = len(self._docs)
        if m is None:
            m = np.empty((max(16, extra), dim), dtype=np.float32)
        elif m.shape[1] != dim:
            raise ValueError(f"embedding dimension changed: the store holds {m.shape[1]}-d vectors, got {dim}-d")
        elif n + extra > m.shape[0]:
            # geometric growth keeps a long run of small adds amortised O(1) per vector
            grown = np.empty((max(n + extra, 2 * m.shape[0]), dim), dtype=np.float32)
            grown[:n] = m[:n]
            m = grown
        self._matrix = m
        return m

    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        with self._lock:
            new = [d for d in documents if d.id not in self._row_of]
            m = self._ensure_capacity(len(new), vectors.shape[1])
            for doc, vec in zip(documents, vectors, strict=True):
                row = self._row_of.get(doc.id)
                if row is None:
                    row = len(self._docs)
                    self._docs.append(doc.with_score(None))
                    self._row_of[doc.id] = row
                else:
                    self._docs[row] = doc.with_score(None)
                m[row] = vec

    def _keep_rows(self, keep: NDArray[np.bool_]) -> None:
        if self._matrix is None or bool(keep.all()):
            return
        idx = np.flatnonzero(keep)
        n = idx.shape[0]
        self._matrix[:n] = self._matrix[idx]
        self._docs = [self._docs[i] for i in idx]
        self._row_of = {d.id: i for i, d in enumerate(self._docs)}

    def _mask(self, expr: Expression) -> NDArray[np.bool_]:
        return np.fromiter((evaluate(expr, d.metadata) for d in self._docs), dtype=bool, count=len(self._docs))

    def _delete(self, target: list[str] | Expression) -> None:
        with self._lock:
            if isinstance(target, Expression):
                keep = ~self._mask(target)
            else:
                keep = np.ones(len(self._docs), dtype=bool)
                for i in target:
                    row = self._row_of.get(i)
                    if row is not None:
                        keep[row] = False
            self._keep_rows(keep)

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        with self._lock:
            n = len(self._docs)
            if n == 0 or self._matrix is None:
                return []
            if vector.shape[0] != self._matrix.shape[1]:
                raise ValueError(
                    f"query embedding has {vector.shape[0]} dimensions, the store holds {self._matrix.shape[1]}"
                )
            scores = self._matrix[:n] @ vector
            candidates: NDArray[np.intp] | None = None
            if request.filter_expression is not None:
                candidates = np.flatnonzero(self._mask(request.filter_expression))
            if request.similarity_threshold > 0.0:
                above = scores >= request.similarity_threshold
                candidates = np.flatnonzero(above) if candidates is None else candidates[above[candidates]]
            if candidates is None:
                best = top_k(scores, request.top_k)
            else:
                best = candidates[top_k(scores[candidates], request.top_k)]
            return [self._docs[i].with_score(float(scores[i])) for i in best]

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the store to one ``.npz`` file (atomically: a crash never leaves a half-written file)."""
        with self._lock:
            n = len(self._docs)
            dim = 0 if self._matrix is None else self._matrix.shape[1]
            matrix = np.zeros((0, dim), np.float32) if self._matrix is None else self._matrix[:n].copy()
            payload = {"format": _FORMAT, "documents": [d.to_dict() for d in self._docs]}
        blob = np.frombuffer(json.dumps(payload, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, embeddings=matrix, documents=blob)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _load(self, path: str | os.PathLike[str]) -> SimpleVectorStore:
        """Replace the contents with a file written by :meth:`save`; returns ``self``."""
        data = Path(path).read_bytes()
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            matrix = np.asarray(npz["embeddings"], dtype=np.float32)
            payload = jsonsafe.loads(npz["documents"].tobytes().decode("utf-8"))
        if payload.get("format") != _FORMAT:
            raise ValueError(f"{path} was not written by SimpleVectorStore.save")
        docs = [Document.from_dict(d) for d in payload["documents"]]
        if matrix.ndim != 2 or matrix.shape[0] != len(docs):
            raise ValueError(f"{path} is corrupt: {len(docs)} documents but embeddings of shape {matrix.shape}")
        with self._lock:
            self._docs = docs
            self._row_of = {d.id: i for i, d in enumerate(docs)}
            self._matrix = matrix.copy() if docs else None
        return self

    load = _Load()
