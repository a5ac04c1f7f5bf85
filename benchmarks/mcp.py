"""Per-call cost of an MCP tool over stdio against the same function as a local ``@tool``.

Run: .venv/bin/python benchmarks/mcp.py [--calls 300]

The MCP server is chatclient's own ``serve()`` (tests/integration/mcp_servers.py, mode ``serve``) as
a subprocess, so both sides run the very same ``add`` function. Printed per path: median and p95
microseconds per ``callback.call(arguments)`` (what the tool loop runs for each tool call), for the
sync client (session on its private loop thread) and the async client (session on the caller's
loop), plus one whole tool-loop turn through ``ChatClient`` with a scripted model, and the time to
start the server and finish the handshake.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# This file is named like the SDK package: drop its own folder from the path so `import mcp` finds the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
sys.path.insert(0, str(ROOT))

from chatclient import ChatClient  # noqa: E402
from chatclient.mcp import McpClient, McpToolProvider  # noqa: E402
from chatclient.messages import AssistantMessage, ToolCall  # noqa: E402
from chatclient.testing import ScriptedChatModel  # noqa: E402
from chatclient.tools import resolve_tools  # noqa: E402
from tests.integration.mcp_servers import add  # noqa: E402

SERVER = [str(ROOT / "tests" / "integration" / "mcp_servers.py"), "serve"]
ARGS = '{"a": 2, "b": 3}'


def summary(samples_ns: list[int]) -> str:
    ordered = sorted(samples_ns)
    median = statistics.median(ordered) / 1000
    p95 = ordered[int(len(ordered) * 0.95) - 1] / 1000
    return f"median {median:9.1f} µs   p95 {p95:9.1f} µs"


def time_sync(fn: object, calls: int) -> list[int]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - start)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls

    [local] = resolve_tools([add])
    for _ in range(50):
        local.call(ARGS)
    local_ns = time_sync(lambda: local.call(ARGS), calls)

    start = time.perf_counter()
    with McpClient.stdio(sys.executable, SERVER) as server:
        startup = time.perf_counter() - start
        [remote] = McpToolProvider(server, tool_filter=["add"]).tool_callbacks()
        assert remote.call(ARGS) == local.call(ARGS) == "5"
        for _ in range(30):
            remote.call(ARGS)
        sync_ns = time_sync(lambda: remote.call(ARGS), calls)

        def one_turn(provider: McpToolProvider) -> None:
            model = ScriptedChatModel([AssistantMessage(None, (ToolCall("1", "add", ARGS),)), "ok"])
            ChatClient.create(model).prompt("add").tools(provider).call().content()

        provider = McpToolProvider(server, tool_filter=["add"])
        loop_ns = time_sync(lambda: one_turn(provider), max(20, calls // 5))

        def local_turn() -> None:
            model = ScriptedChatModel([AssistantMessage(None, (ToolCall("1", "add", ARGS),)), "ok"])
            ChatClient.create(model).prompt("add").tools(add).call().content()

        local_loop_ns = time_sync(local_turn, max(20, calls // 5))

    async def async_side() -> list[int]:
        async with McpClient.stdio(sys.executable, SERVER) as server:
            [remote] = McpToolProvider(server, tool_filter=["add"]).tool_callbacks()
            for _ in range(30):
                await remote.acall(ARGS)
            samples = []
            for _ in range(calls):
                begin = time.perf_counter_ns()
                await remote.acall(ARGS)
                samples.append(time.perf_counter_ns() - begin)
            return samples

    async_ns = asyncio.run(async_side())

    print(f"calls per path: {calls}")
    print(f"server start + initialize + tools/list: {startup * 1000:.0f} ms")
    print(f"local @tool          call(): {summary(local_ns)}")
    print(f"MCP stdio, sync     call(): {summary(sync_ns)}")
    print(f"MCP stdio, async   acall(): {summary(async_ns)}")
    print(f"tool-loop turn (2 model calls), local tool: {summary(local_loop_ns)}")
    print(f"tool-loop turn (2 model calls), MCP tool:   {summary(loop_ns)}")
    overhead = statistics.median(sync_ns) - statistics.median(local_ns)
    print(f"MCP overhead per call (sync, median): {overhead / 1000:.1f} µs")


if __name__ == "__main__":
    main()
