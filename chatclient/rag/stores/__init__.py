"""Vector stores: the ``VectorStore`` protocol, the in-memory and SQLite stores."""

from __future__ import annotations

from chatclient.rag.stores.base import BaseVectorStore, VectorStore
from chatclient.rag.stores.simple import SimpleVectorStore
from chatclient.rag.stores.sqlite import SqliteVectorStore

__all__ = ["BaseVectorStore", "SimpleVectorStore", "SqliteVectorStore", "VectorStore"]
