"""Ingestion benchmark: DocumentPipeline (read -> split -> embed with local MiniLM -> store), documents/s and chunks/s.

    .venv/bin/python benchmarks/ingest.py [--chunks 10000] [--batch-size 64] [--concurrency 1 2]
                                          [--store simple|sqlite]

Writes synthetic text files (about 10 chunks each, deterministic), then runs the pipeline into a
fresh store once per concurrency setting and prints documents/s and chunks/s for the whole run
(reading, splitting, embedding and storing). A second run over the same files shows the idempotent
path: every chunk is already stored, so nothing is embedded again (SqliteVectorStore only: it can
answer which ids it holds). The embedding model dominates; numpy's BLAS threads matter
(``OPENBLAS_NUM_THREADS``).
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

from chatclient.rag import (
    DocumentPipeline,
    LocalEmbeddingModel,
    SimpleVectorStore,
    SqliteVectorStore,
    TextReader,
    TokenTextSplitter,
)

WORDS = [
    "retrieval",
    "index",
    "vector",
    "keyword",
    "hybrid",
    "fusion",
    "rank",
    "query",
    "answer",
    "document",
    "chunk",
    "embedding",
    "model",
    "store",
    "pipeline",
    "batch",
    "memory",
    "summary",
    "window",
    "advisor",
    "client",
    "request",
    "response",
    "stream",
    "token",
    "tool",
    "call",
    "result",
    "server",
    "cache",
    "filter",
    "metadata",
    "page",
    "title",
    "link",
    "reader",
    "splitter",
    "progress",
    "checkpoint",
    "crash",
    "resume",
]
CHUNKS_PER_FILE = 10
CHUNK_TOKENS = 100


def write_corpus(folder: Path, files: int, seed: int = 7) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for i in range(files):
        sentences = []
        # about CHUNK_TOKENS * CHUNKS_PER_FILE simple tokens: words plus spaces and full stops
        for _ in range(CHUNKS_PER_FILE * 10):
            words = [rng.choice(WORDS) for _ in range(9)]
            sentences.append(" ".join(words).capitalize() + ".")
        p = folder / f"doc{i:05d}.txt"
        p.write_text(f"Document {i}. " + " ".join(sentences))
        paths.append(p)
    return paths


def run(paths: list[Path], store: object, batch_size: int, concurrency: int) -> tuple[float, int, int, int]:
    splitter = TokenTextSplitter(chunk_size=CHUNK_TOKENS, min_chunk_size_chars=50, encoding="simple")
    pipeline = DocumentPipeline(
        [TextReader(p) for p in paths],
        [splitter],
        store,  # type: ignore[arg-type]
        batch_size=batch_size,
        max_concurrency=concurrency,
        progress=False,
    )
    started = time.perf_counter()
    docs = pipeline.run()
    seconds = time.perf_counter() - started
    report = pipeline.last_report
    assert report is not None
    return seconds, len(docs), report.written, report.skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000, help="target number of chunks (default 10000)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[2])
    parser.add_argument("--store", choices=["simple", "sqlite"], default="sqlite")
    args = parser.parse_args()

    model = LocalEmbeddingModel()
    model.embed(["warm up"])  # load the weights outside the timed runs
    print(f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, cpus={os.cpu_count()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = write_corpus(folder, max(1, args.chunks // CHUNKS_PER_FILE))
        print(f"{len(paths)} files, store={args.store}, batch_size={args.batch_size}")
        print(f"{'concurrency':>11} {'chunks':>7} {'seconds':>8} {'docs/s':>8} {'chunks/s':>9}")
        for concurrency in args.concurrency:
            db = folder / f"v{concurrency}.db"
            store = SqliteVectorStore(db, model) if args.store == "sqlite" else SimpleVectorStore(model)
            seconds, chunks, written, _ = run(paths, store, args.batch_size, concurrency)
            print(
                f"{concurrency:>11} {chunks:>7} {seconds:>8.1f} {len(paths) / seconds:>8.1f} {written / seconds:>9.1f}"
            )
            if args.store == "sqlite":
                again, _, rewritten, skipped = run(paths, store, args.batch_size, concurrency)
                print(f"{'rerun':>11} {skipped:>7} {again:>8.1f}   (idempotent: {rewritten} chunks embedded again)")
                store.close()  # type: ignore[union-attr]


if __name__ == "__main__":
    main()
