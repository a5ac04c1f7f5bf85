"""The embedded local model calls a tool of a real MCP server (our serve() fixture over stdio) through
ToolCallAdvisor, with a forced tool choice, and the server's answer goes back to the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.mcp import McpClient, McpToolProvider
from chatclient.messages import ToolResponseMessage

pytestmark = [pytest.mark.e2e, pytest.mark.mcp]

SERVERS = str(Path(__file__).parents[1] / "integration" / "mcp_servers.py")


def test_local_model_calls_an_mcp_tool(local_model: Any) -> None:
    with McpClient.stdio(sys.executable, [SERVERS, "serve"]) as server:
        provider = McpToolProvider(server, tool_filter=["add"])
        response = (
            ChatClient.create(local_model)
            .prompt("Use the add tool to add 17 and 25.")
            .tools(provider)
            .options(ChatOptions(tool_choice="add", temperature=0.0, seed=42, max_tokens=64))
            .call()
            .chat_client_response()
        )
    [execution] = response.tool_executions
    assert execution.name == "add"
    arguments = json.loads(execution.arguments)
    assert not execution.is_error, execution.result
    # The server computed it: the result is the sum of whatever integers the model sent.
    assert execution.result == str(int(arguments["a"]) + int(arguments["b"]))
    assert response.chat_response is not None
    tool_message = response.context[ContextKeys.TOOL_EXCHANGE][1]
    assert isinstance(tool_message, ToolResponseMessage)
    assert tool_message.responses[0].response_data == execution.result
