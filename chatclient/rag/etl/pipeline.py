"""The ETL protocols and ``DocumentPipeline``: reader -> transformers -> writer."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO, runtime_checkable

from chatclient.progress import progress_bar, report_interrupt
from chatclient.rag.documents import Document

log = logging.getLogger(__name__)


@runtime_checkable
class DocumentReader(Protocol):
    """Produces documents (``TextReader``, ``JsonReader``, ``MarkdownReader``...)."""

    def read(self) -> list[Document]:
        """The documents read."""
        ...


@runtime_checkable
class DocumentTransformer(Protocol):
    """Turns documents into documents (``TokenTextSplitter``, enrichers...)."""

    def transform(self, documents: Sequence[Document]) -> list[Document]:
        """The transformed documents."""
        ...


@runtime_checkable
class DocumentWriter(Protocol):
    """Consumes documents (every vector store is one)."""

    def write(self, documents: Sequence[Document]) -> None:
        """Store the documents."""
        ...


ReaderLike = DocumentReader | Callable[[], Sequence[Document]]
TransformerLike = DocumentTransformer | Callable[[Sequence[Document]], Sequence[Document]]
WriterLike = DocumentWriter | Callable[[Sequence[Document]], Any]


def content_id(document: Document) -> str:
    """A stable id from a document's text and metadata (a SHA-256 hex digest, 32 characters).

    Documents with the same text and metadata get the same id, so writing them again replaces
    instead of duplicating. Metadata values that are not JSON are hashed by their ``str``.
    """
    meta = json.dumps(dict(document.metadata), sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256()
    digest.update(document.text.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(meta.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def _with_content_ids(documents: Sequence[Document]) -> list[Document]:
    return [Document(d.text, d.metadata, id=content_id(d), score=d.score) for d in documents]


@dataclass(frozen=True)
class PipelineReport:
    """What one :meth:`DocumentPipeline.run` did."""

    documents_read: int
    chunks: int
    written: int
    skipped: int
    batches: int
    seconds: float

    @property
    def chunks_per_second(self) -> float:
        """Chunks written per second of the whole run (reading and splitting included)."""
        return self.written / self.seconds if self.seconds > 0 else 0.0


class _Checkpoint:
    """An append-only file of the ids already written; a torn last line (a crash mid-write) is ignored."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> set[str]:
        if not self.path.exists():
            return set()
        data = self.path.read_text(encoding="utf-8")
        lines = data.split("\n")
        if not data.endswith("\n"):
            lines = lines[:-1]  # the last line was cut off by a crash
        return {line for line in lines if line}

    def record(self, ids: Sequence[str]) -> None:
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write("".join(i + "\n" for i in ids))
            f.flush()
            os.fsync(f.fileno())


class DocumentPipeline:
    """Read, transform in order, then write: ``DocumentPipeline(reader, [splitter], store).run()``.

    Each stage may be an object with the protocol method (``read``/``transform``/``write``, or
    ``add`` for a writer) or a plain callable; ``reader`` may also be a list of readers. ``run``
    returns the documents that were written (or were already written by an earlier run).

    For ingestion at scale:

    * **idempotent** — with ``content_ids=True`` (default) every document gets an id hashed from
      its text and metadata (after reading, and again after each transformer, so chunk ids are
      stable too); re-running writes the same ids, which stores replace, so nothing is duplicated;
    * **batched, bounded concurrency** — the writer (a vector store embeds on ``add``) gets
      ``batch_size`` documents per call, at most ``max_concurrency`` calls at a time;
    * **resumable** — with ``checkpoint=path`` the ids of every finished batch are appended to
      that file; after a crash, the next run skips them. Without a checkpoint, a writer with
      ``get(ids)`` (e.g. ``SqliteVectorStore``) is asked which ids it already holds;
    * **progress** — the project's progress bar (``chatclient.progress``) on stderr (or
      ``progress_stream``): redrawn on a terminal, one plain line per step otherwise
      (``progress=False`` silences both). ``last_report`` holds the counts of the last run.
    """

    def __init__(
        self,
        reader: ReaderLike | Sequence[ReaderLike],
        transformers: Sequence[TransformerLike] = (),
        writer: WriterLike | None = None,
        *,
        content_ids: bool = True,
        batch_size: int = 64,
        max_concurrency: int = 2,
        checkpoint: str | os.PathLike[str] | None = None,
        skip_existing: bool = True,
        progress: bool | None = None,
        progress_stream: TextIO | None = None,
    ) -> None:
        if reader is None:
            raise ValueError("reader cannot be None")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError("batch_size must be a positive int")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency <= 0:
            raise ValueError("max_concurrency must be a positive int")
        self.reader = reader
        self.readers: tuple[ReaderLike, ...] = (
            tuple(reader) if isinstance(reader, (list, tuple)) else (reader,)  # type: ignore[assignment]
        )
        self.transformers = tuple(transformers)
        self.writer = writer
        self.content_ids = content_ids
        self.batch_size = batch_size
        self.max_concurrency = max_concurrency
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.skip_existing = skip_existing
        self.progress = progress
        self.progress_stream = progress_stream
        self.last_report: PipelineReport | None = None

    def _read(self) -> list[Document]:
        docs: list[Document] = []
        for reader in self.readers:
            read = getattr(reader, "read", None)
            docs.extend(read() if read is not None else reader())  # type: ignore[operator]
        return docs

    def _transform(self, docs: list[Document]) -> list[Document]:
        if self.content_ids:
            docs = _with_content_ids(docs)
        for t in self.transformers:
            fn = getattr(t, "transform", None)
            docs = list(fn(docs) if fn is not None else t(docs))  # type: ignore[operator]
            if self.content_ids:
                docs = _with_content_ids(docs)
        if self.content_ids:
            docs = list({d.id: d for d in docs}.values())  # identical chunks are stored once
        return docs

    def _write_fn(self) -> Callable[[Sequence[Document]], Any]:
        assert self.writer is not None
        write = getattr(self.writer, "write", None) or getattr(self.writer, "add", None)
        return write or self.writer  # type: ignore[return-value]

    def _already_written(self, docs: list[Document], checkpoint: _Checkpoint | None) -> set[str]:
        if checkpoint is not None:
            return checkpoint.load()
        get = getattr(self.writer, "get", None)
        if not (self.content_ids and self.skip_existing and callable(get)):
            return set()
        found: set[str] = set()
        ids = [d.id for d in docs]
        for i in range(0, len(ids), 500):
            found.update(d.id for d in get(ids[i : i + 500]))
        return found

    def run(self) -> list[Document]:
        """Run the pipeline; returns the documents handed (now or by an earlier run) to the writer."""
        started = time.monotonic()
        raw = self._read()
        docs = self._transform(raw)
        if self.writer is None or not docs:
            self.last_report = PipelineReport(len(raw), len(docs), 0, 0, 0, time.monotonic() - started)
            return docs
        checkpoint = _Checkpoint(self.checkpoint) if self.checkpoint is not None else None
        done = self._already_written(docs, checkpoint) if self.content_ids else set()
        todo = [d for d in docs if d.id not in done]
        batches = [todo[i : i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        write = self._write_fn()
        skipped = len(docs) - len(todo)
        where = "from checkpoint" if checkpoint is not None else "already stored"
        progress = progress_bar(
            total=len(docs),
            desc="embedding",
            unit="chunk",
            enabled=self.progress is not False,
            stream=self.progress_stream,
            initial=skipped,  # shown, but not counted as speed
            postfix=f"{skipped} {where}" if skipped else None,
        )
        written = [0]
        count_lock = threading.Lock()

        def work(batch: list[Document]) -> int:
            write(batch)
            if checkpoint is not None:
                checkpoint.record([d.id for d in batch])
            with count_lock:  # batches finish on several threads
                written[0] += len(batch)
            return len(batch)

        try:
            if self.max_concurrency == 1 or len(batches) <= 1:
                for batch in batches:
                    progress.update(work(batch))
            else:
                with ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="ingest") as pool:
                    pending: set[Future[int]] = set()
                    queue = iter(batches)
                    try:
                        for batch in queue:
                            # keep at most 2 * max_concurrency batches in flight, so memory stays bounded
                            if len(pending) >= 2 * self.max_concurrency:
                                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                                for f in finished:
                                    progress.update(f.result())
                            pending.add(pool.submit(work, batch))
                        for f in as_completed(pending):
                            progress.update(f.result())
                    except BaseException:
                        for f in pending:
                            f.cancel()
                        raise
        except KeyboardInterrupt as exc:
            progress.close()
            report_interrupt(self._interrupted_line(written[0], len(todo), skipped), exc)
            raise
        finally:
            progress.close()
        self.last_report = PipelineReport(
            len(raw), len(docs), len(todo), len(docs) - len(todo), len(batches), time.monotonic() - started
        )
        return docs

    __call__ = run

    def _interrupted_line(self, written: int, todo: int, skipped: int) -> str:
        """The one line Ctrl-C prints: what is stored and how a re-run goes on."""
        head = f"document pipeline interrupted: {written} of {todo} chunks written in this run"
        if skipped:
            head += f" ({skipped} before it)"
        if self.checkpoint is not None:
            return (
                f"{head}; checkpoint {str(self.checkpoint)!r} lists them. Run the same pipeline again to resume: "
                "written chunks are skipped."
            )
        if self.content_ids and self.skip_existing and callable(getattr(self.writer, "get", None)):
            return f"{head}; the store holds them. Run the same pipeline again to resume: stored chunks are skipped."
        return (
            f"{head}; nothing records them, so a re-run writes everything again (ids are stable, so nothing is "
            "duplicated); pass checkpoint='ingest.ckpt' to make a run resumable."
        )
