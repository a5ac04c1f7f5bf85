"""What flows through the advisor chain: a request (prompt + context) and a response (+ context)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from chatclient.models.base import ChatResponse
from chatclient.prompt import Prompt

if TYPE_CHECKING:
    from chatclient.event_types import StreamEvent
    from chatclient.tools.results import ToolExecution

ResponseScreen = Callable[[ChatResponse], "ChatResponse | None"]
"""A check an advisor registers under ``ContextKeys.RESPONSE_SCREENS``: ``None`` when an answer may
reach the caller, else the response to send instead (a refusal)."""

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
    TOOL_PROVIDERS = "chatclient.tool.providers"
    """Request context: ``(provider, callbacks)`` pairs of the ``ToolCallbackProvider``s among the
    request's tools; the tool loop asks them again between model turns."""
    TOOL_CONTEXT = "chatclient.tool.context"
    TOOL_EXECUTIONS = "chatclient.tool.executions"
    """Response context: the ``ToolExecution`` records of every tool call the tool loop ran."""
    RESPONSE_SCREENS = "chatclient.response.screens"
    """Request/response context: a tuple of ``ResponseScreen`` callables. An advisor that builds an
    answer the screening advisor never saw (a ``return_direct`` tool result) or that persists one
    (memory) applies them first."""
    REFUSED = "chatclient.refused"
    """Response context: the name of the advisor that refused the turn (memory does not store it)."""
    EVENTS = "chatclient.events.sink"
    """Request context: the ``chatclient.events.EventSink`` of the run (absent when nothing listens)."""
    MAX_DURATION = "chatclient.max_duration"
    """Request context: the request's ``max_duration`` in seconds (set by the client)."""
    DEADLINE = "chatclient.deadline"
    """Request context: the running request's ``chatclient.events.Deadline``."""
    USER_QUESTION = "chatclient.user_question"
    """Request/response context: the text of the last user message as the caller wrote it (templates
    rendered), recorded by the client before any advisor rewrote it (retrieval context, re-reading,
    format instructions). Evaluators take the question from here."""
    ASYNC_STREAMS = "chatclient.async_streams"
    """Request context: the async streams an ``astream()`` run opened, closed together when it ends."""
    PRINCIPAL = "chatclient.principal"
    """Request context: who is calling, as the ``auth`` hook of a served app (``chatclient.serving``)
    returned it (a user id, a token's claims...); ``None`` without a hook. Key a ``Budget``, a rate
    limit or a memory conversation on it to make them per user."""


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

    def emit(self, event: StreamEvent) -> None:
        """Send an event (from ``chatclient.events``) to whoever listens to this request.

        ``events()`` streams yield it in order (before the first token when emitted before the
        model is called), ``on_event`` callbacks receive it, and call modes collect it on
        ``ChatClientResponse.events``. Does nothing for a request built without a sink (not by the client).
        """
        sink = self.context.get(ContextKeys.EVENTS)
        if sink is not None:
            sink.emit(event)


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

    @property
    def tool_executions(self) -> tuple[ToolExecution, ...]:
        """Every tool call the tool loop ran for this response, in order, across all iterations.

        Each record has the call's ``id``, ``name``, ``arguments`` (the model's JSON text),
        ``result`` (the text sent back to the model), ``is_error`` and ``duration`` (seconds).
        Empty when no tool ran.

        >>> ChatClientResponse().tool_executions
        ()
        """
        return tuple(self.context.get(ContextKeys.TOOL_EXECUTIONS) or ())

    @property
    def events(self) -> tuple[StreamEvent, ...]:
        """Every event of the request that produced this response, in order (``chatclient.events``).

        Call modes collect the advisors' events (documents retrieved, tool calls, retries) and end
        with ``UsageUpdate``/``Finished``. Empty when the request was not collecting events.
        """
        sink = self.context.get(ContextKeys.EVENTS)
        return tuple(sink.events) if sink is not None else ()

    @property
    def refused_by(self) -> str | None:
        """The name of the advisor that refused this turn (e.g. ``"SafeGuardAdvisor"``), else ``None``."""
        value = self.context.get(ContextKeys.REFUSED)
        return str(value) if value else None


def apply_screens(screens: object, chat_response: ChatResponse | None) -> tuple[ChatResponse, str] | None:
    """Run the ``ResponseScreen`` callables in ``screens`` over ``chat_response``.

    Returns the first replacement a screen asks for (a refusal) with the name of the screen's
    owner (its advisor's ``name``), or ``None`` when every screen lets the answer through (also for
    a missing response or an empty/malformed screen list).
    """
    if chat_response is None or not isinstance(screens, (tuple, list)):
        return None
    for screen in screens:
        if callable(screen):
            replacement = screen(chat_response)
            if replacement is not None:
                owner = getattr(screen, "__self__", None)
                name = getattr(owner, "name", None) or getattr(screen, "__qualname__", "response screen")
                return replacement, str(name)
    return None


def screens_of(*contexts: Mapping[str, Any]) -> tuple[ResponseScreen, ...]:
    """The ``RESPONSE_SCREENS`` of the given contexts, each screen once, in order."""
    out: list[ResponseScreen] = []
    for context in contexts:
        value = context.get(ContextKeys.RESPONSE_SCREENS)
        if isinstance(value, (tuple, list)):
            out.extend(s for s in value if callable(s) and s not in out)
    return tuple(out)
