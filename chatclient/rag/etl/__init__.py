"""ETL for RAG: read documents, transform (split) them, write them to a vector store."""

from __future__ import annotations

from chatclient.rag.etl.pipeline import DocumentPipeline, DocumentReader, DocumentTransformer, DocumentWriter
from chatclient.rag.etl.readers import JsonReader, MarkdownReader, TextReader, resolve_pointer
from chatclient.rag.etl.splitter import SimpleTokenEncoding, TokenEncoding, TokenTextSplitter, default_encoding

__all__ = [
    "DocumentPipeline",
    "DocumentReader",
    "DocumentTransformer",
    "DocumentWriter",
    "JsonReader",
    "MarkdownReader",
    "SimpleTokenEncoding",
    "TextReader",
    "TokenEncoding",
    "TokenTextSplitter",
    "default_encoding",
    "resolve_pointer",
]
