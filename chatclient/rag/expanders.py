"""Query expansion: one query in, several out (retrieved in parallel, then joined)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chatclient.rag._llm import aask, as_client, ask, check_template, render
from chatclient.rag.query import Query

if TYPE_CHECKING:
    from chatclient.rag._llm import PromptingClient, PromptingClientBuilder


@runtime_checkable
class QueryExpander(Protocol):
    """Expands one query into several."""

    def expand(self, query: Query) -> list[Query]:
        """The queries to retrieve for."""
        ...

    async def aexpand(self, query: Query) -> list[Query]:
        """Async :meth:`expand`."""
        ...


MULTI_QUERY_TEMPLATE = """\
You help a search engine find more relevant information.
Write {{ number }} different versions of the query below. Each version should approach the topic
from another angle or stress another aspect, while keeping the original intent.

Reply with exactly {{ number }} lines, one query per line, and nothing else.

Original query: {{ query }}

Query versions:"""


class MultiQueryExpander:
    """Asks a model for ``number_of_queries`` variants of the query (one per line).

    With ``include_original`` (default) the original query comes first. If the model does not
    answer with exactly ``number_of_queries`` lines, only the original query is used.
    """

    def __init__(
        self,
        chat_client: PromptingClient | PromptingClientBuilder,
        number_of_queries: int = 3,
        include_original: bool = True,
        template: str = MULTI_QUERY_TEMPLATE,
    ) -> None:
        if chat_client is None:
            raise ValueError("chat_client cannot be None")
        if number_of_queries < 1:
            raise ValueError("number_of_queries must be at least 1")
        self.chat_client = as_client(chat_client)
        self.number_of_queries = number_of_queries
        self.include_original = include_original
        self.template = check_template(template, ("number", "query"))

    def _prompt(self, query: Query) -> str:
        return render(self.template, {"number": self.number_of_queries, "query": query.text})

    def _result(self, query: Query, answer: str | None) -> list[Query]:
        if answer is None:
            return [query]
        lines = answer.strip().split("\n")
        # a miscounted answer is more likely rambling than variants, so fall back to the original
        if len(lines) != self.number_of_queries:
            return [query]
        variants = [query.mutate(text=line.strip()) for line in lines if line.strip()]
        return [query, *variants] if self.include_original else variants

    def expand(self, query: Query) -> list[Query]:
        """The query variants (see the class docstring)."""
        return self._result(query, ask(self.chat_client, self._prompt(query)))

    async def aexpand(self, query: Query) -> list[Query]:
        """Async :meth:`expand`."""
        return self._result(query, await aask(self.chat_client, self._prompt(query)))

    __call__ = expand
