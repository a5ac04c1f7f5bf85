"""``HybridDocumentRetriever``: vector search and keyword search fused by reciprocal rank fusion.

from chatclient.rag import BM25DocumentRetriever, HybridDocumentRetriever, SimpleVectorStore
store = SimpleVectorStore(embedding_model); store.add(documents)
retriever = HybridDocumentRetriever(vector_store=store, keyword_retriever=BM25DocumentRetriever(store))
advisor = RetrievalAugmentationAdvisor(document_retriever=retriever)
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from chatclient.rag.retrievers import DocumentRetriever, FilterSource, VectorStoreDocumentRetriever, aretrieve

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query
    from chatclient.rag.stores.base import VectorStore


class HybridDocumentRetriever:
    """Retrieves from a vector store and a keyword retriever, then fuses both rankings (RRF).

    Each side is asked for ``candidates`` documents (default ``4 * top_k``); a document scores
    ``weight / (k + rank)`` summed over the lists it appears in (rank from 1), and the ``top_k``
    best are returned with that fused score. Ranks, not raw scores, are fused, because cosine
    similarities and BM25 scores are not on one scale.

    ``vector_store`` may also be any :class:`~chatclient.rag.DocumentRetriever`.
    ``keyword_retriever`` defaults to a :class:`~chatclient.rag.BM25DocumentRetriever` over the
    store's documents (the store must expose them). A BM25 or SQLite FTS5 keyword retriever is
    asked for ``candidates`` documents; any other retriever returns what it returns. Filters in the query context reach both sides.
    """

    def __init__(
        self,
        *,
        vector_store: VectorStore | DocumentRetriever,
        keyword_retriever: DocumentRetriever | None = None,
        top_k: int = 4,
        candidates: int | None = None,
        k: int = 60,
        vector_weight: float = 1.0,
        keyword_weight: float = 1.0,
        filter_expression: FilterSource = None,
    ) -> None:
        if vector_store is None:
            raise ValueError("vector_store cannot be None")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ValueError("top_k must be a positive int")
        if candidates is not None and candidates < top_k:
            raise ValueError("candidates must be at least top_k")
        if k < 1:
            raise ValueError("k must be at least 1")
        if vector_weight < 0 or keyword_weight < 0 or vector_weight + keyword_weight == 0:
            raise ValueError("weights must be >= 0 and not both 0")
        self.top_k = top_k
        self.candidates = candidates if candidates is not None else 4 * top_k
        self.k = k
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight
        self.vector_retriever: DocumentRetriever
        if hasattr(vector_store, "similarity_search"):
            self.vector_retriever = VectorStoreDocumentRetriever(
                vector_store,  # type: ignore[arg-type]
                top_k=self.candidates,
                filter_expression=filter_expression,
            )
        elif isinstance(vector_store, DocumentRetriever):
            self.vector_retriever = vector_store
        else:
            raise TypeError(
                f"vector_store must be a VectorStore or DocumentRetriever, got {type(vector_store).__name__}"
            )
        if keyword_retriever is None:
            from chatclient.rag.bm25 import BM25DocumentRetriever

            keyword_retriever = BM25DocumentRetriever(vector_store, top_k=self.candidates)
        self.keyword_retriever = keyword_retriever

    def _keyword(self, query: Query) -> list[Document]:
        from chatclient.rag.bm25 import BM25DocumentRetriever
        from chatclient.rag.fts import SqliteFtsDocumentRetriever

        if isinstance(self.keyword_retriever, (BM25DocumentRetriever, SqliteFtsDocumentRetriever)):
            return self.keyword_retriever.retrieve(query, top_k=self.candidates)
        return list(self.keyword_retriever.retrieve(query))

    def _fuse(self, vector: list[Document], keyword: list[Document]) -> list[Document]:
        scores: dict[str, float] = {}
        first: dict[str, Document] = {}
        for weight, docs in ((self.vector_weight, vector), (self.keyword_weight, keyword)):
            for rank, d in enumerate(docs, start=1):
                scores[d.id] = scores.get(d.id, 0.0) + weight / (self.k + rank)
                first.setdefault(d.id, d)
        ranked = sorted(scores, key=lambda i: -scores[i])[: self.top_k]
        return [first[i].with_score(scores[i]) for i in ranked]

    def retrieve(self, query: Query) -> list[Document]:
        """The fused ``top_k`` documents, best first; both sides run concurrently."""
        with ThreadPoolExecutor(2, thread_name_prefix="hybrid-retrieve") as pool:
            vector = pool.submit(self.vector_retriever.retrieve, query)
            keyword = pool.submit(self._keyword, query)
            return self._fuse(list(vector.result()), keyword.result())

    async def aretrieve(self, query: Query) -> list[Document]:
        """Async :meth:`retrieve`."""
        vector, keyword = await asyncio.gather(
            aretrieve(self.vector_retriever, query), asyncio.to_thread(self._keyword, query)
        )
        return self._fuse(list(vector), keyword)

    __call__ = retrieve

    def __repr__(self) -> str:
        return f"HybridDocumentRetriever(top_k={self.top_k}, candidates={self.candidates}, k={self.k})"
