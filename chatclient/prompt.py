"""The prompt: an ordered list of messages plus options and the tools offered to the model."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatclient.messages import (
    MESSAGE_CLASSES,
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.options import ChatOptions

_KEEP: Any = object()


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """What the model is told about a tool: its name, description and JSON schema of its input."""

    name: str
    description: str
    input_schema: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HostedToolDefinition(ToolDefinition):
    """The definition of a hosted tool (``chatclient.tools.builtin``): the provider runs it, not chatclient.

    ``tool`` is the hosted tool object; a provider asks ``tool.declaration(api)`` for its wire
    declaration (``(declaration dict, beta header or None)``, or ``None`` when ``api`` cannot run it).
    """

    tool: Any = None


class Prompt:
    """Messages for one model call, plus options and tool definitions. Immutable.

    >>> Prompt("Hello").user_message.text
    'Hello'
    """

    __slots__ = ("messages", "options", "tools")

    messages: tuple[Message, ...]
    options: ChatOptions | None
    tools: tuple[ToolDefinition, ...]

    def __init__(
        self,
        messages: str | Message | Sequence[Message],
        options: ChatOptions | None = None,
        *,
        tools: Sequence[ToolDefinition] = (),
    ) -> None:
        if messages is None:
            raise ValueError("messages cannot be None")
        if isinstance(messages, str):
            msgs: tuple[Message, ...] = (UserMessage(messages),)
        elif isinstance(messages, MESSAGE_CLASSES):
            msgs = (messages,)
        else:
            msgs = tuple(messages)
            for m in msgs:
                if not isinstance(m, MESSAGE_CLASSES):
                    raise TypeError(f"messages must be Message objects, got {type(m).__name__}")
        object.__setattr__(self, "messages", msgs)
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "tools", tuple(tools))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Prompt is immutable; use copy(...)")

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt through __init__: the default slot-by-slot restore would hit the immutability guard.
        return (_rebuild_prompt, (self.messages, self.options, self.tools))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Prompt):
            return NotImplemented
        return (self.messages, self.options, self.tools) == (other.messages, other.options, other.tools)

    def __hash__(self) -> int:
        return hash(self.messages)

    def __repr__(self) -> str:
        return f"Prompt(messages={list(self.messages)!r}, options={self.options!r}, tools={len(self.tools)})"

    # -- accessors -----------------------------------------------------------------------------

    @property
    def system_message(self) -> SystemMessage:
        """The first system message, or an empty one."""
        for m in self.messages:
            if isinstance(m, SystemMessage):
                return m
        return SystemMessage("")

    @property
    def user_message(self) -> UserMessage:
        """The last user message, or an empty one."""
        for m in reversed(self.messages):
            if isinstance(m, UserMessage):
                return m
        return UserMessage("")

    @property
    def last_user_or_tool_response_message(self) -> Message:
        """The last user or tool-response message, or an empty user message."""
        for m in reversed(self.messages):
            if isinstance(m, (UserMessage, ToolResponseMessage)):
                return m
        return UserMessage("")

    @property
    def contents(self) -> str:
        """Every message's text joined (used by content screens such as SafeGuardAdvisor)."""
        return "\n".join(m.text for m in self.messages if m.text)

    # -- copies --------------------------------------------------------------------------------

    def copy(
        self,
        *,
        messages: Sequence[Message] = _KEEP,
        options: ChatOptions | None = _KEEP,
        tools: Sequence[ToolDefinition] = _KEEP,
    ) -> Prompt:
        """Return a copy with the given parts replaced."""
        return Prompt(
            self.messages if messages is _KEEP else messages,
            self.options if options is _KEEP else options,
            tools=self.tools if tools is _KEEP else tools,
        )

    def augment_user_message(self, text_or_fn: str | Callable[[UserMessage], UserMessage]) -> Prompt:
        """Replace the last user message (text keeps media and metadata), or append one."""
        fn = _as_fn(text_or_fn, UserMessage)
        msgs = list(self.messages)
        for i in range(len(msgs) - 1, -1, -1):
            m = msgs[i]
            if isinstance(m, UserMessage):
                msgs[i] = fn(m)
                return self.copy(messages=msgs)
        msgs.append(fn(UserMessage("")))
        return self.copy(messages=msgs)

    def augment_system_message(self, text_or_fn: str | Callable[[SystemMessage], SystemMessage]) -> Prompt:
        """Replace the first system message, or insert one at the start."""
        fn = _as_fn(text_or_fn, SystemMessage)
        msgs = list(self.messages)
        for i, m in enumerate(msgs):
            if isinstance(m, SystemMessage):
                msgs[i] = fn(m)
                return self.copy(messages=msgs)
        msgs.insert(0, fn(SystemMessage("")))
        return self.copy(messages=msgs)

    def has_tool_calls(self) -> bool:
        return any(isinstance(m, AssistantMessage) and m.tool_calls for m in self.messages)


def _as_fn(text_or_fn: Any, cls: type) -> Callable[[Any], Any]:
    if callable(text_or_fn):
        return text_or_fn  # type: ignore[no-any-return]
    if not isinstance(text_or_fn, str):
        raise TypeError("expected text or a function of the message")
    text = text_or_fn

    def replace_text(m: Any) -> Any:
        if cls is UserMessage:
            return UserMessage(text, media=m.media, metadata=m.metadata)
        return SystemMessage(text, metadata=m.metadata)

    return replace_text


def _rebuild_prompt(
    messages: tuple[Message, ...], options: ChatOptions | None, tools: tuple[ToolDefinition, ...]
) -> Prompt:
    return Prompt(messages, options, tools=tools)
