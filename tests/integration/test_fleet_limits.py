"""Fleet-wide limits: RateLimiter and Budget shared through the machine's Redis by several processes."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
import uuid
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import BudgetExceededError, SharedStateError
from chatclient.models.openai import OpenAIChatModel
from chatclient.resilience import RateLimiter
from tests.support.loopback import LoopbackServer, Recorded, Reply, openai_completion

pytestmark = [pytest.mark.integration, pytest.mark.redis]

REDIS = "redis://127.0.0.1:6379/0"
SERVER_LIMIT = 10  # requests in any one-second window
WINDOW = 1.0


@pytest.fixture(autouse=True)
def _needs_redis() -> None:
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS, socket_connect_timeout=1).ping()
    except redis.exceptions.RedisError as exc:  # pragma: no cover - the machine's Redis is part of the setup
        pytest.fail(f"Redis is not running at 127.0.0.1:6379 ({exc}); start it with scripts/services.sh")


class LimitedServer:
    """A loopback OpenAI server that answers 429 past SERVER_LIMIT requests per WINDOW and records arrivals."""

    def __init__(self, server: LoopbackServer) -> None:
        self.arrivals: list[float] = []
        self.refused = 0
        self._lock = threading.Lock()
        server.set_default("/v1/chat/completions", self._answer)
        server.set_default("/warm/chat/completions", Reply(json=openai_completion("warm")))

    def _answer(self, rec: Recorded) -> Reply:
        now = time.monotonic()
        with self._lock:
            self.arrivals.append(now)
            recent = [t for t in self.arrivals if now - t < WINDOW]
            if len(recent) > SERVER_LIMIT:
                self.refused += 1
                return Reply(429, json={"error": {"message": "rate limited", "type": "rate_limit"}})
        return Reply(json=openai_completion("ok"))

    def busiest_window(self) -> int:
        times = sorted(self.arrivals)
        return max((sum(1 for u in times if t <= u < t + WINDOW) for t in times), default=0)


def _worker(url: str, key: str, redis_url: str | None, calls: int, rpm: float, start: Any, out: Any) -> None:
    # A first call pays for lazy imports and a connection; made before the start (to a path the
    # server does not count), it does not make the measured calls arrive late and bunched.
    warm = OpenAIChatModel("gpt-test", api_key="sk-x", base_url=url + "/warm", max_retries=0)
    ChatClient.builder(warm).build().prompt("warm up").call().content()
    limiter = RateLimiter(requests_per_minute=rpm, redis_url=redis_url, key=key)
    model = limiter.wrap(OpenAIChatModel("gpt-test", api_key="sk-x", base_url=url + "/v1", max_retries=0))
    client = ChatClient.builder(model).build()
    start.wait(timeout=60)
    failures = 0
    for _ in range(calls):
        try:
            client.prompt("hi").call().content()
        except Exception:
            failures += 1
    out.put(failures)


def _run_fleet(url: str, redis_url: str | None, *, processes: int = 4, calls: int = 8) -> int:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = ctx.Barrier(processes)
    key = f"fleet-{uuid.uuid4().hex}"
    # each process alone stays well under the server's limit (8 a second against 10): the margin absorbs
    # the time between a reservation and its request reaching the server (a cold first call)
    procs = [
        ctx.Process(target=_worker, args=(url, key, redis_url, calls, 480.0, start, out)) for _ in range(processes)
    ]
    for p in procs:
        p.start()
    failures = sum(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    return failures


def test_four_processes_share_one_limit() -> None:
    with LoopbackServer() as server:
        limited = LimitedServer(server)
        failures = _run_fleet(server.url, REDIS)
        assert len(limited.arrivals) == 32 and failures == 0
        assert limited.refused == 0 and limited.busiest_window() <= SERVER_LIMIT


def test_without_the_shared_limit_the_same_fleet_is_refused() -> None:
    # the control: four limiters that each count alone send four times the rate
    with LoopbackServer() as server:
        limited = LimitedServer(server)
        failures = _run_fleet(server.url, None)
        assert limited.refused > 0 and failures == limited.refused


def test_redis_down_is_named_and_local_fallback_on_request(caplog: pytest.LogCaptureFixture) -> None:
    down = "redis://:hunter2secret@127.0.0.1:1/0"
    limiter = RateLimiter(requests_per_minute=6000, redis_url=down)
    with pytest.raises(SharedStateError) as info:
        limiter.acquire()
    assert "127.0.0.1:1" in str(info.value) and "hunter2secret" not in str(info.value)
    assert info.value.where == "127.0.0.1:1"
    fallback = RateLimiter(requests_per_minute=6000, redis_url=down, on_redis_error="local")
    assert fallback.acquire() == pytest.approx(0.0, abs=0.05)
    assert "counts in this process only" in caplog.text

    from advisors.budget import Budget

    with pytest.raises(SharedStateError, match=r"127\.0\.0\.1:1"):
        Budget(max_tokens=10, redis_url=down).spent("u")
    with pytest.raises(ValueError, match="on_redis_error"):
        RateLimiter(requests_per_minute=1, redis_url=REDIS, on_redis_error="ignore")


def test_limiter_and_budget_pickle_and_keep_sharing() -> None:
    from advisors.budget import Budget
    from chatclient.models.base import Usage

    key = f"pickle-{uuid.uuid4().hex}"
    limiter = RateLimiter(requests_per_minute=60, redis_url=REDIS, key=key)
    copy = pickle.loads(pickle.dumps(limiter))
    assert copy.key == key and copy.requests_per_minute == 60
    assert limiter.acquire() < 0.1
    start = time.monotonic()
    copy.acquire()  # the copy's turn comes one interval (1 s) after the original's
    assert time.monotonic() - start > 0.8

    namespace = f"chatclient:test:{uuid.uuid4().hex}"
    budget = Budget(max_tokens=100, redis_url=REDIS, namespace=namespace)
    other = pickle.loads(pickle.dumps(budget))
    try:
        budget.add("team", Usage(30, 20), 0.5)
        other.add("team", Usage(10, 5), 0.25)
        for b in (budget, other):
            spent = b.spent("team")
            assert spent.usage == Usage(40, 25) and spent.calls == 2 and spent.cost == pytest.approx(0.75)
        with pytest.raises(BudgetExceededError, match="100 tokens"):
            other.check("team", 40, None)
        other.check("team", 30, None)
    finally:
        budget.reset()
    assert other.spent("team").calls == 0


def test_budget_advisor_stops_every_client_sharing_it() -> None:
    from advisors.budget import Budget, BudgetAdvisor
    from chatclient.testing import FunctionChatModel

    namespace = f"chatclient:test:{uuid.uuid4().hex}"
    clients = [
        ChatClient.builder(FunctionChatModel(lambda p: "word " * 20))
        .default_advisors(BudgetAdvisor(budget=Budget(max_tokens=60, redis_url=REDIS, namespace=namespace)))
        .build()
        for _ in range(2)
    ]
    try:
        used = 0
        with pytest.raises(BudgetExceededError):
            for i in range(20):
                clients[i % 2].prompt("hello there").call().content()
                used += 1
        assert 1 <= used < 20
        with pytest.raises(BudgetExceededError):  # the other client is out of budget too
            clients[used % 2 - 1].prompt("hello there").call().content()
    finally:
        Budget(redis_url=REDIS, namespace=namespace).reset()


def test_tokens_per_minute_are_shared_and_corrected() -> None:
    key = f"tokens-{uuid.uuid4().hex}"
    one = RateLimiter(tokens_per_minute=60_000, redis_url=REDIS, key=key)  # 1,000 tokens a second
    two = pickle.loads(pickle.dumps(one))  # another process's copy
    assert one.acquire(500) < 0.1
    start = time.monotonic()
    two.acquire(500)  # waits for the first call's 500 tokens: about half a second
    waited = time.monotonic() - start
    assert 0.3 < waited < 1.5, waited
    one.settle(500, 100)  # the call used far fewer tokens than estimated: refunded for everyone
    start = time.monotonic()
    two.acquire(100)
    assert time.monotonic() - start < 0.45
