"""``DecisionScoringModel``: a segment's relevance score is P(yes) of "does this passage help answer the query?".

    scorer = DecisionScoringModel(model)
    scorer.score_all(["Paris is the capital of France.", "Bananas are yellow."], "capital of France")
    RetrievalAugmentationAdvisor(..., document_post_processors=[DecisionScoringModel(model, top_n=4)])

Segments are scored in groups of at most 20 (one ``decide()`` per group, one yes/no question per
segment, the query as the input); ``process`` makes it a reranking ``DocumentPostProcessor``. A
failed decision raises: a score that silently became 0 would reorder results without saying so.
A retrieved text can try to raise its own score ("answer yes"): treat scores like the text itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from chatclient.decisions.answers import YesNoAnswer
from chatclient.decisions.model import DecisionModel, as_decision_model
from chatclient.decisions.questions import MAX_TEXT_CHARS, YesNoQuestion
from chatclient.errors import RefusalError
from chatclient.models.base import ChatModel

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query

__all__ = ["DEFAULT_SCORING_QUESTION", "MAX_SEGMENTS_PER_REQUEST", "DecisionScoringModel"]

MAX_SEGMENTS_PER_REQUEST = 20
"""Segments scored per ``decide()`` call."""

DEFAULT_SCORING_QUESTION = "Does this passage help answer the query in the input?\nPassage: {segment}"
"""The question asked per segment; ``{segment}`` is replaced by the segment's text (cut to ``max_chars``)."""


def _text(segment: Any) -> str:
    text = getattr(segment, "text", segment)
    if not isinstance(text, str):
        raise TypeError(f"segments are strings or Documents, got {type(segment).__name__}")
    return text


class DecisionScoringModel:
    """Scores text segments against a query with a decision model (see the module docstring).

    ``model`` is a ``DecisionModel`` or a chat model reporting log-probabilities; each segment is
    cut to ``max_chars`` characters; ``question`` replaces :data:`DEFAULT_SCORING_QUESTION`.
    As a post-processor, ``top_n`` keeps the best n and ``min_score`` (0..1) drops weaker ones.
    """

    def __init__(
        self,
        model: DecisionModel | ChatModel,
        *,
        max_chars: int = 2000,
        question: str = DEFAULT_SCORING_QUESTION,
        top_n: int | None = None,
        min_score: float | None = None,
    ) -> None:
        if not isinstance(max_chars, int) or not 1 <= max_chars <= MAX_TEXT_CHARS - len(question):
            raise ValueError(f"max_chars must be between 1 and {MAX_TEXT_CHARS - len(question)}")
        if "{segment}" not in question:
            raise ValueError("question must contain {segment}")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise ValueError("top_n must be a positive int or None")
        self.decisions = as_decision_model(model)
        self.max_chars = max_chars
        self.question = question
        self.top_n = top_n
        self.min_score = min_score

    def _questions(self, segments: Sequence[Any]) -> dict[str, YesNoQuestion]:
        out = {}
        for i, s in enumerate(segments):
            text = _text(s)[: self.max_chars].strip() or "(empty)"
            out[f"segment_{i + 1}"] = YesNoQuestion(self.question.replace("{segment}", text))
        return out

    @staticmethod
    def _scores(answers: dict[str, Any]) -> list[float]:
        out = []
        for name, answer in answers.items():
            if answer.is_refused:
                raise RefusalError(answer.refusal, f"the model refused to score {name}: {answer.refusal[:200]}")
            assert isinstance(answer, YesNoAnswer)
            out.append(answer.probability)
        return out

    @staticmethod
    def _query(query: Query | str) -> str:
        return query if isinstance(query, str) else query.text

    def score_all(self, segments: Sequence[Any], query: Query | str) -> list[float]:
        """One score (P(yes), 0..1) per segment, in input order."""
        items = list(segments)
        out: list[float] = []
        for start in range(0, len(items), MAX_SEGMENTS_PER_REQUEST):
            group = items[start : start + MAX_SEGMENTS_PER_REQUEST]
            out.extend(self._scores(self.decisions.decide(self._query(query), self._questions(group))))
        return out

    async def ascore_all(self, segments: Sequence[Any], query: Query | str) -> list[float]:
        """Async :meth:`score_all`."""
        items = list(segments)
        out: list[float] = []
        for start in range(0, len(items), MAX_SEGMENTS_PER_REQUEST):
            group = items[start : start + MAX_SEGMENTS_PER_REQUEST]
            out.extend(self._scores(await self.decisions.adecide(self._query(query), self._questions(group))))
        return out

    def score(self, segment: Any, query: Query | str) -> float:
        """The score of one segment."""
        return self.score_all([segment], query)[0]

    def process(self, query: Query, documents: Sequence[Document]) -> list[Document]:
        """The documents rescored and sorted best first (a ``DocumentPostProcessor``)."""
        docs = list(documents)
        if not docs:
            return []
        scores = self.score_all(docs, query)
        order = sorted(range(len(docs)), key=lambda i: (-scores[i], i))
        out = [docs[i].with_score(scores[i]) for i in order]
        if self.min_score is not None:
            out = [d for d in out if (d.score or 0.0) >= self.min_score]
        return out[: self.top_n] if self.top_n is not None else out

    __call__ = process

    def __repr__(self) -> str:
        return f"DecisionScoringModel({self.decisions!r}, top_n={self.top_n})"
