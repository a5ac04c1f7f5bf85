"""Metadata enrichers: a language model reads each document and writes keywords or summaries into
its metadata, for filtering, display or better retrieval (Spring AI's ``KeywordMetadataEnricher``
and ``SummaryMetadataEnricher``).

Both are ``DocumentTransformer``s (``transform(documents)``, async ``atransform``) usable in an
ingestion pipeline; they call the model through a ``ChatClient`` (give one with a low temperature).
Templates are jinja and are checked for their placeholders when the enricher is built.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from chatclient.rag._llm import aask, as_client, ask, check_template, render
from chatclient.rag.documents import Document

if TYPE_CHECKING:
    from chatclient.rag._llm import PromptingClient, PromptingClientBuilder

EXCERPT_KEYWORDS = "excerpt_keywords"
"""Metadata key of the keywords (one comma-separated string)."""
SECTION_SUMMARY = "section_summary"
PREV_SECTION_SUMMARY = "prev_section_summary"
NEXT_SECTION_SUMMARY = "next_section_summary"

KEYWORDS_TEMPLATE = """\
{{ document }}

List {{ keyword_count }} distinct keywords that describe the text above, separated by commas.
Reply with the keywords only.
Keywords:"""

SUMMARY_TEMPLATE = """\
The text of one section of a document:
{{ document }}

Summarise the main topics and the people, places and things this section is about.
Reply with the summary only.
Summary:"""


class KeywordMetadataEnricher:
    """Adds ``excerpt_keywords`` (comma-separated, as the model wrote them) to each document.

    ``keyword_count`` (default 5, at least 1) goes into the template as ``keyword_count``; a custom
    ``template`` needs the ``document`` placeholder. ``max_chars`` (default 1,000) bounds what is
    stored: a model that runs on keeps its first whole keywords that fit (metadata goes into every
    vector-store row and filter).
    """

    def __init__(
        self,
        chat_client: PromptingClient | PromptingClientBuilder,
        *,
        keyword_count: int = 5,
        template: str = KEYWORDS_TEMPLATE,
        max_chars: int = 1_000,
    ) -> None:
        if isinstance(keyword_count, bool) or not isinstance(keyword_count, int) or keyword_count < 1:
            raise ValueError(f"keyword_count must be an integer >= 1, got {keyword_count!r}")
        self.client = as_client(chat_client)
        self.keyword_count = keyword_count
        self.template = check_template(template, ("document",))
        self.max_chars = _check_max_chars(max_chars)

    def _prompt(self, document: Document) -> str:
        return render(self.template, {"document": document.text, "keyword_count": self.keyword_count})

    def _with(self, document: Document, answer: str | None) -> Document:
        kept: list[str] = []
        size = 0
        for keyword in (answer or "").split(","):
            keyword = keyword.strip()
            if not keyword:
                continue
            size += len(keyword) + (2 if kept else 0)
            if size > self.max_chars:
                break
            kept.append(keyword)
        return document.copy(metadata={**document.metadata, EXCERPT_KEYWORDS: ", ".join(kept)})

    def transform(self, documents: Sequence[Document]) -> list[Document]:
        """The documents, each with its keywords (one model call per document)."""
        return [self._with(d, ask(self.client, self._prompt(d))) for d in _checked(documents)]

    async def atransform(self, documents: Sequence[Document]) -> list[Document]:
        """Async ``transform``."""
        return [self._with(d, await aask(self.client, self._prompt(d))) for d in _checked(documents)]

    def __call__(self, documents: Sequence[Document]) -> list[Document]:
        return self.transform(documents)


class SummaryType(StrEnum):
    """Which summaries a document gets: its own, its predecessor's, its successor's."""

    PREVIOUS = "previous"
    CURRENT = "current"
    NEXT = "next"


class SummaryMetadataEnricher:
    """Summarises each document once and writes the summaries chosen by ``summary_types``:
    ``section_summary`` (its own), ``prev_section_summary`` (the document before it, not on the
    first) and ``next_section_summary`` (the one after it, not on the last).

    Documents are taken in the order given (the sections of one source, in reading order). A custom
    ``template`` needs the ``document`` placeholder. ``max_chars`` (default 4,000) bounds each stored
    summary: a longer answer is cut at a word boundary and ends with "…".
    """

    def __init__(
        self,
        chat_client: PromptingClient | PromptingClientBuilder,
        summary_types: Iterable[SummaryType | str] = (SummaryType.CURRENT,),
        *,
        template: str = SUMMARY_TEMPLATE,
        max_chars: int = 4_000,
    ) -> None:
        chosen = tuple(SummaryType(t) for t in summary_types)
        if not chosen:
            raise ValueError("summary_types needs at least one of PREVIOUS, CURRENT, NEXT")
        self.client = as_client(chat_client)
        self.summary_types = frozenset(chosen)
        self.template = check_template(template, ("document",))
        self.max_chars = _check_max_chars(max_chars)

    def _summary(self, answer: str | None) -> str:
        text = (answer or "").strip()
        if len(text) <= self.max_chars:
            return text
        cut = text[: self.max_chars - 1]
        space = cut.rfind(" ")
        return (cut[:space] if space > self.max_chars // 2 else cut).rstrip() + "…"

    def _prompt(self, document: Document) -> str:
        return render(self.template, {"document": document.text})

    def _apply(self, documents: Sequence[Document], summaries: Sequence[str]) -> list[Document]:
        out = []
        last = len(documents) - 1
        for i, document in enumerate(documents):
            added: dict[str, str] = {}
            if SummaryType.PREVIOUS in self.summary_types and i > 0:
                added[PREV_SECTION_SUMMARY] = summaries[i - 1]
            if SummaryType.CURRENT in self.summary_types:
                added[SECTION_SUMMARY] = summaries[i]
            if SummaryType.NEXT in self.summary_types and i < last:
                added[NEXT_SECTION_SUMMARY] = summaries[i + 1]
            out.append(document.copy(metadata={**document.metadata, **added}))
        return out

    def transform(self, documents: Sequence[Document]) -> list[Document]:
        """The documents with their summaries (one model call per document)."""
        docs = _checked(documents)
        return self._apply(docs, [self._summary(ask(self.client, self._prompt(d))) for d in docs])

    async def atransform(self, documents: Sequence[Document]) -> list[Document]:
        """Async ``transform``."""
        docs = _checked(documents)
        return self._apply(docs, [self._summary(await aask(self.client, self._prompt(d))) for d in docs])

    def __call__(self, documents: Sequence[Document]) -> list[Document]:
        return self.transform(documents)


def _check_max_chars(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 16:
        raise ValueError(f"max_chars must be an integer >= 16, got {value!r}")
    return value


def _checked(documents: Sequence[Document]) -> list[Document]:
    if isinstance(documents, (str, Document)):
        raise TypeError("pass a sequence of Documents, not a single one")
    docs = list(documents)
    for d in docs:
        if not isinstance(d, Document):
            raise TypeError(f"enrichers take Documents, not {type(d).__name__}")
    return docs


__all__ = [
    "EXCERPT_KEYWORDS",
    "NEXT_SECTION_SUMMARY",
    "PREV_SECTION_SUMMARY",
    "SECTION_SUMMARY",
    "KeywordMetadataEnricher",
    "SummaryMetadataEnricher",
    "SummaryType",
]
