"""The ``VectorStore`` contract and the machinery the built-in stores share.

A store embeds documents on ``add`` (through its ``EmbeddingModel``), finds the documents most
similar to a query on ``similarity_search`` (results carry ``score``, highest first), and deletes
by a list of ids or by a filter. Adding a document whose id is already stored replaces it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from chatclient.observation import observe_embedding, observe_retrieval, observed
from chatclient.rag.documents import Document
from chatclient.rag.embedding import aembed_with, as_matrix, check_texts, normalize_rows
from chatclient.rag.filters import Expression, as_expression
from chatclient.rag.search import SearchRequest, as_search_request

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel


@runtime_checkable
class VectorStore(Protocol):
    """What advisors and retrievers need from a vector store."""

    def add(self, documents: Sequence[Document]) -> None:
        """Embed and store documents; an existing id is replaced."""
        ...

    def delete(self, ids_or_filter: Sequence[str] | str | Expression) -> None:
        """Delete by a list of ids, or by filter text / expression."""
        ...

    def similarity_search(self, request: SearchRequest | str) -> list[Document]:
        """The most similar documents, ``score`` set, highest first."""
        ...


def resolve_delete(ids_or_filter: Sequence[str] | str | Expression) -> list[str] | Expression:
    """A list of ids, or a parsed filter. A bare string is filter text (pass ids as a list)."""
    if isinstance(ids_or_filter, (str, Expression)):
        expr = as_expression(ids_or_filter)
        if expr is None:
            raise ValueError("the filter expression to delete by cannot be blank")
        return expr
    if ids_or_filter is None:
        raise ValueError("ids_or_filter cannot be None")
    ids = list(ids_or_filter)
    for i in ids:
        if not isinstance(i, str):
            raise TypeError(f"document ids must be str, got {type(i).__name__}")
    return ids


def top_k(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """Indices of the ``k`` highest scores, best first (``argpartition``, then sort only those)."""
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.intp)
    part = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    # ties resolve by position so results are deterministic
    order = np.lexsort((part, -scores[part]))
    return part[order]


def dedupe_last(documents: Sequence[Document]) -> list[Document]:
    """Documents with unique ids; for a repeated id the last one wins (as a later add would)."""
    by_id: dict[str, Document] = {}
    for d in documents:
        if not isinstance(d, Document):
            raise TypeError(f"expected Document, got {type(d).__name__}")
        by_id.pop(d.id, None)
        by_id[d.id] = d
    return list(by_id.values())


class BaseVectorStore:
    """Embedding, batching and the async variants on top of two storage hooks.

    Subclasses implement ``_store(documents, vectors)`` (vectors are L2-normalised float32 rows),
    ``_query(vector, request)`` (returns scored documents, best first) and ``_delete(ids | filter)``.
    Set ``_blocking = True`` when the hooks do I/O, so async callers run them in a worker thread.
    """

    _blocking = False

    def __init__(self, embedding_model: EmbeddingModel, *, embed_batch_size: int = 256) -> None:
        if embedding_model is None:
            raise ValueError("embedding_model cannot be None")
        if embed_batch_size <= 0:
            raise ValueError("embed_batch_size must be positive")
        self.embedding_model = embedding_model
        self.embed_batch_size = embed_batch_size

    @property
    def name(self) -> str:
        """The store's name (its class name)."""
        return type(self).__name__

    # -- hooks ----------------------------------------------------------------------------------
    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        raise NotImplementedError

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        raise NotImplementedError

    def _delete(self, target: list[str] | Expression) -> None:
        raise NotImplementedError

    # -- embedding ------------------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        parts = []
        for batch in _batches(texts, self.embed_batch_size):
            with observed(observe_embedding(self.embedding_model, len(batch))) as done:
                parts.append(as_matrix(self.embedding_model.embed(batch), len(batch)))
                done(parts[-1])
        return normalize_rows(np.vstack(parts))

    async def _aembed(self, texts: list[str]) -> NDArray[np.float32]:
        parts = []
        for batch in _batches(texts, self.embed_batch_size):
            with observed(observe_embedding(self.embedding_model, len(batch))) as done:
                parts.append(await aembed_with(self.embedding_model, batch))
                done(parts[-1])
        return normalize_rows(np.vstack(parts))

    # -- the contract ---------------------------------------------------------------------------
    def add(self, documents: Sequence[Document]) -> None:
        """Embed and store ``documents`` (an existing id is replaced)."""
        docs = dedupe_last(documents)
        if docs:
            # embedding happens outside any store lock, so concurrent adds embed in parallel
            self._store(docs, self._embed(check_texts([d.text for d in docs])))

    def write(self, documents: Sequence[Document]) -> None:
        """Alias of :meth:`add`, so a store can end an ETL pipeline."""
        self.add(documents)

    def delete(self, ids_or_filter: Sequence[str] | str | Expression) -> None:
        """Delete by a list of ids (unknown ids are ignored) or by a filter (text or expression)."""
        self._delete(resolve_delete(ids_or_filter))

    def similarity_search(self, request: SearchRequest | str) -> list[Document]:
        """The ``top_k`` documents most similar to the query, with ``score`` set, highest first."""
        req = as_search_request(request)
        if req.top_k == 0:
            return []
        with observed(observe_retrieval(self, req)) as done:
            found = self._query(self._embed([req.query])[0], req)
            done(found)
        return found

    async def aadd(self, documents: Sequence[Document]) -> None:
        """Async :meth:`add` (uses the model's ``aembed``)."""
        docs = dedupe_last(documents)
        if docs:
            vectors = await self._aembed(check_texts([d.text for d in docs]))
            await self._run(self._store, docs, vectors)

    async def adelete(self, ids_or_filter: Sequence[str] | str | Expression) -> None:
        """Async :meth:`delete`."""
        await self._run(self._delete, resolve_delete(ids_or_filter))

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        """Async :meth:`similarity_search` (uses the model's ``aembed``)."""
        req = as_search_request(request)
        if req.top_k == 0:
            return []
        with observed(observe_retrieval(self, req)) as done:
            vector = (await self._aembed([req.query]))[0]
            result: list[Document] = await self._run(self._query, vector, req)
            done(result)
        return result

    async def _run(self, fn: Any, *args: Any) -> Any:
        if self._blocking:
            return await asyncio.to_thread(fn, *args)
        return fn(*args)


def _batches(texts: list[str], size: int) -> list[list[str]]:
    return [texts[i : i + size] for i in range(0, len(texts), size)]


async def asearch(store: Any, request: SearchRequest) -> list[Document]:
    """Search any store from async code: its ``asimilarity_search`` if it has one, else a worker thread."""
    fn = getattr(store, "asimilarity_search", None)
    if fn is not None:
        result: list[Document] = await fn(request)
        return result
    return list(await asyncio.to_thread(store.similarity_search, request))


async def aadd(store: Any, documents: Sequence[Document]) -> None:
    """Add to any store from async code: its ``aadd`` if it has one, else a worker thread."""
    fn = getattr(store, "aadd", None)
    if fn is not None:
        await fn(documents)
    else:
        await asyncio.to_thread(store.add, documents)
