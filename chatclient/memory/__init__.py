"""Chat memory: what a conversation remembers, and where it is kept.

    from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
    memory = MessageWindowChatMemory(SqliteChatMemoryRepository("chat.db"), max_messages=20)
    memory.add("c1", UserMessage("Hello"))

The PostgreSQL and Redis repositories import their drivers on first use (extras ``postgres`` and
``redis``).
"""

from __future__ import annotations

import importlib
from typing import Any

from chatclient.memory.base import (
    DEFAULT_CONVERSATION_ID,
    AtomicChatMemoryRepository,
    ChatMemory,
    ChatMemoryRepository,
)
from chatclient.memory.in_memory import InMemoryChatMemoryRepository
from chatclient.memory.serialization import (
    FORMAT_VERSION,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    messages_from_json,
    messages_to_json,
)
from chatclient.memory.sqlite import SqliteChatMemoryRepository
from chatclient.memory.tokens import (
    SimpleTokenCounter,
    TiktokenTokenCounter,
    TokenCounter,
    TokenCounterUnavailableError,
)
from chatclient.memory.window import DEFAULT_MAX_MESSAGES, MessageWindowChatMemory, TokenWindowChatMemory

# Repositories whose modules are imported on first use (their drivers are optional extras).
_LAZY = {
    "PostgresChatMemoryRepository": "chatclient.memory.postgres",
    "RedisChatMemoryRepository": "chatclient.memory.redis",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'chatclient.memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_CONVERSATION_ID",
    "DEFAULT_MAX_MESSAGES",
    "FORMAT_VERSION",
    "AtomicChatMemoryRepository",
    "ChatMemory",
    "ChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "MessageWindowChatMemory",
    "PostgresChatMemoryRepository",
    "RedisChatMemoryRepository",
    "SimpleTokenCounter",
    "SqliteChatMemoryRepository",
    "TiktokenTokenCounter",
    "TokenCounter",
    "TokenCounterUnavailableError",
    "TokenWindowChatMemory",
    "message_from_dict",
    "message_from_json",
    "message_to_dict",
    "message_to_json",
    "messages_from_json",
    "messages_to_json",
]
