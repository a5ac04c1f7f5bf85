"""Chat messages: immutable value objects that make up a conversation.

Every message compares by value, so memory windows and tests can reason about them directly.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias

_EMPTY: Mapping[str, Any] = MappingProxyType({})

MAX_MEDIA_FILE_BYTES = 50 * 1024 * 1024
"""The largest file ``Media.from_path`` reads unless given another ``max_bytes``."""


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
    """An attachment of a user message or a tool result: inline bytes or a URL (``data`` as ``str``).

    >>> Media.from_url("https://example.com/cat.png")
    Media(mime_type='image/png', data='https://example.com/cat.png')
    """

    mime_type: str
    data: bytes | str

    @classmethod
    def from_path(
        cls, path: str | os.PathLike[str], mime_type: str | None = None, *, max_bytes: int = MAX_MEDIA_FILE_BYTES
    ) -> Media:
        """The bytes of a local file; the mime type is guessed from the file name unless given.

        A file larger than ``max_bytes`` (50 MiB by default) raises ``ValueError`` before it is read
        whole; a name whose type cannot be guessed needs ``mime_type=``.
        """
        name = os.fspath(path)
        mime = mime_type or _guess_mime(name)
        size = os.path.getsize(name)
        if size > max_bytes:
            raise ValueError(
                f"{name} is {size} bytes, more than max_bytes={max_bytes}; pass a larger max_bytes "
                "or send a URL (Media.from_url) instead"
            )
        with open(name, "rb") as f:
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:  # the file grew while we looked
            raise ValueError(f"{name} is larger than max_bytes={max_bytes}")
        return cls(mime, data)

    @classmethod
    def from_url(cls, url: str, mime_type: str | None = None) -> Media:
        """A media reference by URL (``https:``, or a ``data:`` URL); nothing is downloaded.

        The mime type is guessed from the URL's path (or read from a ``data:`` URL) unless given.
        """
        if not isinstance(url, str) or not url.strip():
            raise ValueError("Media.from_url needs a non-empty URL string")
        mime = mime_type
        if mime is None and url.startswith("data:"):
            mime = url[5:].split(",", 1)[0].split(";", 1)[0] or None
        if mime is None:
            mime = _guess_mime(url.split("?", 1)[0].split("#", 1)[0])
        return cls(mime, url)

    @property
    def size(self) -> int:
        """Inline bytes (0 for a URL)."""
        return 0 if isinstance(self.data, str) else len(self.data)


def _guess_mime(name: str) -> str:
    mime, _ = mimetypes.guess_type(name, strict=False)
    if mime is None:
        raise ValueError(f"cannot tell the mime type of {name!r} from its name; pass mime_type='...'")
    return mime


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
    """The result of one tool call, sent back to the model.

    ``media`` holds images, audio or documents the tool returned beside its text (a tool returning
    ``Media`` or ``chatclient.tools.ToolResult``); each provider sends them in its own way.
    """

    id: str
    name: str
    response_data: str
    is_error: bool = False
    media: tuple[Media, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "media", tuple(self.media))


@dataclass(frozen=True, slots=True)
class Citation:
    """A source the answer cites (a web search result, a fetched page): where in the text and from where.

    ``start``/``end`` are character offsets into the message text when the provider gives them.
    """

    url: str
    title: str | None = None
    cited_text: str | None = None
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True, slots=True)
class HostedToolCall:
    """A hosted (server-side) tool the provider ran during the turn, with its outcome.

    ``name`` is the portable name (``"web_search"``, ``"code_execution"``, ``"web_fetch"``) or the
    provider's own for other hosted tools; ``input`` what the model asked (``query``, ``code``,
    ``url``); ``output`` the result in plain data (``sources`` of a search, ``stdout``/``stderr``/
    ``return_code`` or ``logs`` of code, ``error`` when the tool failed); ``raw`` the provider's own
    items, sent back verbatim in the next request to the same provider (``provider`` names it).
    """

    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    output: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    status: str | None = None
    provider: str | None = None
    raw: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "input", _freeze(self.input))
        object.__setattr__(self, "output", _freeze(self.output))
        object.__setattr__(self, "raw", tuple(self.raw))

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.status))


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
    answer (OpenAI ``message.refusal``), ``None`` otherwise. ``hosted_tool_calls`` are the hosted
    tools (web search, code execution, web fetch) the provider ran for this turn and
    ``citations`` the sources the text cites.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    reasoning: tuple[Reasoning, ...] = ()
    refusal: str | None = None
    hosted_tool_calls: tuple[HostedToolCall, ...] = ()
    citations: tuple[Citation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        object.__setattr__(self, "metadata", _freeze(self.metadata))
        object.__setattr__(self, "reasoning", tuple(self.reasoning))
        if self.hosted_tool_calls:
            object.__setattr__(self, "hosted_tool_calls", tuple(self.hosted_tool_calls))
        if self.citations:
            object.__setattr__(self, "citations", tuple(self.citations))

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
