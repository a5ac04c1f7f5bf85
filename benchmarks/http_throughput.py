"""HTTP throughput of OpenAIChatModel next to the official ``openai`` SDK and raw clients, same server, same run.

Async: five clients take turns on the same server: chatclient on httpx's default transport,
chatclient on ``AiohttpTransport`` (extra ``aiohttp``; its POSTs take the direct path past httpx's
client layer), the official SDK, and two raw clients that only POST the same body and parse the
bytes — plain ``httpx.AsyncClient`` and an ``aiohttp`` session, the ceiling of a Python client here.
Sync (``--threads``, and after the async table by default): one shared model (its non-streaming
POSTs go through ``http.client``), the sync SDK, and raw ``http.client`` with a connection per thread.

The loopback server's instant responder (``tests.support.loopback.main``: a minimal asyncio HTTP/1.1
keep-alive server) runs in a separate process and answers every request at once with the same
canned chat completion, so what is measured is the client's own cost: building the request, the
HTTP round trip over 127.0.0.1, parsing the answer. For 1, 16 and 256 concurrent callers (1, 16 and
64 threads) it prints requests/s and p50/p99 latency per call, then chatclient's ratios: to the SDK
(above 1.0 means chatclient is faster), to the raw ceiling, to its own single-caller rate (the
collapse check) and p99/p50. Each level runs every client in turn, three times, and keeps each
client's best round, which evens out noise from other work on the machine.

    .venv/bin/pip install -e '.[aiohttp,bench]'   # the SDK and aiohttp, for this benchmark only
    .venv/bin/python benchmarks/http_throughput.py [--requests-scale 1.0] [--threads]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatclient.models.openai import OpenAIChatModel  # noqa: E402
from chatclient.prompt import Prompt  # noqa: E402

LEVELS = {1: 400, 16: 2000, 256: 4096}  # concurrency -> requests per round
ROUNDS = 3


@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float


async def run_level(call: Callable[[], Awaitable[object]], concurrency: int, total: int) -> Result:
    latencies: list[float] = []
    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Result(len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000)


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from tests.support.loopback import main; main()"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise SystemExit(f"loopback server did not start (got {port!r})")
    return proc, f"http://127.0.0.1:{port}/v1"


async def main_async(scale: float) -> None:
    try:
        import openai
    except ImportError:
        raise SystemExit("the openai SDK is needed for the comparison: .venv/bin/pip install openai") from None
    import aiohttp
    import httpx

    from chatclient.models.http.aiohttp_transport import AiohttpTransport

    proc, base_url = start_server()
    messages = [{"role": "user", "content": "Hello"}]
    prompt = Prompt("Hello")
    body = json.dumps({"model": "gpt-test", "messages": messages}).encode()
    headers = {"authorization": "Bearer sk-bench", "content-type": "application/json"}
    url = base_url + "/chat/completions"
    try:
        ours = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=base_url, timeout=60.0)
        fast_client = httpx.AsyncClient(transport=AiohttpTransport(), timeout=60.0)
        ours_aiohttp = OpenAIChatModel(
            "gpt-test", api_key="sk-bench", base_url=base_url, timeout=60.0, async_http_client=fast_client
        )
        sdk = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, timeout=60.0)
        raw_httpx = httpx.AsyncClient(timeout=60.0, limits=httpx.Limits(max_connections=1000))
        raw_aiohttp = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1000))

        async def call_ours() -> object:
            return await ours.acall(prompt)

        async def call_ours_aiohttp() -> object:
            return await ours_aiohttp.acall(prompt)

        async def call_sdk() -> object:
            return await sdk.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]

        async def call_httpx() -> object:
            return (await raw_httpx.post(url, content=body, headers=headers)).json()

        async def call_aiohttp() -> object:
            async with raw_aiohttp.post(url, data=body, headers=headers) as r:
                return json.loads(await r.read())

        clients = {
            "chatclient": call_ours,
            "cc+aiohttp": call_ours_aiohttp,
            "openai": call_sdk,
            "raw httpx": call_httpx,
            "raw aiohttp": call_aiohttp,
        }
        for fn in clients.values():  # warm every pool and code path
            await run_level(fn, 8, 200)
        print(f"openai SDK {openai.__version__}; server: instant asyncio responder in a separate process\n")
        header = f"{'concurrency':>11} | {'client':<11} | {'req/s':>8} | {'p50 ms':>8} | {'p99 ms':>8}"
        print(header)
        print("-" * len(header))
        single: dict[str, float] = {}
        for concurrency, total in LEVELS.items():
            n = max(concurrency, int(total * scale))
            best: dict[str, Result] = {}
            for _ in range(ROUNDS):
                for name, fn in clients.items():
                    r = await run_level(fn, concurrency, n)
                    if name not in best or r.rps > best[name].rps:
                        best[name] = r
            for name in clients:
                r = best[name]
                print(f"{concurrency:>11} | {name:<11} | {r.rps:>8.0f} | {r.p50_ms:>8.2f} | {r.p99_ms:>8.2f}")
            for name in ("chatclient", "cc+aiohttp"):
                single.setdefault(name, best[name].rps)
                print(
                    f"{'':>11} | {name}: {best[name].rps / best['openai'].rps:.2f}x the SDK, "
                    f"{best[name].rps / best['raw aiohttp'].rps:.2f}x raw aiohttp, "
                    f"{best[name].rps / single[name]:.0%} of its 1-caller rate, "
                    f"p99/p50 {best[name].p99_ms / best[name].p50_ms:.1f}"
                )
        await ours.aclose()
        await ours_aiohttp.aclose()
        await fast_client.aclose()
        await sdk.close()
        await raw_httpx.aclose()
        await raw_aiohttp.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


THREAD_LEVELS = {1: 400, 16: 1600, 64: 2048}


def run_threads(call: Callable[[], object], threads: int, total: int) -> Result:
    """``total`` sync calls spread over ``threads`` threads."""
    import threading

    latencies: list[float] = []
    lock = threading.Lock()
    remaining = [total]

    def worker() -> None:
        while True:
            with lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            started = time.perf_counter()
            call()
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - started
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return Result(len(latencies) / elapsed, statistics.median(latencies) * 1000, p99 * 1000)


def main_threads(scale: float) -> None:
    """The sync face from threads: one shared model vs the sync SDK and a raw ``http.client`` ceiling."""
    import http.client
    import threading

    import openai

    proc, base_url = start_server()
    prompt = Prompt("Hello")
    messages = [{"role": "user", "content": "Hello"}]
    body = json.dumps({"model": "gpt-test", "messages": messages}).encode()
    headers = {"authorization": "Bearer sk-bench", "content-type": "application/json"}
    hostport = base_url.split("//", 1)[1].split("/", 1)[0]
    local = threading.local()

    def raw_http_client() -> object:
        # The floor of a Python sync client: one kept-alive connection per thread, no pool at all.
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(hostport)
        conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
        return json.loads(conn.getresponse().read())

    try:
        ours = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=base_url, timeout=60.0)
        sdk = openai.OpenAI(api_key="sk-bench", base_url=base_url, timeout=60.0)
        clients: dict[str, Callable[[], object]] = {
            "chatclient": lambda: ours.call(prompt),
            "openai": lambda: sdk.chat.completions.create(model="gpt-test", messages=messages),  # type: ignore[arg-type]
            "http.client": raw_http_client,
        }
        for fn in clients.values():
            run_threads(fn, 4, 200)
        print("\nsync calls from threads (one shared model / SDK client; raw http.client: a connection per thread)")
        header = f"{'threads':>11} | {'client':<11} | {'req/s':>8} | {'p50 ms':>8} | {'p99 ms':>8}"
        print(header)
        print("-" * len(header))
        single: dict[str, float] = {}
        for threads, total in THREAD_LEVELS.items():
            n = max(threads, int(total * scale))
            best: dict[str, Result] = {}
            for _ in range(ROUNDS):
                for name, fn in clients.items():
                    r = run_threads(fn, threads, n)
                    if name not in best or r.rps > best[name].rps:
                        best[name] = r
            for name in clients:
                r = best[name]
                single.setdefault(name, r.rps)
                print(f"{threads:>11} | {name:<11} | {r.rps:>8.0f} | {r.p50_ms:>8.2f} | {r.p99_ms:>8.2f}")
            ours_r = best["chatclient"]
            print(
                f"{'':>11} | chatclient: {ours_r.rps / best['openai'].rps:.2f}x the SDK, "
                f"{ours_r.rps / best['http.client'].rps:.2f}x raw http.client, "
                f"{ours_r.rps / single['chatclient']:.0%} of its 1-thread rate, p99/p50 {ours_r.p99_ms / ours_r.p50_ms:.1f}"
            )
        ours.close()
        sdk.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="chatclient vs openai SDK async HTTP throughput")
    parser.add_argument("--requests-scale", type=float, default=1.0, help="scale the number of requests per level")
    parser.add_argument("--threads", action="store_true", help="only the sync-from-threads comparison")
    args = parser.parse_args()
    if not args.threads:
        asyncio.run(main_async(args.requests_scale))
    main_threads(args.requests_scale)


if __name__ == "__main__":
    main()
