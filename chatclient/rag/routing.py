"""``QueryRouter``: choose which retrievers serve a query, by rules or by asking a language model.

    router = QueryRouter(
        [Route(docs_retriever, "product documentation", when=r"\\b(install|configure|error)\\b"),
         Route(tickets_retriever, "past support tickets", when=lambda q: "ticket" in q.text.lower())],
        fallback="all",
    )
    advisor = RetrievalAugmentationAdvisor(document_retriever=router)

A router is itself a :class:`~chatclient.rag.DocumentRetriever`: it runs the chosen retrievers
(concurrently) and fuses their lists by reciprocal rank fusion. Routing is not access control.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from chatclient.errors import ChatClientError
from chatclient.patterns import IGNORECASE, LinearPattern
from chatclient.rag._llm import as_client, check_template, render
from chatclient.rag.joiners import reciprocal_rank_fusion
from chatclient.rag.retrievers import DocumentRetriever, aretrieve

if TYPE_CHECKING:
    from chatclient.models.base import Usage
    from chatclient.rag._llm import PromptingClient, PromptingClientBuilder
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query

log = logging.getLogger(__name__)

Condition = str | re.Pattern[str] | Callable[["Query"], bool]


@dataclass(frozen=True)
class Route:
    """One retriever the router may choose.

    ``description`` tells a language model what the retriever holds (needed for LLM routing).
    ``when`` is the rule for rule-based routing: a regular expression searched in the query text
    (case-insensitive when given as a string) or a function of the query. A route without ``when``
    is a *default* route: rule-based routing uses it when no rule matches (see ``fallback``).
    """

    retriever: DocumentRetriever
    description: str = ""
    when: Condition | None = None
    name: str = ""
    _matcher: Callable[[Query], bool] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.retriever is None:
            raise ValueError("a route needs a retriever")
        cond = self.when
        matcher: Callable[[Query], bool] | None
        if cond is None:
            matcher = None
        elif isinstance(cond, str):
            pattern = LinearPattern(cond, IGNORECASE)  # RE2: linear in the query, whatever it holds
            matcher = lambda q: pattern.search(q.text) is not None  # noqa: E731
        elif isinstance(cond, re.Pattern):
            matcher = lambda q: cond.search(q.text) is not None  # noqa: E731
        elif callable(cond):
            matcher = cond
        else:
            raise TypeError("when must be a regex string, a compiled pattern or a function of the query")
        object.__setattr__(self, "_matcher", matcher)

    def matches(self, query: Query) -> bool:
        """Whether the rule selects this route (False for a default route)."""
        return self._matcher is not None and bool(self._matcher(query))


ROUTING_TEMPLATE = """\
Choose the data sources that could contain the answer to the query. Sources:
{% for r in routes %}{{ loop.index }}: {{ r }}
{% endfor %}
Query: {{ query }}

Answer as JSON with the numbers of every useful source, or an empty list when none applies
(e.g. a greeting): {"sources": [numbers]}."""


@dataclass
class SourceChoice:
    """The model's answer: the numbers of the chosen sources (1-based)."""

    sources: list[int]


class QueryRouter:
    """Routes each query to some of ``routes`` and fuses their results (reciprocal rank fusion, k=60).

    Without ``chat_client`` the routing is rule-based: every route whose ``when`` matches. With
    ``chat_client`` a language model picks routes by their descriptions (one short call per
    query; ``max_history`` previous messages of the conversation are shown to it for context).
    An empty choice from the model means "no retrieval" (e.g. for "Hi!").

    ``fallback`` applies when the rules match nothing, or when the model call fails or answers
    with something unusable: ``"defaults"`` (routes without ``when``; for LLM routing, as
    ``"all"``), ``"all"`` routes, or ``"none"`` (no retrieval). ``top_k`` cuts the fused list.
    ``last_routes`` holds the names chosen for the latest query; ``usage`` sums LLM routing usage.
    """

    def __init__(
        self,
        routes: Sequence[Route | DocumentRetriever],
        *,
        chat_client: PromptingClient | PromptingClientBuilder | None = None,
        fallback: Literal["defaults", "all", "none"] = "defaults",
        top_k: int | None = None,
        k: int = 60,
        max_history: int = 2,
        template: str | None = None,
    ) -> None:
        if not routes:
            raise ValueError("routes cannot be empty")
        if fallback not in ("defaults", "all", "none"):
            raise ValueError("fallback must be 'defaults', 'all' or 'none'")
        if top_k is not None and top_k <= 0:
            raise ValueError("top_k must be positive or None")
        if k < 1:
            raise ValueError("k must be at least 1")
        self.routes: tuple[Route, ...] = tuple(
            r if isinstance(r, Route) else Route(r, name=f"route{i + 1}") for i, r in enumerate(routes)
        )
        self.routes = tuple(
            r if r.name else Route(r.retriever, r.description, r.when, name=f"route{i + 1}")
            for i, r in enumerate(self.routes)
        )
        self.chat_client = as_client(chat_client) if chat_client is not None else None
        if self.chat_client is not None and any(not r.description.strip() for r in self.routes):
            raise ValueError("LLM routing needs a description on every route")
        self.fallback = fallback
        self.top_k = top_k
        self.k = k
        self.max_history = max_history
        self.template = check_template(template or ROUTING_TEMPLATE, ("routes", "query"))
        self._lock = threading.Lock()
        self.usage: Usage | None = None
        self.last_routes: tuple[str, ...] = ()

    def _fallback(self) -> list[Route]:
        if self.fallback == "none":
            return []
        if self.fallback == "defaults" and self.chat_client is None:
            return [r for r in self.routes if r.when is None]
        return list(self.routes)

    def _history_text(self, query: Query) -> str:
        if self.max_history <= 0:
            return ""
        recent = [m for m in query.history if m.type.value in ("user", "assistant") and m.text][-self.max_history - 1 :]
        lines = [f"{m.type.value}: {(m.text or '')[:500]}" for m in recent if m.text != query.text]
        return "\n".join(lines[-self.max_history :])

    def _ask(self, query: Query) -> list[Route]:
        assert self.chat_client is not None
        history = self._history_text(query)
        text = query.text if not history else f"{query.text}\n\n(Earlier in the conversation:\n{history})"
        prompt = render(self.template, {"routes": [r.description for r in self.routes], "query": text})
        try:
            result = self.chat_client.prompt().user(prompt).call().response_entity(SourceChoice)
            if result.response is not None:
                with self._lock:
                    u = result.response.metadata.usage
                    self.usage = u if self.usage is None else self.usage + u
            choice = result.entity
            if not isinstance(choice, SourceChoice):
                raise ChatClientError("the model chose no sources")
        except Exception as exc:
            log.warning(
                "QueryRouter: routing by the model failed (%s: %s); using fallback=%r",
                type(exc).__name__,
                exc,
                self.fallback,
            )
            return self._fallback()
        chosen = sorted({n for n in choice.sources if isinstance(n, int) and 1 <= n <= len(self.routes)})
        if choice.sources and not chosen:  # numbers, but none valid: the answer is unusable
            log.warning(
                "QueryRouter: the model chose unknown sources %r; using fallback=%r", choice.sources, self.fallback
            )
            return self._fallback()
        return [self.routes[n - 1] for n in chosen]

    def select(self, query: Query) -> list[Route]:
        """The routes for ``query`` (possibly none), in declaration order."""
        if self.chat_client is not None:
            routes = self._ask(query)
        else:
            routes = [r for r in self.routes if r.matches(query)] or self._fallback()
        self.last_routes = tuple(r.name for r in routes)
        return routes

    def _fuse(self, lists: list[list[Document]]) -> list[Document]:
        fused = lists[0] if len(lists) == 1 else reciprocal_rank_fusion(lists, self.k)
        return fused[: self.top_k] if self.top_k is not None else list(fused)

    def retrieve(self, query: Query) -> list[Document]:
        """Documents from the routes chosen for ``query``, fused."""
        routes = self.select(query)
        if not routes:
            return []
        if len(routes) == 1:
            return self._fuse([list(routes[0].retriever.retrieve(query))])
        with ThreadPoolExecutor(len(routes), thread_name_prefix="route") as pool:
            lists = list(pool.map(lambda r: list(r.retriever.retrieve(query)), routes))
        return self._fuse(lists)

    async def aretrieve(self, query: Query) -> list[Document]:
        """Async :meth:`retrieve` (the model call runs in a worker thread)."""
        routes = await asyncio.to_thread(self.select, query)
        if not routes:
            return []
        lists = await asyncio.gather(*(aretrieve(r.retriever, query) for r in routes))
        return self._fuse([list(x) for x in lists])

    __call__ = retrieve

    def __repr__(self) -> str:
        mode = "llm" if self.chat_client is not None else "rules"
        return f"QueryRouter({[r.name for r in self.routes]}, mode={mode!r}, fallback={self.fallback!r})"
