"""Spans for vector-store work: one ``embeddings`` span per embedding batch, one ``retrieval`` span
per search (store, top_k, result count), nested, with content only when asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from chatclient.observability.otel import instrument, uninstrument
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore

DOCS = [Document(f"note {i} about {'cats' if i % 2 else 'dogs'}", {"i": i}, id=f"n{i}") for i in range(5)]


class Spans:
    def __init__(self, capture_content: bool) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        instrument(provider, capture_content=capture_content)

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith(prefix)]


@pytest.fixture
def spans() -> Iterator[Spans]:
    s = Spans(capture_content=False)
    yield s
    uninstrument()


@pytest.fixture
def content_spans() -> Iterator[Spans]:
    s = Spans(capture_content=True)
    yield s
    uninstrument()


def test_each_embedding_batch_is_an_embeddings_span(spans: Spans) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=32), embed_batch_size=2)
    store.add(DOCS)
    emb = spans.named("embeddings ")
    assert [s.attributes["chatclient.embeddings.input_count"] for s in emb] == [2, 2, 1]  # type: ignore[index]
    for s in emb:
        assert s.name == "embeddings HashingEmbeddingModel"
        assert s.attributes["gen_ai.operation.name"] == "embeddings"  # type: ignore[index]
        assert s.attributes["gen_ai.embeddings.dimension.count"] == 32  # type: ignore[index]
    assert not spans.named("retrieval")


def test_a_search_is_a_retrieval_span_with_its_embedding_inside(spans: Spans) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=32))
    store.add(DOCS)
    spans.exporter.clear()
    found = store.similarity_search(SearchRequest("cats", top_k=3, filter_expression="i >= 1"))
    (retrieval,) = spans.named("retrieval")
    (embedding,) = spans.named("embeddings")
    attrs = retrieval.attributes
    assert attrs is not None and retrieval.name == "retrieval SimpleVectorStore"
    assert attrs["gen_ai.operation.name"] == "retrieval"
    assert attrs["chatclient.vector_store.name"] == "SimpleVectorStore"
    assert attrs["gen_ai.request.top_k"] == 3
    assert attrs["chatclient.vector_store.result_count"] == len(found) == 3
    assert list(attrs["chatclient.documents.ids"]) == [d.id for d in found]  # type: ignore[arg-type]
    assert attrs["chatclient.vector_store.filtered"] is True
    # no query text or filter values without capture_content
    assert "chatclient.vector_store.query" not in attrs and "chatclient.vector_store.filter" not in attrs
    assert embedding.parent is not None and embedding.parent.span_id == retrieval.context.span_id


def test_content_is_recorded_only_when_asked(content_spans: Spans) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=32))
    store.add(DOCS)
    store.similarity_search(SearchRequest("cats", top_k=2, filter_expression="i >= 1"))
    (retrieval,) = content_spans.named("retrieval")
    assert retrieval.attributes is not None
    assert retrieval.attributes["chatclient.vector_store.query"] == "cats"
    assert retrieval.attributes["chatclient.vector_store.filter"] == "i >= 1"


def test_async_search_and_failures_are_spans_too(spans: Spans) -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=32))
    asyncio.run(store.aadd(DOCS))
    got = asyncio.run(store.asimilarity_search(SearchRequest("dogs", top_k=2)))
    (retrieval,) = spans.named("retrieval")
    assert retrieval.attributes is not None and retrieval.attributes["chatclient.vector_store.result_count"] == len(got)
    assert len(spans.named("embeddings")) == 2  # the add and the query
    store.embedding_model = HashingEmbeddingModel(dimensions=8)
    with pytest.raises(ValueError, match="dimensions"):
        store.similarity_search("dogs")
    failed = spans.named("retrieval")[-1]
    assert failed.status.status_code is StatusCode.ERROR
