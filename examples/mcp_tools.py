"""MCP: serve @tool functions as a Model Context Protocol server, and use a server's tools, resources
and prompts from a ChatClient.

    python examples/mcp_tools.py

The script plays both sides. Started with ``--serve`` it is an MCP server (``chatclient.mcp.serve``)
offering an ``order_status`` tool, a returns-policy resource and a ``complaint`` prompt over stdio.
Started plainly it launches itself with ``--serve`` as a subprocess, connects with ``McpClient.stdio``
and hands the server's tools to a ChatClient through ``McpToolProvider``: the tool loop calls the
tool over MCP exactly as it would call a local ``@tool``. Runs offline on ``ScriptedChatModel``
(its script plays the model's tool call; the server really runs). Needs ``pip install 'chatclient[mcp]'``.
Set ``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to let a real model decide.
"""

from __future__ import annotations

import sys

from _support import make_model

from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool

ORDERS = {"A-42": "shipped on Monday, arriving Thursday", "B-7": "waiting for payment"}


@tool
def order_status(order_id: str) -> str:
    """Where an order is.

    Args:
        order_id: The order number, e.g. A-42.
    """
    return ORDERS.get(order_id, f"no order {order_id}")


def complaint(order_id: str, tone: str = "polite") -> str:
    """Write a complaint about a late order."""
    return f"Write a {tone} complaint about order {order_id}, which is late."


def run_server() -> None:
    from chatclient.mcp import serve

    # stdout carries the protocol in this mode: nothing else may print to it.
    serve(
        tools=[order_status],
        resources={"policy://returns": "Items can be returned within 30 days with the receipt."},
        prompts=[complaint],
        name="shop",
    )


def main() -> None:
    from chatclient.mcp import McpClient, McpToolProvider

    script = [
        AssistantMessage(None, (ToolCall("call_1", "order_status", '{"order_id": "A-42"}'),)),
        "Your order A-42 shipped on Monday and arrives Thursday.",
    ]
    client = ChatClient.create(make_model(ScriptedChatModel(script)))

    with McpClient.stdio(sys.executable, [__file__, "--serve"]) as shop:
        print("server:", shop.name, "| protocol", shop.protocol_version)
        print("tools:", [t.name for t in shop.list_tools()])

        response = client.prompt("Where is my order A-42?").tools(McpToolProvider(shop)).call().chat_client_response()
        for execution in response.tool_executions:
            print(f"  [mcp tool] {execution.name}({execution.arguments}) -> {execution.result}")
        print("answer:", response.chat_response.text if response.chat_response else None)

        [policy] = shop.read_resource("policy://returns")
        print("resource:", policy.metadata["source"], "->", policy.text)

        messages = shop.get_prompt("complaint", {"order_id": "A-42", "tone": "firm"})
        print("prompt messages:", [m.text for m in messages])


if __name__ == "__main__":
    if "--serve" in sys.argv:
        run_server()
    else:
        main()
