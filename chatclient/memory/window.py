"""Window memories: keep the newest messages of a conversation within a bound.

Both windows share one eviction rule set:

* a new system message (one not stored yet) replaces the stored ones; a system message that is
  already stored is not stored twice;
* system messages are never evicted (the window exceeds its bound only when they alone do);
* otherwise the oldest messages go first, keeping the order of the rest;
* an assistant message with tool calls and the tool-response messages that follow it are one unit:
  kept or evicted together, so the window never starts with a tool response whose call is gone;
* a tool response with no call before it, or a tool-call message whose responses never came,
  cannot be sent to a model, so one left at the start of the window is dropped too (a tool-call
  message that is the newest unit stays: its responses may be added next).

Adding is one atomic read-modify-write on repositories that support it
(:class:`~chatclient.memory.base.AtomicChatMemoryRepository`), so concurrent writers lose nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from chatclient.memory.base import (
    ChatMemoryRepository,
    apply_update,
    check_conversation_id,
    check_messages,
)
from chatclient.memory.in_memory import InMemoryChatMemoryRepository
from chatclient.memory.tokens import TokenCounter, as_counter
from chatclient.messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage

DEFAULT_MAX_MESSAGES = 20


def merge_messages(stored: Sequence[Message], new: Sequence[Message]) -> list[Message]:
    """Stored plus new messages, with the system-message replacement rule applied (no eviction)."""
    stored_systems = [m for m in stored if isinstance(m, SystemMessage)]
    replaces = any(isinstance(m, SystemMessage) and m not in stored_systems for m in new)
    if replaces:
        kept = [m for m in stored if not isinstance(m, SystemMessage)]
        return kept + list(new)
    # No new system message: drop repeats of ones already stored instead of storing them twice.
    return list(stored) + [m for m in new if not isinstance(m, SystemMessage)]


def tool_units(messages: Sequence[Message]) -> list[list[int]]:
    """Group the indexes of the non-system messages into eviction units, oldest first.

    A unit is one message, or an assistant tool-call message with the tool responses after it.
    System messages in between neither belong to nor break a unit (they are never evicted).
    """
    units: list[list[int]] = []
    open_exchange = False  # the last unit is a tool-call message that responses may still join
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, ToolResponseMessage) and open_exchange:
            units[-1].append(i)
            continue
        units.append([i])
        open_exchange = isinstance(m, AssistantMessage) and bool(m.tool_calls)
    return units


def evict(messages: Sequence[Message], size: Callable[[Message], int], limit: int) -> list[Message]:
    """Drop the oldest units until the total size is within ``limit`` (system messages stay)."""
    sizes = [size(m) for m in messages]
    total = sum(sizes)
    units = tool_units(messages)
    drop: set[int] = set()
    k = 0
    while total > limit and k < len(units):
        for i in units[k]:
            drop.add(i)
            total -= sizes[i]
        k += 1
    # A tool response whose call is not in front of it (never stored), or a finished tool-call turn
    # missing responses, would be a broken exchange at the window's start, which providers reject.
    # The last unit may be a tool-call message whose responses are still to be added: it stays.
    for j in range(k, first_intact_unit(messages, units, k)):
        drop.update(units[j])
    if not drop:
        return list(messages)
    return [m for i, m in enumerate(messages) if i not in drop]


def first_intact_unit(messages: Sequence[Message], units: list[list[int]], start: int) -> int:
    """The index of the first unit from ``start`` on that can begin a conversation (see ``_broken``);
    ``len(units)`` when none can."""
    k = start
    while k < len(units) and _broken(messages, units[k], last=k == len(units) - 1):
        k += 1
    return k


def _broken(messages: Sequence[Message], unit: list[int], *, last: bool) -> bool:
    """True when a unit of ``tool_units`` cannot stand alone: it starts with tool results, or its tool
    calls are not all answered (allowed only for the ``last`` unit, whose answers may still come)."""
    first = messages[unit[0]]
    if isinstance(first, ToolResponseMessage):
        return True
    if not isinstance(first, AssistantMessage) or not first.tool_calls or last:
        return False
    answered = {r.id for i in unit[1:] for r in messages[i].responses}  # type: ignore[union-attr]
    return any(c.id not in answered for c in first.tool_calls)


class _WindowChatMemory:
    """Shared add/get/clear of the window memories; subclasses define ``_trim``."""

    repository: ChatMemoryRepository

    def _trim(self, messages: list[Message]) -> list[Message]:
        raise NotImplementedError

    def process(self, stored: Sequence[Message], new: Sequence[Message]) -> list[Message]:
        """What the window keeps after adding ``new`` to ``stored``."""
        return self._trim(merge_messages(stored, new))

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """Add one message or several, evicting as needed, in one atomic repository update."""
        check_conversation_id(conversation_id)
        new = check_messages(messages)
        if not new:
            return
        apply_update(self.repository, conversation_id, lambda stored: self.process(stored, new))

    def get(self, conversation_id: str) -> list[Message]:
        """The messages in the window, oldest first."""
        return self.repository.find(check_conversation_id(conversation_id))

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        self.repository.delete(check_conversation_id(conversation_id))


class MessageWindowChatMemory(_WindowChatMemory):
    """Keeps at most ``max_messages`` messages per conversation (system messages always stay).

    >>> from chatclient.messages import UserMessage
    >>> memory = MessageWindowChatMemory(max_messages=2)
    >>> memory.add("c1", [UserMessage("a"), UserMessage("b"), UserMessage("c")])
    >>> [m.text for m in memory.get("c1")]
    ['b', 'c']
    """

    def __init__(
        self, repository: ChatMemoryRepository | None = None, max_messages: int = DEFAULT_MAX_MESSAGES
    ) -> None:
        if isinstance(max_messages, bool) or not isinstance(max_messages, int) or max_messages <= 0:
            raise ValueError("max_messages must be greater than 0")
        self.repository = repository if repository is not None else InMemoryChatMemoryRepository()
        self.max_messages = max_messages

    def _trim(self, messages: list[Message]) -> list[Message]:
        return evict(messages, _one, self.max_messages)

    def __repr__(self) -> str:
        return f"MessageWindowChatMemory(max_messages={self.max_messages}, repository={self.repository!r})"


class TokenWindowChatMemory(_WindowChatMemory):
    """Keeps the newest messages whose tokens add up to at most ``max_tokens``; messages are never cut.

    ``token_counter`` is a :class:`~chatclient.memory.tokens.TokenCounter` or a function of a message;
    the default is the offline :class:`~chatclient.memory.tokens.SimpleTokenCounter`.
    """

    def __init__(
        self,
        max_tokens: int,
        token_counter: TokenCounter | Callable[[Message], int] | None = None,
        *,
        repository: ChatMemoryRepository | None = None,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValueError("max_tokens must be greater than 0")
        self.max_tokens = max_tokens
        self.token_counter = token_counter
        self._count = as_counter(token_counter)
        self.repository = repository if repository is not None else InMemoryChatMemoryRepository()

    def _trim(self, messages: list[Message]) -> list[Message]:
        return evict(messages, self._count, self.max_tokens)

    def __repr__(self) -> str:
        return f"TokenWindowChatMemory(max_tokens={self.max_tokens}, repository={self.repository!r})"


def _one(_: Message) -> int:
    return 1
