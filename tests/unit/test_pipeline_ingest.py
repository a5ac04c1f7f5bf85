"""DocumentPipeline at scale: content-hash ids, batches, bounded concurrency, checkpoints, progress."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from chatclient.rag import (
    Document,
    DocumentPipeline,
    HashingEmbeddingModel,
    SimpleVectorStore,
    SqliteVectorStore,
    TextReader,
    TokenTextSplitter,
)
from chatclient.rag.etl import PipelineReport, content_id

SPLITTER = TokenTextSplitter(chunk_size=30, min_chunk_size_chars=10, encoding="simple")


def corpus(tmp_path: Path, n: int = 6) -> list[TextReader]:
    readers = []
    for i in range(n):
        p = tmp_path / f"doc{i}.txt"
        p.write_text(" ".join(f"Sentence {j} of document {i} talks about topic {i * j}." for j in range(12)))
        readers.append(TextReader(p))
    return readers


class CountingWriter:
    """Records every batch and the highest number of concurrent write calls."""

    def __init__(self, delay: float = 0.0) -> None:
        self.batches: list[list[Document]] = []
        self.active = 0
        self.peak = 0
        self.delay = delay
        self._lock = threading.Lock()

    def write(self, documents: Sequence[Document]) -> None:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(self.delay)
        with self._lock:
            self.batches.append(list(documents))
            self.active -= 1


def test_content_id_depends_on_text_and_metadata_only() -> None:
    a = Document("same", {"k": 1})
    assert content_id(a) == content_id(Document("same", {"k": 1})) != content_id(Document("same", {"k": 2}))
    assert content_id(a) != content_id(Document("other", {"k": 1}))
    assert len(content_id(a)) == 32


def test_rerun_writes_the_same_ids_so_the_store_has_no_duplicates(tmp_path: Path) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    readers = corpus(tmp_path)
    first = DocumentPipeline(readers, [SPLITTER], store, progress=False).run()
    n = len(store)
    assert n == len(first) > len(readers)
    second = DocumentPipeline(readers, [SPLITTER], store, progress=False).run()
    assert len(store) == n
    assert [d.id for d in first] == [d.id for d in second]
    # chunk metadata points at the stable (content-hash) id of its parent document
    parents = {d.metadata["parent_document_id"] for d in first}
    assert len(parents) == len(readers) and all(len(p) == 32 for p in parents)


def test_duplicate_chunks_are_written_once() -> None:
    out: list[Document] = []
    docs = DocumentPipeline(lambda: [Document("twin"), Document("twin"), Document("solo")], writer=out.extend).run()
    assert [d.text for d in docs] == ["twin", "solo"] and len(out) == 2


def test_content_ids_can_be_turned_off() -> None:
    out: list[Document] = []
    DocumentPipeline(lambda: [Document("a", id="mine")], writer=out.extend, content_ids=False).run()
    assert out[0].id == "mine"


def test_batches_and_bounded_concurrency(tmp_path: Path) -> None:
    writer = CountingWriter(delay=0.02)
    pipeline = DocumentPipeline(corpus(tmp_path), [SPLITTER], writer, batch_size=5, max_concurrency=3, progress=False)
    docs = pipeline.run()
    assert all(len(b) <= 5 for b in writer.batches)
    assert sorted(d.id for b in writer.batches for d in b) == sorted(d.id for d in docs)
    assert 2 <= writer.peak <= 3
    report = pipeline.last_report
    assert isinstance(report, PipelineReport)
    assert (report.documents_read, report.chunks, report.written, report.skipped) == (6, len(docs), len(docs), 0)
    assert report.batches == len(writer.batches) and report.chunks_per_second > 0


def test_checkpoint_skips_finished_batches_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    readers = corpus(tmp_path, 3)
    ckpt = tmp_path / "ingest.ckpt"
    first = CountingWriter()
    docs = DocumentPipeline(readers, [SPLITTER], first, batch_size=4, checkpoint=ckpt, progress=False).run()
    lines = ckpt.read_text().splitlines()
    # Batches run on several threads, so they finish (and are checkpointed) in any order; each batch's
    # ids are written together, after the batch is stored.
    batches = {tuple(d.id for d in b) for b in first.batches}
    assert sorted(lines) == sorted(d.id for d in docs)
    assert {tuple(lines[i : i + 4]) for i in range(0, len(lines), 4)} == batches
    # simulate a crash after two batches: keep their ids plus half a line
    ckpt.write_text("\n".join(lines[:8]) + "\n" + lines[8][:10])
    kept = set(lines[:8])
    again = CountingWriter()
    pipeline = DocumentPipeline(readers, [SPLITTER], again, batch_size=4, checkpoint=ckpt, progress=False)
    pipeline.run()
    rewritten = [d.id for b in again.batches for d in b]
    assert sorted(rewritten) == sorted(d.id for d in docs if d.id not in kept)
    assert pipeline.last_report is not None and pipeline.last_report.skipped == 8


def test_without_checkpoint_a_store_with_get_is_asked_what_it_holds(tmp_path: Path) -> None:
    class Embedder(HashingEmbeddingModel):
        calls = 0

        def embed(self, texts: Sequence[str]):  # type: ignore[no-untyped-def]
            Embedder.calls += len(texts)
            return super().embed(texts)

    readers = corpus(tmp_path, 2)
    with SqliteVectorStore(tmp_path / "v.db", Embedder()) as store:
        DocumentPipeline(readers, [SPLITTER], store, progress=False).run()
        n, embedded = len(store), Embedder.calls
        assert embedded == n
        pipeline = DocumentPipeline(readers, [SPLITTER], store, progress=False)
        pipeline.run()
        assert Embedder.calls == embedded and len(store) == n  # nothing re-embedded
        assert pipeline.last_report is not None and pipeline.last_report.skipped == n


def test_a_failing_batch_raises_and_leaves_the_finished_ones_checkpointed(tmp_path: Path) -> None:
    calls = {"n": 0}
    written: list[str] = []
    lock = threading.Lock()

    def flaky(batch: Sequence[Document]) -> None:
        with lock:
            calls["n"] += 1
            if calls["n"] == 3:
                raise RuntimeError("embedding service down")
            written.extend(d.id for d in batch)

    ckpt = tmp_path / "c.ckpt"
    with pytest.raises(RuntimeError, match="down"):
        DocumentPipeline(corpus(tmp_path, 3), [SPLITTER], flaky, batch_size=3, checkpoint=ckpt, progress=False).run()
    assert len(written) >= 6 and sorted(ckpt.read_text().split()) == sorted(written)


def test_progress_bar_on_a_terminal_and_plain_lines_otherwise(tmp_path: Path) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    DocumentPipeline(corpus(tmp_path, 2), [SPLITTER], CountingWriter(), batch_size=4, progress_stream=tty).run()
    out = tty.getvalue()
    assert out.count("\r") >= 2 and "chunk" in out and out.endswith("\n") and "100%" in out

    plain = io.StringIO()
    pipeline = DocumentPipeline(corpus(tmp_path, 2), [SPLITTER], CountingWriter(), batch_size=4, progress_stream=plain)
    pipeline.run()
    lines = plain.getvalue().splitlines()
    written = pipeline.last_report.written if pipeline.last_report else 0
    assert "\r" not in plain.getvalue() and len(lines) >= 2
    assert lines[-1].startswith("embedding: 100%") and f"{written}/{written}" in lines[-1]

    quiet = io.StringIO()
    DocumentPipeline(corpus(tmp_path, 2), [SPLITTER], CountingWriter(), progress=False, progress_stream=quiet).run()
    assert quiet.getvalue() == ""


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        DocumentPipeline(lambda: [], batch_size=0)
    with pytest.raises(ValueError, match="max_concurrency"):
        DocumentPipeline(lambda: [], max_concurrency=0)
