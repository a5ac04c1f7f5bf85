"""RateLimiter: pacing, fairness, token accounting, header adaptation (no network)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

import pytest

from chatclient import ChatClient, Prompt
from chatclient.errors import RateLimitError
from chatclient.models.base import Usage
from chatclient.options import ChatOptions
from chatclient.resilience import RateLimitedChatModel, RateLimiter, parse_reset
from chatclient.testing import ScriptedChatModel
from tests.conftest import run_spec


def test_parse_reset_reads_durations_numbers_and_timestamps() -> None:
    assert parse_reset("1s") == 1.0
    assert parse_reset("6m0s") == 360.0
    assert parse_reset("20ms") == pytest.approx(0.02)
    assert parse_reset("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_reset("2.5") == 2.5
    assert parse_reset("2026-01-01T00:00:10Z", now=1767225600.0) == pytest.approx(10.0)
    assert parse_reset("soon") is None and parse_reset(None) is None and parse_reset("9" * 100) is None


def test_validation() -> None:
    with pytest.raises(ValueError, match="requests_per_minute"):
        RateLimiter(requests_per_minute=0)
    with pytest.raises(ValueError, match="give requests_per_minute"):
        RateLimiter()
    with pytest.raises(TypeError, match="RateLimiter"):
        RateLimitedChatModel(ScriptedChatModel([]), object())  # type: ignore[arg-type]


def test_sync_calls_are_spaced_and_served_first_come_first_served() -> None:
    limiter = RateLimiter(requests_per_minute=1200)  # one every 50 ms
    order: list[int] = []
    lock = threading.Lock()

    def worker(i: int) -> None:
        limiter.acquire()
        with lock:
            order.append(i)

    start = time.monotonic()
    threads = []
    for i in range(8):
        t = threading.Thread(target=worker, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.002)  # arrival order 0, 1, 2 …
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    assert order == list(range(8))
    assert 0.33 <= elapsed < 2.0  # 7 gaps of 50 ms (generous upper bound for a loaded machine)


def test_async_tasks_are_paced_without_blocking_the_loop() -> None:
    limiter = RateLimiter(requests_per_minute=1200)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def main() -> float:
        t = asyncio.create_task(ticker())
        start = time.monotonic()
        await asyncio.gather(*(limiter.aacquire() for _ in range(6)))
        t.cancel()
        return time.monotonic() - start

    elapsed = asyncio.run(main())
    assert 0.23 <= elapsed < 2.0
    assert ticks >= 8  # the loop kept running while tasks waited


def test_releases_stay_spaced_when_the_event_loop_is_late() -> None:
    limiter = RateLimiter(requests_per_minute=6000)  # one every 10 ms
    released: list[float] = []

    async def caller() -> None:
        await limiter.aacquire()
        released.append(time.monotonic())

    async def hog() -> None:
        for _ in range(6):
            await asyncio.sleep(0.02)
            time.sleep(0.04)  # blocks the loop: several callers' timers expire meanwhile

    async def main() -> None:
        await asyncio.gather(hog(), *(caller() for _ in range(30)))

    asyncio.run(main())
    gaps = [b - a for a, b in itertools.pairwise(released)]
    assert len(released) == 30
    # Without the release gate, callers whose timers expired during a block go out together
    # (gaps well under 1 ms); the gate keeps at least half an interval between any two.
    assert min(gaps) >= 0.0045, f"two releases {min(gaps) * 1000:.1f} ms apart"
    assert 0.29 <= released[-1] - released[0] < 2.0  # and the average holds: 29 intervals of 10 ms


def test_cancelled_waiter_gives_its_slot_back() -> None:
    limiter = RateLimiter(requests_per_minute=60)  # one per second

    async def main() -> float:
        await limiter.aacquire()
        waiter = asyncio.create_task(limiter.aacquire())
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        start = time.monotonic()
        await limiter.aacquire()
        return time.monotonic() - start

    # Without the refund the third acquire would wait two slots (~2 s).
    assert asyncio.run(main()) < 1.3


def test_tokens_per_minute_uses_the_estimate_then_the_reported_usage() -> None:
    limiter = RateLimiter(tokens_per_minute=60_000, burst_seconds=1.0)  # 1,000 tokens/s, bucket of 1,000
    model = limiter.wrap(ScriptedChatModel(["a", "b"]))
    prompt = Prompt("x" * 4000, ChatOptions(max_tokens=200))  # estimate 1000 + 1 + 200 = 1201 tokens
    model.call(prompt)  # waits ~0.2 s; the reported usage (2 tokens) refunds the rest of the estimate
    start = time.monotonic()
    model.call(prompt)
    # ~0.2 s again; without the refund the debt would be ~1,400 tokens: a 1.4 s wait.
    assert time.monotonic() - start < 0.9
    limiter.settle(0, 3000)  # a call that used far more than estimated leaves debt
    assert limiter.acquire(1) > 1.0


def test_headers_clamp_and_pause() -> None:
    limiter = RateLimiter(requests_per_minute=600, burst_seconds=1.0)  # bucket of 10
    limiter.observe(200, {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "300ms"})
    assert 0.25 < limiter.acquire() < 0.6
    limiter.observe(200, {"anthropic-ratelimit-input-tokens-remaining": "junk"})  # ignored
    limiter.observe(429, {"retry-after": "0.3"})
    assert limiter.acquire() > 0.25
    off = RateLimiter(requests_per_minute=600, adapt_to_headers=False)
    off.observe(429, {"retry-after": "30"})
    assert off.acquire() < 0.2


def test_wrapped_model_works_in_every_mode_and_a_429_pauses(mode: str) -> None:
    limiter = RateLimiter(requests_per_minute=6000)
    scripted = ScriptedChatModel([["lim", "ited"]], model_name="inner")
    model = limiter.wrap(scripted)
    assert model.model_name == "inner"
    r = run_spec(ChatClient.create(model).prompt("hi"), mode).chat_response
    assert r is not None and r.text == "limited"
    scripted.add(RateLimitError("slow", retry_after=0.3), "ok")
    with pytest.raises(RateLimitError):
        model.call(Prompt("q"))
    start = time.monotonic()
    assert model.call(Prompt("q")).text == "ok"
    assert time.monotonic() - start > 0.25


def test_usage_of_streams_settles_tokens() -> None:
    limiter = RateLimiter(tokens_per_minute=6_000_000)
    seen: list[tuple[int, int]] = []
    original = limiter.settle
    limiter.settle = lambda est, actual: (seen.append((est, actual)), original(est, actual))[1]  # type: ignore[method-assign]
    model = limiter.wrap(ScriptedChatModel([["one ", "two"]]))
    list(model.stream(Prompt("four words are here")))
    assert seen and seen[0][1] == Usage(4, 2).total_tokens


def test_a_429_with_an_http_date_or_milliseconds_retry_after_pauses_for_that_long() -> None:
    import email.utils
    import time as _time

    from chatclient.resilience import RateLimiter

    now = [1000.0]
    limiter = RateLimiter(requests_per_minute=600, clock=lambda: now[0])
    limiter.observe(429, {"retry-after-ms": "2500"})
    assert limiter._paused_until == 1002.5
    later = email.utils.formatdate(_time.time() + 30, usegmt=True)
    limiter.observe(429, {"retry-after": later})
    assert 1025.0 <= limiter._paused_until <= 1031.0
