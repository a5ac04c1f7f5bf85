"""Streams at scale: per-chunk cost through the chain, memory per open stream, 1,000 concurrent streams.

    .venv/bin/python benchmarks/streams.py [--streams 1000] [--chunks 200]

1. Per-chunk cost of ``stream().content()`` (sync and async) over an in-process model that yields
   prebuilt chunks, with 0 and with 5 pass-through advisors: what the chain adds per chunk.
2. Memory per open stream: N streams against a local SSE server, each read up to its first chunk
   and held open (tracemalloc, Python allocations only), with httpx's transport and with
   ``AiohttpTransport``.
3. ``--streams`` concurrent streams of ``--chunks`` chunks each against that server, all read to
   the end: time, chunks/s, errors, and the peak of Python allocations.
4. The model alone against a raw client: ``OpenAIChatModel.astream`` (no advisors) on the socket
   lane and on httpx (``socket_lane=False``), against a raw aiohttp client that reads the same SSE
   and parses each data line with ``json.loads``; 1 and 256 concurrent streams of 50 chunks, the
   best of ``--rounds`` runs each, chunks/s and the ratio to raw aiohttp.

The server is a minimal asyncio HTTP/1.1 responder in a separate process (``--serve``), answering
every request with the same OpenAI-format SSE body, so the client side is what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatclient import BaseAdvisor, ChatClient, ChatResponse, Prompt  # noqa: E402
from chatclient.models.base import BaseChatModel  # noqa: E402

# -- 1. per-chunk cost ---------------------------------------------------------------------------


def _chunks(n: int) -> list[ChatResponse]:
    # as from a provider: only the last chunk carries a finish reason
    return [ChatResponse.of_text(f"w{i} ", finish_reason=None) for i in range(n - 1)] + [ChatResponse.of_text("end")]


class ChunkModel(BaseChatModel):
    def __init__(self, n: int) -> None:
        self.chunks = _chunks(n)

    def call(self, prompt: Prompt) -> ChatResponse:
        return ChatResponse.of_text("".join(c.result.output.text or "" for c in self.chunks))

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        return iter(self.chunks)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in self.chunks:
            yield chunk


class PassThrough(BaseAdvisor):
    def __init__(self, order: int) -> None:
        self.order = order


def per_chunk_us(advisors: int, use_async: bool, chunks: int = 200, rounds: int = 15) -> float:
    """Median µs per chunk over ``rounds`` samples of 5 whole streams each. The async streams of
    all samples run in one event loop (``asyncio.run`` per stream would add the loop's start-up,
    ~100 µs, to every 200 chunks)."""
    client = ChatClient.builder(ChunkModel(chunks)).default_advisors(*(PassThrough(i) for i in range(advisors))).build()

    def one_sync() -> None:
        for _ in client.prompt("hi").stream().content():
            pass

    async def one_async() -> None:
        async for _ in client.prompt("hi").astream().content():
            pass

    async def async_samples() -> list[float]:
        await one_async()  # warm
        out = []
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(5):
                await one_async()
            out.append((time.perf_counter() - start) / (5 * chunks) * 1e6)
        return out

    if use_async:
        return statistics.median(asyncio.run(async_samples()))
    samples = []
    one_sync()
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(5):
            one_sync()
        samples.append((time.perf_counter() - start) / (5 * chunks) * 1e6)
    return statistics.median(samples)


# -- the SSE server ------------------------------------------------------------------------------


def sse_body(chunks: int) -> bytes:
    lines = []
    for i in range(chunks):
        event = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "finish_reason": None}],
        }
        lines.append(b"data: " + json.dumps(event).encode() + b"\n\n")
    last = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    }
    lines.append(b"data: " + json.dumps(last).encode() + b"\n\n")
    lines.append(b"data: [DONE]\n\n")
    return b"".join(lines)


class _SSEProtocol(asyncio.Protocol):
    def __init__(self, response: bytes) -> None:
        self.response = response
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").lower()
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip() == "content-length":
                    length = int(value.strip())
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            assert self.transport is not None
            self.transport.write(self.response)


def serve(chunks: int) -> None:
    body = sse_body(chunks)
    response = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _SSEProtocol(response), "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(run())


def start_server(chunks: int) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--chunks", str(chunks)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise SystemExit(f"SSE server did not start (got {port!r})")
    return proc, f"http://127.0.0.1:{port}/v1"


# -- 2 and 3: open streams and many streams -------------------------------------------------------


def make_client(base_url: str, transport: str) -> tuple[ChatClient, Any]:
    import httpx

    from chatclient.models.openai import OpenAIChatModel

    aclient = None
    if transport == "aiohttp":
        from chatclient.models.http.aiohttp_transport import AiohttpTransport

        aclient = httpx.AsyncClient(transport=AiohttpTransport(limit=0), timeout=120.0)
    model = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=base_url, timeout=120.0, async_http_client=aclient)
    client = ChatClient.builder(model).default_advisors(*(PassThrough(i) for i in range(5))).build()
    return client, aclient


async def memory_per_open_stream(base_url: str, transport: str, n: int) -> float:
    client, aclient = make_client(base_url, transport)
    # warm the pool and the code paths, then measure
    async for _ in client.prompt("hi").astream().content():
        pass
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    streams = []
    for _ in range(n):
        it = client.prompt("hi").astream().content().__aiter__()
        await it.__anext__()
        streams.append(it)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    for it in streams:
        await it.aclose()
    if aclient is not None:
        await aclient.aclose()
    return (after - before) / n / 1024


async def many_streams(base_url: str, transport: str, n: int, chunks: int) -> dict[str, float]:
    client, aclient = make_client(base_url, transport)
    errors = 0
    counts: list[int] = []

    async def one() -> None:
        nonlocal errors
        try:
            count = 0
            async for _ in client.prompt("hi").astream().content():
                count += 1
            counts.append(count)
        except Exception:
            errors += 1

    tracemalloc.start()
    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if aclient is not None:
        await aclient.aclose()
    complete = sum(1 for c in counts if c == chunks)
    return {
        "seconds": elapsed,
        "errors": errors,
        "complete": complete,
        "chunks_per_s": sum(counts) / elapsed,
        "peak_mb": peak / 2**20,
    }


async def model_streams(base_url: str, path: str, n: int, chunks: int) -> tuple[float, float]:
    """Chunks per second and per CPU-second of ``n`` concurrent ``OpenAIChatModel.astream`` calls
    (no client, no advisors)."""
    from chatclient.models.openai import OpenAIChatModel

    model = OpenAIChatModel(
        "gpt-test", api_key="sk-bench", base_url=base_url, timeout=120.0, socket_lane=path == "lane"
    )
    prompt = Prompt("hi")

    async def one() -> int:
        count = 0
        async for _ in model.astream(prompt):
            count += 1
        return count

    await one()  # warm the pool and the code paths
    start, cpu = time.perf_counter(), time.process_time()
    counts = await asyncio.gather(*(one() for _ in range(n)))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    await model.aclose()
    if sum(counts) != n * (chunks + 1):  # 50 deltas and the finishing chunk
        raise SystemExit(f"{path}: {sum(counts)} chunks, expected {n * (chunks + 1)}")
    return sum(counts) / elapsed, sum(counts) / cpu


async def raw_aiohttp_streams(base_url: str, n: int, chunks: int) -> tuple[float, float]:
    """Chunks per second and per CPU-second of ``n`` concurrent raw aiohttp POSTs reading the SSE
    lines and parsing each event."""
    import aiohttp

    body = json.dumps({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one() -> int:
            count = 0
            async with session.post(base_url + "/chat/completions", data=body, headers=headers) as response:
                async for raw in response.content:
                    line = raw.strip()
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        json.loads(line[6:])
                        count += 1
            return count

        await one()
        start, cpu = time.perf_counter(), time.process_time()
        counts = await asyncio.gather(*(one() for _ in range(n)))
        elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return sum(counts) / elapsed, sum(counts) / cpu


def compare_with_raw(rounds: int) -> None:
    chunks = 50
    proc, base_url = start_server(chunks)
    try:
        print(
            f"\n4. OpenAIChatModel.astream against raw aiohttp, {chunks}-chunk SSE streams, best of {rounds} "
            "interleaved rounds: chunks per second of wall time, and per CPU-second of the client process "
            "(steadier on a shared machine)"
        )
        for n in (1, 256):
            best: dict[str, list[float]] = {"raw": [0.0, 0.0], "lane": [0.0, 0.0], "httpx": [0.0, 0.0]}
            ratios: list[tuple[float, float]] = []  # lane / raw of each round (wall, CPU)
            for _ in range(rounds):
                got_round: dict[str, tuple[float, float]] = {}
                for name in best:
                    if name == "raw":
                        got = asyncio.run(raw_aiohttp_streams(base_url, n, chunks))
                    else:
                        got = asyncio.run(model_streams(base_url, name, n, chunks))
                    got_round[name] = got
                    best[name] = [max(best[name][0], got[0]), max(best[name][1], got[1])]
                raw_round, lane_round = got_round["raw"], got_round["lane"]
                ratios.append((lane_round[0] / raw_round[0], lane_round[1] / raw_round[1]))
            (raw, raw_cpu), (lane, lane_cpu), (hx, hx_cpu) = best["raw"], best["lane"], best["httpx"]
            print(
                f"   {n:3} streams: raw aiohttp {raw:8,.0f}/s {raw_cpu:8,.0f}/CPU-s | socket lane {lane:8,.0f}/s "
                f"({lane / raw:.2f}x) {lane_cpu:8,.0f}/CPU-s ({lane_cpu / raw_cpu:.2f}x) | httpx {hx:8,.0f}/s "
                f"({hx / raw:.2f}x) {hx_cpu:8,.0f}/CPU-s ({hx_cpu / raw_cpu:.2f}x)"
            )
            walls, cpus = [r[0] for r in ratios], [r[1] for r in ratios]
            print(
                f"       lane / raw aiohttp round by round: wall {min(walls):.2f}-{max(walls):.2f}x, "
                f"CPU {min(cpus):.2f}-{max(cpus):.2f}x"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def chain_per_chunk(repeats: int = 3) -> None:
    print(
        "1. per-chunk cost of stream().content() / astream().content(), 200-chunk streams from an in-process "
        "model of prebuilt chunks, 0 and 5 pass-through advisors (BaseAdvisor subclasses overriding nothing); "
        "each figure the median of 15 samples of 5 streams (async: all in one event loop), the 0/5 runs "
        f"interleaved {repeats} times, lowest and highest median shown (µs per chunk)"
    )
    for use_async in (False, True):
        zero, five = [], []
        for _ in range(repeats):
            zero.append(per_chunk_us(0, use_async))
            five.append(per_chunk_us(5, use_async))
        mode = "async" if use_async else "sync "
        print(
            f"   {mode}: 0 advisors {min(zero):.2f}-{max(zero):.2f} | 5 advisors {min(five):.2f}-{max(five):.2f} | "
            f"chain of 5 adds {min(five) - min(zero):+.2f} per chunk (lowest medians)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each part of 4., the best is kept")
    parser.add_argument("--only-raw-comparison", action="store_true", help="run only part 4")
    parser.add_argument("--only-chain", action="store_true", help="run only part 1")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.chunks)
        return
    if args.only_raw_comparison:
        compare_with_raw(args.rounds)
        return
    if args.only_chain:
        chain_per_chunk()
        return

    chain_per_chunk()

    proc, base_url = start_server(args.chunks)
    try:
        print(f"\n2. memory per open stream (5 advisors, first chunk read, {args.chunks}-chunk SSE body)")
        for transport in ("httpx", "aiohttp"):
            kib = asyncio.run(memory_per_open_stream(base_url, transport, 200))
            print(f"   {transport:8} {kib:.1f} KiB per open stream (Python allocations, 200 streams held open)")
        print(f"\n3. {args.streams} concurrent streams x {args.chunks} chunks, read to the end (5 advisors)")
        for transport in ("httpx", "aiohttp"):
            r = asyncio.run(many_streams(base_url, transport, args.streams, args.chunks))
            print(
                f"   {transport:8} {r['seconds']:.1f} s, {r['chunks_per_s']:.0f} chunks/s, complete "
                f"{r['complete']:.0f}/{args.streams}, errors {r['errors']:.0f}, peak Python memory {r['peak_mb']:.0f} MiB"
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    compare_with_raw(args.rounds)


if __name__ == "__main__":
    main()
