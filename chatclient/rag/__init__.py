"""Documents, embeddings, vector stores and the pieces of retrieval-augmented generation.

    from chatclient.rag import Document, SimpleVectorStore, SearchRequest, LocalEmbeddingModel
    store = SimpleVectorStore(LocalEmbeddingModel())
    store.add([Document("Paris is the capital of France.", {"lang": "en"})])
    store.similarity_search(SearchRequest("French capital", top_k=3, filter_expression="lang == 'en'"))

Names are imported on first use, so ``import chatclient.rag`` stays cheap; numpy loads with the
first store or embedding model (``import chatclient`` never loads it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr

if TYPE_CHECKING:
    from chatclient.rag.augmenters import ContextualQueryAugmenter as ContextualQueryAugmenter
    from chatclient.rag.augmenters import QueryAugmenter as QueryAugmenter
    from chatclient.rag.bm25 import BM25DocumentRetriever as BM25DocumentRetriever
    from chatclient.rag.classification import EmbeddingModelTextClassifier as EmbeddingModelTextClassifier
    from chatclient.rag.classification import ScoredLabel as ScoredLabel
    from chatclient.rag.documents import Document as Document
    from chatclient.rag.embedding import BaseEmbeddingModel as BaseEmbeddingModel
    from chatclient.rag.embedding import EmbeddingModel as EmbeddingModel
    from chatclient.rag.embedding import HashingEmbeddingModel as HashingEmbeddingModel
    from chatclient.rag.enrichers import KeywordMetadataEnricher as KeywordMetadataEnricher
    from chatclient.rag.enrichers import SummaryMetadataEnricher as SummaryMetadataEnricher
    from chatclient.rag.enrichers import SummaryType as SummaryType
    from chatclient.rag.etl import DirectoryReader as DirectoryReader
    from chatclient.rag.etl import DocumentPipeline as DocumentPipeline
    from chatclient.rag.etl import DocumentReader as DocumentReader
    from chatclient.rag.etl import DocumentTransformer as DocumentTransformer
    from chatclient.rag.etl import DocumentWriter as DocumentWriter
    from chatclient.rag.etl import HtmlReader as HtmlReader
    from chatclient.rag.etl import JsonReader as JsonReader
    from chatclient.rag.etl import MarkdownReader as MarkdownReader
    from chatclient.rag.etl import PdfReader as PdfReader
    from chatclient.rag.etl import TextReader as TextReader
    from chatclient.rag.etl import TokenTextSplitter as TokenTextSplitter
    from chatclient.rag.expanders import MultiQueryExpander as MultiQueryExpander
    from chatclient.rag.expanders import QueryExpander as QueryExpander
    from chatclient.rag.fts import SqliteFtsDocumentRetriever as SqliteFtsDocumentRetriever
    from chatclient.rag.hybrid import HybridDocumentRetriever as HybridDocumentRetriever
    from chatclient.rag.joiners import ConcatenationDocumentJoiner as ConcatenationDocumentJoiner
    from chatclient.rag.joiners import DocumentJoiner as DocumentJoiner
    from chatclient.rag.joiners import ReciprocalRankFusionJoiner as ReciprocalRankFusionJoiner
    from chatclient.rag.local_embedding import LocalEmbeddingModel as LocalEmbeddingModel
    from chatclient.rag.query import Query as Query
    from chatclient.rag.rerank import EmbeddingReranker as EmbeddingReranker
    from chatclient.rag.rerank import LlmReranker as LlmReranker
    from chatclient.rag.retrievers import DocumentPostProcessor as DocumentPostProcessor
    from chatclient.rag.retrievers import DocumentRetriever as DocumentRetriever
    from chatclient.rag.retrievers import VectorStoreDocumentRetriever as VectorStoreDocumentRetriever
    from chatclient.rag.routing import QueryRouter as QueryRouter
    from chatclient.rag.routing import Route as Route
    from chatclient.rag.search import SearchRequest as SearchRequest
    from chatclient.rag.stores import BaseVectorStore as BaseVectorStore
    from chatclient.rag.stores import SimpleVectorStore as SimpleVectorStore
    from chatclient.rag.stores import SqliteVectorStore as SqliteVectorStore
    from chatclient.rag.stores import VectorStore as VectorStore
    from chatclient.rag.stores.chroma import ChromaVectorStore as ChromaVectorStore
    from chatclient.rag.stores.pgvector import PgVectorStore as PgVectorStore
    from chatclient.rag.stores.qdrant import QdrantVectorStore as QdrantVectorStore
    from chatclient.rag.stores.redis import RedisVectorStore as RedisVectorStore
    from chatclient.rag.transformers import CompressionQueryTransformer as CompressionQueryTransformer
    from chatclient.rag.transformers import QueryTransformer as QueryTransformer
    from chatclient.rag.transformers import RewriteQueryTransformer as RewriteQueryTransformer
    from chatclient.rag.transformers import TranslationQueryTransformer as TranslationQueryTransformer
    from chatclient.rag.web_search import SearxngWebSearchEngine as SearxngWebSearchEngine
    from chatclient.rag.web_search import TavilyWebSearchEngine as TavilyWebSearchEngine
    from chatclient.rag.web_search import WebSearchContentRetriever as WebSearchContentRetriever
    from chatclient.rag.web_search import WebSearchEngine as WebSearchEngine
    from chatclient.rag.web_search import WebSearchRequest as WebSearchRequest
    from chatclient.rag.web_search import WebSearchResult as WebSearchResult

_WHERE = {
    "Document": "chatclient.rag.documents",
    "EmbeddingModel": "chatclient.rag.embedding",
    "BaseEmbeddingModel": "chatclient.rag.embedding",
    "HashingEmbeddingModel": "chatclient.rag.embedding",
    "LocalEmbeddingModel": "chatclient.rag.local_embedding",
    "SearchRequest": "chatclient.rag.search",
    "VectorStore": "chatclient.rag.stores",
    "BaseVectorStore": "chatclient.rag.stores",
    "SimpleVectorStore": "chatclient.rag.stores",
    "SqliteVectorStore": "chatclient.rag.stores",
    "QdrantVectorStore": "chatclient.rag.stores.qdrant",
    "PgVectorStore": "chatclient.rag.stores.pgvector",
    "ChromaVectorStore": "chatclient.rag.stores.chroma",
    "RedisVectorStore": "chatclient.rag.stores.redis",
    "Query": "chatclient.rag.query",
    "QueryTransformer": "chatclient.rag.transformers",
    "RewriteQueryTransformer": "chatclient.rag.transformers",
    "CompressionQueryTransformer": "chatclient.rag.transformers",
    "TranslationQueryTransformer": "chatclient.rag.transformers",
    "QueryExpander": "chatclient.rag.expanders",
    "MultiQueryExpander": "chatclient.rag.expanders",
    "DocumentRetriever": "chatclient.rag.retrievers",
    "DocumentPostProcessor": "chatclient.rag.retrievers",
    "VectorStoreDocumentRetriever": "chatclient.rag.retrievers",
    "DocumentJoiner": "chatclient.rag.joiners",
    "ConcatenationDocumentJoiner": "chatclient.rag.joiners",
    "ReciprocalRankFusionJoiner": "chatclient.rag.joiners",
    "QueryAugmenter": "chatclient.rag.augmenters",
    "ContextualQueryAugmenter": "chatclient.rag.augmenters",
    "DocumentReader": "chatclient.rag.etl",
    "DocumentTransformer": "chatclient.rag.etl",
    "DocumentWriter": "chatclient.rag.etl",
    "DocumentPipeline": "chatclient.rag.etl",
    "TextReader": "chatclient.rag.etl",
    "JsonReader": "chatclient.rag.etl",
    "MarkdownReader": "chatclient.rag.etl",
    "TokenTextSplitter": "chatclient.rag.etl",
    "PdfReader": "chatclient.rag.etl",
    "HtmlReader": "chatclient.rag.etl",
    "DirectoryReader": "chatclient.rag.etl",
    "BM25DocumentRetriever": "chatclient.rag.bm25",
    "HybridDocumentRetriever": "chatclient.rag.hybrid",
    "SqliteFtsDocumentRetriever": "chatclient.rag.fts",
    "EmbeddingReranker": "chatclient.rag.rerank",
    "LlmReranker": "chatclient.rag.rerank",
    "QueryRouter": "chatclient.rag.routing",
    "Route": "chatclient.rag.routing",
    "WebSearchContentRetriever": "chatclient.rag.web_search",
    "WebSearchEngine": "chatclient.rag.web_search",
    "WebSearchRequest": "chatclient.rag.web_search",
    "WebSearchResult": "chatclient.rag.web_search",
    "SearxngWebSearchEngine": "chatclient.rag.web_search",
    "TavilyWebSearchEngine": "chatclient.rag.web_search",
    "KeywordMetadataEnricher": "chatclient.rag.enrichers",
    "SummaryMetadataEnricher": "chatclient.rag.enrichers",
    "SummaryType": "chatclient.rag.enrichers",
    "EmbeddingModelTextClassifier": "chatclient.rag.classification",
    "ScoredLabel": "chatclient.rag.classification",
}

__all__ = sorted(_WHERE)


__getattr__ = lazy_getattr("chatclient.rag", _WHERE, globals())


def __dir__() -> list[str]:
    return __all__
