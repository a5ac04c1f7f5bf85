"""A2A: what one call to a remote agent costs over loopback HTTP, on top of running the agent locally.

Run: .venv/bin/python benchmarks/a2a_calls.py        (needs the a2a extra: pip install 'chatclient[a2a]')

Wall time on 127.0.0.1, median of N calls after a warm-up, client and server in this process (the
server in uvicorn's thread), so the machine's load shows in the figures:

1. the served function agent run locally (``agent.run``): the baseline;
2. the same agent through ``a2a_agent(...).arun`` with streaming (SSE) and without (one JSON-RPC
   answer), each call opening its own HTTP client (the default);
3. the streamed path with a 20-chunk model answer: time to the last text delta.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatclient import ChatClient
from chatclient.a2a import a2a_agent, serve_a2a
from chatclient.agents import agent, agent_function
from chatclient.events import TextDelta
from chatclient.testing import ScriptedChatModel

N = 100


@agent_function(output_key="answer")
def echo(request: str) -> str:
    return request.upper()


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def timed(call: Any, n: int = N) -> list[float]:
    for _ in range(5):
        await call()
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


async def main() -> None:
    local = await timed(lambda: echo.arun(request="hello"))
    with serve_a2a(echo) as server:
        streamed = a2a_agent(server.url)
        single = a2a_agent(server.url, streaming=False)
        sse = await timed(lambda: streamed.arun(request="hello"))
        json_rpc = await timed(lambda: single.arun(request="hello"))
    print(f"local run of the function agent: {median_ms(local):8.3f} ms")
    print(f"a2a_agent, streaming (SSE):      {median_ms(sse):8.3f} ms   (+{median_ms(sse) - median_ms(local):.2f} ms)")
    print(f"a2a_agent, one JSON-RPC answer:  {median_ms(json_rpc):8.3f} ms")

    chunks = [f"word{i} " for i in range(20)]
    model = ScriptedChatModel([chunks] * (N // 4 + 5))
    teller = agent(ChatClient.create(model), name="teller", description="tells", user="{{ request }}")
    with serve_a2a(teller) as server:
        remote = a2a_agent(server.url)

        async def stream_all() -> None:
            deltas = [e async for e in remote.astream(request="go") if isinstance(e, TextDelta)]
            assert "".join(delta.text for delta in deltas) == "".join(chunks)

        streams = await timed(stream_all, N // 4)
    print(f"20-chunk answer streamed through a2a_agent, to its last delta: {median_ms(streams):8.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
