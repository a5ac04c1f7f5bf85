"""The typed events of a request (the vocabulary of ``chatclient.events``), apart from their emission.

They live in their own module so that ``chatclient.request`` can name ``StreamEvent`` without
importing the emission machinery, which itself works on requests and responses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from chatclient.messages import HostedToolCall
    from chatclient.models.base import ChatResponse, Usage
    from chatclient.rag.documents import Document


class StreamEvent:
    """Base of every event (an immutable dataclass); ``kind`` is a short stable name for the wire."""

    __slots__ = ()
    kind: str = "event"


@dataclass(frozen=True, slots=True)
class TextDelta(StreamEvent):
    """A piece of the answer text, in order."""

    text: str
    kind = "text"


@dataclass(frozen=True, slots=True)
class ReasoningDelta(StreamEvent):
    """A piece of the model's readable reasoning ("thinking"), kept apart from the answer."""

    text: str
    kind = "reasoning"


@dataclass(frozen=True, slots=True)
class ToolCallStarted(StreamEvent):
    """The tool loop is about to run a tool the model asked for; ``arguments`` is the model's JSON text."""

    id: str
    name: str
    arguments: str
    kind = "tool_call_started"


@dataclass(frozen=True, slots=True)
class ToolCallFinished(StreamEvent):
    """A tool call ended: ``result`` is the text sent back to the model, ``duration`` in seconds."""

    id: str
    name: str
    result: str
    is_error: bool = False
    duration: float = 0.0
    kind = "tool_call_finished"


@dataclass(frozen=True, slots=True)
class HostedToolUsed(StreamEvent):
    """The provider ran a hosted tool (web search, code execution, web fetch) for the answer: its
    call and outcome, as on ``AssistantMessage.hosted_tool_calls``."""

    call: HostedToolCall
    kind = "hosted_tool"


@dataclass(frozen=True, slots=True)
class DocumentsRetrieved(StreamEvent):
    """A retrieval advisor (QA, RAG, vector-store memory) found these documents for the request."""

    documents: tuple[Document, ...]
    source: str = ""
    """The name of the advisor that retrieved them."""
    kind = "documents_retrieved"

    def __post_init__(self) -> None:
        object.__setattr__(self, "documents", tuple(self.documents))


@dataclass(frozen=True, slots=True)
class AdvisorEvent(StreamEvent):
    """An advisor's own event: ``name`` says what happened (e.g. ``"validation.retry"``), ``data``
    carries the details (read-only; a ``"message"`` entry, when present, is a human-readable line)."""

    name: str
    data: Mapping[str, Any] = field(default_factory=dict)
    kind = "advisor"

    def __post_init__(self) -> None:
        from types import MappingProxyType

        object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    @property
    def message(self) -> str:
        """The human-readable line of this event (``data["message"]``), else its name."""
        value = self.data.get("message")
        return str(value) if value is not None else self.name


@dataclass(frozen=True, slots=True)
class UsageUpdate(StreamEvent):
    """Token usage reported by the model (in streams: whenever a chunk carries it)."""

    usage: Usage
    kind = "usage"


@dataclass(frozen=True, slots=True)
class RawProviderEvent(StreamEvent):
    """A provider stream event chatclient does not map (Anthropic's ``ping``, a Responses API event
    type it has no field for): ``provider``, the event's ``type`` and its ``data`` as sent.

    Only streams run inside ``chatclient.listeners.raw_provider_events()`` carry them (or a
    ``handle_stream`` handler with ``on_raw_event``); new event types may appear, so never switch
    on them exhaustively.
    """

    provider: str
    type: str
    data: Mapping[str, Any] = field(default_factory=dict)
    kind = "raw_provider_event"


@dataclass(frozen=True, slots=True)
class Finished(StreamEvent):
    """The last event of a request: the whole answer as one ``ChatResponse`` (None when there was none)."""

    response: ChatResponse | None
    kind = "finished"


EventCallback: TypeAlias = Callable[[StreamEvent], "Awaitable[None] | None"]
"""A sync or async callable that receives each event of a request (``spec.on_event``)."""


__all__ = [
    "AdvisorEvent",
    "DocumentsRetrieved",
    "EventCallback",
    "Finished",
    "HostedToolUsed",
    "RawProviderEvent",
    "ReasoningDelta",
    "StreamEvent",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "UsageUpdate",
]
