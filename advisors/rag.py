"""``RetrievalAugmentationAdvisor``: modular RAG — transform, expand, retrieve (in parallel), join,
post-process, then augment the user message."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from advisors.qa import with_context_metadata
from chatclient.advisor import BaseAdvisor
from chatclient.events import DocumentsRetrieved
from chatclient.rag.augmenters import ContextualQueryAugmenter
from chatclient.rag.joiners import ConcatenationDocumentJoiner
from chatclient.rag.query import Query
from chatclient.rag.retrievers import aretrieve
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys

if TYPE_CHECKING:
    from chatclient.advisor import AdvisorChain
    from chatclient.rag.augmenters import QueryAugmenter
    from chatclient.rag.documents import Document
    from chatclient.rag.expanders import QueryExpander
    from chatclient.rag.joiners import DocumentJoiner
    from chatclient.rag.retrievers import DocumentPostProcessor, DocumentRetriever
    from chatclient.rag.transformers import QueryTransformer


class RetrievalAugmentationAdvisor(BaseAdvisor):
    """Runs the modular RAG flow on the last user message.

    1. ``Query(user text, history=all prompt messages, context=the request context)``;
    2. each of ``query_transformers`` in turn; 3. ``query_expander`` (or just the query);
    4. ``document_retriever`` for every query, in parallel (threads for blocking calls,
       ``asyncio.gather`` in async calls); 5. ``document_joiner``; 6. each post-processor in turn;
    7. ``query_augmenter`` builds the new user text. The final documents are put in the context
    and the response metadata under ``ContextKeys.DOCUMENT_CONTEXT``.
    """

    def __init__(
        self,
        document_retriever: DocumentRetriever,
        query_transformers: Sequence[QueryTransformer] = (),
        query_expander: QueryExpander | None = None,
        document_joiner: DocumentJoiner | None = None,
        document_post_processors: Sequence[DocumentPostProcessor] = (),
        query_augmenter: QueryAugmenter | None = None,
        max_workers: int = 4,
        order: int = 0,
    ) -> None:
        if document_retriever is None:
            raise ValueError("document_retriever cannot be None")
        if any(t is None for t in query_transformers):
            raise ValueError("query_transformers cannot contain None")
        if any(p is None for p in document_post_processors):
            raise ValueError("document_post_processors cannot contain None")
        if max_workers < 1:
            raise ValueError("max_workers must be at least 1")
        self.document_retriever = document_retriever
        self.query_transformers = tuple(query_transformers)
        self.query_expander = query_expander
        self.document_joiner = document_joiner or ConcatenationDocumentJoiner()
        self.document_post_processors = tuple(document_post_processors)
        self.query_augmenter = query_augmenter or ContextualQueryAugmenter()
        self.max_workers = max_workers
        self.order = order

    @staticmethod
    def _original_query(request: ChatClientRequest) -> Query:
        prompt = request.prompt
        return Query(prompt.user_message.text, history=prompt.messages, context=request.context)

    def _finish(
        self, request: ChatClientRequest, original: Query, retrieved: dict[Query, list[list[Document]]]
    ) -> ChatClientRequest:
        documents = self.document_joiner.join(retrieved)
        for processor in self.document_post_processors:
            documents = processor.process(original, documents)
        augmented = self.query_augmenter.augment(original, documents)
        prompt = request.prompt.augment_user_message(
            lambda u: type(u)(augmented.text, media=u.media, metadata=u.metadata)
        )
        return request.mutate(prompt=prompt, context={ContextKeys.DOCUMENT_CONTEXT: list(documents)})

    @staticmethod
    def _group(queries: list[Query], results: Sequence[list[Document]]) -> dict[Query, list[list[Document]]]:
        grouped: dict[Query, list[list[Document]]] = {}
        for q, docs in zip(queries, results, strict=True):
            # equal queries (e.g. a variant repeating the original) contribute one list each
            grouped.setdefault(q, []).append(docs)
        return grouped

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        original = self._original_query(request)
        query = original
        for transformer in self.query_transformers:
            query = transformer.transform(query)
        queries = self.query_expander.expand(query) if self.query_expander is not None else [query]
        if len(queries) == 1:
            results = [self.document_retriever.retrieve(queries[0])]
        else:
            with ThreadPoolExecutor(min(self.max_workers, len(queries)), thread_name_prefix="rag-retrieve") as pool:
                results = list(pool.map(self.document_retriever.retrieve, queries))
        return self._emit_documents(self._finish(request, original, self._group(queries, results)))

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        original = self._original_query(request)
        query = original
        for transformer in self.query_transformers:
            query = await _acall(transformer, "atransform", "transform", query)
        if self.query_expander is not None:
            queries: list[Query] = await _acall(self.query_expander, "aexpand", "expand", query)
        else:
            queries = [query]
        results = await asyncio.gather(*(aretrieve(self.document_retriever, q) for q in queries))
        # joiners and post-processors are CPU-light and user-supplied; run them in a thread in case they block
        finished = await asyncio.to_thread(self._finish, request, original, self._group(queries, results))
        return self._emit_documents(finished)

    def _emit_documents(self, request: ChatClientRequest) -> ChatClientRequest:
        request.emit(DocumentsRetrieved(tuple(request.context.get(ContextKeys.DOCUMENT_CONTEXT) or ()), self.name))
        return request

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        return with_context_metadata(response, ContextKeys.DOCUMENT_CONTEXT)


async def _acall(obj: Any, async_name: str, sync_name: str, arg: Any) -> Any:
    fn = getattr(obj, async_name, None)
    if fn is not None:
        return await fn(arg)
    return await asyncio.to_thread(getattr(obj, sync_name), arg)
