"""Retrieval: find documents for a query; post-processors then rank, filter or compress them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatclient.rag.filters import Expression, as_expression
from chatclient.rag.query import Query
from chatclient.rag.search import DEFAULT_TOP_K, SIMILARITY_THRESHOLD_ACCEPT_ALL, SearchRequest
from chatclient.rag.stores.base import asearch
from chatclient.request import ContextKeys

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.stores.base import VectorStore


@runtime_checkable
class DocumentRetriever(Protocol):
    """Finds the documents relevant to a query."""

    def retrieve(self, query: Query) -> list[Document]:
        """The documents for ``query``, most relevant first."""
        ...


@runtime_checkable
class DocumentPostProcessor(Protocol):
    """Reorders, drops or rewrites retrieved documents (e.g. re-ranking, compression)."""

    def process(self, query: Query, documents: Sequence[Document]) -> list[Document]:
        """The documents to keep, in the order to use them."""
        ...


async def aretrieve(retriever: DocumentRetriever, query: Query) -> list[Document]:
    """``retriever.aretrieve`` when it has one, else ``retrieve`` in a worker thread."""
    fn = getattr(retriever, "aretrieve", None)
    if fn is not None:
        result: list[Document] = await fn(query)
        return result
    return list(await asyncio.to_thread(retriever.retrieve, query))


FilterSource = Expression | str | Callable[[], Expression | str | None] | None


class VectorStoreDocumentRetriever:
    """Retrieves from a vector store.

    ``filter_expression`` may be an expression, filter text, or a zero-argument callable evaluated
    on every retrieval (e.g. the current tenant). A filter in the query context — under
    :attr:`FILTER_EXPRESSION` (``"vector_store_filter_expression"``, Spring AI's key) or else
    ``ContextKeys.FILTER_EXPRESSION`` — replaces it for that request; blank values are ignored.
    """

    FILTER_EXPRESSION = "vector_store_filter_expression"

    def __init__(
        self,
        vector_store: VectorStore,
        top_k: int = DEFAULT_TOP_K,
        similarity_threshold: float = SIMILARITY_THRESHOLD_ACCEPT_ALL,
        filter_expression: FilterSource = None,
    ) -> None:
        if vector_store is None:
            raise ValueError("vector_store cannot be None")
        if top_k <= 0:
            raise ValueError("top_k must be greater than 0")
        if not 0.0 <= similarity_threshold <= 1.0:
            raise ValueError("similarity_threshold must be in [0, 1]")
        self.vector_store = vector_store
        self.top_k = top_k
        self.similarity_threshold = similarity_threshold
        # parse static text now so a typo fails at construction
        self._filter = filter_expression if callable(filter_expression) else as_expression(filter_expression)

    def _filter_for(self, query: Query) -> Expression | None:
        for key in (self.FILTER_EXPRESSION, ContextKeys.FILTER_EXPRESSION):
            value = query.context.get(key)
            if value is not None and (not isinstance(value, str) or value.strip()):
                return as_expression(value)
        source = self._filter() if callable(self._filter) else self._filter
        return as_expression(source)

    def _request(self, query: Query) -> SearchRequest:
        return SearchRequest(query.text, self.top_k, self.similarity_threshold, self._filter_for(query))

    def retrieve(self, query: Query) -> list[Document]:
        """The most similar documents, best first."""
        return self.vector_store.similarity_search(self._request(query))

    async def aretrieve(self, query: Query) -> list[Document]:
        """Async :meth:`retrieve` (the store's async search when it has one)."""
        return await asearch(self.vector_store, self._request(query))

    __call__ = retrieve
