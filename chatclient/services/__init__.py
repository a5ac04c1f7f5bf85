"""Declarative AI services: declare a typed interface, get an implementation backed by a model.

    from typing import Protocol
    from chatclient.services import ai_service, system, MemoryId

    class Assistant(Protocol):
        @system("You are a {{ role }}.")
        def ask(self, question: str, role: str = "teacher", user: MemoryId[str] = "default") -> str: ...

    assistant = ai_service(Assistant, client=client, memory=MessageWindowChatMemory())
    assistant.ask("What is a prime number?", user="ada")

Each call is one ordinary ``ChatClient`` request, so every advisor works inside a service.
"""

from chatclient.services.markers import MemoryId, Partial, ToolArg, V, system, user
from chatclient.services.result import Result
from chatclient.services.service import ai_service, evict_memory, service_tool

__all__ = [
    "MemoryId",
    "Partial",
    "Result",
    "ToolArg",
    "V",
    "ai_service",
    "evict_memory",
    "service_tool",
    "system",
    "user",
]
