"""Query augmenters put the retrieved documents into the query sent to the model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatclient.rag._llm import check_template, render
from chatclient.rag.documents import join_texts

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query


@runtime_checkable
class QueryAugmenter(Protocol):
    """Combines a query with retrieved documents into the text the model sees."""

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        """The query whose text the model will see."""
        ...


CONTEXT_TEMPLATE = """\
Context:
{{ context }}

Question: {{ query }}

Answer the question in one or two sentences, using only the context above."""
"""The query the model sees: the documents' text, the question, one short instruction (the shape
``QuestionAnswerAdvisor`` uses, measured on the bundled small model: see ``advisors.qa.DEFAULT_TEMPLATE``)."""

EMPTY_CONTEXT_TEMPLATE = """\
The user's query is outside the knowledge base you can draw on.
Tell the user politely that you cannot answer it."""


class ContextualQueryAugmenter:
    """Wraps the query and the documents' text in ``template`` (placeholders ``query``, ``context``).

    With no documents: when ``allow_empty_context`` is false (the default) the query becomes
    ``empty_context_template`` — telling the model not to answer from its own knowledge; when true,
    the query passes unchanged. Document text is inserted as data, never rendered as a template.
    """

    def __init__(
        self,
        allow_empty_context: bool = False,
        template: str = CONTEXT_TEMPLATE,
        empty_context_template: str = EMPTY_CONTEXT_TEMPLATE,
        document_formatter: Callable[[Sequence[Document]], str] = join_texts,
    ) -> None:
        self.allow_empty_context = allow_empty_context
        self.template = check_template(template, ("query", "context"))
        self.empty_context_template = check_template(empty_context_template, ())
        self.document_formatter = document_formatter

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        """The query to send to the model."""
        if not documents:
            if self.allow_empty_context:
                return query
            return query.mutate(text=render(self.empty_context_template, {}))
        context = self.document_formatter(documents)
        return query.mutate(text=render(self.template, {"query": query.text, "context": context}))

    __call__ = augment
