"""Model-side types and providers.

Providers live in submodules (``chatclient.models.openai``, ``.anthropic``, ``.ollama``,
``.llamacpp``) and are imported only when used.
"""

from chatclient.models._moved import install as _install_moved_paths
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

_install_moved_paths()  # chatclient.models.sse and the other earlier paths of the HTTP machinery

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
