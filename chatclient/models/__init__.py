"""Model-side types and providers.

Providers live in submodules (``chatclient.models.openai``, ``.anthropic``, ``.ollama``,
``.llamacpp``) and are imported only when used.
"""

from chatclient.models.base import (
    BaseChatModel,
    ChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    ResponseAggregator,
    Usage,
    aggregate,
)

__all__ = [
    "BaseChatModel",
    "ChatModel",
    "ChatResponse",
    "ChatResponseMetadata",
    "Generation",
    "GenerationMetadata",
    "ModelCapabilities",
    "ResponseAggregator",
    "Usage",
    "aggregate",
]
