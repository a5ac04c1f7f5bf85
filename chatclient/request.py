"""What flows through the advisor chain: a request (prompt + context) and a response (+ context)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chatclient.models.base import ChatResponse
from chatclient.prompt import Prompt

_KEEP: Any = object()
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class ContextKeys:
    """Well-known keys of the request/response context shared by advisors."""

    OUTPUT_FORMAT = "chatclient.output.format"
    OUTPUT_SCHEMA = "chatclient.output.schema"
    NATIVE_STRUCTURED_OUTPUT = "chatclient.output.native"
    STRUCTURED_OUTPUT_MODE = "chatclient.output.mode"
    CONVERSATION_ID = "chat_memory_conversation_id"
    RETRIEVED_DOCUMENTS = "qa_retrieved_documents"
    FILTER_EXPRESSION = "qa_filter_expression"
    DOCUMENT_CONTEXT = "rag_document_context"
    VECTOR_MEMORY_TOP_K = "chat_memory_vector_store_top_k"
    TOOL_EXCHANGE = "chatclient.tool.exchange"
    TOOL_CALLBACKS = "chatclient.tool.callbacks"
    TOOL_CONTEXT = "chatclient.tool.context"


def _freeze(context: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not context:
        return _EMPTY
    for k in context:
        if k is None:
            raise ValueError("context keys cannot be None")
    return MappingProxyType(dict(context))


@dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """A prompt on its way to the model, with a read-only context advisors can share."""

    prompt: Prompt
    context: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, Prompt):
            raise TypeError("prompt must be a Prompt")
        object.__setattr__(self, "context", _freeze(self.context))

    def mutate(self, *, prompt: Prompt = _KEEP, context: Mapping[str, Any] | None = None) -> ChatClientRequest:
        """A copy with a new prompt and/or extra context (merged: given keys win)."""
        ctx = self.context if not context else {**self.context, **context}
        return ChatClientRequest(self.prompt if prompt is _KEEP else prompt, ctx)


@dataclass(frozen=True, slots=True)
class ChatClientResponse:
    """A model's response on its way back through the chain, with the context."""

    chat_response: ChatResponse | None = None
    context: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "context", _freeze(self.context))

    def mutate(
        self, *, chat_response: ChatResponse | None = _KEEP, context: Mapping[str, Any] | None = None
    ) -> ChatClientResponse:
        """A copy with a new chat response and/or extra context (merged: given keys win)."""
        ctx = self.context if not context else {**self.context, **context}
        return ChatClientResponse(self.chat_response if chat_response is _KEEP else chat_response, ctx)
