"""``PgVectorStore``: the VectorStore contract on PostgreSQL with the pgvector extension.

``pip install 'chatclient[pgvector]'`` (psycopg 3 and the ``pgvector`` adapter). Point it at any
PostgreSQL that has pgvector available (``CREATE EXTENSION vector`` is run on first use when the
role may; otherwise ask the database owner to run it once).

One table per store: ``id text primary key, text text, metadata jsonb, embedding vector(d)``,
created on the first ``add`` (the dimension comes from the first embeddings), with a GIN index on
``metadata`` and the vector index the store was built with:

* ``index="hnsw"`` (default) — good recall without training, builds as rows arrive;
* ``index="ivfflat"`` — smaller and faster to build; its lists are trained on the rows present
  when the index is built, so load data first and call :meth:`PgVectorStore.create_index` again;
* ``index=None`` — exact search by a sequential scan (right up to ~100k rows).

pgvector indexes ``vector`` columns of up to 2,000 dimensions; with larger embeddings the table is
created without a vector index and searches are exact.

``distance`` picks the operator and index operator class: ``"cosine"`` (``<=>``),
``"inner_product"`` (``<#>``) or ``"l2"`` (``<->``). Embeddings are L2-normalised before they are
stored, so the three order results the same way and ``score`` is always the cosine similarity.

Filters become SQL over the ``jsonb`` column (:mod:`chatclient.rag.filters.postgres`), every
value bound as a parameter. Approximate indexes and filters: the store turns on pgvector's
iterative index scans (pgvector >= 0.8) so a selective filter still returns ``top_k`` rows, and
raises ``hnsw.ef_search`` to at least ``top_k``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from chatclient.errors import VectorStoreError
from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression
from chatclient.rag.filters.postgres import to_postgres_sql
from chatclient.rag.stores.base import BaseVectorStore

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

Distance = Literal["cosine", "inner_product", "l2"]
IndexKind = Literal["hnsw", "ivfflat"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}\Z")
_MEMORY = re.compile(r"[1-9][0-9]{0,6}(kB|MB|GB)\Z")
# operator, index operator class, and the SQL turning the operator's value into cosine similarity
# (rows are unit vectors: <#> is minus the dot product, and |a - b|^2 = 2 - 2 cos)
_DISTANCES: dict[str, tuple[str, str, str]] = {
    "cosine": ("<=>", "vector_cosine_ops", "1 - ({d})"),
    "inner_product": ("<#>", "vector_ip_ops", "-({d})"),
    "l2": ("<->", "vector_l2_ops", "1 - ({d}) * ({d}) / 2"),
}
_MAX_EF_SEARCH = 1000  # pgvector's upper bound for hnsw.ef_search
_MAX_DIMENSIONS = 2000  # pgvector indexes vectors of up to 2,000 dimensions
_CHUNK = 1000


def _psycopg() -> Any:
    try:
        import psycopg
        from pgvector.psycopg import register_vector  # noqa: F401
    except ImportError:
        raise ImportError("PgVectorStore needs psycopg 3 and pgvector: pip install 'chatclient[pgvector]'") from None
    return psycopg


class PgVectorStore(BaseVectorStore):
    """A vector store in a PostgreSQL table with the pgvector extension.

    >>> store = PgVectorStore("postgresql://app@db/kb", LocalEmbeddingModel())   # doctest: +SKIP
    >>> store.add([Document("Paris is the capital of France.", {"lang": "en"})])  # doctest: +SKIP

    Thread-safe: one connection, used under a lock (open one store per worker process). Pass
    ``ef_search`` / ``probes`` to trade recall for speed on HNSW / IVFFlat indexes.
    """

    _blocking = True

    def __init__(
        self,
        dsn: str,
        embedding_model: EmbeddingModel,
        *,
        table: str = "documents",
        index: IndexKind | None = "hnsw",
        distance: Distance = "cosine",
        embed_batch_size: int = 256,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 64,
        ef_search: int = 40,
        ivfflat_lists: int = 100,
        probes: int = 10,
        connect_timeout: float = 10.0,
        statement_timeout: float | None = 60.0,
    ) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        if not isinstance(dsn, str) or not dsn.strip():
            raise ValueError("dsn must be a PostgreSQL connection string, e.g. 'postgresql://user@host/db'")
        if not _IDENT.match(table):
            raise ValueError(f"table must be a plain SQL identifier of at most 63 characters, got {table!r}")
        if index not in ("hnsw", "ivfflat", None):
            raise ValueError(f"index must be 'hnsw', 'ivfflat' or None, got {index!r}")
        if distance not in _DISTANCES:
            raise ValueError(f"distance must be one of {sorted(_DISTANCES)}, got {distance!r}")
        for name, value in (
            ("hnsw_m", hnsw_m),
            ("hnsw_ef_construction", hnsw_ef_construction),
            ("ef_search", ef_search),
            ("ivfflat_lists", ivfflat_lists),
            ("probes", probes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self._psycopg = _psycopg()
        self.dsn = dsn
        self.table = table
        self.index = index
        self.distance = distance
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.ef_search = min(ef_search, _MAX_EF_SEARCH)
        self.ivfflat_lists = ivfflat_lists
        self.probes = probes
        self.connect_timeout = connect_timeout
        self.statement_timeout = statement_timeout
        self._lock = threading.RLock()
        self._conn: Any = None
        self._dimension: int | None = None
        self._iterative = False

    # -- connection -----------------------------------------------------------------------------
    def _connection(self) -> Any:
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        psycopg = self._psycopg
        from pgvector.psycopg import register_vector

        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=max(1, int(self.connect_timeout)))
        except psycopg.OperationalError as exc:
            # the driver's message names host and port, never the password
            raise VectorStoreError(f"cannot connect to PostgreSQL: {exc}".strip(), store="PgVectorStore") from None
        try:
            self._ensure_extension(conn)
            register_vector(conn)
            if self.statement_timeout is not None:
                conn.execute(f"SET statement_timeout = {int(self.statement_timeout * 1000)}")
            (version,) = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
            self._iterative = _version(version) >= (0, 8)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _ensure_extension(self, conn: Any) -> None:
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
            return
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except self._psycopg.Error as exc:
            raise VectorStoreError(
                "the pgvector extension is not installed in this database and could not be created "
                f"({type(exc).__name__}: {str(exc).strip()}); install pgvector on the server and run "
                "'CREATE EXTENSION vector' as a role allowed to",
                store="PgVectorStore",
            ) from None

    def close(self) -> None:
        """Close the database connection (a later call reconnects)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> PgVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        conn = self._connection()
        with conn.transaction():
            yield conn

    # -- schema ---------------------------------------------------------------------------------
    def _table_dimension(self, conn: Any) -> int | None:
        if self._dimension is not None:
            return self._dimension
        row = conn.execute(
            "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) "
            "AND a.attname = 'embedding' AND NOT a.attisdropped",
            [f'"{self.table}"'],
        ).fetchone()
        if row is None:
            return None
        self._dimension = int(row[0])
        return self._dimension

    def _create_schema(self, conn: Any, dim: int) -> None:
        t = self.table
        conn.execute(
            f'CREATE TABLE IF NOT EXISTS "{t}" (id text PRIMARY KEY, text text NOT NULL, '
            f"metadata jsonb NOT NULL DEFAULT '{{}}'::jsonb, embedding vector({dim}) NOT NULL)"
        )
        conn.execute(f'CREATE INDEX IF NOT EXISTS "{t}_metadata_idx" ON "{t}" USING gin (metadata jsonb_path_ops)')
        if self.index is not None and dim <= _MAX_DIMENSIONS:
            self._create_vector_index(conn)

    def _create_vector_index(self, conn: Any) -> None:
        t, opclass = self.table, _DISTANCES[self.distance][1]
        name = f"{t}_embedding_{self.index}_idx"[:63]
        if self.index == "hnsw":
            conn.execute(
                f'CREATE INDEX IF NOT EXISTS "{name}" ON "{t}" USING hnsw (embedding {opclass}) '
                f"WITH (m = {self.hnsw_m}, ef_construction = {self.hnsw_ef_construction})"
            )
        else:
            conn.execute(
                f'CREATE INDEX IF NOT EXISTS "{name}" ON "{t}" USING ivfflat (embedding {opclass}) '
                f"WITH (lists = {self.ivfflat_lists})"
            )

    def create_index(self, *, maintenance_work_mem: str | None = None) -> None:
        """(Re)build the vector index from the rows stored now: after a bulk load (faster than
        indexing row by row) and always for IVFFlat, whose lists are trained on the rows present.

        ``maintenance_work_mem`` (e.g. ``"1GB"``) raises PostgreSQL's memory for this build only;
        an HNSW build is much faster when its graph fits. The build runs without statement timeout.
        """
        if self.index is None:
            return
        if maintenance_work_mem is not None and not _MEMORY.match(maintenance_work_mem):
            raise ValueError(f"maintenance_work_mem must look like '512MB' or '1GB', got {maintenance_work_mem!r}")
        with self._lock:
            conn = self._connection()
            if self._table_dimension(conn) is None:
                return
            name = f"{self.table}_embedding_{self.index}_idx"[:63]
            with conn.transaction():
                # building over many rows takes minutes: the store's statement_timeout is for searches
                conn.execute("SET LOCAL statement_timeout = 0")
                if maintenance_work_mem is not None:
                    conn.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
                conn.execute(f'DROP INDEX IF EXISTS "{name}"')
                self._create_vector_index(conn)

    def drop(self) -> None:
        """Drop the store's table (all documents and indexes)."""
        with self._lock:
            self._connection().execute(f'DROP TABLE IF EXISTS "{self.table}"')
            self._dimension = None

    def __len__(self) -> int:
        with self._lock:
            conn = self._connection()
            if self._table_dimension(conn) is None:
                return 0
            (n,) = conn.execute(f'SELECT count(*) FROM "{self.table}"').fetchone()
        return int(n)

    # -- storage hooks --------------------------------------------------------------------------
    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        jsonb = self._psycopg.types.json.Jsonb
        rows = [
            (_clean(d.id, "id"), _clean(d.text, "text"), jsonb(_metadata(d)), v)
            for d, v in zip(documents, vectors, strict=True)
        ]
        dim = int(vectors.shape[1])
        with self._lock:
            conn = self._connection()
            stored = self._table_dimension(conn)
            if stored is None:
                with conn.transaction():
                    self._create_schema(conn, dim)
                self._dimension = dim
            elif stored != dim:
                raise ValueError(f"embedding dimension changed: the table holds {stored}-d vectors, got {dim}-d")
            with conn.transaction(), conn.cursor() as cur:
                for i in range(0, len(rows), _CHUNK):
                    cur.executemany(
                        f'INSERT INTO "{self.table}" (id, text, metadata, embedding) VALUES (%s, %s, %s, %s) '
                        "ON CONFLICT (id) DO UPDATE SET text = EXCLUDED.text, metadata = EXCLUDED.metadata, "
                        "embedding = EXCLUDED.embedding",
                        rows[i : i + _CHUNK],
                    )

    def _delete(self, target: list[str] | Expression) -> None:
        with self._lock:
            conn = self._connection()
            if self._table_dimension(conn) is None:
                return
            with conn.transaction():
                if isinstance(target, Expression):
                    where, params = to_postgres_sql(target, "metadata")
                    conn.execute(f'DELETE FROM "{self.table}" WHERE {where}', params)
                else:
                    for i in range(0, len(target), _CHUNK):
                        conn.execute(f'DELETE FROM "{self.table}" WHERE id = ANY(%s)', [target[i : i + _CHUNK]])

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        op, _, to_score = _DISTANCES[self.distance]
        params: list[Any] = [vector]
        where = ""
        if request.filter_expression is not None:
            sql, fparams = to_postgres_sql(request.filter_expression, "metadata")
            where = f"WHERE {sql}"
            params += fparams
        params.append(request.top_k)
        # the inner query may use the vector index (ORDER BY distance LIMIT k); the outer one re-sorts,
        # as iterative index scans may return rows slightly out of order
        sql = (
            f"SELECT id, text, metadata, {to_score.format(d='distance')} AS score FROM ("
            f'SELECT id, text, metadata, embedding {op} %s AS distance FROM "{self.table}" {where} '
            "ORDER BY distance LIMIT %s) AS hits ORDER BY distance, id"
        )
        threshold = request.similarity_threshold
        with self._lock:
            conn = self._connection()
            if self._table_dimension(conn) is None:
                return []
            if self._dimension is not None and vector.shape[0] != self._dimension:
                raise ValueError(f"query embedding has {vector.shape[0]} dimensions, the table holds {self._dimension}")
            with conn.transaction():
                self._tune(conn, request)
                # never a prepared (generic) plan: it would keep an index scan whatever the SETs and table size
                rows = conn.execute(sql, params, prepare=False).fetchall()
                if len(rows) < request.top_k and self.index is not None:
                    # An approximate index returned fewer rows than asked: make sure that is all there is.
                    # (HNSW can lose rows to duplicate vectors and update churn until VACUUM repairs it.)
                    (matching,) = conn.execute(f'SELECT count(*) FROM "{self.table}" {where}', params[1:-1]).fetchone()
                    if matching > len(rows):
                        conn.execute("SET LOCAL enable_indexscan = off")  # the exact plan: scan (or GIN) + sort
                        rows = conn.execute(sql, params, prepare=False).fetchall()
        return [
            Document(text, metadata, id=doc_id, score=float(s))
            for doc_id, text, metadata, s in rows
            if threshold <= 0.0 or s >= threshold
        ]

    def _tune(self, conn: Any, request: SearchRequest) -> None:
        # SET LOCAL: these last until the end of the search's transaction only; one round trip for all
        sets: list[str] = []
        if self.index == "hnsw":
            sets.append(f"SET LOCAL hnsw.ef_search = {int(max(self.ef_search, min(request.top_k, _MAX_EF_SEARCH)))}")
            if self._iterative:
                sets.append("SET LOCAL hnsw.iterative_scan = strict_order")
        elif self.index == "ivfflat":
            sets.append(f"SET LOCAL ivfflat.probes = {int(min(self.probes, self.ivfflat_lists))}")
            if self._iterative:
                sets.append("SET LOCAL ivfflat.iterative_scan = relaxed_order")
        if sets:
            conn.execute("; ".join(sets))

    def get(self, ids: Sequence[str]) -> list[Document]:
        """The stored documents with the given ids (unknown ids are skipped), in the given order."""
        wanted = list(ids)
        found: dict[str, Document] = {}
        with self._lock:
            conn = self._connection()
            if self._table_dimension(conn) is None:
                return []
            for i in range(0, len(wanted), _CHUNK):
                for doc_id, text, metadata in conn.execute(
                    f'SELECT id, text, metadata FROM "{self.table}" WHERE id = ANY(%s)', [wanted[i : i + _CHUNK]]
                ):
                    found[doc_id] = Document(text, metadata, id=doc_id)
        return [found[i] for i in wanted if i in found]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def _clean(value: str, what: str) -> str:
    if "\x00" in value:
        raise ValueError(f"document {what} holds a NUL character, which PostgreSQL text cannot store")
    return value


def _metadata(doc: Document) -> dict[str, Any]:
    metadata = dict(doc.metadata)
    try:
        text = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata of document {doc.id!r} is not JSON (no NaN/infinity, no objects): {exc}") from None
    if "\\u0000" in text:
        raise ValueError(f"metadata of document {doc.id!r} holds a NUL character, which PostgreSQL jsonb cannot store")
    return metadata
