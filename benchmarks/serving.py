"""openai_app under Uvicorn against a bare Starlette endpoint sending the same chunks.

One Uvicorn server process hosts both: ``openai_app`` over a ChatClient whose zero-latency model
streams ``CHUNKS`` text pieces, and bare Starlette endpoints that send the same OpenAI chunk frames
(built with ``json.dumps`` per chunk, as a hand-written endpoint would) with no client, chain or
events. The load generator (aiohttp, else httpx) runs in this process; rounds alternate between the
two targets so both see the same machine load.

Figures: streamed chunks per wall second with 256 concurrent streams, and per second of the server
process's CPU (what the server itself spends, independent of the load generator); whole answers per
second with 64 callers. Goal: openai_app >= 0.8x the bare endpoint.

    .venv/bin/python benchmarks/serving.py [--streams 256] [--chunks 40] [--callers 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PIECE = "token "


def build_app(chunks: int) -> Any:
    """The server's app: openai_app at /v1/..., the bare endpoints at /bare/..."""
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Mount, Route

    from chatclient import ChatClient
    from chatclient.messages import AssistantMessage
    from chatclient.models.base import BaseChatModel, ChatResponse, ChatResponseMetadata, Generation, Usage
    from chatclient.prompt import Prompt
    from chatclient.serving import openai_app

    class InstantModel(BaseChatModel):
        """Answers at once: ``chunks`` pieces streamed, or all of them in one answer."""

        def call(self, prompt: Prompt) -> ChatResponse:
            usage = Usage(prompt_tokens=5, completion_tokens=chunks)
            return ChatResponse((Generation(AssistantMessage(PIECE * chunks)),), ChatResponseMetadata(usage=usage))

        async def acall(self, prompt: Prompt) -> ChatResponse:
            return self.call(prompt)

        async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
            for _ in range(chunks):
                yield ChatResponse((Generation(AssistantMessage(PIECE)),))

    def frame(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "chatcmpl-bare",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "chatclient",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    async def bare_stream(request: Any) -> Any:
        await request.body()

        async def frames() -> AsyncIterator[bytes]:
            yield frame({"role": "assistant", "content": ""})
            for _ in range(chunks):
                yield frame({"content": PIECE})
            yield frame({}, "stop")
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def bare_whole(request: Any) -> Any:
        await request.json()
        message = {"role": "assistant", "content": PIECE * chunks, "refusal": None}
        return JSONResponse(
            {
                "id": "chatcmpl-bare",
                "object": "chat.completion",
                "created": 0,
                "model": "chatclient",
                "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": chunks, "total_tokens": 5 + chunks},
            }
        )

    return Starlette(
        routes=[
            Route("/bare/stream", bare_stream, methods=["POST"]),
            Route("/bare/whole", bare_whole, methods=["POST"]),
            Mount("/", openai_app(ChatClient.create(InstantModel()))),
        ]
    )


def serve(port: int, chunks: int) -> None:
    import uvicorn

    uvicorn.run(build_app(chunks), host="127.0.0.1", port=port, log_level="error", access_log=False)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


BODY = {"model": "chatclient", "messages": [{"role": "user", "content": "hi"}]}


async def stream_round(session: Any, url: str, streams: int) -> tuple[int, float]:
    """``streams`` concurrent streamed requests to the end: (content chunks received, wall seconds)."""
    payload = json.dumps({**BODY, "stream": True}).encode()
    headers = {"content-type": "application/json"}

    async def one() -> int:
        count = 0
        async with session.post(url, data=payload, headers=headers) as response:
            assert response.status == 200, response.status
            buffer = b""
            async for data in response.content.iter_any():
                buffer += data
                *events, buffer = buffer.split(b"\n\n")
                count += sum(1 for e in events if b"token " in e)
        return count

    start = time.perf_counter()
    counts = await asyncio.gather(*(one() for _ in range(streams)))
    return sum(counts), time.perf_counter() - start


async def whole_round(session: Any, url: str, callers: int, seconds: float) -> tuple[int, float]:
    """``callers`` loops posting whole requests for ``seconds``: (answers, wall seconds)."""
    payload = json.dumps(BODY).encode()
    headers = {"content-type": "application/json"}
    stop = time.perf_counter() + seconds

    async def caller() -> int:
        done = 0
        while time.perf_counter() < stop:
            async with session.post(url, data=payload, headers=headers) as response:
                assert response.status == 200, response.status
                await response.read()
            done += 1
        return done

    start = time.perf_counter()
    done = await asyncio.gather(*(caller() for _ in range(callers)))
    return sum(done), time.perf_counter() - start


async def measure(base: str, pid: int, args: argparse.Namespace) -> None:
    import aiohttp

    targets = {"openai_app": base + "/v1/chat/completions", "bare": base + "/bare/"}
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=300)) as session:
        await stream_round(session, targets["openai_app"], 8)  # warm-up: imports, connections
        await stream_round(session, targets["bare"] + "stream", 8)
        streamed: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
        whole: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
        for _ in range(args.rounds):
            for name, url in targets.items():
                cpu = cpu_seconds(pid)
                chunks, wall = await stream_round(
                    session, url if name == "openai_app" else url + "stream", args.streams
                )
                cpu = cpu_seconds(pid) - cpu
                assert chunks == args.streams * args.chunks, (name, chunks)
                streamed[name].append((chunks / wall, chunks / max(cpu, 1e-9)))
            for name, url in targets.items():
                cpu = cpu_seconds(pid)
                answers, wall = await whole_round(
                    session, url if name == "openai_app" else url + "whole", args.callers, args.seconds
                )
                cpu = cpu_seconds(pid) - cpu
                whole[name].append((answers / wall, answers / max(cpu, 1e-9)))

    def best(rows: list[tuple[float, float]]) -> tuple[float, float]:
        return max(r[0] for r in rows), max(r[1] for r in rows)

    print(f"{args.streams} concurrent streams x {args.chunks} chunks, {args.rounds} alternating rounds (best):")
    for name in targets:
        wall, cpu = best(streamed[name])
        print(f"  {name:10s} {wall:9,.0f} chunks/s wall   {cpu:9,.0f} chunks per server CPU-second")
    (ow, oc), (bw, bc) = best(streamed["openai_app"]), best(streamed["bare"])
    print(f"  ratio      {ow / bw:9.2f}x wall           {oc / bc:9.2f}x per server CPU-second   (goal >= 0.8x)")
    print(f"{args.callers} callers, whole answers for {args.seconds:g} s per round (best):")
    for name in targets:
        wall, cpu = best(whole[name])
        print(f"  {name:10s} {wall:9,.0f} req/s wall      {cpu:9,.0f} req per server CPU-second")
    (ow, oc), (bw, bc) = best(whole["openai_app"]), best(whole["bare"])
    print(f"  ratio      {ow / bw:9.2f}x wall           {oc / bc:9.2f}x per server CPU-second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=256)
    parser.add_argument("--chunks", type=int, default=40)
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0, help="length of a whole-answer round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.chunks)
        return
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    cmd = [sys.executable, __file__, "--serve", str(port), "--chunks", str(args.chunks)]
    server = subprocess.Popen(cmd, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("the benchmark server did not start") from None
                time.sleep(0.1)
        asyncio.run(measure(f"http://127.0.0.1:{port}", server.pid, args))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
