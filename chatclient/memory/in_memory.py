"""A process-local repository: a dict of conversations behind a lock."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from chatclient._pickling import PicklesWithoutLocks
from chatclient.memory.base import MessageUpdate, check_conversation_id, check_messages
from chatclient.messages import Message


class InMemoryChatMemoryRepository(PicklesWithoutLocks):
    """Keeps conversations in a dict; thread-safe, lost when the process ends.

    Pickles with its conversations (a copy travels to a worker; the two do not share later writes).

    Messages are immutable, so storing and returning list copies is enough to isolate callers.
    """

    def __init__(self) -> None:
        self._conversations: dict[str, list[Message]] = {}
        self._lock = threading.Lock()

    def find_conversation_ids(self) -> list[str]:
        with self._lock:
            return list(self._conversations)

    def find(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._lock:
            return list(self._conversations.get(conversation_id, ()))

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        check_conversation_id(conversation_id)
        stored = check_messages(messages)
        with self._lock:
            self._put(conversation_id, stored)

    def delete(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def update(self, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        """Apply ``fn`` to the conversation under the repository lock."""
        check_conversation_id(conversation_id)
        with self._lock:
            result = check_messages(fn(list(self._conversations.get(conversation_id, ()))))
            self._put(conversation_id, result)
            return list(result)

    def _put(self, conversation_id: str, messages: list[Message]) -> None:
        # An emptied conversation disappears from find_conversation_ids, like the other stores.
        if messages:
            self._conversations[conversation_id] = messages
        else:
            self._conversations.pop(conversation_id, None)

    def __repr__(self) -> str:
        return f"InMemoryChatMemoryRepository(conversations={len(self._conversations)})"
