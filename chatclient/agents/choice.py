"""Choosing one of a few named candidates with a model: by probability where the model reports
token log-probabilities (the embedded model), else as a typed answer.

The supervisor's next agent and a routed ``conditional``'s branch are choices among names. A small
model asked to write the name (even under a grammar) often copies the first one it saw; read as a
``DecisionModel`` choice, the same model spends one forward pass and the answer is the candidate
whose label token is most probable — never a name that does not exist, never free text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from chatclient.errors import InvalidDecisionResponseError, OutputConversionError

CHOICE_TEMPLATE = """\
Agents:
{{ options }}

Request:
{{ input }}

Question: {{ question }}
{{ instruction }}"""
"""The user message of a choice among agents: the candidates first, then the request, so that the
request is what a small model read last (SmolLM2-135M: 9/10 named agents chosen, 7/10 with the
request first; ``benchmarks/agent_choices.py``)."""

if TYPE_CHECKING:
    from chatclient.client import ChatClient
    from chatclient.decisions.model import DecisionModel
    from chatclient.models.base import Usage


@dataclass(frozen=True)
class Candidate:
    """One option of a choice: its ``name`` and what it is for."""

    name: str
    description: str = ""

    def shown(self) -> str:
        return f"{self.name}: {self.description}" if self.description else self.name


@dataclass(frozen=True)
class Chosen:
    """The candidate chosen (its index), the probabilities when read from the model's log-probabilities
    (``None`` for a typed answer), and the usage of a typed answer's call."""

    index: int
    probabilities: tuple[float, ...] | None = None
    usage: Usage | None = None


def decides_by_probability(client: ChatClient, by_probability: bool | None) -> bool:
    """Whether choices on ``client``'s model are read from log-probabilities: ``by_probability``
    when given, else automatically on the embedded model (``LlamaCppChatModel``) reporting them."""
    from chatclient.decisions.model import supports_logprobs

    if by_probability is not None:
        return by_probability
    model = client.model
    return type(model).__name__ == "LlamaCppChatModel" and supports_logprobs(model)


class Chooser:
    """Asks ``client``'s model to choose among candidates (see the module docstring)."""

    def __init__(self, client: ChatClient, *, by_probability: bool | None = None, calibrate: bool = True) -> None:
        self.client = client
        self.by_probability = by_probability
        self.calibrate = calibrate
        self._decisions: DecisionModel | None = None

    @property
    def uses_probability(self) -> bool:
        """Whether this chooser reads log-probabilities (one forward pass, no free text)."""
        return decides_by_probability(self.client, self.by_probability)

    def _decision_model(self) -> DecisionModel:
        if self._decisions is None:
            from chatclient.decisions.model import DecisionModel

            # Calibrated: a small model leans towards some answer whatever it reads; the baseline for
            # a content-free input is asked once per question and removes that lean. The embedded
            # model reports up to 100 top tokens, which a choice by name needs (names may begin
            # with tokens outside the top 20).
            model = self.client.model
            top = 100 if type(model).__name__ == "LlamaCppChatModel" else 20
            self._decisions = DecisionModel(
                model, calibrate=self.calibrate, top_logprobs=top, question_template=CHOICE_TEMPLATE
            )
        return self._decisions

    def _question(self, question: str, candidates: Sequence[Candidate]) -> Any:
        from chatclient.decisions.questions import ChoiceQuestion

        # By name: a small model copies the name a request mentions far more readily than it maps
        # it to a letter (measured on SmolLM2-135M: 5/10 by name, 2/10 by letter, uncalibrated).
        return ChoiceQuestion(question, [c.shown() for c in candidates], by_name=True)

    def _from_answer(self, answer: Any, candidates: Sequence[Candidate]) -> Chosen:
        shown = [c.shown() for c in candidates]
        probabilities = tuple(answer.probability_of(s) for s in shown)
        return Chosen(shown.index(answer.value), probabilities)

    def _typed_target(self, candidates: Sequence[Candidate]) -> Any:
        return Literal[tuple(c.name for c in candidates)]  # type: ignore[valid-type]

    def _typed_text(self, text: str, question: str, candidates: Sequence[Candidate]) -> str:
        listing = "\n".join(f"- {c.shown()}" for c in candidates)
        return f"{text}\n\n{question}\nAnswer with one of these names:\n{listing}"

    def choose(self, text: str, question: str, candidates: Sequence[Candidate]) -> Chosen:
        """The candidate chosen for ``text``."""
        if len(candidates) == 1:
            return Chosen(0)
        if self.uses_probability:
            try:
                answers = self._decision_model().decide(text, {"choice": self._question(question, candidates)})
                return self._from_answer(answers["choice"], candidates)
            except InvalidDecisionResponseError:
                pass  # no label among the top tokens: ask for a typed answer instead
        response = self.client.prompt(self._typed_text(text, question, candidates)).call()
        return _typed(response.response_entity(self._typed_target(candidates)), candidates)

    async def achoose(self, text: str, question: str, candidates: Sequence[Candidate]) -> Chosen:
        """Async ``choose``."""
        if len(candidates) == 1:
            return Chosen(0)
        if self.uses_probability:
            try:
                answers = await self._decision_model().adecide(text, {"choice": self._question(question, candidates)})
                return self._from_answer(answers["choice"], candidates)
            except InvalidDecisionResponseError:
                pass
        response = self.client.prompt(self._typed_text(text, question, candidates)).acall()
        return _typed(await response.response_entity(self._typed_target(candidates)), candidates)


def _typed(answer: Any, candidates: Sequence[Candidate]) -> Chosen:
    names = [c.name for c in candidates]
    if answer.entity not in names:
        raise OutputConversionError(f"the model chose none of {names} (it answered {answer.entity!r})")
    return Chosen(names.index(answer.entity), None, _usage(answer.response))


def _usage(response: Any) -> Usage | None:
    return getattr(getattr(response, "metadata", None), "usage", None)


__all__ = ["CHOICE_TEMPLATE", "Candidate", "Chooser", "Chosen", "decides_by_probability"]
