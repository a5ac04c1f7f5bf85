"""ETL for RAG: read documents, transform (split) them, write them to a vector store."""

from __future__ import annotations

from chatclient.rag.etl.directory import DirectoryReader
from chatclient.rag.etl.html import HtmlReader
from chatclient.rag.etl.pdf import PdfReader
from chatclient.rag.etl.pipeline import (
    DocumentPipeline,
    DocumentReader,
    DocumentTransformer,
    DocumentWriter,
    PipelineReport,
    content_id,
)
from chatclient.rag.etl.readers import JsonReader, MarkdownReader, TextReader, resolve_pointer
from chatclient.rag.etl.splitter import SimpleTokenEncoding, TokenEncoding, TokenTextSplitter, default_encoding

__all__ = [
    "DirectoryReader",
    "DocumentPipeline",
    "DocumentReader",
    "DocumentTransformer",
    "DocumentWriter",
    "HtmlReader",
    "JsonReader",
    "MarkdownReader",
    "PdfReader",
    "PipelineReport",
    "SimpleTokenEncoding",
    "TextReader",
    "TokenEncoding",
    "TokenTextSplitter",
    "content_id",
    "default_encoding",
    "resolve_pointer",
]
