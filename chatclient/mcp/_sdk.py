"""The one place that imports the MCP SDK, so a missing extra fails with the command that fixes it."""

from __future__ import annotations

try:
    import mcp_types as types
    from mcp.client.session import ClientRequestContext, ClientSession, IncomingMessage
    from mcp.client.sse import sse_client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "chatclient.mcp needs the Model Context Protocol SDK (mcp>=2.3): pip install 'chatclient[mcp]'"
    ) from exc

__all__ = [
    "ClientRequestContext",
    "ClientSession",
    "IncomingMessage",
    "MCPError",
    "StdioServerParameters",
    "sse_client",
    "streamable_http_client",
    "types",
]
