"""Framework overhead per call: a zero-latency model behind chains of 0, 1, 5 and 20 advisors.

Run: .venv/bin/python benchmarks/overhead.py
Prints the median microseconds per full ``client.prompt(...).call().content()`` (and the async
twin), so what is measured is everything chatclient does around the model: building the request,
sorting and walking the chain, the terminal advisor, and the response spec.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatclient import BaseAdvisor, ChatClient, ChatResponse, Prompt
from chatclient.models.base import BaseChatModel

ANSWER = ChatResponse.of_text("ok")


class InstantModel(BaseChatModel):
    """Answers immediately with a prebuilt response, so only framework time is measured."""

    def call(self, prompt: Prompt) -> ChatResponse:
        return ANSWER

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return ANSWER


class Identity(BaseAdvisor):
    def __init__(self, order: int) -> None:
        self.order = order


def client_with(n: int) -> ChatClient:
    return ChatClient.builder(InstantModel()).default_advisors(*(Identity(i) for i in range(n))).build()


def median_us_sync(client: ChatClient, rounds: int = 15, per_round: int = 400) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(per_round):
            client.prompt("hi").call().content()
        samples.append((time.perf_counter_ns() - start) / per_round / 1000)
    return statistics.median(samples), min(samples)


def median_us_async(client: ChatClient, rounds: int = 15, per_round: int = 400) -> tuple[float, float]:
    async def run() -> tuple[float, float]:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            for _ in range(per_round):
                await client.prompt("hi").acall().content()
            samples.append((time.perf_counter_ns() - start) / per_round / 1000)
        return statistics.median(samples), min(samples)

    return asyncio.run(run())


def import_time_ms() -> tuple[float, list[str]]:
    code = (
        "import sys, time; t=time.perf_counter(); import chatclient; d=time.perf_counter()-t; "
        "heavy=[m for m in ('numpy','jsonschema','httpx','pydantic','chatclient.models.openai',"
        "'chatclient.models.anthropic','chatclient.models.ollama') if m in sys.modules]; print(d*1000); print(heavy)"
    )
    # Measure as a user's install would run: with bytecode caches (some sandboxes set
    # PYTHONDONTWRITEBYTECODE, which makes every import recompile the sources). One warm-up run writes them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import chatclient"], env=env, check=True)
    runs = []
    heavy: list[str] = []
    for _ in range(5):
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        out = result.stdout.split("\n")
        runs.append(float(out[0]))
        heavy = eval(out[1])  # our own subprocess's printed list
    return statistics.median(runs), heavy


def main() -> None:
    print("µs per call: median of 15 rounds (best round in brackets; on a busy machine the best is the fairer figure)")
    print("chain length | sync µs/call     | async µs/call")
    results = {}
    for n in (0, 1, 5, 20):
        client = client_with(n)
        median_us_sync(client, rounds=2, per_round=100)  # warm-up
        s = median_us_sync(client)
        a = median_us_async(client)
        results[n] = (s, a)
        print(f"{n:12d} | {s[0]:7.1f} ({s[1]:5.1f}) | {a[0]:7.1f} ({a[1]:5.1f})")
    per_advisor = (results[20][0][1] - results[0][0][1]) / 20
    print(f"marginal cost per advisor (sync, best rounds): {per_advisor:.2f} µs")
    print(f"target: 5 advisors sync under 60 µs -> {'met' if results[5][0][0] < 60 else 'NOT met'} (median)")
    ms, heavy = import_time_ms()
    print(f"import chatclient: {ms:.1f} ms (median of 5 fresh interpreters); heavy modules imported: {heavy or 'none'}")


if __name__ == "__main__":
    main()
