"""``Result[T]``: a service method's typed value together with what produced it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from chatclient.models.base import ChatResponse, Usage
from chatclient.request import ChatClientResponse, ContextKeys

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.tools.results import ToolExecution

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Result(Generic[T]):
    """The value a service method returns, with the usage, finish reason, retrieved documents
    (``sources``), tool calls run (``tool_executions``) and the whole ``ChatResponse``.

    Declare it as the return type: ``def answer(self, q: str) -> Result[Answer]: ...``.
    """

    value: T
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    sources: tuple[Document, ...] = ()
    tool_executions: tuple[ToolExecution, ...] = ()
    response: ChatResponse | None = None


def sources_of(response: ChatClientResponse) -> tuple[Any, ...]:
    """Documents retrieved for this turn: ``QuestionAnswerAdvisor``'s, then ``RetrievalAugmentationAdvisor``'s.

    Read from the response context, else from the chat response metadata (where both advisors copy them).
    """
    found: list[Any] = []
    extra = response.chat_response.metadata.extra if response.chat_response is not None else {}
    for key in (ContextKeys.RETRIEVED_DOCUMENTS, ContextKeys.DOCUMENT_CONTEXT):
        docs = response.context.get(key)
        if docs is None:
            docs = extra.get(key)
        if docs:
            found.extend(d for d in docs if d not in found)
    return tuple(found)


def result_of(value: Any, response: ChatClientResponse) -> Result[Any]:
    """Assemble a ``Result`` from a converted value and the chain's final response."""
    chat = response.chat_response
    generation = chat.result if chat is not None else None
    return Result(
        value=value,
        usage=chat.metadata.usage if chat is not None else Usage(),
        finish_reason=generation.metadata.finish_reason if generation is not None else None,
        sources=sources_of(response),
        tool_executions=response.tool_executions,
        response=chat,
    )


__all__ = ["Result", "result_of", "sources_of"]
