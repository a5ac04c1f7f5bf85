"""Chat memory: what a conversation remembers, and where it is kept.

    from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
    memory = MessageWindowChatMemory(SqliteChatMemoryRepository("chat.db"), max_messages=20)
    memory.add("c1", UserMessage("Hello"))

The PostgreSQL and Redis repositories import their drivers on first use (extras ``postgres`` and
``redis``).
"""

from __future__ import annotations

from chatclient._lazy import lazy_getattr
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
from chatclient.memory.summarizing import SummarizingChatMemory, SummaryEvent
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


__getattr__ = lazy_getattr("chatclient.memory", _LAZY, globals())


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
    "SummarizingChatMemory",
    "SummaryEvent",
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
