"""Chat messages: immutable value objects that make up a conversation.

Every message compares by value, so memory windows and tests can reason about them directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias

_EMPTY: Mapping[str, Any] = MappingProxyType({})


class MessageType(StrEnum):
    """The role a message plays in a conversation."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


def _freeze(metadata: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not metadata:
        return _EMPTY
    if isinstance(metadata, MappingProxyType):
        return metadata
    return MappingProxyType(dict(metadata))


@dataclass(frozen=True, slots=True)
class Media:
    """An attachment of a user message: inline bytes or a URL (``data`` as ``str``)."""

    mime_type: str
    data: bytes | str


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call a tool; ``arguments`` is the raw JSON text the model produced.

    ``metadata`` carries provider data that must travel back with the call in the next request
    (for example Gemini's ``thought_signature``); it takes part in equality but not in the hash.
    """

    id: str
    name: str
    arguments: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.arguments))


@dataclass(frozen=True, slots=True)
class Reasoning:
    """One block of a model's reasoning ("thinking") that preceded its answer.

    ``text`` is the readable reasoning (empty when the provider hides it). ``signature`` is the
    provider's opaque token that proves the block is authentic (Anthropic requires it back, with the
    block, in the follow-up request of a tool loop); ``redacted`` holds encrypted reasoning the
    provider returned instead of text (Anthropic ``redacted_thinking``). ``provider`` names who made
    the block, so a different provider is not sent data it cannot verify.
    """

    text: str = ""
    signature: str | None = None
    redacted: str | None = None
    provider: str | None = None


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """The result of one tool call, sent back to the model."""

    id: str
    name: str
    response_data: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """Instructions that frame the whole conversation."""

    text: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.SYSTEM

    def __hash__(self) -> int:
        return hash((MessageType.SYSTEM, self.text))


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user says, optionally with media attachments."""

    text: str
    media: tuple[Media, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "media", tuple(self.media))
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.USER

    def __hash__(self) -> int:
        return hash((MessageType.USER, self.text, self.media))


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both.

    ``reasoning`` holds the model's thinking blocks in the order they came (kept apart from
    ``text``, which is the answer only); ``refusal`` is the model's explanation when it declined to
    answer (OpenAI ``message.refusal``), ``None`` otherwise.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    reasoning: tuple[Reasoning, ...] = ()
    refusal: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "metadata", _freeze(self.metadata))
        object.__setattr__(self, "reasoning", tuple(self.reasoning))

    @property
    def reasoning_text(self) -> str:
        """All readable reasoning of this message, joined (empty when there is none)."""
        return "".join(r.text for r in self.reasoning)

    @property
    def type(self) -> MessageType:
        return MessageType.ASSISTANT

    def has_tool_calls(self) -> bool:
        return bool(self.tool_calls)

    def __hash__(self) -> int:
        return hash((MessageType.ASSISTANT, self.text, self.tool_calls))


@dataclass(frozen=True, slots=True)
class ToolResponseMessage:
    """The results of the tool calls of one model turn, in the model's order."""

    responses: tuple[ToolResponse, ...]
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "responses", tuple(self.responses))
        object.__setattr__(self, "metadata", _freeze(self.metadata))

    @property
    def type(self) -> MessageType:
        return MessageType.TOOL

    @property
    def text(self) -> str:
        return "\n".join(r.response_data for r in self.responses)

    def __hash__(self) -> int:
        return hash((MessageType.TOOL, self.responses))


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResponseMessage
MESSAGE_CLASSES = (SystemMessage, UserMessage, AssistantMessage, ToolResponseMessage)
