"""A soak run: many concurrent calls and streams against a loopback server that misbehaves on purpose.

The server (``LoopbackServer`` in a child process, so the client's memory and descriptors are
measured alone) answers each request by the case named in its prompt: a normal answer, a slow one
(a delayed reply, a stream that stalls mid-body), 429, 503, a connection reset before any answer,
or a stream cut by a TCP reset after a few events. The client runs ``concurrency`` workers that
each send request after request (half calls, half streams) until the time is up; a tenth of the
streams are cancelled by the caller after their first chunk. Every request gets exactly one
outcome, checked against its case: the right text, a typed ``ChatClientError``, or "cancelled".
RSS, open descriptors and open sockets are sampled every second.

    python -m tests.support.soak --serve        # the server alone (prints its port)

``benchmarks/soak.py`` runs it for minutes and prints the figures; ``tests/integration/test_soak.py``
runs it for a minute and asserts on them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.loopback import SSE, Close, LoopbackServer, Recorded, Reply, openai_completion, openai_stream

ROOT = Path(__file__).resolve().parents[2]
PATH = "/v1/chat/completions"
# case -> share of requests (the rest of the mix is "ok")
CASES = {"slow": 0.10, "429": 0.08, "503": 0.08, "reset": 0.08, "cut": 0.08}
FAILING = frozenset({"429", "503", "reset", "cut"})
CANCELLED_SHARE = 0.10  # of the streams
_CASE = re.compile(r"case=(\w+) id=(\d+)")


def expected_text(request_id: int) -> str:
    return f"answer {request_id} done"


def _pieces(request_id: int) -> tuple[str, ...]:
    return ("ans", "wer ", str(request_id), " done")


def respond(rec: Recorded) -> Any:
    """The server's answer for one request, by the case its prompt names."""
    body = rec.body or {}
    text = str((body.get("messages") or [{}])[-1].get("content", ""))
    found = _CASE.search(text)
    case, request_id = (found.group(1), int(found.group(2))) if found else ("ok", 0)
    stream = bool(body.get("stream"))
    if case == "429":
        return Reply(429, json={"error": {"message": "slow down", "type": "rate_limit"}}, headers={"retry-after": "0"})
    if case == "503":
        return Reply(503, json={"error": {"message": "overloaded"}})
    if case == "reset" or (case == "cut" and not stream):
        return Close()
    if not stream:
        return Reply(json=openai_completion(expected_text(request_id)), delay=0.15 if case == "slow" else 0.0)
    events = openai_stream(_pieces(request_id))
    if case == "cut":
        return SSE(events, reset_after=3)
    if case == "slow":
        return SSE(events, stall_after=2, stall=0.15)
    return SSE(events)


def serve() -> None:
    """Run the fault server until stdin closes (the parent went away)."""
    server = LoopbackServer()
    server.record = False  # a soak sends too many requests to keep
    server.set_default(PATH, respond)
    with server:
        print(server.port, flush=True)
        sys.stdin.read()


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.soak", "--serve"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise RuntimeError(f"the soak server did not start (got {port!r})")
    return proc, f"http://127.0.0.1:{port}/v1"


# -- measuring ------------------------------------------------------------------------------------


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def descriptors() -> tuple[int, int]:
    """(open file descriptors, of which sockets) of this process."""
    total = sockets = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed while listing
        total += 1
        sockets += target.startswith("socket:")
    return total, sockets


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    n = len(points)
    if n < 2:
        return 0.0
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 60


@dataclass
class SoakReport:
    seconds: float
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)  # "call ok", "stream 429: RateLimitError", ...
    wrong: list[str] = field(default_factory=list)  # a result that does not fit its case
    untyped: list[str] = field(default_factory=list)  # a failure that is not a ChatClientError
    duplicated: list[int] = field(default_factory=list)  # ids with more than one outcome
    lost: int = 0  # ids without an outcome
    samples: list[tuple[float, float, int, int]] = field(default_factory=list)  # (t, RSS MiB, fds, sockets)
    warmup: float = 0.0

    def after_warmup(self) -> list[tuple[float, float, int, int]]:
        return [s for s in self.samples if s[0] >= self.warmup]

    @property
    def rss_slope(self) -> float:
        return slope_per_minute([(t, rss) for t, rss, _, _ in self.after_warmup()])

    @property
    def fd_slope(self) -> float:
        return slope_per_minute([(t, float(fds)) for t, _, fds, _ in self.after_warmup()])

    def growth(self) -> tuple[float, float]:
        """RSS (MiB) and descriptors at the end minus just after warm-up (medians of 3 samples)."""
        kept = self.after_warmup()
        if len(kept) < 6:
            return 0.0, 0.0

        def med(values: list[float]) -> float:
            return sorted(values)[len(values) // 2]

        first, last = kept[:3], kept[-3:]
        return (
            med([s[1] for s in last]) - med([s[1] for s in first]),
            med([float(s[2]) for s in last]) - med([float(s[2]) for s in first]),
        )

    @property
    def max_sockets(self) -> int:
        return max((s[3] for s in self.samples), default=0)

    def summary(self) -> str:
        rss_growth, fd_growth = self.growth()
        kept = self.after_warmup()
        rss = [s[1] for s in kept] or [0.0]
        fds = [s[2] for s in kept] or [0]
        failures = sum(n for k, n in self.outcomes.items() if ": " in k)
        return (
            f"{self.requests:,} requests in {self.seconds:.0f} s ({self.requests / self.seconds:,.0f}/s), "
            f"{failures:,} typed failures, {sum(n for k, n in self.outcomes.items() if k.endswith('cancelled')):,} "
            f"cancelled by the caller; wrong {len(self.wrong)}, untyped {len(self.untyped)}, lost {self.lost}, "
            f"duplicated {len(self.duplicated)}\n"
            f"after {self.warmup:.0f} s of warm-up: RSS {min(rss):.1f}-{max(rss):.1f} MiB, slope "
            f"{self.rss_slope:+.2f} MiB/min (end minus start {rss_growth:+.1f} MiB); descriptors "
            f"{min(fds)}-{max(fds)}, slope {self.fd_slope:+.2f}/min ({fd_growth:+.0f}); open sockets at most "
            f"{self.max_sockets}"
        )


# -- the run --------------------------------------------------------------------------------------


async def _soak(base_url: str, seconds: float, concurrency: int, warmup: float, seed: int) -> SoakReport:
    from chatclient import ChatClient
    from chatclient.errors import ChatClientError
    from chatclient.models.openai import OpenAIChatModel

    model = OpenAIChatModel("gpt-test", api_key="sk-soak", base_url=base_url, timeout=30.0, max_retries=0)
    client = ChatClient.create(model)
    report = SoakReport(seconds=seconds, warmup=warmup)
    # One byte per request id (ids are 1, 2, 3...): how many outcomes it got. A dict of outcomes
    # would itself grow by ~100 bytes a request and show up as the client's memory growth.
    seen = bytearray(1)
    issued = 0
    rng = random.Random(seed)
    start = time.monotonic()
    deadline = start + seconds

    def record(request_id: int, outcome: str) -> None:
        if seen[request_id]:
            report.duplicated.append(request_id)
        seen[request_id] = min(seen[request_id] + 1, 255)

    def next_request() -> tuple[int, str, bool, bool]:
        nonlocal issued
        issued += 1
        seen.append(0)
        roll, case = rng.random(), "ok"
        for name, share in CASES.items():
            if roll < share:
                case = name
                break
            roll -= share
        stream = rng.random() < 0.5
        cancel = stream and rng.random() < CANCELLED_SHARE
        return issued, case, stream, cancel

    async def stream_text(question: str, cancel: bool) -> str | None:
        parts: list[str] = []
        chunks = client.prompt(question).astream().content()
        try:
            async for piece in chunks:
                parts.append(piece)
                if cancel:
                    return None
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]
        return "".join(parts)

    async def one(request_id: int, case: str, stream: bool, cancel: bool) -> None:
        question = f"case={case} id={request_id}"
        kind = "stream" if stream else "call"
        try:
            if stream and cancel:
                task = asyncio.ensure_future(stream_text(question, False))
                await asyncio.sleep(0.001 * (request_id % 5))  # cancelled at varying points
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except ChatClientError:
                    pass  # it failed before the caller gave up: still an outcome of the caller's
                record(request_id, f"{kind} cancelled")
                report.outcomes[f"{kind} cancelled"] += 1
                return
            text = await stream_text(question, False) if stream else await client.prompt(question).acall().content()
        except ChatClientError as exc:
            record(request_id, f"{kind} {case}: {type(exc).__name__}")
            report.outcomes[f"{kind} {case}: {type(exc).__name__}"] += 1
            if case not in FAILING:
                report.wrong.append(f"{kind} {case} #{request_id}: {type(exc).__name__}: {str(exc)[:120]}")
            return
        except Exception as exc:
            record(request_id, f"{kind} {case}: untyped {type(exc).__name__}")
            report.untyped.append(f"{kind} {case} #{request_id}: {type(exc).__name__}: {str(exc)[:120]}")
            return
        record(request_id, f"{kind} ok")
        report.outcomes[f"{kind} {case}"] += 1
        if case in FAILING or text != expected_text(request_id):
            report.wrong.append(f"{kind} {case} #{request_id}: got {text!r}")

    async def worker() -> None:
        while time.monotonic() < deadline:
            await one(*next_request())

    async def sampler() -> None:
        while time.monotonic() < deadline:
            fds, sockets = descriptors()
            report.samples.append((time.monotonic() - start, rss_mib(), fds, sockets))
            await asyncio.sleep(1.0)

    await asyncio.gather(sampler(), *(worker() for _ in range(concurrency)))
    report.seconds = time.monotonic() - start
    report.requests = issued
    report.lost = seen.count(0, 1)
    await model.aclose()
    return report


def run_soak(seconds: float, *, concurrency: int = 256, warmup: float | None = None, seed: int = 40) -> SoakReport:
    """Run the soak against a fresh fault server; ``warmup`` defaults to a quarter of the time (at most 60 s)."""
    proc, base_url = start_server()
    try:
        return asyncio.run(
            _soak(base_url, seconds, concurrency, min(seconds / 4, 60.0) if warmup is None else warmup, seed)
        )
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the soak's fault server")
    parser.add_argument("--serve", action="store_true")
    if parser.parse_args().serve:
        serve()
