"""serve(transport="http") in a real subprocess, reached by McpClient.http over streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient import ChatClient
from chatclient.errors import McpConnectionError, McpServerError, McpTimeoutError
from chatclient.mcp import McpClient, McpToolProvider
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.testing import ScriptedChatModel
from tests.support.serving import child_server, free_port

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVERS = str(Path(__file__).with_name("mcp_servers.py"))


@contextlib.contextmanager
def serving(transport: str) -> Iterator[str]:
    port = free_port()
    with child_server([sys.executable, SERVERS, "serve", transport, str(port)], [port], "the HTTP fixture server"):
        yield f"http://127.0.0.1:{port}/{'mcp' if transport == 'http' else 'sse'}"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving("http") as started:
        yield started


def test_sse_transport() -> None:
    with serving("sse") as sse_url, McpClient.sse(sse_url, headers={"X-Api-Key": "k"}) as client:
        assert client.call_tool("add", {"a": 1, "b": 2}).content[0].text == "3"
        [doc] = client.read_resource("docs://faq")
        assert doc.text == "Q: Is it fast? A: Yes."


def test_http_list_call_and_error_result(url: str) -> None:
    with McpClient.http(url, headers={"Authorization": "Bearer not-a-real-token"}) as client:
        assert client.name == "fixture"
        assert {t.name for t in client.list_tools()} == {"add", "greet", "divide", "slow", "big", "ask"}
        assert client.call_tool("add", {"a": 20, "b": 22}).content[0].text == "42"
        failed = client.call_tool("divide", {"a": 1, "b": 0})
        assert failed.is_error and "ZeroDivisionError" in failed.content[0].text
        with pytest.raises(McpServerError):
            client.call_tool("missing", {})
        [doc] = client.read_resource("notes://{topic}", topic="http")
        assert doc.text == "Notes about http: it matters."
        assert client.get_prompt("hello") != []
        # The label never carries credentials.
        assert "not-a-real-token" not in repr(client)


def test_http_oversized_response_fails_that_call_only(url: str) -> None:
    with McpClient.http(url) as client:
        # The SDK caps one SSE event at 1 MB: the call fails with the reason, the session lives on.
        with pytest.raises(McpConnectionError, match="byte limit"):
            client.call_tool("big", {"size": 2_000_000})
        assert client.connected
        assert client.call_tool("big", {"size": 10}).content[0].text == "z" * 10


def test_http_tools_in_a_tool_loop_async(url: str) -> None:
    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("1", "greet", '{"name": "Bo"}'),)), "Greeted."])

    async def main() -> str | None:
        async with McpClient.http(url) as client:
            chat = ChatClient.create(model)
            return await chat.prompt("greet Bo").tools(McpToolProvider(client)).acall().content()

    assert asyncio.run(main()) == "Greeted."
    message = model.prompts[1].messages[-1]
    assert isinstance(message, ToolResponseMessage)
    assert message.responses[0].response_data.startswith("Hello, Bo!")


def test_http_nothing_listening() -> None:
    port = free_port()
    with pytest.raises(McpConnectionError):
        McpClient.http(f"http://127.0.0.1:{port}/mcp", timeout=3).connect()


def test_http_server_that_never_answers() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(McpTimeoutError):
            McpClient.http(f"http://127.0.0.1:{port}/mcp", timeout=1.0).connect()
        assert time.monotonic() - started < 15
