"""A2A serving: how much memory finished tasks keep, with the bounded task store and without it.

Run: .venv/bin/python benchmarks/a2a_task_store.py [--messages 100] [--size 900000]
(needs the a2a extra: pip install 'chatclient[a2a]')

An echo agent is served on 127.0.0.1 and sent ``--messages`` messages of ``--size`` characters,
each a new task (the message and its answer, both kept in the task). Each configuration runs in a
fresh interpreter so resident memory starts equal:

1. the default: ``a2a_app``'s bounded store (``max_finished_bytes`` 64 MiB, ``max_finished_tasks`` 1,000);
2. the SDK's ``InMemoryTaskStore`` passed as ``task_store`` (what the server used before issue 36).

Printed per configuration: tasks and serialized bytes the store holds at the end (through the
SDK's ``TaskStore.list``), and the growth of the process's resident memory (VmRSS).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_run(bounded: bool, messages: int, size: int) -> dict[str, Any]:
    import httpx
    from a2a.auth.user import UnauthenticatedUser
    from a2a.server.context import ServerCallContext
    from a2a.server.tasks import InMemoryTaskStore
    from a2a.types import ListTasksRequest

    from chatclient.a2a import serve_a2a
    from chatclient.agents import agent_function

    @agent_function(output_key="answer")
    def echo(request: str) -> str:
        return request

    store = None if bounded else InMemoryTaskStore()
    options: dict[str, Any] = {"max_request_bytes": size * 2}
    if store is not None:
        options["task_store"] = store
    with serve_a2a(echo, **options) as server, httpx.Client(timeout=60) as http:
        def send(text: str) -> None:
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
            answer = http.post(server.url, json=body, headers={"A2A-Version": "1.0"})
            assert "result" in answer.json(), answer.text[:200]

        send("warm-up")
        before = rss_mib()
        for n in range(messages):
            send(f"{n:06d}" + "x" * size)
        after = rss_mib()
        held_store = store if store is not None else server._server.config.app.task_store

        async def held() -> tuple[int, int]:
            page = await held_store.list(ListTasksRequest(page_size=100_000), ServerCallContext(user=UnauthenticatedUser()))
            return len(page.tasks), sum(task.ByteSize() for task in page.tasks)

        tasks, stored = asyncio.run(held())
    return {"bounded": bounded, "tasks": tasks, "stored_mib": stored / 2**20, "rss_growth_mib": after - before}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--size", type=int, default=900_000)
    parser.add_argument("--child", choices=["bounded", "sdk"])
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_run(args.child == "bounded", args.messages, args.size)))
        return
    sent = args.messages * args.size * 2 / 2**20
    print(f"{args.messages} messages of {args.size:,} characters ({sent:,.0f} MiB of message + answer text)")
    for child in ("bounded", "sdk"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", child, "--messages", str(args.messages), "--size", str(args.size)],
            capture_output=True, text=True, check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        label = "bounded store (default)" if row["bounded"] else "SDK InMemoryTaskStore"
        print(
            f"{label:26} tasks held {row['tasks']:5d}   stored {row['stored_mib']:7.1f} MiB   "
            f"RSS growth {row['rss_growth_mib']:7.1f} MiB"
        )


if __name__ == "__main__":
    main()
