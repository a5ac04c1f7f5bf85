"""Tools: let models call Python functions.

    from chatclient.tools import tool, ToolContext

    @tool
    def get_weather(city: str, ctx: ToolContext) -> dict:
        '''Current weather of a city.

        Args:
            city: City name, e.g. "Paris".
        '''
        return {"city": city, "temp_c": 18, "tenant": ctx["tenant"]}

    client.prompt("Weather in Paris?").tools(get_weather).tool_context({"tenant": "acme"}).call().content()

The client adds a ``ToolCallAdvisor`` (the tool loop) to any request that has tools. For manual
control, run ``ToolCallingManager().execute(prompt, response, request.context)`` yourself.
"""

from __future__ import annotations

from chatclient.prompt import ToolDefinition
from chatclient.tools.advisor import ToolCallAdvisor
from chatclient.tools.augmentation import AugmentedArgumentEvent, AugmentedToolCallback, AugmentedToolCallbackProvider
from chatclient.tools.callback import (
    FunctionToolCallback,
    ToolArgumentsError,
    ToolCallback,
    ToolCallbackProvider,
    ToolResultConversionError,
    ToolTimeoutError,
)
from chatclient.tools.compensation import compensates
from chatclient.tools.context import ToolContext
from chatclient.tools.decorator import ToolSpec, callbacks_from_object, resolve_tools, tool
from chatclient.tools.docstrings import ParsedDocstring, parse_docstring
from chatclient.tools.failures import (
    ToolErrorContext,
    ToolErrorHandler,
    ToolErrorResult,
    ToolErrorVisibleToModel,
    fail_invocation,
    fail_unless_visible,
    send_generic_message_unless_visible,
    send_message_to_model,
)
from chatclient.tools.manager import RETURN_DIRECT, ToolCallingManager, ToolExecutionResult
from chatclient.tools.media_models import image_tool, speech_tool, transcription_tool
from chatclient.tools.providers import ToolProviderRequest
from chatclient.tools.results import (
    DONE,
    ToolExecution,
    ToolMediaTooLargeError,
    ToolResult,
    ToolResultConverter,
    default_result_converter,
)

__all__ = [
    "AugmentedArgumentEvent",
    "AugmentedToolCallback",
    "AugmentedToolCallbackProvider",
    "DONE",
    "RETURN_DIRECT",
    "FunctionToolCallback",
    "ParsedDocstring",
    "ToolArgumentsError",
    "ToolCallAdvisor",
    "ToolCallback",
    "ToolCallbackProvider",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolErrorContext",
    "ToolErrorHandler",
    "ToolErrorResult",
    "ToolErrorVisibleToModel",
    "ToolExecution",
    "ToolExecutionResult",
    "ToolProviderRequest",
    "ToolMediaTooLargeError",
    "ToolResult",
    "ToolResultConversionError",
    "ToolResultConverter",
    "ToolSpec",
    "ToolTimeoutError",
    "callbacks_from_object",
    "compensates",
    "default_result_converter",
    "fail_invocation",
    "fail_unless_visible",
    "image_tool",
    "parse_docstring",
    "resolve_tools",
    "send_generic_message_unless_visible",
    "send_message_to_model",
    "speech_tool",
    "tool",
    "transcription_tool",
]
