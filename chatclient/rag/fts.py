"""``SqliteFtsDocumentRetriever``: keyword retrieval with SQLite's FTS5 full-text index (stdlib only).

An alternative to :class:`~chatclient.rag.bm25.BM25DocumentRetriever` when the keyword index should
live on disk next to a :class:`~chatclient.rag.SqliteVectorStore`, survive restarts, and take
additions and deletions without a rebuild. Ranking is FTS5's BM25; words are stemmed by the
``porter`` tokenizer.

    from chatclient.rag import HybridDocumentRetriever, SqliteFtsDocumentRetriever
    keyword = SqliteFtsDocumentRetriever("keywords.db")
    keyword.add(documents)                       # or SqliteFtsDocumentRetriever(path, documents=...)
    retriever = HybridDocumentRetriever(vector_store=store, keyword_retriever=keyword)
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence

from chatclient.rag.bm25 import ENGLISH_STOPWORDS, MAX_QUERY_CHARS
from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression, as_expression
from chatclient.rag.filters.evaluator import compile_filter
from chatclient.rag.query import Query
from chatclient.rag.search import DEFAULT_TOP_K
from chatclient.request import ContextKeys

_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WORD = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_TERMS = 64
"""At most this many distinct query words are searched (bounds the work per query)."""


class SqliteFtsDocumentRetriever:
    """Ranks documents with an SQLite FTS5 index (BM25) kept in ``path`` (``":memory:"`` by default).

    ``add(documents)`` indexes (replacing documents whose id is already there), ``delete(ids)``
    removes; ``documents=`` indexes an initial set. A query matches documents that share at least
    one (stemmed) word with it; its words are quoted, so FTS5 operators in user text have no effect.
    Scores are ``-bm25`` (higher is better). A filter expression (argument or query context under
    ``ContextKeys.FILTER_EXPRESSION``) is applied exactly to the candidates, over-fetching up to
    ``max_candidates`` rows.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        documents: Iterable[Document] = (),
        table: str = "chatclient_fts",
        top_k: int = DEFAULT_TOP_K,
        filter_expression: Expression | str | None = None,
        max_candidates: int = 1000,
        timeout: float = 30.0,
    ) -> None:
        if not _TABLE.match(table):
            raise ValueError(f"table must be a plain SQL identifier, got {table!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ValueError("top_k must be a positive int")
        if max_candidates < top_k:
            raise ValueError("max_candidates must be at least top_k")
        self.path = os.fspath(path)
        self.table = table
        self.top_k = top_k
        self.max_candidates = max_candidates
        self._filter = as_expression(filter_expression)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False, isolation_level=None)
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
        try:
            self._conn.execute(
                f'CREATE VIRTUAL TABLE IF NOT EXISTS "{table}" USING fts5('
                "text, doc_id UNINDEXED, metadata UNINDEXED, tokenize='porter unicode61')"
            )
        except sqlite3.OperationalError as exc:  # pragma: no cover - depends on how SQLite was built
            raise RuntimeError(f"this SQLite ({sqlite3.sqlite_version}) has no FTS5: {exc}") from exc
        docs = list(documents)
        if docs:
            self.add(docs)

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteFtsDocumentRetriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        with self._lock:
            (n,) = self._conn.execute(f'SELECT count(*) FROM "{self.table}"').fetchone()
        return int(n)

    def add(self, documents: Sequence[Document]) -> None:
        """Index documents; a document whose id is already indexed is replaced."""
        rows = []
        for d in documents:
            if not isinstance(d, Document):
                raise TypeError(f"expected Document objects, got {type(d).__name__}")
            rows.append((d.text, d.id, json.dumps(dict(d.metadata), ensure_ascii=False, default=str)))
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(f'DELETE FROM "{self.table}" WHERE doc_id = ?', [(r[1],) for r in rows])
                self._conn.executemany(f'INSERT INTO "{self.table}"(text, doc_id, metadata) VALUES (?, ?, ?)', rows)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    write = add

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the documents with these ids (unknown ids are ignored)."""
        if isinstance(ids, str):
            raise TypeError("delete() takes a list of ids, not a single str")
        with self._lock:
            self._conn.executemany(f'DELETE FROM "{self.table}" WHERE doc_id = ?', [(i,) for i in ids])

    def _match(self, text: str) -> str | None:
        words = [w for w in _WORD.findall(text[:MAX_QUERY_CHARS].lower()) if w not in ENGLISH_STOPWORDS]
        unique = list(dict.fromkeys(words))[:MAX_QUERY_TERMS]
        if not unique:
            return None
        # quoted strings are plain terms to FTS5: no operator or column filter can be injected
        return " OR ".join('"' + w.replace('"', '""') + '"' for w in unique)

    def _filter_for(self, query: Query) -> Expression | None:
        value = query.context.get(ContextKeys.FILTER_EXPRESSION)
        if value is not None and (not isinstance(value, str) or value.strip()):
            return as_expression(value)
        return self._filter

    def retrieve(self, query: Query, *, top_k: int | None = None) -> list[Document]:
        """The best ``top_k`` documents for the query text (default: the retriever's), best first."""
        k = self.top_k if top_k is None else top_k
        match = self._match(query.text)
        if match is None or k <= 0:
            return []
        expr = self._filter_for(query)
        limit = k if expr is None else self.max_candidates
        with self._lock:
            rows = self._conn.execute(
                f'SELECT text, doc_id, metadata, bm25("{self.table}") AS rank FROM "{self.table}" '
                f'WHERE "{self.table}" MATCH ? ORDER BY rank LIMIT ?',
                (match, limit),
            ).fetchall()
        keep = compile_filter(expr) if expr is not None else None
        out: list[Document] = []
        for text, doc_id, metadata, rank in rows:
            md = json.loads(metadata)
            if keep is not None and not keep(md):
                continue
            out.append(Document(text, md, id=doc_id, score=-float(rank)))
            if len(out) == k:
                break
        return out

    __call__ = retrieve

    def __repr__(self) -> str:
        return f"SqliteFtsDocumentRetriever({self.path!r}, table={self.table!r}, top_k={self.top_k})"
