"""``SqliteVectorStore``: a persistent, embedded store in one SQLite file (stdlib ``sqlite3``).

Documents, JSON metadata and float32 embeddings live in one table. Searches score in numpy against
an in-memory copy of the embedding matrix, refreshed only when the table changed (this connection's
own writes, or ``PRAGMA data_version`` for commits by other connections or processes). Filters are
pushed down to SQL (``json_extract`` over the metadata column, all values bound as parameters).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression, to_sql
from chatclient.rag.stores.base import BaseVectorStore, top_k

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_CHUNK = 500  # stay well below SQLite's bound-parameter limit


class SqliteVectorStore(BaseVectorStore):
    """A vector store persisted in a SQLite file (``":memory:"`` for a throwaway one).

    Safe to share between threads; several processes may use the same file (WAL mode).
    """

    _blocking = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        embedding_model: EmbeddingModel,
        *,
        table: str = "chatclient_documents",
        embed_batch_size: int = 256,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        if not _TABLE.match(table):
            raise ValueError(f"table must be a plain SQL identifier, got {table!r}")
        self.path = os.fspath(path)
        self.table = table
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{table}" ('
            "rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, text TEXT NOT NULL, "
            "metadata TEXT NOT NULL, embedding BLOB NOT NULL)"
        )
        # cache of (rowids, matrix), valid for (data_version, own write generation)
        self._cache: tuple[NDArray[np.int64], NDArray[np.float32]] | None = None
        self._cache_key: tuple[int, int] | None = None
        self._writes = 0

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "SqliteVectorStore holds an open SQLite connection and cannot be pickled; pass its path and build "
            "the store in the worker (SqliteVectorStore(path, embedding_model) inside client_factory)"
        )

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            (n,) = self._conn.execute(f'SELECT COUNT(*) FROM "{self.table}"').fetchone()
        return int(n)

    # -- storage hooks --------------------------------------------------------------------------
    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        rows = [
            (d.id, d.text, json.dumps(dict(d.metadata), ensure_ascii=False), np.ascontiguousarray(v).tobytes())
            for d, v in zip(documents, vectors, strict=True)
        ]
        with self._lock:
            dim = self._stored_dimension()
            if dim is not None and dim != vectors.shape[1]:
                raise ValueError(
                    f"embedding dimension changed: the store holds {dim}-d vectors, got {vectors.shape[1]}-d"
                )
            with self._transaction():
                self._conn.executemany(
                    f'INSERT INTO "{self.table}" (id, text, metadata, embedding) VALUES (?, ?, ?, ?) '
                    "ON CONFLICT(id) DO UPDATE SET text=excluded.text, metadata=excluded.metadata, "
                    "embedding=excluded.embedding",
                    rows,
                )

    def _delete(self, target: list[str] | Expression) -> None:
        with self._lock, self._transaction():
            if isinstance(target, Expression):
                where, params = to_sql(target, "metadata")
                self._conn.execute(f'DELETE FROM "{self.table}" WHERE {where}', params)
            else:
                for i in range(0, len(target), _CHUNK):
                    chunk = target[i : i + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    self._conn.execute(f'DELETE FROM "{self.table}" WHERE id IN ({marks})', chunk)

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        with self._lock:
            rowids, matrix = self._matrix()
            if rowids.shape[0] == 0:
                return []
            if vector.shape[0] != matrix.shape[1]:
                raise ValueError(f"query embedding has {vector.shape[0]} dimensions, the store holds {matrix.shape[1]}")
            scores = matrix @ vector
            candidates: NDArray[np.intp] | None = None
            if request.filter_expression is not None:
                where, params = to_sql(request.filter_expression, "metadata")
                hits = np.fromiter(
                    (r for (r,) in self._conn.execute(f'SELECT rowid FROM "{self.table}" WHERE {where}', params)),
                    dtype=np.int64,
                )
                candidates = np.flatnonzero(np.isin(rowids, hits))
            if request.similarity_threshold > 0.0:
                above = scores >= request.similarity_threshold
                candidates = np.flatnonzero(above) if candidates is None else candidates[above[candidates]]
            best = (
                top_k(scores, request.top_k)
                if candidates is None
                else candidates[top_k(scores[candidates], request.top_k)]
            )
            return self._fetch([(int(rowids[i]), float(scores[i])) for i in best])

    def _fetch(self, hits: list[tuple[int, float]]) -> list[Document]:
        if not hits:
            return []
        marks = ",".join("?" * len(hits))
        found = {
            r: (i, t, m)
            for r, i, t, m in self._conn.execute(
                f'SELECT rowid, id, text, metadata FROM "{self.table}" WHERE rowid IN ({marks})', [r for r, _ in hits]
            )
        }
        out = []
        for rowid, score in hits:
            row = found.get(rowid)
            if row is not None:  # another process may have deleted it since the matrix was loaded
                out.append(Document(row[1], json.loads(row[2]), id=row[0], score=score))
        return out

    # -- helpers --------------------------------------------------------------------------------
    def _transaction(self) -> Any:
        store = self

        class _Tx:
            def __enter__(self) -> None:
                store._conn.execute("BEGIN IMMEDIATE")

            def __exit__(self, exc_type: object, *rest: object) -> None:
                store._conn.execute("ROLLBACK" if exc_type else "COMMIT")
                store._writes += 1

        return _Tx()

    def _stored_dimension(self) -> int | None:
        row = self._conn.execute(f'SELECT length(embedding) FROM "{self.table}" LIMIT 1').fetchone()
        return None if row is None else int(row[0]) // 4

    def _matrix(self) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        key = (int(version), self._writes)
        if self._cache is None or self._cache_key != key:
            rows = self._conn.execute(f'SELECT rowid, embedding FROM "{self.table}" ORDER BY rowid').fetchall()
            rowids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
            if rows:
                matrix = np.frombuffer(b"".join(e for _, e in rows), dtype=np.float32).reshape(len(rows), -1)
            else:
                matrix = np.zeros((0, 0), dtype=np.float32)
            self._cache, self._cache_key = (rowids, matrix), key
        return self._cache

    def get(self, ids: list[str]) -> list[Document]:
        """The stored documents with the given ids (unknown ids are skipped), in the given order."""
        with self._lock:
            found: dict[str, Document] = {}
            for i in range(0, len(ids), _CHUNK):
                chunk = ids[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for doc_id, text, md in self._conn.execute(
                    f'SELECT id, text, metadata FROM "{self.table}" WHERE id IN ({marks})', chunk
                ):
                    found[doc_id] = Document(text, json.loads(md), id=doc_id)
        return [found[i] for i in ids if i in found]
