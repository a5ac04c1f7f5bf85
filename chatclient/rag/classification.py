"""Text classification by embeddings: labels described by example texts, no model calls.

``EmbeddingModelTextClassifier(embedding_model, {Label.A: [examples...], ...})`` embeds the examples
once; ``classify(text)`` embeds the text and scores each label by how close the text is to that
label's examples — a blend of the mean and the best similarity, ``mean_to_max_score_ratio`` weighing
the mean — and returns the labels scoring at least ``min_score``, best first, at most
``max_results`` of them (LangChain4j's ``EmbeddingModelTextClassifier``, with its defaults: 1 result,
minimum score 0, ratio 0.5). Scores are relevance scores in [0, 1]: ``(cosine + 1) / 2``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from chatclient.rag.embedding import EmbeddingModel

L = TypeVar("L", bound=Hashable)

MAX_EXAMPLES = 10_000
"""The most example texts one classifier embeds."""


@dataclass(frozen=True, slots=True)
class ScoredLabel(Generic[L]):
    """A label and its score in [0, 1] (higher: closer to the label's examples)."""

    label: L
    score: float


class EmbeddingModelTextClassifier(Generic[L]):
    """Classifies texts into labels given by example texts (see the module's description)."""

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        examples_by_label: Mapping[L, Sequence[str]],
        *,
        max_results: int = 1,
        min_score: float = 0.0,
        mean_to_max_score_ratio: float = 0.5,
    ) -> None:
        if not callable(getattr(embedding_model, "embed", None)):
            raise TypeError(f"embedding_model must have embed(texts), got {type(embedding_model).__name__}")
        if not isinstance(examples_by_label, Mapping) or not examples_by_label:
            raise ValueError("examples_by_label needs at least one label with example texts")
        if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
            raise ValueError(f"max_results must be an integer >= 1, got {max_results!r}")
        for name, value in (("min_score", min_score), ("mean_to_max_score_ratio", mean_to_max_score_ratio)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
        labels: list[L] = []
        texts: list[str] = []
        owners: list[int] = []
        for label, examples in examples_by_label.items():
            if isinstance(examples, str) or not isinstance(examples, Sequence) or not examples:
                raise ValueError(f"label {label!r} needs a non-empty list of example texts")
            for text in examples:
                if not isinstance(text, str) or not text.strip():
                    raise ValueError(f"label {label!r} has an example that is not non-empty text: {text!r}")
                texts.append(text)
                owners.append(len(labels))
            labels.append(label)
        if len(texts) > MAX_EXAMPLES:
            raise ValueError(f"{len(texts)} example texts; at most {MAX_EXAMPLES} are embedded")
        self.embedding_model = embedding_model
        self.labels = tuple(labels)
        self.max_results = max_results
        self.min_score = float(min_score)
        self.mean_to_max_score_ratio = float(mean_to_max_score_ratio)
        self._owners = np.asarray(owners)
        self._examples = _normalised(np.asarray(embedding_model.embed(texts), dtype=np.float32))

    def classify_with_scores(self, text: str) -> list[ScoredLabel[L]]:
        """The labels that pass ``min_score`` with their scores, best first, at most ``max_results``."""
        return self._rank(self._embed(text))

    def classify(self, text: str) -> list[L]:
        """The labels of ``classify_with_scores``, without the scores."""
        return [s.label for s in self.classify_with_scores(text)]

    async def aclassify_with_scores(self, text: str) -> list[ScoredLabel[L]]:
        """Async ``classify_with_scores`` (the model's ``aembed`` when it has one)."""
        aembed = getattr(self.embedding_model, "aembed", None)
        if aembed is None:
            return self.classify_with_scores(text)
        _check_text(text)
        return self._rank(np.asarray(await aembed([text]), dtype=np.float32)[0])

    async def aclassify(self, text: str) -> list[L]:
        """Async ``classify``."""
        return [s.label for s in await self.aclassify_with_scores(text)]

    def _embed(self, text: str) -> NDArray[np.float32]:
        _check_text(text)
        vector: NDArray[np.float32] = np.asarray(self.embedding_model.embed([text]), dtype=np.float32)[0]
        return vector

    def _rank(self, vector: NDArray[np.float32]) -> list[ScoredLabel[L]]:
        norm = float(np.linalg.norm(vector))
        cosines = self._examples @ (vector / norm) if norm else np.zeros(len(self._owners))
        relevance = (np.clip(cosines, -1.0, 1.0) + 1.0) / 2.0
        ratio = self.mean_to_max_score_ratio
        scored = []
        for index, label in enumerate(self.labels):
            mine = relevance[self._owners == index]
            score = ratio * float(mine.mean()) + (1.0 - ratio) * float(mine.max())
            if score >= self.min_score:
                scored.append(ScoredLabel(label, score))
        scored.sort(key=lambda s: s.score, reverse=True)  # stable: ties keep the labels' order
        return scored[: self.max_results]

    def __repr__(self) -> str:
        return f"EmbeddingModelTextClassifier(labels={list(self.labels)!r}, max_results={self.max_results})"


def _check_text(text: str) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("classify() needs non-empty text")


def _normalised(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: NDArray[np.float32] = matrix / norms
    return out


__all__ = ["EmbeddingModelTextClassifier", "ScoredLabel"]
