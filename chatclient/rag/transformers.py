"""Pre-retrieval query transformers: each asks a language model to improve the query.

Use a ChatClient with a low temperature (e.g. 0.0). When the model answers with nothing, the
query passes through unchanged. Templates are jinja2; each checks its placeholders on construction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatclient.messages import AssistantMessage, UserMessage
from chatclient.rag._llm import aask, as_client, ask, check_template, render
from chatclient.rag.query import Query

if TYPE_CHECKING:
    from chatclient.rag._llm import PromptingClient, PromptingClientBuilder


@runtime_checkable
class QueryTransformer(Protocol):
    """Turns a query into a better one for retrieval."""

    def transform(self, query: Query) -> Query:
        """The improved query."""
        ...

    async def atransform(self, query: Query) -> Query:
        """Async :meth:`transform`."""
        ...


REWRITE_TEMPLATE = """\
Rewrite the user's query so that it retrieves the best results from a {{ target }}.
Drop anything irrelevant to the search and keep the query short and specific.
Reply with the rewritten query only.

Original query:
{{ query }}

Rewritten query:"""

COMPRESSION_TEMPLATE = """\
Below are a conversation and a follow-up query. Rewrite the follow-up as one standalone query
that carries whatever it needs from the conversation, is clear and specific, and keeps the
user's intent. Reply with the standalone query only.

Conversation:
{{ history }}

Follow-up query:
{{ query }}

Standalone query:"""

TRANSLATION_TEMPLATE = """\
Translate the user's query into {{ target_language }}.
If it is already in {{ target_language }}, or you cannot tell its language, repeat it unchanged.
Reply with the query only, without any explanation.

Original query: {{ query }}

Translated query:"""


class _LlmTransformer:
    _required: tuple[str, ...] = ()

    def __init__(self, chat_client: PromptingClient | PromptingClientBuilder, template: str) -> None:
        if chat_client is None:
            raise ValueError("chat_client cannot be None")
        self.chat_client = as_client(chat_client)
        self.template = check_template(template, self._required)

    def _variables(self, query: Query) -> dict[str, str]:
        raise NotImplementedError

    def _result(self, query: Query, answer: str | None) -> Query:
        if answer is None or not answer.strip():
            return query
        return query.mutate(text=answer.strip())

    def transform(self, query: Query) -> Query:
        """The transformed query (the input when the model gives no text)."""
        return self._result(query, ask(self.chat_client, render(self.template, self._variables(query))))

    async def atransform(self, query: Query) -> Query:
        """Async :meth:`transform`."""
        return self._result(query, await aask(self.chat_client, render(self.template, self._variables(query))))

    __call__ = transform


class RewriteQueryTransformer(_LlmTransformer):
    """Rewrites a verbose or ambiguous query for the target search system (placeholders ``target``, ``query``)."""

    _required = ("target", "query")

    def __init__(
        self,
        chat_client: PromptingClient | PromptingClientBuilder,
        *,
        target_search_system: str = "vector store",
        template: str = REWRITE_TEMPLATE,
    ) -> None:
        super().__init__(chat_client, template)
        if not target_search_system or not target_search_system.strip():
            raise ValueError("target_search_system cannot be empty")
        self.target_search_system = target_search_system

    def _variables(self, query: Query) -> dict[str, str]:
        return {"target": self.target_search_system, "query": query.text}


def format_history(query: Query) -> str:
    """User and assistant turns of the history as ``USER: ...`` / ``ASSISTANT: ...`` lines."""
    lines = []
    for m in query.history:
        if isinstance(m, UserMessage):
            lines.append(f"USER: {m.text}")
        elif isinstance(m, AssistantMessage) and m.text:
            lines.append(f"ASSISTANT: {m.text}")
    return "\n".join(lines)


class CompressionQueryTransformer(_LlmTransformer):
    """Folds the conversation history and a follow-up into one standalone query (``history``, ``query``)."""

    _required = ("history", "query")

    def __init__(self, chat_client: PromptingClient | PromptingClientBuilder, *, template: str = COMPRESSION_TEMPLATE) -> None:
        super().__init__(chat_client, template)

    def _variables(self, query: Query) -> dict[str, str]:
        return {"history": format_history(query), "query": query.text}


class TranslationQueryTransformer(_LlmTransformer):
    """Translates the query into ``target_language`` (placeholders ``target_language``, ``query``)."""

    _required = ("target_language", "query")

    def __init__(
        self, chat_client: PromptingClient | PromptingClientBuilder, *, target_language: str, template: str = TRANSLATION_TEMPLATE
    ) -> None:
        super().__init__(chat_client, template)
        if not target_language or not target_language.strip():
            raise ValueError("target_language cannot be empty")
        self.target_language = target_language

    def _variables(self, query: Query) -> dict[str, str]:
        return {"target_language": self.target_language, "query": query.text}
