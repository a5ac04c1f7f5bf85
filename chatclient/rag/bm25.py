"""Keyword retrieval: ``BM25DocumentRetriever`` ranks documents by BM25 over their words (extra ``rag``).

Vector search finds paraphrases; keyword search finds exact names, codes and rare words that an
embedding blurs. :class:`~chatclient.rag.hybrid.HybridDocumentRetriever` fuses the two.

    from chatclient.rag import BM25DocumentRetriever, Document, Query
    bm25 = BM25DocumentRetriever([Document("Error E1042 means the disk is full."), Document("Hello")])
    bm25.retrieve(Query("what is E1042?"))[0].text
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from chatclient.rag.documents import Document
from chatclient.rag.filters import Expression, as_expression
from chatclient.rag.filters.evaluator import compile_filter
from chatclient.rag.query import Query
from chatclient.rag.search import DEFAULT_TOP_K
from chatclient.request import ContextKeys

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_WORD = re.compile(r"\w+", re.UNICODE)

# A short English stop list: words that carry no retrieval signal and would only add noise to BM25.
ENGLISH_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "so",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
        "do",
        "does",
        "did",
        "can",
        "could",
        "should",
        "would",
        "may",
        "might",
        "must",
        "not",
        "no",
        "nor",
        "our",
        "we",
        "us",
        "he",
        "she",
        "him",
        "her",
        "them",
        "my",
        "me",
    ]
)

MAX_QUERY_CHARS = 10_000
"""Longer query texts are cut to this many characters before tokenizing (bounds the work per query)."""


def light_stem(word: str) -> str:
    """Strip the commonest English inflections (plural ``s``/``ies``, ``ing``, ``ed``), conservatively.

    Enough for "refunds" to match "refund"; not a full stemmer (install one and pass your own
    ``tokenizer`` for that). Words with digits or of 3 letters or fewer are left alone.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    if word.endswith("ing") and len(word) > 5:
        return word[:-3]
    if word.endswith("ed") and len(word) > 4:
        return word[:-2]
    return word


def tokenize(text: str, stopwords: frozenset[str] = ENGLISH_STOPWORDS) -> list[str]:
    """Lower-cased, lightly stemmed word tokens of ``text`` without stop words (the default tokenizer).

    >>> tokenize("What does E1042 mean for the refunds?")
    ['e1042', 'mean', 'refund']
    """
    return [light_stem(w) for w in _WORD.findall(text.lower()) if w not in stopwords]


def _require_bm25s() -> Any:
    try:
        import bm25s  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ImportError("BM25DocumentRetriever needs the 'bm25s' package: pip install 'chatclient[rag]'") from exc
    return bm25s


DocumentSource = Sequence[Document] | Iterable[Document] | Any


class BM25DocumentRetriever:
    """Ranks documents by BM25 (``bm25s``) and returns the best ``top_k``, each with its BM25 ``score``.

    ``documents_or_store`` is a sequence of documents, or a store that exposes its documents (a
    ``documents`` attribute or method, as :class:`~chatclient.rag.SimpleVectorStore` has). The index
    is built on construction; call :meth:`refresh` after the store changes (or :meth:`index` with
    new documents). Documents with no query word in common score 0 and are never returned.

    A filter expression (argument, or the query context under ``ContextKeys.FILTER_EXPRESSION``)
    restricts the candidates exactly, with the same grammar as the vector stores.
    ``tokenizer`` maps a text to its terms (default: lower-cased words without English stop words).
    """

    def __init__(
        self,
        documents_or_store: DocumentSource,
        *,
        top_k: int = DEFAULT_TOP_K,
        k1: float = 1.5,
        b: float = 0.75,
        filter_expression: Expression | str | None = None,
        tokenizer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        if documents_or_store is None:
            raise ValueError("documents_or_store cannot be None: pass a list of Documents or a vector store")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ValueError("top_k must be a positive int")
        if k1 < 0 or not 0.0 <= b <= 1.0:
            raise ValueError("k1 must be >= 0 and b in [0, 1]")
        self.source = documents_or_store
        self.top_k = top_k
        self.k1 = k1
        self.b = b
        self.tokenizer = tokenizer
        self._filter = as_expression(filter_expression)
        self._lock = threading.Lock()
        self._docs: list[Document] = []
        self._model: Any = None
        self.refresh()

    def __len__(self) -> int:
        return len(self._docs)

    def _source_documents(self) -> list[Document]:
        src = self.source
        docs = getattr(src, "documents", None)
        if docs is not None and not isinstance(src, (list, tuple)):
            items = docs() if callable(docs) else docs
        elif isinstance(src, Iterable) and not isinstance(src, (str, bytes)):
            items = src
        else:
            raise TypeError(
                f"cannot read documents from {type(src).__name__}: pass a list of Documents "
                "or a store with a 'documents' attribute"
            )
        out = list(items)
        for d in out:
            if not isinstance(d, Document):
                raise TypeError(f"expected Document objects, got {type(d).__name__}")
        return out

    def refresh(self) -> None:
        """Rebuild the index from ``documents_or_store`` (after the store changed)."""
        self.index(self._source_documents())

    def index(self, documents: Sequence[Document]) -> None:
        """Replace the index with ``documents`` (the last one wins when ids repeat)."""
        unique = list({d.id: d for d in documents}.values())
        model = None
        if unique:
            bm25s = _require_bm25s()
            # an empty token list breaks bm25s' vocabulary; a placeholder term matches no query word
            corpus = [self.tokenizer(d.text) or ["\x00"] for d in unique]
            model = bm25s.BM25(k1=self.k1, b=self.b)
            model.index(corpus, show_progress=False)
        with self._lock:
            self._docs, self._model = unique, model

    def _filter_for(self, query: Query | None, override: Expression | str | None) -> Expression | None:
        if override is not None:
            return as_expression(override)
        if query is not None:
            value = query.context.get(ContextKeys.FILTER_EXPRESSION)
            if value is not None and (not isinstance(value, str) or value.strip()):
                return as_expression(value)
        return self._filter

    def search(
        self, text: str, top_k: int | None = None, filter_expression: Expression | str | None = None
    ) -> list[Document]:
        """The ``top_k`` best documents for ``text`` (default: the retriever's ``top_k``), best first."""
        return self._search(text, top_k, self._filter_for(None, filter_expression))

    def _search(self, text: str, top_k: int | None, expr: Expression | None) -> list[Document]:
        import numpy as np

        k = self.top_k if top_k is None else top_k
        if k <= 0:
            return []
        with self._lock:
            docs, model = self._docs, self._model
        if model is None:
            return []
        terms = [t for t in self.tokenizer(text[:MAX_QUERY_CHARS]) if t in model.vocab_dict]
        if not terms:
            return []
        scores: NDArray[np.float32] = np.asarray(model.get_scores(terms), dtype=np.float32)
        if expr is not None:
            keep = compile_filter(expr)
            mask = np.fromiter((keep(d.metadata) for d in docs), dtype=bool, count=len(docs))
            scores = np.where(mask, scores, np.float32(0.0))
        hits = np.flatnonzero(scores > 0)
        if hits.size > k:
            hits = hits[np.argpartition(-scores[hits], k - 1)[:k]]
        # ties keep insertion order, so results are deterministic
        ordered = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), i))
        return [docs[i].with_score(float(scores[i])) for i in ordered]

    def retrieve(self, query: Query, *, top_k: int | None = None) -> list[Document]:
        """The best ``top_k`` documents for the query text (default: the retriever's), best first."""
        return self._search(query.text, top_k, self._filter_for(query, None))

    __call__ = retrieve

    def __repr__(self) -> str:
        return f"BM25DocumentRetriever(documents={len(self._docs)}, top_k={self.top_k})"
