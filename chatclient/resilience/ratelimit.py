"""Client-side rate limiting: stay under a provider's requests/min and tokens/min.

``RateLimiter`` holds the budget of one model (share one limiter between every wrapper of that
model); ``limiter.wrap(model)`` (or ``RateLimitedChatModel(model, limiter)``) is a ``ChatModel``
that waits for its turn before each call.

How it waits. Each dimension is a token bucket that may go into debt: a caller takes its cost
under a short lock and learns how long to sleep until the debt is repaid (``time.sleep`` in sync
code, ``asyncio.sleep`` in async code; never a polling loop). Because the cost is taken in arrival
order, callers are served first come, first served. Token costs are estimated before the call
(prompt characters / 4 plus ``max_tokens``) and corrected with the reported usage afterwards.

How it adapts. The HTTP transport reports every response's headers to the limiter
(``chatclient.models.http.response_headers``): OpenAI-style ``x-ratelimit-remaining-requests`` /
``x-ratelimit-reset-requests`` (and ``-tokens``), Anthropic ``anthropic-ratelimit-requests-remaining``
/ ``-reset`` (and ``-tokens``, ``-input-tokens``, ``-output-tokens``), and ``Retry-After`` on a 429.
When the server says nothing is left, the limiter holds every caller until the reset time; when
it says little is left, the bucket shrinks to that.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chatclient._pickling import PicklesWithoutLocks
from chatclient.errors import RateLimitError, SharedStateError
from chatclient.models.base import BaseChatModel, ChatModel, ChatResponse, Usage
from chatclient.models.http.response_headers import listen_to_responses
from chatclient.prompt import Prompt
from chatclient.resilience._common import model_label

if TYPE_CHECKING:
    from chatclient.resilience.redis_state import RedisState

__all__ = ["RateLimitedChatModel", "RateLimiter", "parse_reset"]

log = logging.getLogger(__name__)

# One reservation for N processes (GCRA on Redis's clock): the caller's release time is the latest of
# now, a shared pause, and each dimension's theoretical arrival time minus its tolerance; each
# dimension then moves on by the caller's increment. Returns the seconds to wait.
_RESERVE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local release = now
local pause = tonumber(redis.call('GET', KEYS[3]) or '0')
if pause > release then release = pause end
local tat1 = tonumber(redis.call('GET', KEYS[1]) or '0')
local tat2 = tonumber(redis.call('GET', KEYS[2]) or '0')
local inc1, tau1 = tonumber(ARGV[1]), tonumber(ARGV[2])
local inc2, tau2 = tonumber(ARGV[3]), tonumber(ARGV[4])
if inc1 > 0 and tat1 - tau1 > release then release = tat1 - tau1 end
if inc2 > 0 and tat2 - tau2 > release then release = tat2 - tau2 end
if inc1 > 0 then redis.call('SET', KEYS[1], string.format('%.6f', math.max(tat1, release) + inc1), 'PX', ARGV[5]) end
if inc2 > 0 then redis.call('SET', KEYS[2], string.format('%.6f', math.max(tat2, release) + inc2), 'PX', ARGV[5]) end
return string.format('%.6f', release - now)
"""
# Move a dimension's arrival time by ARGV[1] seconds (a refund is negative), keeping its expiry.
_ADJUST = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBYFLOAT', KEYS[1], ARGV[1]) end
return false
"""
# Hold every process until now + ARGV[1] seconds (the later of this and a pause already set).
_PAUSE = """
local t = redis.call('TIME')
local until_ = tonumber(t[1]) + tonumber(t[2]) / 1000000 + tonumber(ARGV[1])
local old = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ > old then redis.call('SET', KEYS[1], string.format('%.6f', until_), 'PX', ARGV[2]) end
return 1
"""
_SHARED = -1  # the ticket of a reservation made in Redis (no local gate)

_MAX_PAUSE = 600.0  # a server asking for more than this is capped: callers are not parked for hours
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds until a rate-limit reset, from ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1.5"``, or an
    RFC 3339 timestamp (Anthropic); ``None`` when it cannot be read.

    >>> parse_reset("6m0s"), parse_reset("20ms"), parse_reset("2")
    (360.0, 0.02, 2.0)
    """
    if not value or len(value) > 64:
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if parts and "".join(n + u for n, u in parts) == text.replace(" ", ""):
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return sum(float(n) * scale[u] for n, u in parts)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now if now is not None else time.time()
    return max(0.0, when.timestamp() - current)


def _int(value: str | None) -> int | None:
    if value is None or len(value) > 20:
        return None
    try:
        return max(0, int(float(value)))
    except ValueError:
        return None


class _Bucket:
    """A token bucket that may go into debt; ``take`` answers how long the caller must wait."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, per_minute: float, burst_seconds: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_seconds)
        self.level = self.capacity
        self.stamp = now

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, cost: float, now: float) -> float:
        self._refill(now)
        self.level -= cost
        return 0.0 if self.level >= 0 else -self.level / self.rate

    def give(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)

    def clamp(self, remaining: int, now: float) -> None:
        # The server knows better: never plan on more than it says is left.
        self._refill(now)
        self.level = min(self.level, float(remaining))


class RateLimiter(PicklesWithoutLocks):
    """Requests per minute and/or tokens per minute for one model, shared safely by threads and tasks.

    ``redis_url`` makes the limit fleet-wide: every limiter with the same URL and ``key`` (in any
    process or host) takes its turn from one schedule kept in Redis by an atomic script (a GCRA on
    Redis's clock), so together they never go over the limit. Redis down raises
    ``SharedStateError`` naming host and port; ``on_redis_error="local"`` logs a warning and
    limits this process alone until Redis answers again. A limiter pickles (to a Ray or Dask
    worker) without its lock; a Redis-backed one reconnects where it lands.

    ``burst_seconds`` lets that many seconds' worth of requests/tokens go at once after a quiet
    period (default 0: calls are spaced evenly — never closer than half the interval, on average
    exactly at the limit — which is what a server enforcing a short window needs). ``completion_tokens`` is the output estimate used when a prompt sets no
    ``max_tokens``. ``adapt_to_headers=False`` ignores the server's rate-limit headers.

    >>> limiter = RateLimiter(requests_per_minute=600)
    >>> limiter.acquire()        # returns the seconds it waited
    0.0
    """

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        *,
        burst_seconds: float = 0.0,
        completion_tokens: int = 256,
        adapt_to_headers: bool = True,
        clock: Callable[[], float] = time.monotonic,
        redis_url: str | None = None,
        key: str = "default",
        on_redis_error: str = "raise",
    ) -> None:
        for label, value in (("requests_per_minute", requests_per_minute), ("tokens_per_minute", tokens_per_minute)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
                raise ValueError(f"{label} must be a number > 0 (or None for no limit), got {value!r}")
        if requests_per_minute is None and tokens_per_minute is None:
            raise ValueError("give requests_per_minute=, tokens_per_minute= or both")
        if burst_seconds < 0:
            raise ValueError(f"burst_seconds must be >= 0, got {burst_seconds!r}")
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.completion_tokens = completion_tokens
        self.adapt_to_headers = adapt_to_headers
        self._clock = clock
        now = clock()
        self._requests = _Bucket(requests_per_minute, burst_seconds, now) if requests_per_minute else None
        self._tokens = _Bucket(tokens_per_minute, burst_seconds, now) if tokens_per_minute else None
        self._paused_until = 0.0
        # The release gate (see _gate): real send times stay spaced even when callers wake late.
        self._gap = 60.0 / requests_per_minute if requests_per_minute else 0.0
        # Half an interval of slack: a caller released late lets the next one catch up (so the
        # average stays at the limit) without two calls ever going out closer than that.
        self._tau = max(burst_seconds, self._gap / 2)
        self._tat = now
        self._tickets = 0
        self._gated: set[int] = set()
        self._lock = threading.Lock()
        if on_redis_error not in ("raise", "local"):
            raise ValueError(f"on_redis_error must be 'raise' or 'local', got {on_redis_error!r}")
        self.key = key
        self.on_redis_error = on_redis_error
        self._burst = burst_seconds
        self._redis: RedisState | None = None
        if redis_url is not None:
            from chatclient.resilience.redis_state import RedisState

            self._redis = RedisState(redis_url)

    def __getstate__(self) -> dict[str, Any]:
        # A fresh lock where it arrives and no callers waiting at the gate; a Redis-backed limiter
        # travels as its URL and key.
        state = super().__getstate__()
        state["_gated"] = set()
        return state

    def _shared(self, fn: Callable[[], Any]) -> Any:
        """Run a Redis step; with on_redis_error='local' a failure is logged and ``None`` returned."""
        try:
            return fn()
        except SharedStateError as exc:
            if self.on_redis_error != "local":
                raise
            log.warning("rate limiter %r counts in this process only: %s", self.key, exc)
            return None

    def _redis_reserve(self, tokens: int) -> float | None:
        redis = self._redis
        assert redis is not None
        gap_r = 60.0 / self.requests_per_minute if self.requests_per_minute else 0.0
        gap_t = tokens * 60.0 / self.tokens_per_minute if self.tokens_per_minute and tokens > 0 else 0.0
        keys = [f"chatclient:ratelimit:{self.key}:{k}" for k in ("requests", "tokens", "pause")]
        args = [gap_r, self._burst, gap_t, self._burst, 600_000]
        answer = self._shared(lambda: redis.script("reserve", _RESERVE, keys, args, operation="rate limit"))
        return None if answer is None else max(0.0, float(answer))

    def _redis_adjust(self, dimension: str, seconds: float) -> None:
        redis = self._redis
        if redis is None or not seconds:
            return
        key = f"chatclient:ratelimit:{self.key}:{dimension}"
        self._shared(lambda: redis.script("adjust", _ADJUST, [key], [seconds], operation="rate limit"))

    def __repr__(self) -> str:
        return (
            f"RateLimiter(requests_per_minute={self.requests_per_minute}, tokens_per_minute={self.tokens_per_minute})"
        )

    def wrap(self, model: ChatModel) -> RateLimitedChatModel:
        """``model`` behind this limiter."""
        return RateLimitedChatModel(model, self)

    # -- reservations ---------------------------------------------------------------------------

    def _reserve(self, tokens: int) -> tuple[float, int]:
        """Take the call's cost from the buckets: (seconds to wait, the caller's ticket)."""
        if self._redis is not None:
            shared = self._redis_reserve(tokens)
            if shared is not None:
                return shared, _SHARED
        with self._lock:
            now = self._clock()
            wait = 0.0
            if self._requests is not None:
                wait = max(wait, self._requests.take(1.0, now))
            if self._tokens is not None and tokens > 0:
                wait = max(wait, self._tokens.take(float(tokens), now))
            ticket = self._tickets
            self._tickets += 1
            return max(wait, self._paused_until - now), ticket

    def _refund(self, tokens: int, ticket: int) -> None:
        if ticket == _SHARED:
            if self.requests_per_minute:
                self._redis_adjust("requests", -60.0 / self.requests_per_minute)
            if self.tokens_per_minute and tokens > 0:
                self._redis_adjust("tokens", -tokens * 60.0 / self.tokens_per_minute)
            return
        with self._lock:
            self._gated.discard(ticket)
            now = self._clock()
            if self._requests is not None:
                self._requests.give(1.0, now)
            if self._tokens is not None and tokens > 0:
                self._tokens.give(float(tokens), now)

    def _gate(self, ticket: int) -> float:
        """0 when the caller may go now (its release is recorded), else how long to sleep first.

        The release gate is a GCRA on actual release times: reservations schedule callers, but one
        that wakes late (a busy event loop, a descheduled thread) must not go out together with the
        next ones. Callers held here go in ticket (arrival) order: one with an earlier ticket still
        waiting keeps later ones back, one gap each. A reservation made in Redis is already spaced.
        """
        if ticket == _SHARED:
            return 0.0
        with self._lock:
            now = self._clock()
            pause = self._paused_until - now
            if pause > 0:  # a server-side pause arrived while waiting: wait it out, then queue again
                self._gated.add(ticket)
                return pause
            if not self._gap:
                self._gated.discard(ticket)
                return 0.0
            earlier = sum(1 for t in self._gated if t < ticket)
            opens = self._tat - self._tau
            if earlier == 0 and now >= opens:
                self._tat = max(self._tat, now) + self._gap
                self._gated.discard(ticket)
                return 0.0
            self._gated.add(ticket)
            return max(opens - now, 0.0) + self._gap * earlier

    def acquire(self, tokens: int = 0) -> float:
        """Wait (blocking) until one request of ``tokens`` estimated tokens may go; returns the wait."""
        start = self._clock()
        delay, ticket = self._reserve(tokens)
        try:
            while True:
                if delay > 0:
                    time.sleep(delay)
                delay = self._gate(ticket)
                if delay <= 0:
                    break
        except BaseException:
            self._refund(tokens, ticket)
            raise
        return self._clock() - start

    async def aacquire(self, tokens: int = 0) -> float:
        """``acquire`` for async code: the task sleeps, the event loop keeps running."""
        start = self._clock()
        delay, ticket = self._reserve(tokens)
        try:
            while True:
                if delay > 0:
                    await asyncio.sleep(delay)
                delay = self._gate(ticket)
                if delay <= 0:
                    break
        except BaseException:
            self._refund(tokens, ticket)
            raise
        return self._clock() - start

    def settle(self, estimated: int, actual: int) -> None:
        """Correct a call's token estimate with what the provider reported (charge or refund the difference)."""
        if self._tokens is None or actual <= 0 or actual == estimated:
            return
        if self._redis is not None and self.tokens_per_minute:
            self._redis_adjust("tokens", (actual - estimated) * 60.0 / self.tokens_per_minute)
            return
        with self._lock:
            now = self._clock()
            if actual > estimated:
                self._tokens.take(float(actual - estimated), now)
            else:
                self._tokens.give(float(estimated - actual), now)

    def pause(self, seconds: float) -> None:
        """Hold every caller for ``seconds`` (capped at 10 minutes), e.g. after a 429 with ``Retry-After``."""
        if seconds <= 0:
            return
        redis = self._redis
        if redis is not None:
            key = f"chatclient:ratelimit:{self.key}:pause"
            wait = min(seconds, _MAX_PAUSE)
            self._shared(lambda: redis.script("pause", _PAUSE, [key], [wait, 600_000], operation="rate limit"))
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + min(seconds, _MAX_PAUSE))

    # -- server feedback ------------------------------------------------------------------------

    def observe(self, status: int, headers: Mapping[str, str]) -> None:
        """Adapt to a response's rate-limit headers (the rate-limited model calls this for you)."""
        if not self.adapt_to_headers:
            return
        get = headers.get
        if status == 429:
            from chatclient.models.http import parse_retry_after  # the retry rule's own reading of the header

            retry = parse_retry_after(headers) or parse_reset(get("x-ratelimit-reset-requests"))
            self.pause(retry if retry is not None else 1.0)
        for kind, bucket in (("requests", self._requests), ("tokens", self._tokens)):
            remaining = _int(get(f"x-ratelimit-remaining-{kind}"))
            reset = parse_reset(get(f"x-ratelimit-reset-{kind}"))
            if remaining is None:
                remaining = _int(get(f"anthropic-ratelimit-{kind}-remaining"))
                reset = parse_reset(get(f"anthropic-ratelimit-{kind}-reset"))
            if kind == "tokens" and remaining is None:
                # Anthropic also limits input and output tokens apart; the tighter one counts.
                parts = [_int(get(f"anthropic-ratelimit-{p}-tokens-remaining")) for p in ("input", "output")]
                known = [p for p in parts if p is not None]
                if known:
                    remaining = min(known)
                    resets = [parse_reset(get(f"anthropic-ratelimit-{p}-tokens-reset")) for p in ("input", "output")]
                    reset = max((r for r in resets if r is not None), default=None)
            if remaining is None:
                continue
            if remaining == 0 and reset:
                self.pause(reset)
            elif bucket is not None:
                with self._lock:
                    bucket.clamp(remaining, self._clock())

    def _listener(self, status: int, headers: Mapping[str, str]) -> None:
        try:
            self.observe(status, headers)
        except Exception:  # malformed headers must never break the call they arrived on
            return


def _estimate(prompt: Prompt, model: Any, completion_default: int) -> int:
    text = sum(len(m.text or "") for m in prompt.messages)
    max_tokens = getattr(prompt.options, "max_tokens", None) or getattr(
        getattr(model, "default_options", None), "max_tokens", None
    )
    return text // 4 + 1 + int(max_tokens or completion_default)


def _used(usage: Usage) -> int:
    return usage.total_tokens


class RateLimitedChatModel(BaseChatModel):
    """``model`` behind ``limiter``: every call (in any of the four modes) waits for its turn first."""

    def __init__(self, model: ChatModel, limiter: RateLimiter) -> None:
        if model is None or not callable(getattr(model, "call", None)):
            raise TypeError(f"RateLimitedChatModel wraps a ChatModel, got {type(model).__name__}")
        if not isinstance(limiter, RateLimiter):
            raise TypeError(f"limiter must be a RateLimiter, got {type(limiter).__name__}")
        self.model = model
        self.limiter = limiter
        self.capabilities = model.capabilities
        self.default_options = None  # the wrapped model applies its own

    @property
    def model_name(self) -> str:
        return model_label(self.model)

    def __repr__(self) -> str:
        return f"RateLimitedChatModel({self.model!r}, {self.limiter!r})"

    def _cost(self, prompt: Prompt) -> int:
        return _estimate(prompt, self.model, self.limiter.completion_tokens) if self.limiter._tokens else 0

    def _failed(self, error: BaseException) -> None:
        if isinstance(error, RateLimitError):
            self.limiter.pause(error.retry_after if error.retry_after else 1.0)

    def call(self, prompt: Prompt) -> ChatResponse:
        cost = self._cost(prompt)
        self.limiter.acquire(cost)
        try:
            with listen_to_responses(self.limiter._listener):
                response = self.model.call(prompt)
        except BaseException as exc:
            self._failed(exc)
            raise
        self.limiter.settle(cost, _used(response.metadata.usage))
        return response

    async def acall(self, prompt: Prompt) -> ChatResponse:
        cost = self._cost(prompt)
        await self.limiter.aacquire(cost)
        try:
            with listen_to_responses(self.limiter._listener):
                response = await self.model.acall(prompt)
        except BaseException as exc:
            self._failed(exc)
            raise
        self.limiter.settle(cost, _used(response.metadata.usage))
        return response

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        cost = self._cost(prompt)
        self.limiter.acquire(cost)
        chunks = iter(self.model.stream(prompt))
        usage = Usage()
        try:
            # The request (and its headers) happen on the first read; listen only around it, so the
            # listener never leaks into the consumer's context between yields.
            with listen_to_responses(self.limiter._listener):
                first = next(chunks, None)
            if first is None:
                return
            for chunk in _prepend(first, chunks):
                if not chunk.metadata.usage.is_empty():
                    usage = chunk.metadata.usage
                yield chunk
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
        self.limiter.settle(cost, _used(usage))

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        cost = self._cost(prompt)
        await self.limiter.aacquire(cost)
        chunks = aiter(self.model.astream(prompt))
        usage = Usage()
        try:
            with listen_to_responses(self.limiter._listener):
                first = await anext(chunks, None)
            if first is None:
                return
            yield first
            if not first.metadata.usage.is_empty():
                usage = first.metadata.usage
            async for chunk in chunks:
                if not chunk.metadata.usage.is_empty():
                    usage = chunk.metadata.usage
                yield chunk
        except Exception as exc:
            self._failed(exc)
            raise
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        self.limiter.settle(cost, _used(usage))


def _prepend(first: ChatResponse, rest: Iterator[ChatResponse]) -> Iterator[ChatResponse]:
    yield first
    yield from rest
