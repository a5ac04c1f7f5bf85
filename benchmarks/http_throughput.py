"""Async HTTP throughput of OpenAIChatModel next to the official ``openai`` SDK, same server, same run.

The loopback server's instant responder (``tests.support.loopback.main``: a minimal asyncio HTTP/1.1
keep-alive server) runs in a separate process and answers every request at once with the same
canned chat completion, so what is measured is
the client's own cost: building the request, the HTTP round trip over 127.0.0.1, parsing the answer.
For 1, 16 and 256 concurrent callers it prints requests/s and p50/p99 latency per call for both
clients and the ratio (ours / SDK; above 1.0 means chatclient is faster). Each level runs both
clients alternately, three times, and keeps each client's best round, which evens out noise from other
work on the machine.

    .venv/bin/pip install openai          # for this benchmark only
    .venv/bin/python benchmarks/http_throughput.py [--requests-scale 1.0]
"""

from __future__ import annotations

import argparse
import asyncio
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
    proc, base_url = start_server()
    messages = [{"role": "user", "content": "Hello"}]
    prompt = Prompt("Hello")
    try:
        ours = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=base_url, timeout=60.0)
        sdk = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, timeout=60.0)

        async def call_ours() -> object:
            return await ours.acall(prompt)

        async def call_sdk() -> object:
            return await sdk.chat.completions.create(model="gpt-test", messages=messages)  # type: ignore[arg-type]

        # Warm both pools and code paths.
        await run_level(call_ours, 8, 200)
        await run_level(call_sdk, 8, 200)
        print(f"openai SDK {openai.__version__}; server: instant asyncio responder in a separate process\n")
        header = f"{'concurrency':>11} | {'client':<10} | {'req/s':>8} | {'p50 ms':>8} | {'p99 ms':>8}"
        print(header)
        print("-" * len(header))
        for concurrency, total in LEVELS.items():
            n = max(concurrency, int(total * scale))
            best: dict[str, Result] = {}
            for _ in range(ROUNDS):
                for name, fn in (("chatclient", call_ours), ("openai", call_sdk)):
                    r = await run_level(fn, concurrency, n)
                    if name not in best or r.rps > best[name].rps:
                        best[name] = r
            for name in ("chatclient", "openai"):
                r = best[name]
                print(f"{concurrency:>11} | {name:<10} | {r.rps:>8.0f} | {r.p50_ms:>8.2f} | {r.p99_ms:>8.2f}")
            ratio = best["chatclient"].rps / best["openai"].rps
            print(f"{'':>11} | ratio req/s chatclient/openai = {ratio:.2f}")
        await ours.aclose()
        await sdk.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description="chatclient vs openai SDK async HTTP throughput")
    parser.add_argument("--requests-scale", type=float, default=1.0, help="scale the number of requests per level")
    args = parser.parse_args()
    asyncio.run(main_async(args.requests_scale))


if __name__ == "__main__":
    main()
