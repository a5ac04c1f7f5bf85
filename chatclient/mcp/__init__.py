"""Model Context Protocol: use any MCP server's tools, resources and prompts, and serve your own tools.

    from chatclient.mcp import McpClient, McpToolProvider

    with McpClient.stdio("python", ["-m", "mcp_server_time"]) as time_server:
        answer = client.prompt("What time is it in Tokyo?").tools(McpToolProvider(time_server)).call().content()

Needs the ``mcp`` extra (``pip install 'chatclient[mcp]'``). Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr

if TYPE_CHECKING:
    from chatclient.mcp.client import McpClient
    from chatclient.mcp.elicitation import ElicitationHandler, ElicitationRequest, ElicitationResponse
    from chatclient.mcp.oauth import (
        InMemoryTokenStorage,
        JwtBearer,
        LoopbackRedirect,
        OAuthAuthorizationCode,
        OAuthClientCredentials,
        ProtectedResource,
    )
    from chatclient.mcp.resources import McpResourceReader
    from chatclient.mcp.sampling import SamplingApproval, SamplingRequest
    from chatclient.mcp.server import aserve, build_server, chat_client_tool, serve
    from chatclient.mcp.serving import EmbeddedResource, McpServerContext, ResourceChanges, mcp_server_context
    from chatclient.mcp.tools import McpToolCallback, McpToolProvider, McpToolResult, map_result

_LAZY = {
    "InMemoryTokenStorage": "chatclient.mcp.oauth",
    "JwtBearer": "chatclient.mcp.oauth",
    "LoopbackRedirect": "chatclient.mcp.oauth",
    "OAuthAuthorizationCode": "chatclient.mcp.oauth",
    "OAuthClientCredentials": "chatclient.mcp.oauth",
    "ProtectedResource": "chatclient.mcp.oauth",
    "ElicitationHandler": "chatclient.mcp.elicitation",
    "ElicitationRequest": "chatclient.mcp.elicitation",
    "ElicitationResponse": "chatclient.mcp.elicitation",
    "EmbeddedResource": "chatclient.mcp.serving",
    "McpServerContext": "chatclient.mcp.serving",
    "ResourceChanges": "chatclient.mcp.serving",
    "mcp_server_context": "chatclient.mcp.serving",
    "McpClient": "chatclient.mcp.client",
    "McpResourceReader": "chatclient.mcp.resources",
    "McpToolCallback": "chatclient.mcp.tools",
    "McpToolProvider": "chatclient.mcp.tools",
    "McpToolResult": "chatclient.mcp.tools",
    "SamplingApproval": "chatclient.mcp.sampling",
    "SamplingRequest": "chatclient.mcp.sampling",
    "aserve": "chatclient.mcp.server",
    "build_server": "chatclient.mcp.server",
    "chat_client_tool": "chatclient.mcp.server",
    "map_result": "chatclient.mcp.tools",
    "serve": "chatclient.mcp.server",
}

__getattr__ = lazy_getattr("chatclient.mcp", _LAZY, globals())

__all__ = [
    "InMemoryTokenStorage",
    "JwtBearer",
    "LoopbackRedirect",
    "OAuthAuthorizationCode",
    "OAuthClientCredentials",
    "ProtectedResource",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResponse",
    "EmbeddedResource",
    "McpServerContext",
    "ResourceChanges",
    "mcp_server_context",
    "McpClient",
    "McpResourceReader",
    "McpToolCallback",
    "McpToolProvider",
    "McpToolResult",
    "SamplingApproval",
    "SamplingRequest",
    "aserve",
    "build_server",
    "chat_client_tool",
    "map_result",
    "serve",
]
