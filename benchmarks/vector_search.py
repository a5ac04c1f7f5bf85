"""Vector search benchmark: SimpleVectorStore and SqliteVectorStore next to faiss IndexFlatIP (exact search, the floor).

    .venv/bin/python benchmarks/vector_search.py [--sizes 10000 100000] [--queries 200]

Measures add throughput (vectors/s) and top-10 query latency (median and p95, one query at a time)
for random unit vectors of 384 dimensions (MiniLM's size). Embedding cost is excluded: the stores
get a model that looks precomputed vectors up, so only storage and search are timed. faiss-cpu is
optional; without it only our stores are measured.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chatclient.rag import Document, SearchRequest, SimpleVectorStore, SqliteVectorStore
from chatclient.rag.embedding import BaseEmbeddingModel

DIM = 384
TOP_K = 10


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


def interleaved(contestants: dict[str, Any], n: int) -> dict[str, tuple[float, float]]:
    """Median and p95 latency (ms) per contestant; queries alternate between contestants so that
    load changes on a shared machine hit them all alike."""
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


def bench(size: int, n_queries: int, rng: np.random.Generator, tmp: Path) -> list[tuple[str, float, float, float]]:
    docs, queries = unit(rng, size), unit(rng, n_queries)
    model = LookupEmbeddingModel(docs, queries)
    documents = [Document(f"d{i}", {"i": i}, id=str(i)) for i in range(size)]
    rates: dict[str, float] = {}
    contestants: dict[str, Any] = {}

    simple = SimpleVectorStore(model, embed_batch_size=4096)
    rates["SimpleVectorStore"] = timed_adds(simple.add, documents, size)
    contestants["SimpleVectorStore"] = lambda i: simple.similarity_search(SearchRequest(f"q{i}", top_k=TOP_K))

    sqlite = SqliteVectorStore(tmp / f"bench{size}.db", model, embed_batch_size=4096)
    rates["SqliteVectorStore"] = timed_adds(sqlite.add, documents, size)
    sqlite.similarity_search(SearchRequest("q0", top_k=TOP_K))  # the first search loads the matrix
    contestants["SqliteVectorStore"] = lambda i: sqlite.similarity_search(SearchRequest(f"q{i}", top_k=TOP_K))

    try:
        import faiss
    except ImportError:
        print("faiss-cpu is not installed: skipping the faiss baseline")
    else:
        index = faiss.IndexFlatIP(DIM)
        rates["faiss IndexFlatIP"] = timed_adds(index.add, docs, size)
        contestants["faiss IndexFlatIP"] = lambda i: index.search(queries[i : i + 1], TOP_K)
        _, expected = index.search(queries[0:1], TOP_K)
        ours = [int(d.id) for d in simple.similarity_search(SearchRequest("q0", top_k=TOP_K))]
        assert ours == [int(x) for x in expected[0]], "SimpleVectorStore and faiss disagree on the top 10"

    lat = interleaved(contestants, n_queries)
    sqlite.close()
    return [(name, rates[name], *lat[name]) for name in contestants]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(42)
    print(f"dim={DIM} top_k={TOP_K} queries={args.queries} numpy={np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        results = [(size, bench(size, args.queries, rng, Path(tmp))) for size in args.sizes]
    for size, rows in results:
        floor = next((r[2] for r in rows if r[0].startswith("faiss")), None)
        print(f"\n{size:,} vectors")
        print(f"{'store':<20}{'add vec/s':>14}{'p50 ms':>10}{'p95 ms':>10}{'p50 vs faiss':>15}")
        for name, rate, p50, p95 in rows:
            ratio = f"{p50 / floor:.2f}x" if floor else "-"
            print(f"{name:<20}{rate:>14,.0f}{p50:>10.3f}{p95:>10.3f}{ratio:>15}")


if __name__ == "__main__":
    main()
