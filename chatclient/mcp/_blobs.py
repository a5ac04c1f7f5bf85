"""Binary data an MCP server sends as base64, decoded within a bound (shared by the client and its mappers)."""

from __future__ import annotations

import base64

from chatclient.errors import McpProtocolError


def decode_blob(data: str, limit: int) -> bytes:
    """Base64 data from a server, refused past ``limit`` decoded bytes (checked before decoding)."""
    if len(data) * 3 // 4 > limit:
        raise McpProtocolError(f"an MCP server sent {len(data) * 3 // 4} bytes of binary data, more than {limit}")
    try:
        return base64.b64decode(data, validate=False)
    except (ValueError, TypeError) as exc:
        raise McpProtocolError(f"an MCP server sent invalid base64 data: {exc}") from exc


__all__ = ["decode_blob"]
