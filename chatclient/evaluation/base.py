"""What every evaluator takes and returns: ``EvaluationRequest`` in, ``EvaluationResult`` out.

An evaluator accepts an ``EvaluationRequest`` or anything one can be built from: a
``ChatClientResponse`` (its answer, the question as the caller asked it — the client records it
under ``ContextKeys.USER_QUESTION`` before any advisor rewrites it — and the documents the QA/RAG
advisors put in its context), a call spec from ``client.prompt(...).call()``, or an AI-service
``Result``. Missing parts can be given as keyword arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from chatclient.errors import EvaluationError
from chatclient.models.base import ChatResponse
from chatclient.request import ChatClientResponse, ContextKeys

_EMPTY: Mapping[str, Any] = MappingProxyType({})

_MAX_TEXT = 20_000
"""Characters of an answer, question or document that an evaluator looks at (and a judge is sent)."""


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """The verdict of one evaluator on one answer.

    ``passed`` says whether the answer is acceptable; ``score`` grades it from 0.0 to 1.0;
    ``reasoning`` explains the verdict; ``feedback`` says what would make the answer better (empty
    when there is nothing to improve). ``evaluator`` names who judged.

    >>> EvaluationResult(True, 1.0, "the answer names Paris", "").passed
    True
    """

    passed: bool
    score: float
    reasoning: str
    feedback: str = ""
    evaluator: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.score, (int, float)) or isinstance(self.score, bool):
            raise TypeError("score must be a number between 0.0 and 1.0")
        if not 0.0 <= float(self.score) <= 1.0:
            raise ValueError(f"score must be between 0.0 and 1.0, got {self.score}")
        object.__setattr__(self, "score", float(self.score))
        object.__setattr__(self, "passed", bool(self.passed))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)) if self.metadata else _EMPTY)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return {
            "evaluator": self.evaluator,
            "passed": self.passed,
            "score": self.score,
            "reasoning": self.reasoning,
            "feedback": self.feedback,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationResult:
        """The inverse of ``to_dict``."""
        return cls(
            bool(data.get("passed")),
            float(data.get("score", 0.0)),
            str(data.get("reasoning", "")),
            str(data.get("feedback", "")),
            str(data.get("evaluator", "")),
        )


@dataclass(frozen=True, slots=True)
class EvaluationRequest:
    """Everything an evaluator may look at for one answer.

    ``question`` is what the user asked, ``answer`` what the model said, ``documents`` the context
    it was given (texts), ``reference`` the expected answer of a dataset case, ``response`` the whole
    ``ChatClientResponse`` when there is one (for tool calls and usage) and ``entity`` a converted
    value when the caller has one.
    """

    question: str | None = None
    answer: str | None = None
    documents: tuple[str, ...] = ()
    reference: Any = None
    response: ChatClientResponse | None = None
    entity: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "documents", tuple(str(d) for d in self.documents))

    @property
    def tool_executions(self) -> tuple[Any, ...]:
        """The tool calls the tool loop ran for the response (empty without a response)."""
        return self.response.tool_executions if self.response is not None else ()


@runtime_checkable
class Evaluator(Protocol):
    """Anything with ``evaluate(response_or_request) -> EvaluationResult`` and a ``name``."""

    name: str

    def evaluate(self, response_or_request: Any, **parts: Any) -> EvaluationResult:
        """Judge one answer."""
        ...


def document_texts(documents: Any) -> tuple[str, ...]:
    """The texts of documents held in a context: ``Document`` objects, strings or dicts with ``text``."""
    if documents is None:
        return ()
    if isinstance(documents, (str, bytes)):
        return (str(documents),)
    out: list[str] = []
    for doc in list(documents)[:1000]:
        text = getattr(doc, "text", None)
        if text is None and isinstance(doc, Mapping):
            text = doc.get("text")
        if text is None and isinstance(doc, str):
            text = doc
        if isinstance(text, str) and text.strip():
            out.append(text)
    return tuple(out)


def _response_text(response: ChatClientResponse) -> str | None:
    chat = response.chat_response
    return chat.text if chat is not None else None


def _question_of(response: ChatClientResponse) -> str | None:
    """The question as the caller asked it, which the client records in the context (``USER_QUESTION``)."""
    question = response.context.get(ContextKeys.USER_QUESTION)
    return question if isinstance(question, str) and question.strip() else None


def _documents_of(response: ChatClientResponse) -> tuple[str, ...]:
    context = response.context
    for key in (ContextKeys.RETRIEVED_DOCUMENTS, ContextKeys.DOCUMENT_CONTEXT):
        if key in context:
            return document_texts(context[key])
    return ()


def to_request(
    response_or_request: Any,
    *,
    question: str | None = None,
    answer: str | None = None,
    documents: Sequence[Any] | None = None,
    reference: Any = None,
    entity: Any = None,
) -> EvaluationRequest:
    """Build an ``EvaluationRequest`` from what a caller has; keyword arguments fill or override parts.

    Accepted: an ``EvaluationRequest``, a ``ChatClientResponse`` (the question is read from its
    context, ``ContextKeys.USER_QUESTION``: the user text before any advisor changed it) or
    ``ChatResponse``, a call spec (``client.prompt(q).call()``), an
    AI service's ``Result`` (its value, sources and tool calls), or a plain answer string.
    """
    base: EvaluationRequest
    item = response_or_request
    if isinstance(item, EvaluationRequest):
        base = item
    elif isinstance(item, ChatClientResponse):
        base = EvaluationRequest(
            question=_question_of(item), answer=_response_text(item), documents=_documents_of(item), response=item
        )
    elif isinstance(item, str):
        base = EvaluationRequest(answer=item)
    elif callable(getattr(item, "chat_client_response", None)) and hasattr(item, "request"):
        cr = item.chat_client_response()
        if not isinstance(cr, ChatClientResponse):
            raise TypeError("evaluate() takes a blocking call spec (prompt(...).call()), not a stream spec")
        user = _question_of(cr) or item.request.prompt.user_message.text
        base = EvaluationRequest(question=user, answer=_response_text(cr), documents=_documents_of(cr), response=cr)
    elif isinstance(getattr(item, "response", None), ChatClientResponse):
        value = getattr(item, "value", None)
        base = to_request(item.response, entity=value)
    elif hasattr(item, "value") and hasattr(item, "sources"):
        base = _from_service_result(item)
    elif isinstance(item, ChatResponse):
        base = EvaluationRequest(answer=item.text, response=ChatClientResponse(item))
    elif item is None:
        base = EvaluationRequest()
    else:
        raise TypeError(
            "evaluate() takes an EvaluationRequest, a ChatClientResponse, a call spec (client.prompt(...).call()) "
            f"or an answer string, got {type(item).__name__}"
        )
    return EvaluationRequest(
        question=_bounded(question if question is not None else base.question),
        answer=_bounded(answer if answer is not None else base.answer),
        documents=tuple(_bounded(d) or "" for d in (document_texts(documents) if documents is not None else base.documents)),
        reference=reference if reference is not None else base.reference,
        response=base.response,
        entity=entity if entity is not None else base.entity,
    )


def _from_service_result(result: Any) -> EvaluationRequest:
    """An AI service's ``Result``: its value, sources and tool calls, and the answer text."""
    import json

    value = result.value
    chat = result.response if isinstance(result.response, ChatResponse) else None
    if isinstance(value, str):
        answer: str | None = value
    elif chat is not None and chat.text is not None:
        answer = chat.text
    else:
        dumped = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
        answer = json.dumps(dumped, default=str, ensure_ascii=False)
    context = {
        ContextKeys.RETRIEVED_DOCUMENTS: tuple(result.sources or ()),
        ContextKeys.TOOL_EXECUTIONS: tuple(getattr(result, "tool_executions", ()) or ()),
    }
    return EvaluationRequest(
        answer=answer,
        documents=document_texts(result.sources),
        response=ChatClientResponse(chat, context),
        entity=value,
    )


def _bounded(text: str | None) -> str | None:
    if text is None:
        return None
    return text if len(text) <= _MAX_TEXT else text[:_MAX_TEXT] + " …[truncated]"


def require(value: Any, what: str, evaluator: str, how: str) -> Any:
    """``value``, or an ``EvaluationError`` saying that ``evaluator`` needs ``what`` and how to give it."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise EvaluationError(f"{evaluator} needs {what}, but none was given: {how}")
    return value


__all__ = ["EvaluationRequest", "EvaluationResult", "Evaluator", "document_texts", "to_request"]
