"""The memory protocols: what a chat memory and a chat memory repository must offer.

A *repository* stores whole conversations (``save_all`` overwrites). A *memory* decides what to
keep (windows evict old messages) and stores through a repository. Repositories that can run a
read-modify-write atomically implement :class:`AtomicChatMemoryRepository`; the window memories use
it, so concurrent writers to one conversation (threads or processes) never lose a message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from chatclient.messages import MESSAGE_CLASSES, Message

DEFAULT_CONVERSATION_ID = "default"
"""The conversation id memory advisors use when the request names none."""

MessageUpdate = Callable[[list[Message]], Sequence[Message]]
"""A function from the stored messages of a conversation to the messages to store instead."""


@runtime_checkable
class ChatMemory(Protocol):
    """What the memory advisors talk to: add to, read and clear a conversation."""

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """Add one message or several (in order) to the conversation."""
        ...

    def get(self, conversation_id: str) -> list[Message]:
        """The messages the memory currently holds for the conversation, oldest first."""
        ...

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation."""
        ...


@runtime_checkable
class ChatMemoryRepository(Protocol):
    """Storage of whole conversations."""

    def find_conversation_ids(self) -> list[str]:
        """The ids of every stored conversation."""
        ...

    def find(self, conversation_id: str) -> list[Message]:
        """The stored messages of a conversation (empty when unknown), oldest first."""
        ...

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the stored messages of a conversation."""
        ...

    def delete(self, conversation_id: str) -> None:
        """Remove a conversation (a no-op when unknown)."""
        ...


@runtime_checkable
class AtomicChatMemoryRepository(ChatMemoryRepository, Protocol):
    """A repository that can read, change and write a conversation as one atomic step."""

    def update(self, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        """Replace the conversation with ``fn(stored)`` atomically; returns what was stored.

        ``fn`` may be called more than once (optimistic stores retry on conflict), so it must not
        have side effects.
        """
        ...


def check_conversation_id(conversation_id: str) -> str:
    """Reject a missing or blank conversation id with ``ValueError``; return it unchanged."""
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        raise ValueError("conversation_id cannot be None or empty")
    return conversation_id


def check_messages(messages: Message | Sequence[Message]) -> list[Message]:
    """Normalise one message or a sequence to a list, rejecting ``None`` and non-messages."""
    if messages is None:
        raise ValueError("messages cannot be None")
    if isinstance(messages, MESSAGE_CLASSES):
        return [messages]
    if isinstance(messages, (str, bytes)):
        raise TypeError("messages must be Message objects, not text; wrap the text in UserMessage(...)")
    out = list(messages)
    for m in out:
        if m is None:
            raise ValueError("messages cannot contain None elements")
        if not isinstance(m, MESSAGE_CLASSES):
            raise TypeError(f"messages must be Message objects, got {type(m).__name__}")
    return out


def apply_update(repository: ChatMemoryRepository, conversation_id: str, fn: MessageUpdate) -> list[Message]:
    """Run ``fn`` on a conversation, atomically when the repository supports it.

    A repository without ``update`` gets a plain find + save_all, which is only as safe as the
    repository itself under concurrent writers.
    """
    update = getattr(repository, "update", None)
    if callable(update):
        return list(update(conversation_id, fn))
    result = list(fn(repository.find(conversation_id)))
    repository.save_all(conversation_id, result)
    return result


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RowPlan(Generic[T]):
    """How to turn stored rows into a new message list: rows to delete and messages to append.

    Stores keep one row per message with an increasing sequence number. Windows mostly append and
    evict from the front, so rewriting only the difference keeps writes small.
    """

    delete: tuple[int, ...]  # indexes into the old list
    append: tuple[T, ...]


def plan_rows(old: Sequence[T], new: Sequence[T]) -> RowPlan[T]:
    """Plan a small delete-then-append change that turns ``old`` into ``new``.

    Walk both lists: an old message equal to the next wanted one is kept, any other old message is
    deleted; whatever is left of ``new`` is appended after the last row. Kept rows keep their order
    and appended rows get higher sequence numbers, so the result always reads back as ``new``.
    Stores compare serialised rows, so "equal" means "would read back the same".
    """
    delete: list[int] = []
    j = 0
    for i, m in enumerate(old):
        if j < len(new) and m == new[j]:
            j += 1
        else:
            delete.append(i)
    return RowPlan(tuple(delete), tuple(new[j:]))
