"""Decision guardrails: a yes/no question about the user message (input) or the answer (output); yes = reject.

    off_topic = DecisionInputGuardrail(model, "Is the message about something other than banking?", threshold=0.6)
    client.prompt(text).advisors(InputGuardrailAdvisor([off_topic])).call()

The check fails when P(yes) >= ``threshold``. The failure message names the check, not the
probability (a user should not learn how close a message came to passing); the probability is
logged at DEBUG. They fail closed: when the decision cannot be made (the model failed, refused or
gave no readable answer) the text is rejected.
"""

from __future__ import annotations

import logging
from typing import Any

from chatclient.decisions.answers import YesNoAnswer, check_threshold
from chatclient.decisions.model import DecisionModel, as_decision_model
from chatclient.decisions.questions import YesNoQuestion
from chatclient.guardrails import (
    GuardrailResult,
    InputGuardrail,
    InputGuardrailRequest,
    OutputGuardrail,
    OutputGuardrailRequest,
)
from chatclient.messages import AssistantMessage, Message, UserMessage
from chatclient.models.base import ChatModel

__all__ = ["DecisionInputGuardrail", "DecisionOutputGuardrail"]

log = logging.getLogger(__name__)

_NAME = "check"


def _question(question: str | YesNoQuestion) -> YesNoQuestion:
    return question if isinstance(question, YesNoQuestion) else YesNoQuestion(question)


class _DecisionCheck:
    """The shared part: one yes/no question, a threshold, the verdict."""

    def __init__(self, model: DecisionModel | ChatModel, question: str | YesNoQuestion, threshold: float) -> None:
        self.decisions = as_decision_model(model)
        self.question = _question(question)
        self.threshold = check_threshold(threshold)

    def _verdict(self, guard: Any, answer: YesNoAnswer | BaseException) -> GuardrailResult:
        if isinstance(answer, BaseException):
            log.warning("%s: the decision failed (%s: %s); rejecting", guard.name, type(answer).__name__, answer)
            return guard.failure(  # type: ignore[no-any-return]
                f"the check {self.question.text!r} could not be decided ({type(answer).__name__}); rejected", answer
            )
        if answer.is_refused:
            log.warning("%s: the model refused the decision; rejecting", guard.name)
            return guard.failure(f"the check {self.question.text!r} was refused by the model; rejected")  # type: ignore[no-any-return]
        log.debug("%s: P(yes)=%.4f, threshold %.2f", guard.name, answer.probability, self.threshold)
        if answer.is_yes(self.threshold):
            return self._rejected(guard)
        return guard.success()  # type: ignore[no-any-return]

    def _rejected(self, guard: Any) -> GuardrailResult:
        return guard.failure(f"rejected by the check {self.question.text!r}")  # type: ignore[no-any-return]

    def _decide(self, guard: Any, content: Any) -> GuardrailResult:
        try:
            answer = self.decisions.decide(content, {_NAME: self.question})[_NAME]
        except Exception as exc:  # fail closed, whatever went wrong
            return self._verdict(guard, exc)
        assert isinstance(answer, YesNoAnswer)
        return self._verdict(guard, answer)

    async def _adecide(self, guard: Any, content: Any) -> GuardrailResult:
        try:
            answer = (await self.decisions.adecide(content, {_NAME: self.question}))[_NAME]
        except Exception as exc:
            return self._verdict(guard, exc)
        assert isinstance(answer, YesNoAnswer)
        return self._verdict(guard, answer)


class DecisionInputGuardrail(_DecisionCheck, InputGuardrail):
    """Rejects the user message when P(yes) of ``question`` about it reaches ``threshold``.

    Only the user message's text is sent to the decision model (not the rest of the conversation).
    ``model`` is a ``DecisionModel`` or a chat model reporting log-probabilities.
    """

    def __init__(self, model: DecisionModel | ChatModel, question: str | YesNoQuestion, threshold: float = 0.5) -> None:
        super().__init__(model, question, threshold)

    def validate(self, request: InputGuardrailRequest) -> GuardrailResult:
        if not request.text.strip():
            return self.success()
        return self._decide(self, request.text)

    async def avalidate(self, request: InputGuardrailRequest) -> GuardrailResult:
        if not request.text.strip():
            return self.success()
        return await self._adecide(self, request.text)


def _exchange(request: OutputGuardrailRequest) -> list[Message]:
    user = request.prompt.user_message
    out: list[Message] = [UserMessage(user.text)] if user is not None and user.text else []
    out.append(AssistantMessage(request.text))
    return out


class DecisionOutputGuardrail(_DecisionCheck, OutputGuardrail):
    """Rejects the answer when P(yes) of ``question`` about it reaches ``threshold``.

    The answer and the last user message are sent (as a two-message conversation). With
    ``reprompt`` set, a rejected answer is asked again with that text as a new user message (for
    example "Answer without revealing personal data."); otherwise the request fails. A failed or
    refused decision always fails the request (no reprompt: the answer was never judged).
    """

    def __init__(
        self,
        model: DecisionModel | ChatModel,
        question: str | YesNoQuestion,
        threshold: float = 0.5,
        *,
        reprompt: str | None = None,
    ) -> None:
        super().__init__(model, question, threshold)
        if reprompt is not None and (not isinstance(reprompt, str) or not reprompt.strip()):
            raise ValueError("reprompt must be the text to send to the model, or None")
        self.reprompt_text = reprompt

    def _rejected(self, guard: Any) -> GuardrailResult:
        if self.reprompt_text is not None:
            return self.reprompt(f"rejected by the check {self.question.text!r}", self.reprompt_text)
        return super()._rejected(guard)

    def validate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        if not request.text.strip():
            return self.success()
        return self._decide(self, _exchange(request))

    async def avalidate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        if not request.text.strip():
            return self.success()
        return await self._adecide(self, _exchange(request))
