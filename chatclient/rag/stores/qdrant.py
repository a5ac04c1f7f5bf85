"""``QdrantVectorStore``: the VectorStore contract on Qdrant (``pip install qdrant-client``).

Works with any ``QdrantClient``: a server (``QdrantClient(url=...)``) or the embedded local mode
(``QdrantClient(path=...)`` / ``QdrantClient(":memory:")``), which is the default here. Points get
a UUID derived from the document id (Qdrant ids must be UUIDs or integers); the payload holds
``doc_id``, ``text`` and ``metadata``. Filters are translated to Qdrant's native filter with the
same semantics as the built-in stores; comparisons ``> >= < <=`` work on numbers only (Qdrant has
no string ranges) and keys containing ``.`` cannot be addressed (Qdrant reads them as paths) —
both raise ``FilterExpressionError``.
"""

from __future__ import annotations

import re
import threading
import uuid
from typing import TYPE_CHECKING, Any

from chatclient.errors import FilterExpressionError
from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression, Key, Op, Value
from chatclient.rag.filters.evaluator import kind
from chatclient.rag.stores.base import BaseVectorStore

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

_NAMESPACE = uuid.UUID("6f1c2b0e-8a55-4e4e-9d0a-6b1f2f6b7a10")
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")  # a path segment Qdrant reads without quotes


def _models() -> Any:
    try:
        from qdrant_client import models
    except ImportError:
        raise ImportError("QdrantVectorStore needs qdrant-client: pip install qdrant-client") from None
    return models


def point_id(doc_id: str) -> str:
    """The Qdrant point id for a document id (a stable UUID5)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


class _FilterTranslator:
    def __init__(self) -> None:
        self.m = _models()

    def field(self, key: Key) -> str:
        if "." in key.name or "[" in key.name:
            raise FilterExpressionError(
                f"The key {key.name!r} cannot be addressed in Qdrant (it reads '.' and '[' as a path)"
            )
        if _PLAIN_KEY.match(key.name):
            return f"metadata.{key.name}"
        if '"' in key.name:
            raise FilterExpressionError(
                f"The key {key.name!r} cannot be addressed in Qdrant (a path cannot quote '\"')"
            )
        # any other character (space, quote, punctuation) needs a quoted path segment
        return f'metadata."{key.name}"'

    def empty(self, key: Key) -> Any:
        return self.m.IsEmptyCondition(is_empty=self.m.PayloadField(key=self.field(key)))

    def eq(self, key: Key, v: Any) -> Any:
        m = self.m
        # Numbers compare by value (2 == 2.0, as in our evaluator); Qdrant's MatchValue is exact on type.
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return m.FieldCondition(key=self.field(key), range=m.Range(gte=v, lte=v))
        return m.FieldCondition(key=self.field(key), match=m.MatchValue(value=v))

    def any_eq(self, key: Key, values: tuple[Any, ...]) -> Any:
        m = self.m
        if not values:  # nothing matches: a key cannot be both empty and not empty
            return m.Filter(must=[self.empty(key)], must_not=[self.empty(key)])
        kinds = {type(v) for v in values}
        if kinds == {str}:
            return m.FieldCondition(key=self.field(key), match=m.MatchAny(any=list(values)))
        return m.Filter(should=[self.eq(key, v) for v in values])

    def translate(self, e: Expression) -> Any:
        m = self.m
        op = e.op
        # a whole chain is one flat list: recursion follows nesting, not the number of terms
        if op is Op.AND:
            return m.Filter(must=[self.translate(o) for o in e.operands()])
        if op is Op.OR:
            return m.Filter(should=[self.translate(o) for o in e.operands()])
        if op is Op.NOT:
            return m.Filter(must_not=[self.translate(e.left)])  # type: ignore[arg-type]
        key = e.left
        assert isinstance(key, Key)
        if op is Op.IS_NULL:
            return self.empty(key)
        if op is Op.IS_NOT_NULL:
            return m.Filter(must_not=[self.empty(key)])
        assert isinstance(e.right, Value)
        v = e.right.value
        if op is Op.EQ:
            return self.eq(key, v)
        if op is Op.NE:
            return m.Filter(must_not=[self.empty(key), self.eq(key, v)])
        if op is Op.IN:
            assert isinstance(v, tuple)
            return self.any_eq(key, v)
        if op is Op.NIN:
            assert isinstance(v, tuple)
            return m.Filter(must_not=[self.empty(key), self.any_eq(key, v)])
        if kind(v) != "number":
            raise FilterExpressionError(f"Qdrant compares numbers only with {op.value}; got {v!r}")
        bound = {Op.GT: "gt", Op.GTE: "gte", Op.LT: "lt", Op.LTE: "lte"}[op]
        return m.FieldCondition(key=self.field(key), range=m.Range(**{bound: v}))


def to_qdrant_filter(expr: Expression) -> Any:
    """A ``qdrant_client.models.Filter`` for ``expr``."""
    t = _FilterTranslator()
    out = t.translate(expr)
    return out if isinstance(out, t.m.Filter) else t.m.Filter(must=[out])


class QdrantVectorStore(BaseVectorStore):
    """A vector store in a Qdrant collection (cosine distance); the collection is created on first add."""

    _blocking = True

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        client: Any = None,
        *,
        collection_name: str = "chatclient_documents",
        embed_batch_size: int = 256,
    ) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        self._m = _models()
        if client is None:
            from qdrant_client import QdrantClient

            client = QdrantClient(":memory:")
        self.client = client
        self.collection_name = collection_name
        # the local mode is not safe for concurrent use; a server client does not mind the lock
        self._lock = threading.RLock()

    def _dimension(self) -> int | None:
        if not self.client.collection_exists(self.collection_name):
            return None
        params = self.client.get_collection(self.collection_name).config.params.vectors
        return int(params.size)

    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        m = self._m
        with self._lock:
            dim = self._dimension()
            if dim is None:
                self.client.create_collection(
                    self.collection_name,
                    vectors_config=m.VectorParams(size=vectors.shape[1], distance=m.Distance.COSINE),
                )
            elif dim != vectors.shape[1]:
                raise ValueError(
                    f"embedding dimension changed: the collection holds {dim}-d vectors, got {vectors.shape[1]}-d"
                )
            points = [
                m.PointStruct(
                    id=point_id(d.id),
                    vector=v.tolist(),
                    payload={"doc_id": d.id, "text": d.text, "metadata": dict(d.metadata)},
                )
                for d, v in zip(documents, vectors, strict=True)
            ]
            self.client.upsert(self.collection_name, points=points, wait=True)

    def _delete(self, target: list[str] | Expression) -> None:
        m = self._m
        with self._lock:
            if not self.client.collection_exists(self.collection_name):
                return
            if isinstance(target, Expression):
                selector = m.FilterSelector(filter=to_qdrant_filter(target))
            else:
                if not target:
                    return
                selector = m.PointIdsList(points=[point_id(i) for i in target])
            self.client.delete(self.collection_name, points_selector=selector, wait=True)

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        flt = to_qdrant_filter(request.filter_expression) if request.filter_expression is not None else None
        threshold = request.similarity_threshold
        with self._lock:
            if not self.client.collection_exists(self.collection_name):
                return []
            result = self.client.query_points(
                self.collection_name,
                query=vector.tolist(),
                query_filter=flt,
                limit=request.top_k,
                # Qdrant compares in its own precision; ask a hair lower and apply the exact cut below
                score_threshold=max(threshold - 1e-6, 0.0) if threshold > 0 else None,
                with_payload=True,
            )
        return [
            Document(p.payload["text"], p.payload.get("metadata") or {}, id=p.payload["doc_id"], score=float(p.score))
            for p in result.points
            if threshold <= 0 or p.score >= threshold
        ]
