"""Token and cost budgets for requests, and for a whole client across requests.

``BudgetAdvisor`` counts every model call its request makes — tool-loop turns, validation re-asks,
calls a RAG query transformer makes through its own client, images drawn and audio transcribed or
spoken inside its tools (priced by the media model's own table) — through a ``UsageMeter``
(``chatclient.usage_meter``) that every terminal model advisor reports to. Before each call it
estimates what the call will take (prompt characters / 4, plus ``max_tokens`` when the prompt's
options set it) and raises ``BudgetExceededError`` (carrying the usage so far) when the call
would go over a limit, so the call is never made. The answer's metadata gets the request's
``cost`` and ``budget_usage``.

    budget = Budget(max_cost=5.00, period="day", key=lambda req: req.context.get("user", "anon"))
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(max_tokens=20_000, budget=budget)).build()
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from chatclient._pickling import PicklesWithoutLocks
from chatclient.advisor import HIGHEST_PRECEDENCE, AdvisorChain, BaseAdvisor
from chatclient.errors import BudgetExceededError, SharedStateError
from chatclient.models.base import ChatResponse, Usage
from chatclient.request import ChatClientRequest, ChatClientResponse
from chatclient.resilience._common import annotate_span, model_label
from chatclient.resilience.prices import DEFAULT_PRICES, ModelPrice, PriceTable
from chatclient.usage_meter import USAGE_METERS, metering

if TYPE_CHECKING:
    from chatclient.models.base import ChatModel
    from chatclient.prompt import Prompt
    from chatclient.resilience.redis_state import RedisState

log = logging.getLogger(__name__)

__all__ = ["BUDGET_KEY", "BUDGET_USAGE", "Budget", "BudgetAdvisor", "BudgetSpend", "CountingEstimate", "estimate_tokens"]

BUDGET_KEY = "chatclient.budget.key"
"""Request-context key: the key a shared ``Budget`` charges this request to (default ``"default"``)."""

BUDGET_USAGE = "chatclient.budget.usage"
"""Response-context key: the request's ``BudgetSpend``."""


@dataclass(frozen=True, slots=True)
class BudgetSpend:
    """What a request (or a budget key) has used: tokens, cost (``None`` without prices) and calls."""

    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    calls: int = 0


def estimate_tokens(prompt: Prompt) -> tuple[int, int]:
    """(input, output) tokens a call with ``prompt`` may take: characters / 4, and ``max_tokens``."""
    chars = sum(len(m.text or "") for m in prompt.messages)
    out = getattr(prompt.options, "max_tokens", None) or 0
    return chars // 4, int(out)


class CountingEstimate:
    """``estimate`` for a ``BudgetAdvisor`` from a real token counter (``chatclient.tokens``): the prompt's
    messages and tools counted by ``counter``, and ``max_tokens`` for the answer. A class, not a closure,
    so the advisor still pickles."""

    def __init__(self, counter: Any) -> None:
        if not callable(getattr(counter, "count", None)):
            raise TypeError("counter must have count(messages, tools=()) -> int (see chatclient.tokens)")
        self.counter = counter

    def __call__(self, prompt: Prompt) -> tuple[int, int]:
        out = getattr(prompt.options, "max_tokens", None) or 0
        return int(self.counter.count(prompt.messages, prompt.tools)), int(out)


def _over(limit: float | None, value: float) -> bool:
    return limit is not None and value > limit


class Budget(PicklesWithoutLocks):
    """A budget shared by every request of a client (or several clients), per key and per period.

    ``period`` is ``"day"`` (the UTC calendar day), a number of seconds (fixed windows), or
    ``None`` (never resets). ``key(request) -> str`` picks whose budget a request spends (an API
    key, a user, a tenant); by default the request context's ``BUDGET_KEY``, else ``"default"``.
    Safe across threads and asyncio tasks.

    ``redis_url`` makes the budget fleet-wide: every ``Budget`` with the same URL and ``namespace``
    (in any process or host) reads and charges the same counts in Redis (one transaction per
    charge, expiring with the period). Calls in flight at the same moment may together go over a
    limit by what they spend, as in one process. Redis down raises ``SharedStateError`` naming host
    and port; ``on_redis_error="local"`` logs a warning and counts in this process until Redis
    answers again.
    """

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        period: str | float | None = "day",
        key: Callable[[ChatClientRequest], str] | None = None,
        clock: Callable[[], float] = time.time,
        redis_url: str | None = None,
        namespace: str = "chatclient:budget",
        on_redis_error: str = "raise",
    ) -> None:
        _check_limits(max_tokens, max_cost)
        if period is not None and period != "day" and not (isinstance(period, (int, float)) and period > 0):
            raise ValueError(f'period must be "day", a number of seconds > 0 or None, got {period!r}')
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.period = period
        self.key = key
        self._clock = clock
        self._lock = threading.Lock()
        self._spent: dict[tuple[str, str], BudgetSpend] = {}
        if on_redis_error not in ("raise", "local"):
            raise ValueError(f"on_redis_error must be 'raise' or 'local', got {on_redis_error!r}")
        self.namespace = namespace
        self.on_redis_error = on_redis_error
        self._redis: RedisState | None = None
        if redis_url is not None:
            from chatclient.resilience.redis_state import RedisState

            self._redis = RedisState(redis_url)

    def _redis_key(self, key: str) -> str:
        return f"{self.namespace}:{key}:{self._window()}"

    def _ttl(self) -> int | None:
        if self.period is None:
            return None
        return 2 * 86_400 if self.period == "day" else max(1, int(2 * float(self.period)))

    def _shared(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(client)`` on Redis; ``_LOCAL`` when it failed and on_redis_error='local'."""
        assert self._redis is not None
        try:
            return self._redis.call("budget", fn)
        except SharedStateError as exc:
            if self.on_redis_error != "local":
                raise
            log.warning("budget %r counts in this process only: %s", self.namespace, exc)
            return _LOCAL

    def _window(self) -> str:
        now = self._clock()
        if self.period is None:
            return "all"
        if self.period == "day":
            return datetime.fromtimestamp(now, UTC).date().isoformat()
        return str(int(now // float(self.period)))

    def reset_in(self) -> float | None:
        """Seconds until the current period ends and the budget starts afresh (``None``: no period)."""
        if self.period is None:
            return None
        now = self._clock()
        if self.period == "day":
            return 86_400.0 - now % 86_400.0  # UTC days are whole multiples of 86 400 s of the epoch
        length = float(self.period)
        return length - now % length

    def key_of(self, request: ChatClientRequest) -> str:
        """The key ``request`` spends."""
        if self.key is not None:
            return str(self.key(request))
        return str(request.context.get(BUDGET_KEY) or "default")

    def spent(self, key: str = "default") -> BudgetSpend:
        """What ``key`` has spent in the current period."""
        if self._redis is not None:
            row = self._shared(lambda r: r.hgetall(self._redis_key(key)))
            if row is not _LOCAL:
                return _spend_of(row)
        with self._lock:
            return self._spent.get((key, self._window()), BudgetSpend())

    def check(self, key: str, tokens: int, cost: float | None) -> None:
        """Raise ``BudgetExceededError`` when ``tokens`` / ``cost`` more would exceed ``key``'s budget."""
        spent = self.spent(key)
        if _over(self.max_tokens, spent.usage.total_tokens + tokens):
            raise BudgetExceededError(
                f"the shared budget of {key!r} allows {self.max_tokens} tokens per period; "
                f"{spent.usage.total_tokens} are spent and the next call may take {tokens} - "
                "wait for the next period or raise max_tokens",
                spent.usage,
                cost=spent.cost,
                limit="budget.max_tokens",
                retry_after=self.reset_in(),
            )
        if cost is not None and _over(self.max_cost, (spent.cost or 0.0) + cost):
            raise BudgetExceededError(
                f"the shared budget of {key!r} allows {self.max_cost} per period; {spent.cost or 0.0:.6f} is spent "
                f"and the next call may cost {cost:.6f} - wait for the next period or raise max_cost",
                spent.usage,
                cost=spent.cost,
                limit="budget.max_cost",
                retry_after=self.reset_in(),
            )

    def add(self, key: str, usage: Usage, cost: float | None) -> None:
        """Charge one call's usage and cost to ``key``."""
        if self._redis is not None:
            name, ttl = self._redis_key(key), self._ttl()

            def charge(r: Any) -> None:
                pipe = r.pipeline(transaction=True)
                for field_name, value in zip(_FIELDS, _usage_fields(usage), strict=True):
                    pipe.hincrby(name, field_name, value)
                pipe.hincrby(name, "calls", 1)
                if cost is not None:
                    pipe.hincrbyfloat(name, "cost", cost)
                if ttl is not None:
                    pipe.expire(name, ttl)
                pipe.execute()

            if self._shared(charge) is not _LOCAL:
                return
        with self._lock:
            slot = (key, self._window())
            old = self._spent.get(slot, BudgetSpend())
            total = None if cost is None and old.cost is None else (old.cost or 0.0) + (cost or 0.0)
            self._spent[slot] = BudgetSpend(old.usage + usage, total, old.calls + 1)

    def reset(self) -> None:
        """Forget everything spent (in Redis: every key of this namespace)."""
        if self._redis is not None:
            pattern = f"{self.namespace}:*"
            self._shared(lambda r: [r.delete(k) for k in r.scan_iter(match=pattern, count=500)])
        with self._lock:
            self._spent.clear()


_LOCAL = object()  # a Redis step that failed with on_redis_error="local"
_FIELDS = ("prompt", "completion", "cached", "cache_write", "reasoning", "total")


def _usage_fields(usage: Usage) -> tuple[int, ...]:
    return (
        usage.prompt_tokens,
        usage.completion_tokens,
        usage.cached_input_tokens,
        usage.cache_write_tokens,
        usage.reasoning_tokens,
        usage.total_tokens,
    )


def _spend_of(row: dict[Any, Any]) -> BudgetSpend:
    if not row:
        return BudgetSpend()
    get = {(k.decode() if isinstance(k, bytes) else str(k)): v for k, v in row.items()}
    p, c, ci, cw, r, total = (int(get.get(f, 0)) for f in _FIELDS)
    usage = Usage(p, c, ci, cw, r, total if total != p + c else None)
    cost = float(get["cost"]) if "cost" in get else None
    return BudgetSpend(usage, cost, int(get.get("calls", 0)))


def _check_limits(max_tokens: int | None, max_cost: float | None) -> None:
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0):
        raise ValueError(f"max_tokens must be an int >= 0 or None, got {max_tokens!r}")
    if max_cost is not None and (isinstance(max_cost, bool) or not isinstance(max_cost, (int, float)) or max_cost < 0):
        raise ValueError(f"max_cost must be a number >= 0 or None, got {max_cost!r}")


def _model_names(model: Any, depth: int = 0) -> list[str]:
    """The labels of ``model`` and of the models it wraps (fallback, routing, rate limit), outermost first."""
    names = [model_label(model)]
    if depth >= 4:
        return names
    inner = getattr(model, "models", None)
    if isinstance(inner, tuple):
        for m in inner:
            names.extend(_model_names(m, depth + 1))
    wrapped = getattr(model, "model", None)
    if wrapped is not None and not isinstance(wrapped, str) and callable(getattr(wrapped, "call", None)):
        names.extend(_model_names(wrapped, depth + 1))
    return names


class _RequestMeter:
    """The usage meter of one request: checks limits before each call, adds usage after it."""

    def __init__(self, advisor: BudgetAdvisor, key: str | None) -> None:
        self.advisor = advisor
        self.key = key
        self.usage = Usage()
        self.cost: float | None = 0.0 if advisor.prices is not None else None
        self.calls = 0
        self._lock = threading.Lock()

    def spend(self) -> BudgetSpend:
        with self._lock:
            return BudgetSpend(self.usage, self.cost, self.calls)

    def _price(self, name: str | None) -> ModelPrice | None:
        prices = self.advisor.prices
        return prices.find(name) if prices is not None else None

    def before_call(self, prompt: Prompt, model: ChatModel) -> None:
        adv = self.advisor
        tokens_in, tokens_out = adv.estimate(prompt)
        asked = getattr(prompt.options, "model", None)
        names = [asked] if asked else _model_names(model)
        cost: float | None = None
        if adv.prices is not None:
            # A wrapper (fallback, routing) may hand the call to any of its models: plan for the dearest.
            estimate = Usage(tokens_in, tokens_out)
            costs = [p.cost(estimate) for p in (self._price(n) for n in names) if p is not None]
            # A plain model without a price cannot be budgeted: say so before spending anything. A
            # wrapper that does not list its models (a routing function) is priced after the call.
            if not costs and len(names) == 1 and not hasattr(model, "models") and self._keeps_cost():
                name = names[-1]
                raise BudgetExceededError(
                    f"cannot keep a cost budget: no price for model {name!r}; pass "
                    f"prices=DEFAULT_PRICES.with_prices({{{name!r}: ModelPrice(input=..., output=...)}})",
                    self.usage,
                    cost=self.cost,
                    limit="prices",
                )
            if costs:
                cost = max(costs)
        with self._lock:
            usage, spent = self.usage, self.cost
        if _over(adv.max_tokens, usage.total_tokens + tokens_in + tokens_out):
            raise BudgetExceededError(
                f"the request's token budget is {adv.max_tokens}; {usage.total_tokens} tokens are used after "
                f"{self.calls} model call(s) and the next call may take {tokens_in + tokens_out} - "
                "raise max_tokens or shorten the conversation",
                usage,
                cost=spent,
                limit="max_tokens",
            )
        if cost is not None and _over(adv.max_cost, (spent or 0.0) + cost):
            raise BudgetExceededError(
                f"the request's cost budget is {adv.max_cost}; {spent or 0.0:.6f} is spent after {self.calls} "
                f"model call(s) and the next call may cost {cost:.6f} - raise max_cost",
                usage,
                cost=spent,
                limit="max_cost",
            )
        if adv.budget is not None and self.key is not None:
            adv.budget.check(self.key, tokens_in + tokens_out, cost)

    def before_media(self, model: str, cost: float | None) -> None:
        """Stop an image, transcription or speech call that would go over the cost budget (or that
        has no price while a cost budget is kept)."""
        adv = self.advisor
        if cost is None and adv.prices is not None and self._keeps_cost():
            raise BudgetExceededError(
                f"cannot keep a cost budget: no price for media model {model!r}; pass the model "
                f"prices=DEFAULT_MEDIA_PRICES.with_prices({{{model!r}: MediaPrice(...)}})",
                self.usage,
                cost=self.cost,
                limit="prices",
            )
        with self._lock:
            usage, spent = self.usage, self.cost
        if cost is not None and _over(adv.max_cost, (spent or 0.0) + cost):
            raise BudgetExceededError(
                f"the request's cost budget is {adv.max_cost}; {spent or 0.0:.6f} is spent and the {model} call "
                f"may cost {cost:.6f} - raise max_cost",
                usage,
                cost=spent,
                limit="max_cost",
            )
        if adv.budget is not None and self.key is not None:
            adv.budget.check(self.key, 0, cost)

    def after_media(self, model: str, usage: Usage, cost: float | None) -> None:
        """Add an image, transcription or speech call's usage and cost."""
        with self._lock:
            self.usage = self.usage + usage
            self.calls += 1
            if self.cost is not None and cost is not None:
                self.cost += cost
        if self.advisor.budget is not None and self.key is not None:
            self.advisor.budget.add(self.key, usage, cost)

    def _keeps_cost(self) -> bool:
        adv = self.advisor
        return adv.max_cost is not None or (adv.budget is not None and adv.budget.max_cost is not None)

    def after_call(self, response: ChatResponse, model: ChatModel) -> None:
        usage = response.metadata.usage
        name = response.metadata.model or model_label(model)
        price = self._price(name)
        cost = price.cost(usage) if price is not None else None
        if price is None and self.advisor.prices is not None and self._keeps_cost():
            with self._lock:
                self.usage = self.usage + usage
                self.calls += 1
                self.cost = None  # unknown from here on
            raise BudgetExceededError(
                f"cannot keep a cost budget: model {name!r} answered and has no price; pass "
                f"prices=DEFAULT_PRICES.with_prices({{{name!r}: ModelPrice(input=..., output=...)}})",
                self.usage,
                cost=None,
                limit="prices",
            )
        with self._lock:
            self.usage = self.usage + usage
            self.calls += 1
            if self.cost is not None and cost is not None:
                self.cost += cost
        if self.advisor.budget is not None and self.key is not None:
            self.advisor.budget.add(self.key, usage, cost)


class BudgetAdvisor(BaseAdvisor):
    """Stops a request before a model call that would exceed its token or cost budget.

    ``max_tokens`` / ``max_cost`` limit one request (all its model calls together); ``prices`` is a
    ``PriceTable`` (default ``DEFAULT_PRICES`` when ``max_cost`` is set) used for the cost; ``budget``
    is a shared ``Budget`` charged by every request of the client. ``counter`` (a
    ``chatclient.tokens`` counter) makes the pre-call estimate count the prompt with a real tokenizer;
    ``estimate(prompt) -> (input, output)`` replaces the estimate altogether. The answer's metadata gets ``cost`` (``None``
    without prices) and ``budget_usage``; the response context gets ``BUDGET_USAGE``.

    Runs first (order ``HIGHEST_PRECEDENCE + 100``) so that every advisor's model calls are in its
    scope.
    """

    def __init__(
        self,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: PriceTable | None = None,
        *,
        budget: Budget | None = None,
        estimate: Callable[[Prompt], tuple[int, int]] = estimate_tokens,
        counter: Any = None,
        order: int = HIGHEST_PRECEDENCE + 100,
    ) -> None:
        _check_limits(max_tokens, max_cost)
        if prices is not None and not isinstance(prices, PriceTable):
            raise TypeError(f"prices must be a PriceTable, got {type(prices).__name__}")
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        needs_prices = max_cost is not None or (budget is not None and budget.max_cost is not None)
        self.prices = prices if prices is not None else (DEFAULT_PRICES if needs_prices else None)
        self.budget = budget
        if counter is not None and estimate is not estimate_tokens:
            raise ValueError("give counter= or estimate=, not both")
        self.estimate = CountingEstimate(counter) if counter is not None else estimate
        self.order = order

    def _start(self, request: ChatClientRequest) -> tuple[ChatClientRequest, _RequestMeter]:
        meter = _RequestMeter(self, self.budget.key_of(request) if self.budget is not None else None)
        existing = tuple(request.context.get(USAGE_METERS) or ())
        return request.mutate(context={USAGE_METERS: (*existing, meter)}), meter

    def _finish(self, response: ChatClientResponse, meter: _RequestMeter) -> ChatClientResponse:
        spend = meter.spend()
        if spend.cost is not None:
            annotate_span("chatclient.cost", spend.cost)
        annotate_span("chatclient.budget.total_tokens", spend.usage.total_tokens)
        cr = response.chat_response
        if cr is not None:
            cr = cr.with_metadata(cost=spend.cost, budget_usage=spend.usage)
        return response.mutate(chat_response=cr, context={BUDGET_USAGE: spend})

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        request, meter = self._start(request)
        with metering(meter):
            response = chain.next_call(request)
        return self._finish(response, meter)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        request, meter = self._start(request)
        with metering(meter):
            response = await chain.next_acall(request)
        return self._finish(response, meter)

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        request, meter = self._start(request)
        held: list[ChatClientResponse] = []
        with metering(meter):
            for response in chain.next_stream(request):
                # Hold the finishing chunk until the stream ends: the call is counted only then.
                if held or (response.chat_response is not None and response.chat_response.has_finish_reason()):
                    held.append(response)
                else:
                    yield response
        if held:
            yield self._finish(held[0], meter)
            yield from held[1:]

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        request, meter = self._start(request)
        held: list[ChatClientResponse] = []
        with metering(meter):
            async for response in chain.next_astream(request):
                if held or (response.chat_response is not None and response.chat_response.has_finish_reason()):
                    held.append(response)
                else:
                    yield response
        if held:
            yield self._finish(held[0], meter)
            for response in held[1:]:
                yield response
