"""``DecisionQueryRouter``: route a query to the retrievers whose description fits it, by P(yes).

    router = DecisionQueryRouter(model, {hr_retriever: "HR policies: leave, benefits, expenses",
                                         wiki_retriever: "Engineering wiki: services, deployments"})
    router.route("How many vacation days do I have?")       # [hr_retriever]
    RetrievalAugmentationAdvisor(document_retriever=router)  # it is a DocumentRetriever too

One yes/no question per retriever ("could this source help?"); every retriever with
P(yes) >= ``min_probability`` is used, none for a query like "Hi!". When the decision fails, the
router follows ``fallback``: ``"none"`` (no retrieval, the default) or ``"all"``. Routing is not
access control: the query and the descriptions steer it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from chatclient.decisions.answers import YesNoAnswer, check_threshold
from chatclient.decisions.model import DecisionModel, as_decision_model
from chatclient.decisions.questions import YesNoQuestion
from chatclient.messages import AssistantMessage, Message, UserMessage
from chatclient.models.base import ChatModel

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query

__all__ = ["DEFAULT_ROUTING_QUESTION", "DecisionQueryRouter"]

log = logging.getLogger(__name__)

DEFAULT_ROUTING_QUESTION = (
    "Could this data source help answer the user's latest message? The source holds: {description}"
)
"""The question asked per retriever; ``{description}`` is replaced by the retriever's description."""


class DecisionQueryRouter:
    """Routes each query to the retrievers a decision model judges useful (see the module docstring).

    ``retrievers`` maps each retriever to its description (or is a sequence of such pairs);
    ``max_messages`` is how many of the latest user/assistant messages (the query included) the
    decision sees, so a follow-up like "and for contractors?" is understood; ``question`` replaces
    :data:`DEFAULT_ROUTING_QUESTION`. ``retrieve`` runs the chosen retrievers and fuses their lists
    by reciprocal rank fusion (k=60).
    """

    def __init__(
        self,
        model: DecisionModel | ChatModel,
        retrievers: Mapping[Any, str] | Sequence[tuple[Any, str]],
        *,
        min_probability: float = 0.5,
        fallback: Literal["none", "all"] = "none",
        max_messages: int = 3,
        question: str = DEFAULT_ROUTING_QUESTION,
    ) -> None:
        pairs = list(retrievers.items()) if isinstance(retrievers, Mapping) else list(retrievers)
        if not pairs:
            raise ValueError("retrievers cannot be empty: map each retriever to a description of what it holds")
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[1], str) and pair[1].strip()):
                raise ValueError("retrievers maps each retriever to a non-empty description string")
            if not callable(getattr(pair[0], "retrieve", None)):
                raise TypeError(f"{type(pair[0]).__name__} is not a retriever (it has no retrieve(query) method)")
        if fallback not in ("none", "all"):
            raise ValueError("fallback must be 'none' (no retrieval) or 'all' (every retriever)")
        if not isinstance(max_messages, int) or max_messages < 1:
            raise ValueError("max_messages must be an int >= 1")
        if "{description}" not in question:
            raise ValueError("question must contain {description}")
        self.decisions = as_decision_model(model)
        self.retrievers: tuple[tuple[Any, str], ...] = tuple(pairs)
        self.min_probability = check_threshold(min_probability, "min_probability")
        self.fallback = fallback
        self.max_messages = max_messages
        self.questions = {
            f"source_{i + 1}": YesNoQuestion(question.replace("{description}", d))
            for i, (_, d) in enumerate(self.retrievers)
        }

    def _input(self, query: Query | str) -> Any:
        if isinstance(query, str):
            return query
        if self.max_messages == 1 or not query.history:
            return query.text
        said: list[Message] = [
            m for m in query.history if isinstance(m, UserMessage) or (isinstance(m, AssistantMessage) and m.text)
        ]
        if said and isinstance(said[-1], UserMessage) and said[-1].text == query.text:
            said = said[:-1]
        return [*said[-(self.max_messages - 1) :], UserMessage(query.text)]

    def _chosen(self, answers: Mapping[str, Any]) -> list[Any]:
        out = []
        for (retriever, _), name in zip(self.retrievers, self.questions, strict=True):
            answer = answers[name]
            if answer.is_refused:
                raise ValueError(f"the model refused to judge {name}")
            assert isinstance(answer, YesNoAnswer)
            if answer.is_yes(self.min_probability):
                out.append(retriever)
        return out

    def _fallback(self, exc: BaseException) -> list[Any]:
        log.warning(
            "DecisionQueryRouter: the decision failed (%s: %s); fallback=%r", type(exc).__name__, exc, self.fallback
        )
        return [r for r, _ in self.retrievers] if self.fallback == "all" else []

    def route(self, query: Query | str) -> list[Any]:
        """The retrievers for ``query`` (possibly none), in the order given."""
        try:
            return self._chosen(self.decisions.decide(self._input(query), self.questions))
        except Exception as exc:
            return self._fallback(exc)

    async def aroute(self, query: Query | str) -> list[Any]:
        """Async :meth:`route` (the questions are asked concurrently)."""
        try:
            return self._chosen(await self.decisions.adecide(self._input(query), self.questions))
        except Exception as exc:
            return self._fallback(exc)

    def retrieve(self, query: Query) -> list[Document]:
        """Documents from the routed retrievers, fused (a ``DocumentRetriever``)."""
        from chatclient.rag.joiners import reciprocal_rank_fusion

        lists = [list(r.retrieve(query)) for r in self.route(query)]
        if not lists:
            return []
        return lists[0] if len(lists) == 1 else reciprocal_rank_fusion(lists)

    async def aretrieve(self, query: Query) -> list[Document]:
        """Async :meth:`retrieve` (the retrievers run concurrently)."""
        from chatclient.rag.joiners import reciprocal_rank_fusion
        from chatclient.rag.retrievers import aretrieve

        routed = await self.aroute(query)
        lists = [list(x) for x in await asyncio.gather(*(aretrieve(r, query) for r in routed))]
        if not lists:
            return []
        return lists[0] if len(lists) == 1 else reciprocal_rank_fusion(lists)

    __call__ = retrieve

    def __repr__(self) -> str:
        return f"DecisionQueryRouter({len(self.retrievers)} retrievers, fallback={self.fallback!r})"
