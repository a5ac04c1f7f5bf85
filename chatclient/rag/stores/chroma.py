"""``ChromaVectorStore``: the VectorStore contract on a Chroma collection.

``pip install 'chatclient[chroma]'``. Works with any Chroma client: the default is an in-process
``EphemeralClient``; pass ``chromadb.PersistentClient(path)`` for a local database on disk or
``chromadb.HttpClient(host, port)`` for a Chroma server. Clients the store makes itself have
Chroma's anonymous telemetry switched off (``Settings(anonymized_telemetry=False)``); build yours
with the same setting (see :func:`chroma_settings`).

Each document keeps its full metadata as JSON under the key ``chatclient:metadata`` (so ``None``,
lists and nested values round-trip), plus a native copy of every string, number and boolean value
for Chroma's own filtering. The collection uses cosine distance; ``score`` is the cosine similarity.

Filters: Chroma answers ``==``/``IN`` on strings and booleans natively; everything else (``!=``,
``NIN``, ranges, ``NOT``, ``IS NULL``, numbers) is applied as an exact post-filter over an
over-fetched candidate list that grows (four times larger each round) until ``top_k`` matches are found or the
collection is exhausted — so results equal the in-memory store's, at the cost of reading more
candidates for very selective non-native filters. See :mod:`chatclient.rag.filters.chroma`.
"""

from __future__ import annotations

import json
import re
import threading
from typing import TYPE_CHECKING, Any

from chatclient.rag.documents import Document
from chatclient.rag.embedding import as_matrix, normalize_rows
from chatclient.rag.filters import Expression, evaluate
from chatclient.rag.filters.chroma import RESERVED_PREFIX, to_chroma_where
from chatclient.rag.filters.chroma import native_key as _native_key
from chatclient.rag.stores.base import BaseVectorStore

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

_METADATA = RESERVED_PREFIX + "metadata"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]\Z")
_FIRST_FETCH = 32
_GROWTH = 4
_PAGE = 1000


def _chromadb() -> Any:
    try:
        import chromadb
    except ImportError:
        raise ImportError("ChromaVectorStore needs chromadb: pip install 'chatclient[chroma]'") from None
    return chromadb


def chroma_settings(**overrides: Any) -> Any:
    """``chromadb.config.Settings`` with anonymous telemetry off (other settings as given)."""
    _chromadb()
    from chromadb.config import Settings

    return Settings(**{"anonymized_telemetry": False, **overrides})


class ChromaVectorStore(BaseVectorStore):
    """A vector store in a Chroma collection (created on first use, cosine distance).

    >>> store = ChromaVectorStore(HashingEmbeddingModel())                     # doctest: +SKIP
    >>> store = ChromaVectorStore(model, client=chromadb.PersistentClient("kb", settings=chroma_settings()))  # doctest: +SKIP
    """

    _blocking = True

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        *,
        client: Any = None,
        collection: str = "documents",
        embed_batch_size: int = 256,
    ) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        if not isinstance(collection, str) or not _NAME.match(collection):
            raise ValueError(
                "collection must be 3-512 characters from [A-Za-z0-9._-], starting and ending with a letter or "
                f"digit (Chroma's rule), got {collection!r}"
            )
        chromadb = _chromadb()
        if client is None:
            client = chromadb.EphemeralClient(settings=chroma_settings())
        self.client = client
        self.collection_name = collection
        self._lock = threading.RLock()
        self._collection: Any = None
        self._dimension: int | None = None

    # -- collection -----------------------------------------------------------------------------
    def _get(self, create: bool) -> Any:
        if self._collection is not None:
            return self._collection
        if create:
            col = self.client.get_or_create_collection(
                self.collection_name, embedding_function=None, configuration={"hnsw": {"space": "cosine"}}
            )
        else:
            try:
                col = self.client.get_collection(self.collection_name, embedding_function=None)
            except Exception:  # chromadb raises NotFoundError (a ValueError in older releases)
                return None
        self._collection = col
        return col

    def _stored_dimension(self, col: Any) -> int | None:
        if self._dimension is None:
            got = col.get(limit=1, include=["embeddings"])
            embeddings = got.get("embeddings")
            if embeddings is not None and len(embeddings) > 0:
                self._dimension = len(embeddings[0])
        return self._dimension

    def __len__(self) -> int:
        with self._lock:
            col = self._get(create=False)
            return 0 if col is None else int(col.count())

    def drop(self) -> None:
        """Delete the collection (all documents)."""
        with self._lock:
            if self._get(create=False) is not None:
                self.client.delete_collection(self.collection_name)
            self._collection = None
            self._dimension = None

    def _batch(self) -> int:
        try:
            return max(1, min(int(self.client.get_max_batch_size()), 5000))
        except Exception:  # an older client without the call
            return 1000

    # -- storage hooks --------------------------------------------------------------------------
    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        metadatas = [_to_chroma_metadata(d) for d in documents]
        dim = int(vectors.shape[1])
        with self._lock:
            col = self._get(create=True)
            stored = self._stored_dimension(col)
            if stored is not None and stored != dim:
                raise ValueError(f"embedding dimension changed: the collection holds {stored}-d vectors, got {dim}-d")
            step = self._batch()
            for i in range(0, len(documents), step):
                col.upsert(
                    ids=[d.id for d in documents[i : i + step]],
                    embeddings=vectors[i : i + step],
                    documents=[d.text for d in documents[i : i + step]],
                    metadatas=metadatas[i : i + step],
                )
            self._dimension = dim

    def _delete(self, target: list[str] | Expression) -> None:
        with self._lock:
            col = self._get(create=False)
            if col is None:
                return
            ids = self._matching_ids(col, target) if isinstance(target, Expression) else list(dict.fromkeys(target))
            step = self._batch()
            for i in range(0, len(ids), step):
                col.delete(ids=ids[i : i + step])

    def _matching_ids(self, col: Any, expr: Expression) -> list[str]:
        flt = to_chroma_where(expr)
        out: list[str] = []
        offset = 0
        while True:
            page = col.get(where=flt.where, limit=_PAGE, offset=offset, include=["metadatas"])
            for doc_id, md in zip(page["ids"], page["metadatas"], strict=True):
                if flt.exact or evaluate(expr, _from_chroma_metadata(md)):
                    out.append(doc_id)
            if len(page["ids"]) < _PAGE:
                return out
            offset += _PAGE

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        expr = request.filter_expression
        flt = to_chroma_where(expr) if expr is not None else None
        threshold = request.similarity_threshold
        with self._lock:
            col = self._get(create=False)
            if col is None:
                return []
            total = int(col.count())
            if total == 0:
                return []
            if self._stored_dimension(col) not in (None, vector.shape[0]):
                raise ValueError(
                    f"query embedding has {vector.shape[0]} dimensions, the collection holds {self._dimension}"
                )
            exact = flt is None or flt.exact
            n = min(total, request.top_k if exact else max(_FIRST_FETCH, request.top_k * _GROWTH))
            while True:
                got = col.query(
                    query_embeddings=[vector],
                    n_results=n,
                    where=None if flt is None else flt.where,
                    include=["documents", "metadatas", "distances"],
                )
                hits: list[Document] = []
                below = False
                for doc_id, text, md, dist in zip(
                    got["ids"][0], got["documents"][0], got["metadatas"][0], got["distances"][0], strict=True
                ):
                    score = 1.0 - float(dist)
                    if threshold > 0.0 and score < threshold:
                        below = True  # results come best first: nothing further can pass
                        break
                    metadata = _from_chroma_metadata(md)
                    if expr is None or exact or evaluate(expr, metadata):
                        hits.append(Document(text or "", metadata, id=doc_id, score=score))
                        if len(hits) == request.top_k:
                            break
                returned = len(got["ids"][0])
                if len(hits) >= request.top_k or below or exact:
                    return hits
                if returned < n or n >= total:
                    # HNSW is approximate: even asked for every vector it can miss some, so a rare
                    # post-filter match may never come back. Score the pre-filtered rest exactly.
                    return self._exact_post_filter(col, vector, request, flt)
                n = min(total, n * _GROWTH)

    def _exact_post_filter(
        self, col: Any, vector: NDArray[np.float32], request: SearchRequest, flt: Any
    ) -> list[Document]:
        """Brute-force cosine search over the documents Chroma's own ``where`` lets through, with the
        exact post-filter applied: the last resort of a filtered search (see ``_query``)."""
        import numpy as np  # chromadb needs numpy anyway; imported here like the store's other heavy parts

        expr = request.filter_expression
        assert expr is not None
        got = col.get(where=flt.where, include=["embeddings", "documents", "metadatas"])
        ids = got["ids"]
        if not ids:
            return []
        scores = normalize_rows(as_matrix(got["embeddings"])) @ normalize_rows(as_matrix(vector))[0]
        hits: list[Document] = []
        for i in np.argsort(-scores, kind="stable"):
            score = float(scores[i])
            if request.similarity_threshold > 0.0 and score < request.similarity_threshold:
                break
            metadata = _from_chroma_metadata(got["metadatas"][i])
            if evaluate(expr, metadata):
                hits.append(Document(got["documents"][i] or "", metadata, id=ids[i], score=score))
                if len(hits) == request.top_k:
                    break
        return hits


def _to_chroma_metadata(doc: Document) -> dict[str, Any]:
    metadata = dict(doc.metadata)
    try:
        blob = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata of document {doc.id!r} is not JSON (no NaN/infinity, no objects): {exc}") from None
    out: dict[str, Any] = {_METADATA: blob}
    for key, value in metadata.items():
        # native copies of scalars let Chroma pre-filter; None, lists and nested values live in the JSON only
        if isinstance(key, str) and _native_key(key) and isinstance(value, (str, bool, int, float)):
            if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
                continue  # Chroma stores 64-bit integers; the JSON copy keeps the exact value
            out[key] = value
    return out


def _from_chroma_metadata(md: Any) -> dict[str, Any]:
    if not md:
        return {}
    blob = md.get(_METADATA)
    if isinstance(blob, str):
        loaded = json.loads(blob)
        if isinstance(loaded, dict):
            return loaded
    # a record written by something else: its scalar metadata as Chroma holds it
    return {k: v for k, v in md.items() if not k.startswith(RESERVED_PREFIX)}
