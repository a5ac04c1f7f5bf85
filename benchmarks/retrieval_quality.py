"""Retrieval quality on the project's own docs: recall@5 and MRR@10 for vector, BM25, hybrid and hybrid+rerank.

    .venv/bin/python benchmarks/retrieval_quality.py [--chunk-size 200] [--verbose]

Corpus: every page of ``docs/`` (``docs/*.md`` and ``docs/guide/*.md``) read with ``MarkdownReader``
(one document per section, code blocks apart) and cut by ``TokenTextSplitter``. Questions:
``benchmarks/data/retrieval_qa.json``, 60 questions written by hand from the guide, each with an
*evidence* phrase copied from the page that answers it. A retrieved chunk is relevant when it contains
the evidence phrase (compared lower-cased, without Markdown emphasis, whitespace collapsed); the
script first checks that every question has at least one relevant chunk, so an edit to the docs that
removes an answer shows up as an error rather than as a silently lower score.

Methods (top 10 each): ``vector`` (SimpleVectorStore + local MiniLM), ``bm25``
(BM25DocumentRetriever), ``hybrid`` (HybridDocumentRetriever, reciprocal rank fusion of both, 20
candidates per side), ``hybrid+rerank`` (the hybrid's 20 best re-scored by EmbeddingReranker),
``fts5`` (SqliteFtsDocumentRetriever) and ``hybrid (fts5)`` (vector fused with FTS5 instead of bm25s).
An LLM reranker with the bundled 135M model is not measured: at about 1.4 s per answer on this
machine a listwise pass over 20 chunks for 60 questions costs minutes, and the model is too small to
judge relevance usefully.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from chatclient.rag import (
    BM25DocumentRetriever,
    Document,
    EmbeddingReranker,
    HybridDocumentRetriever,
    LocalEmbeddingModel,
    MarkdownReader,
    Query,
    SearchRequest,
    SimpleVectorStore,
    SqliteFtsDocumentRetriever,
    TokenTextSplitter,
)
from chatclient.rag.etl import content_id

ROOT = Path(__file__).resolve().parents[1]
QA_FILE = ROOT / "benchmarks" / "data" / "retrieval_qa.json"
_MARKUP = re.compile(r"[*`_]")


def normalize(text: str) -> str:
    return " ".join(_MARKUP.sub("", text).lower().split())


def load_corpus(chunk_size: int) -> list[Document]:
    pages = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "guide").glob("*.md"))
    docs: list[Document] = []
    for page in pages:
        docs += [d.copy(metadata={**d.metadata, "page": page.name}) for d in MarkdownReader(page).read()]
    splitter = TokenTextSplitter(chunk_size=chunk_size, min_chunk_size_chars=100, encoding="simple")
    chunks = splitter.split(docs)
    unique = {content_id(c): c for c in chunks}
    return [Document(c.text, c.metadata, id=i) for i, c in unique.items()]


def first_hit(ranked: list[Document], relevant: set[str]) -> int | None:
    for rank, d in enumerate(ranked, start=1):
        if d.id in relevant:
            return rank
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunk-size", type=int, default=200)
    parser.add_argument("--verbose", action="store_true", help="print the rank of the answer per question")
    parser.add_argument("--no-rerank", action="store_true", help="skip hybrid+rerank (it embeds 20 chunks per query)")
    args = parser.parse_args()

    qa = json.loads(QA_FILE.read_text(encoding="utf-8"))
    chunks = load_corpus(args.chunk_size)
    normalized = {c.id: normalize(c.text) for c in chunks}
    relevant: list[set[str]] = []
    for item in qa:
        ev = normalize(item["evidence"])
        hits = {i for i, t in normalized.items() if ev in t}
        if not hits:
            raise SystemExit(f"question {item['id']}: no chunk contains its evidence {item['evidence']!r}")
        relevant.append(hits)

    model = LocalEmbeddingModel()
    started = time.perf_counter()
    store = SimpleVectorStore(model)
    store.add(chunks)
    embed_seconds = time.perf_counter() - started
    bm25 = BM25DocumentRetriever(chunks, top_k=10)
    hybrid = HybridDocumentRetriever(vector_store=store, keyword_retriever=bm25, top_k=10, candidates=20)
    wide = HybridDocumentRetriever(vector_store=store, keyword_retriever=bm25, top_k=20, candidates=20)
    reranker = EmbeddingReranker(model, top_n=10)
    fts = SqliteFtsDocumentRetriever(documents=chunks, top_k=10)
    hybrid_fts = HybridDocumentRetriever(vector_store=store, keyword_retriever=fts, top_k=10, candidates=20)

    methods = {
        "vector": lambda q: store.similarity_search(SearchRequest(q.text, top_k=10)),
        "bm25": bm25.retrieve,
        "hybrid": hybrid.retrieve,
        "hybrid+rerank": lambda q: reranker.process(q, wide.retrieve(q)),
        "fts5": fts.retrieve,
        "hybrid (fts5)": hybrid_fts.retrieve,
    }
    if args.no_rerank:
        del methods["hybrid+rerank"]
    print(
        f"{len(qa)} questions, {len(chunks)} chunks (chunk_size={args.chunk_size}), embedded in {embed_seconds:.1f} s"
    )
    print(f"{'method':<15} {'recall@5':>9} {'MRR@10':>7} {'ms/query':>9}")
    per_question: dict[str, list[int | None]] = {}
    for name, retrieve in methods.items():
        ranks: list[int | None] = []
        t0 = time.perf_counter()
        for item, rel in zip(qa, relevant, strict=True):
            ranks.append(first_hit(list(retrieve(Query(item["question"])))[:10], rel))
        ms = (time.perf_counter() - t0) * 1000 / len(qa)
        recall5 = sum(r is not None and r <= 5 for r in ranks) / len(qa)
        mrr = sum(1 / r for r in ranks if r is not None) / len(qa)
        per_question[name] = ranks
        print(f"{name:<15} {recall5:>9.3f} {mrr:>7.3f} {ms:>9.1f}")
    if args.verbose:
        print("\nrank of the first relevant chunk (- = not in the top 10):")
        for i, item in enumerate(qa):
            cells = " ".join(f"{per_question[m][i] or '-'!s:>5}" for m in methods)
            print(f"{item['id']:>3} {cells}  {item['question']}")


if __name__ == "__main__":
    main()
