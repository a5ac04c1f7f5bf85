"""chatclient: a fluent client for language models with an ordered chain of advisors.

from chatclient import ChatClient
client = ChatClient.builder(model).default_system("Be brief.").build()
print(client.prompt("Hello").call().content())
"""

import chatclient._pickling  # noqa: F401 - registers how read-only mappings (message metadata) pickle
from chatclient._lazy import lazy_getattr
from chatclient.advisor import (
    DEFAULT_CHAT_MEMORY_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    STRUCTURED_OUTPUT_VALIDATION_ORDER,
    TOOL_CALL_ORDER,
    Advisor,
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    BaseAdvisor,
    CallAdvisor,
    ChatModelAdvisor,
    StreamAdvisor,
)
from chatclient.client import (
    AsyncCallResponseSpec,
    AsyncStreamResponseSpec,
    CallResponseSpec,
    ChatClient,
    ChatClientBuilder,
    ChatClientRequestSpec,
    ResponseEntity,
    StreamResponseSpec,
)
from chatclient.messages import (
    AssistantMessage,
    Citation,
    HostedToolCall,
    Media,
    Message,
    MessageType,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import (
    ChatModel,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    Usage,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.request import ChatClientRequest, ChatClientResponse, ContextKeys
from chatclient.templates import JinjaTemplateRenderer, NoOpTemplateRenderer, TemplateRenderer

__version__ = "0.1.0"

# Structured-output converters pull in pydantic, so they load on first access only.
_LAZY = {
    "StructuredOutputConverter": "chatclient.converters",
    "EntityOutputConverter": "chatclient.converters",
    "MapOutputConverter": "chatclient.converters",
    "ListOutputConverter": "chatclient.converters",
    # production control (issue 17): models wrapping models, loaded on first use
    "CircuitBreaker": "chatclient.resilience",
    "FallbackChatModel": "chatclient.resilience",
    "RoutingChatModel": "chatclient.resilience",
    "RateLimiter": "chatclient.resilience",
    "RateLimitedChatModel": "chatclient.resilience",
    "ModelPrice": "chatclient.resilience",
    "PriceTable": "chatclient.resilience",
}


__getattr__ = lazy_getattr("chatclient", _LAZY, globals())


__all__ = [
    "DEFAULT_CHAT_MEMORY_ORDER",
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "STRUCTURED_OUTPUT_VALIDATION_ORDER",
    "TOOL_CALL_ORDER",
    "Advisor",
    "AdvisorChain",
    "AssistantMessage",
    "AsyncCallAdvisor",
    "AsyncCallResponseSpec",
    "AsyncStreamAdvisor",
    "AsyncStreamResponseSpec",
    "BaseAdvisor",
    "CallAdvisor",
    "CallResponseSpec",
    "ChatClient",
    "ChatClientBuilder",
    "ChatClientRequest",
    "ChatClientRequestSpec",
    "ChatClientResponse",
    "ChatModel",
    "ChatModelAdvisor",
    "ChatOptions",
    "ChatResponse",
    "ChatResponseMetadata",
    "Citation",
    "ContextKeys",
    "EntityOutputConverter",
    "ListOutputConverter",
    "MapOutputConverter",
    "StructuredOutputConverter",
    "CircuitBreaker",
    "FallbackChatModel",
    "ModelPrice",
    "PriceTable",
    "RateLimitedChatModel",
    "RateLimiter",
    "RoutingChatModel",
    "Generation",
    "GenerationMetadata",
    "HostedToolCall",
    "JinjaTemplateRenderer",
    "Media",
    "Message",
    "MessageType",
    "ModelCapabilities",
    "NoOpTemplateRenderer",
    "Prompt",
    "Reasoning",
    "ResponseEntity",
    "StreamAdvisor",
    "StreamResponseSpec",
    "SystemMessage",
    "TemplateRenderer",
    "ToolCall",
    "ToolDefinition",
    "ToolResponse",
    "ToolResponseMessage",
    "Usage",
    "UserMessage",
]
