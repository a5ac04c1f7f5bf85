"""``RedisVectorStore``: the VectorStore contract on Redis with the search module (RediSearch).

``pip install 'chatclient[redis]'``. Needs a server with vector search and ``ismissing()``:
Redis 8 (search built in) or Redis Stack 7.4+ (RediSearch 2.10+). Plain Redis and Debian's
RediSearch 1.2 have no vector search; the store raises ``VectorStoreError`` saying so.

Each document is a hash under ``<prefix><id>`` with ``id``, ``text``, ``metadata`` (the full
metadata as JSON) and ``embedding`` (float32 bytes), plus one hash field per metadata key named in
``metadata_fields`` — the only keys filters can use, since RediSearch filters on declared
attributes (``"tag"`` for strings, ``"numeric"``, ``"bool"``; see
:mod:`chatclient.rag.filters.redis` for the translation and its limits). The index (HNSW or FLAT,
cosine / inner product / L2) is created on the first ``add``. ``score`` is the cosine similarity
(embeddings are L2-normalised before they are stored).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from chatclient.errors import VectorStoreError
from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression
from chatclient.rag.filters.redis import FIELD_KINDS, field_alias, to_redis_query
from chatclient.rag.stores.base import BaseVectorStore

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel
    from chatclient.rag.search import SearchRequest

Algorithm = Literal["hnsw", "flat"]
Distance = Literal["cosine", "inner_product", "l2"]

_METRIC = {"cosine": "COSINE", "inner_product": "IP", "l2": "L2"}
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}\Z")
_SEPARATOR = "\x1f"  # tag separator: a value holding it would be split, so such values are refused
_PAGE = 1000
_FIELD_PREFIX = "m:"


def _redis() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError("RedisVectorStore needs redis-py: pip install 'chatclient[redis]'") from None
    return redis


def vector_score(distance: str, value: float) -> float:
    """Cosine similarity from a RediSearch vector distance between unit vectors."""
    if distance == "l2":
        return 1.0 - value / 2.0  # RediSearch reports the squared Euclidean distance: |a-b|^2 = 2 - 2cos
    return 1.0 - value  # COSINE: 1 - cos; IP: 1 - dot, which is 1 - cos for unit vectors


class RedisVectorStore(BaseVectorStore):
    """A vector store in a RediSearch index over Redis hashes.

    >>> store = RedisVectorStore("redis://localhost:6379/0", HashingEmbeddingModel(),       # doctest: +SKIP
    ...                          metadata_fields={"topic": "tag", "year": "numeric"})
    """

    _blocking = True

    def __init__(
        self,
        url: str,
        embedding_model: EmbeddingModel,
        *,
        index: str = "documents",
        prefix: str | None = None,
        algorithm: Algorithm = "hnsw",
        distance: Distance = "cosine",
        metadata_fields: Mapping[str, str] | None = None,
        hnsw_m: int = 16,
        ef_construction: int = 200,
        ef_runtime: int = 10,
        embed_batch_size: int = 256,
        client: Any = None,
        socket_timeout: float = 30.0,
    ) -> None:
        super().__init__(embedding_model, embed_batch_size=embed_batch_size)
        if not _NAME.match(index):
            raise ValueError(f"index must be 1-128 characters from [A-Za-z0-9_.:-], got {index!r}")
        if algorithm not in ("hnsw", "flat"):
            raise ValueError(f"algorithm must be 'hnsw' or 'flat', got {algorithm!r}")
        if distance not in _METRIC:
            raise ValueError(f"distance must be one of {sorted(_METRIC)}, got {distance!r}")
        fields = dict(metadata_fields or {})
        for name, k in fields.items():
            if not isinstance(name, str) or not name:
                raise ValueError("metadata_fields keys must be non-empty strings")
            if k not in FIELD_KINDS:
                raise ValueError(f"metadata field kinds are {FIELD_KINDS}, got {k!r} for {name!r}")
        for name, value in (("hnsw_m", hnsw_m), ("ef_construction", ef_construction), ("ef_runtime", ef_runtime)):
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        redis = _redis()
        self.client = client if client is not None else redis.Redis.from_url(url, socket_timeout=socket_timeout)
        self.index_name = index
        self.prefix = prefix if prefix is not None else f"{index}:"
        self.algorithm = algorithm
        self.distance = distance
        self.metadata_fields = fields
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_runtime = ef_runtime
        self._lock = threading.RLock()
        self._dimension: int | None = None

    # -- index ----------------------------------------------------------------------------------
    def schema(self, dimension: int) -> list[str]:
        """The ``FT.CREATE`` arguments for this store's index (useful to create it by hand)."""
        args = [self.index_name, "ON", "HASH", "PREFIX", "1", self.prefix, "SCHEMA"]
        vector = ["TYPE", "FLOAT32", "DIM", str(dimension), "DISTANCE_METRIC", _METRIC[self.distance]]
        if self.algorithm == "hnsw":
            vector += ["M", str(self.hnsw_m), "EF_CONSTRUCTION", str(self.ef_construction)]
        args += ["embedding", "VECTOR", self.algorithm.upper(), str(len(vector)), *vector]
        for i, (name, k) in enumerate(self.metadata_fields.items()):
            args += [_FIELD_PREFIX + name, "AS", field_alias(i)]
            if k == "numeric":
                args += ["NUMERIC", "INDEXMISSING"]
            else:
                args += ["TAG", "SEPARATOR", _SEPARATOR, "CASESENSITIVE", "INDEXMISSING"]
        return args

    def _info_dimension(self) -> int | None:
        if self._dimension is not None:
            return self._dimension
        redis = _redis()
        try:
            info = self.client.execute_command("FT.INFO", self.index_name)
        except redis.ResponseError as exc:
            text = str(exc).lower()
            if "unknown command" in text:
                raise _no_search() from None
            if "unknown index" in text or "no such index" in text or "not found" in text:
                return None
            raise
        self._dimension = _dimension_from_info(info)
        return self._dimension

    def _create_index(self, dimension: int) -> None:
        redis = _redis()
        try:
            self.client.execute_command("FT.CREATE", *self.schema(dimension))
        except redis.ResponseError as exc:
            if "unknown command" in str(exc).lower():
                raise _no_search() from None
            if "already exists" not in str(exc).lower():
                raise VectorStoreError(f"FT.CREATE failed: {exc}", store="RedisVectorStore") from None
        self._dimension = dimension

    def drop(self) -> None:
        """Drop the index and delete its documents (``FT.DROPINDEX ... DD``)."""
        redis = _redis()
        with self._lock:
            try:
                self.client.execute_command("FT.DROPINDEX", self.index_name, "DD")
            except redis.ResponseError as exc:
                if "unknown command" in str(exc).lower():
                    raise _no_search() from None
            self._dimension = None

    # -- storage hooks --------------------------------------------------------------------------
    def _hash(self, doc: Document, vector: NDArray[np.float32]) -> dict[str, Any]:
        metadata = dict(doc.metadata)
        try:
            blob = json.dumps(metadata, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"metadata of document {doc.id!r} is not JSON (no NaN/infinity, no objects): {exc}"
            ) from None
        mapping: dict[str, Any] = {
            "id": doc.id,
            "text": doc.text,
            "metadata": blob,
            "embedding": np.ascontiguousarray(vector, dtype=np.float32).tobytes(),
        }
        for name, k in self.metadata_fields.items():
            value = metadata.get(name)
            if k == "tag" and isinstance(value, str) and value:
                if _SEPARATOR in value:
                    raise ValueError(f"metadata {name!r} of document {doc.id!r} holds \\x1f, the tag separator")
                mapping[_FIELD_PREFIX + name] = value
            elif k == "bool" and isinstance(value, bool):
                mapping[_FIELD_PREFIX + name] = "true" if value else "false"
            elif k == "numeric" and isinstance(value, (int, float)) and not isinstance(value, bool):
                mapping[_FIELD_PREFIX + name] = repr(float(value))
        return mapping

    def _store(self, documents: list[Document], vectors: NDArray[np.float32]) -> None:
        hashes = [(self.prefix + d.id, self._hash(d, v)) for d, v in zip(documents, vectors, strict=True)]
        dim = int(vectors.shape[1])
        with self._lock:
            stored = self._info_dimension()
            if stored is None:
                self._create_index(dim)
            elif stored != dim:
                raise ValueError(f"embedding dimension changed: the index holds {stored}-d vectors, got {dim}-d")
            pipe = self.client.pipeline(transaction=False)
            for key, mapping in hashes:
                pipe.delete(key)  # a replaced document must not keep fields it no longer has
                pipe.hset(key, mapping=mapping)
            pipe.execute()

    def _delete(self, target: list[str] | Expression) -> None:
        with self._lock:
            if isinstance(target, Expression):
                if self._info_dimension() is None:
                    return
                query = to_redis_query(target, self.metadata_fields)
                while True:
                    found = self.client.execute_command(
                        "FT.SEARCH", self.index_name, query, "NOCONTENT", "LIMIT", "0", str(_PAGE), "DIALECT", "2"
                    )
                    keys = list(found[1:])
                    # deleted hashes leave the index at once; a page deleting nothing would repeat forever
                    if not keys or not self.client.delete(*keys):
                        return
            else:
                for i in range(0, len(target), _PAGE):
                    chunk = target[i : i + _PAGE]
                    if chunk:
                        self.client.delete(*(self.prefix + d for d in chunk))

    def _query(self, vector: NDArray[np.float32], request: SearchRequest) -> list[Document]:
        where = "*"
        if request.filter_expression is not None:
            where = to_redis_query(request.filter_expression, self.metadata_fields)
        knn = f"=>[KNN $k @embedding $vec{' EF_RUNTIME $ef' if self.algorithm == 'hnsw' else ''} AS vector_distance]"
        params = ["k", str(request.top_k), "vec", np.ascontiguousarray(vector, dtype=np.float32).tobytes()]
        if self.algorithm == "hnsw":
            params += ["ef", str(max(self.ef_runtime, request.top_k))]
        with self._lock:
            dim = self._info_dimension()
            if dim is None:
                return []
            if vector.shape[0] != dim:
                raise ValueError(f"query embedding has {vector.shape[0]} dimensions, the index holds {dim}")
            found = self.client.execute_command(
                "FT.SEARCH", self.index_name, f"({where}){knn}",
                "PARAMS", str(len(params)), *params,
                "SORTBY", "vector_distance", "ASC",
                "RETURN", "4", "id", "text", "metadata", "vector_distance",
                "LIMIT", "0", str(request.top_k),
                "DIALECT", "2",
            )  # fmt: skip
        out = []
        for i in range(2, len(found), 2):
            fields = _pairs(found[i])
            score = vector_score(self.distance, float(fields["vector_distance"]))
            if request.similarity_threshold > 0.0 and score < request.similarity_threshold:
                continue
            out.append(Document(fields["text"], json.loads(fields["metadata"]), id=fields["id"], score=score))
        return out


def _pairs(flat: Any) -> dict[str, str]:
    items = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in flat]
    return dict(zip(items[::2], items[1::2], strict=True))


def _dimension_from_info(info: Any) -> int | None:
    """The vector attribute's ``dim`` from an ``FT.INFO`` reply (a flat list of names and values)."""

    def text(x: Any) -> str:
        return x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)

    pending = [info]
    while pending:
        item = pending.pop()
        if isinstance(item, (list, tuple)):
            for j, x in enumerate(item):
                if text(x).lower() == "dim" and j + 1 < len(item):
                    try:
                        return int(text(item[j + 1]))
                    except ValueError:
                        pass
            pending.extend(x for x in item if isinstance(x, (list, tuple)))
    return None


def _no_search() -> VectorStoreError:
    return VectorStoreError(
        "this Redis server has no vector search (FT.CREATE / FT.SEARCH are unknown commands); use Redis 8 or "
        "Redis Stack 7.4+ (RediSearch 2.10+)",
        store="RedisVectorStore",
    )
