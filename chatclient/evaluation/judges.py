"""Evaluators judged by a language model: relevancy, fact checking, answer correctness.

The judge answers with a typed verdict through ``entity()`` (never parsed from a YES/NO text):
``reasoning`` first, so the judge explains before it decides, then ``passed``, ``score`` and
``feedback``. A verdict that does not fit the schema is sent back by the structured-output
validation advisor with the problems listed; when it still does not fit, ``EvaluationError`` says so.

    judge = ChatClient.create(OpenAIChatModel("gpt-4o-mini"))
    result = RelevancyEvaluator(judge).evaluate(client.prompt("What is an advisor?").call())
    assert result.passed, result.reasoning
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field

from chatclient.errors import EvaluationError, OutputConversionError
from chatclient.evaluation.base import EvaluationRequest, EvaluationResult, require, to_request
from chatclient.options import ChatOptions

if TYPE_CHECKING:
    from chatclient.client import ChatClient


class Verdict(BaseModel):
    """The structured answer a judge model gives."""

    reasoning: str = Field(description="Why you reached the verdict, in one to three sentences.")
    passed: bool = Field(description="true when the answer meets the criterion, false otherwise.")
    score: float = Field(ge=0.0, le=1.0, description="How well the criterion is met, from 0.0 (not at all) to 1.0 (fully).")
    feedback: str = Field(default="", description="What would make the answer better; empty when nothing.")


def judge_client(judge: Any) -> ChatClient:
    """A ``ChatClient`` for ``judge``: a ChatClient is used as it is, a chat model is wrapped."""
    from chatclient.client import ChatClient

    if isinstance(judge, ChatClient):
        return judge
    if judge is None:
        raise ValueError("an LLM-judged evaluator needs a judge: a ChatModel or a ChatClient")
    return ChatClient.create(judge)


class LlmJudgeEvaluator:
    """Base of the model-judged evaluators: renders a task for the judge and reads its ``Verdict``.

    ``max_retries`` is how often a malformed verdict is sent back before ``EvaluationError``;
    ``threshold``, when set, decides ``passed`` from the score instead of the judge's own flag;
    ``options`` (e.g. ``ChatOptions(temperature=0.0)``) are sent with every judge call.
    Subclasses set ``name``, ``criterion`` (the system text) and implement ``task``.
    """

    name: str = "llm_judge"
    criterion: ClassVar[str] = ""

    def __init__(
        self, judge: Any, *, max_retries: int = 2, threshold: float | None = None, options: ChatOptions | None = None
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be 0 or more")
        if threshold is not None and not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0.0 and 1.0")
        self.judge = judge_client(judge)
        self.max_retries = max_retries
        self.threshold = threshold
        self.options = options

    def task(self, request: EvaluationRequest) -> str:
        """The user text sent to the judge for ``request``."""
        raise NotImplementedError

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Judge one answer; ``parts`` (question, answer, documents, reference) fill or override inputs."""
        request = to_request(response_or_request, **parts)
        return self._result(self._verdict(self.task(request)))

    async def aevaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Async ``evaluate`` (the judge is called with ``acall``)."""
        request = to_request(response_or_request, **parts)
        spec = self._spec(self.task(request)).acall()
        try:
            verdict: Verdict | None = await spec.entity(Verdict)
        except OutputConversionError as exc:
            raise self._malformed(exc) from exc
        return self._result(verdict)

    def _spec(self, task: str) -> Any:
        from advisors.validation import StructuredOutputValidationAdvisor

        spec = (
            self.judge.prompt()
            .system(self.criterion)
            .user(task)
            .advisors(StructuredOutputValidationAdvisor(Verdict, max_repeat_attempts=self.max_retries))
        )
        return spec.options(self.options) if self.options is not None else spec

    def _verdict(self, task: str) -> Verdict | None:
        try:
            verdict: Verdict | None = self._spec(task).call().entity(Verdict)
        except OutputConversionError as exc:
            raise self._malformed(exc) from exc
        return verdict

    def _malformed(self, exc: OutputConversionError) -> EvaluationError:
        return EvaluationError(
            f"{self.name}: the judge model did not return a valid verdict after {self.max_retries + 1} attempt(s) "
            f"({str(exc)[:300]}); use a stronger judge model, or raise max_retries"
        )

    def _result(self, verdict: Verdict | None) -> EvaluationResult:
        if verdict is None:
            raise EvaluationError(f"{self.name}: the judge model returned no verdict; check the judge model")
        passed = verdict.passed if self.threshold is None else verdict.score >= self.threshold
        return EvaluationResult(passed, verdict.score, verdict.reasoning.strip(), verdict.feedback.strip(), self.name)


def _documents_block(request: EvaluationRequest) -> str:
    if not request.documents:
        return "(no context documents)"
    return "\n\n".join(f"[{i}] {text}" for i, text in enumerate(request.documents, 1))


class RelevancyEvaluator(LlmJudgeEvaluator):
    """Does the answer address the question, staying consistent with the retrieved context?

    Needs the question (from a ``ChatClientResponse``'s context or a call spec, or ``question=``)
    and the answer; the documents come from the response context (QA/RAG advisors) or ``documents=``.
    """

    name = "relevancy"
    criterion = (
        "You grade answers given by an assistant. Criterion: RELEVANCE. An answer passes when it responds "
        "to what the user actually asked and, where context documents are given, agrees with them. "
        "An answer that is off-topic, evasive or contradicts the context fails. Return the verdict as JSON."
    )

    def task(self, request: EvaluationRequest) -> str:
        question = require(request.question, "the question", self.name, "pass the ChatClientResponse or call spec of a client call, or question='...'")
        answer = require(request.answer, "an answer", self.name, "the response has no text; pass answer='...'")
        return f"Question:\n{question}\n\nContext documents:\n{_documents_block(request)}\n\nAnswer to grade:\n{answer}"


class FactCheckingEvaluator(LlmJudgeEvaluator):
    """Is every claim of the answer supported by the documents? (Grounding, not general truth.)"""

    name = "fact_checking"
    criterion = (
        "You check claims against source documents. An answer passes only when every factual statement in "
        "it can be found in, or follows directly from, the documents. Knowledge outside the documents does "
        "not count as support. Return the verdict as JSON."
    )

    def task(self, request: EvaluationRequest) -> str:
        answer = require(request.answer, "an answer", self.name, "the response has no text; pass answer='...'")
        require(
            request.documents or None,
            "documents to check against",
            self.name,
            "use a QA/RAG advisor (its documents are read from the response) or pass documents=[...]",
        )
        return f"Documents:\n{_documents_block(request)}\n\nClaim to check:\n{answer}"


class AnswerCorrectnessEvaluator(LlmJudgeEvaluator):
    """Does the answer say the same thing as a reference answer (wording aside)?"""

    name = "answer_correctness"
    criterion = (
        "You compare an assistant's answer with a reference answer written by an expert. The answer passes "
        "when it states the same facts as the reference on the points the question asks about; wording, "
        "length and extra harmless detail do not matter, a contradiction or a missing key fact does. "
        "Return the verdict as JSON."
    )

    def task(self, request: EvaluationRequest) -> str:
        answer = require(request.answer, "an answer", self.name, "the response has no text; pass answer='...'")
        reference = require(
            request.reference, "a reference answer", self.name, "pass reference='...' or give the case an 'expected'"
        )
        question = request.question or "(not given)"
        return f"Question:\n{question}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{answer}"


__all__ = ["AnswerCorrectnessEvaluator", "FactCheckingEvaluator", "LlmJudgeEvaluator", "RelevancyEvaluator", "Verdict"]
