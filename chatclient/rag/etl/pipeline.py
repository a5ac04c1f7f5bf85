"""The ETL protocols and ``DocumentPipeline``: reader -> transformers -> writer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from chatclient.rag.documents import Document


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


class DocumentPipeline:
    """Read, transform in order, then write: ``DocumentPipeline(reader, [splitter], store).run()``.

    Each stage may be an object with the protocol method (``read``/``transform``/``write``, or
    ``add`` for a writer) or a plain callable. ``run`` returns the documents that were written.
    """

    def __init__(
        self, reader: ReaderLike, transformers: Sequence[TransformerLike] = (), writer: WriterLike | None = None
    ) -> None:
        if reader is None:
            raise ValueError("reader cannot be None")
        self.reader = reader
        self.transformers = tuple(transformers)
        self.writer = writer

    def run(self) -> list[Document]:
        """Run the pipeline; returns the documents handed to the writer."""
        read = getattr(self.reader, "read", None)
        docs = list(read() if read is not None else self.reader())  # type: ignore[operator]
        for t in self.transformers:
            fn = getattr(t, "transform", None)
            docs = list(fn(docs) if fn is not None else t(docs))  # type: ignore[operator]
        if self.writer is not None and docs:
            write = getattr(self.writer, "write", None) or getattr(self.writer, "add", None)
            (write or self.writer)(docs)  # type: ignore[operator]
        return docs

    __call__ = run
