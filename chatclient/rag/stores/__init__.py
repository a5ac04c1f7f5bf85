"""Vector stores: the ``VectorStore`` protocol, the in-memory and SQLite stores; the stores on
engines (``PgVectorStore``, ``ChromaVectorStore``, ``RedisVectorStore``, ``QdrantVectorStore``)
load on first access, with their drivers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr
from chatclient.rag.stores.base import BaseVectorStore, VectorStore
from chatclient.rag.stores.simple import SimpleVectorStore
from chatclient.rag.stores.sqlite import SqliteVectorStore

if TYPE_CHECKING:
    from chatclient.rag.stores.chroma import ChromaVectorStore as ChromaVectorStore
    from chatclient.rag.stores.pgvector import PgVectorStore as PgVectorStore
    from chatclient.rag.stores.qdrant import QdrantVectorStore as QdrantVectorStore
    from chatclient.rag.stores.redis import RedisVectorStore as RedisVectorStore

_ENGINES = {
    "ChromaVectorStore": "chatclient.rag.stores.chroma",
    "PgVectorStore": "chatclient.rag.stores.pgvector",
    "QdrantVectorStore": "chatclient.rag.stores.qdrant",
    "RedisVectorStore": "chatclient.rag.stores.redis",
}

__all__ = ["BaseVectorStore", "SimpleVectorStore", "SqliteVectorStore", "VectorStore", *sorted(_ENGINES)]

__getattr__ = lazy_getattr("chatclient.rag.stores", _ENGINES, globals())
