"""A raw stdio MCP server that sends oversized messages (``python mcp_oversized_server.py PIDFILE [MODE]``).

It writes its pid to PIDFILE, answers ``initialize`` and ``tools/list`` normally, then per tool:
  exact(total)  answers with a response line of exactly ``total`` bytes (newline not counted)
  flood(size)   answers with one valid JSON line of ``size`` bytes, written in 1 MiB pieces
  endless       prints ``x`` with no newline, forever
  noisy         prints a line that is not JSON, then answers normally
MODE ``huge-init`` answers ``initialize`` itself with a 20 MB line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

out = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def padded(message_id: Any, total: int) -> bytes:
    """A tools/call response whose JSON line is exactly ``total`` bytes long."""

    def line(text: str) -> bytes:
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        return json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}).encode()

    return line("y" * (total - len(line(""))))


def flood(message_id: Any, size: int) -> None:
    data = padded(message_id, size)
    for start in range(0, len(data), 1 << 20):
        out.write(data[start : start + (1 << 20)])
        out.flush()
    out.write(b"\n")
    out.flush()


def main() -> None:
    with open(sys.argv[1], "w", encoding="ascii") as pidfile:
        pidfile.write(str(os.getpid()))
    mode = sys.argv[2] if len(sys.argv) > 2 else ""
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("exact", "flood", "endless", "noisy")]
    for raw in sys.stdin:
        message = json.loads(raw)
        if "id" not in message:
            continue
        method, message_id = message.get("method"), message["id"]
        if method == "initialize":
            if mode == "huge-init":
                flood(message_id, 20_000_000)
                continue
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fixture-oversized", "version": "1.0"},
            }
            send({"jsonrpc": "2.0", "id": message_id, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": message_id, "result": {"tools": tools}})
        elif method == "tools/call":
            name, args = message["params"]["name"], message["params"].get("arguments") or {}
            if name == "exact":
                out.write(padded(message_id, int(args["total"])) + b"\n")
                out.flush()
            elif name == "flood":
                flood(message_id, int(args["size"]))
            elif name == "endless":
                piece = b"x" * 65536
                while True:
                    out.write(piece)
                    out.flush()
            elif name == "noisy":
                out.write(b"this is not JSON-RPC\n")
                send({"jsonrpc": "2.0", "id": message_id, "result": {"content": [{"type": "text", "text": "ok"}]}})
        else:
            send({"jsonrpc": "2.0", "id": message_id, "error": {"code": -32601, "message": "no such method"}})


if __name__ == "__main__":
    main()
