"""CircuitBreaker states, FallbackChatModel triggers and RoutingChatModel, with scripted models."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from advisors import SimpleLoggerAdvisor
from chatclient import ChatClient, ChatResponse, Prompt
from chatclient.errors import (
    AuthenticationError,
    CircuitOpenError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models.base import BaseChatModel, ModelCapabilities
from chatclient.resilience import (
    CircuitBreaker,
    CircuitState,
    ClassifierRouter,
    FallbackChatModel,
    RoutingChatModel,
    fallback_trigger,
)
from chatclient.testing import ScriptedChatModel
from tests.conftest import run_spec


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the breaker ---------------------------------------------------------------------------------


def test_breaker_opens_after_threshold_failures_within_the_window() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=3, window=10.0, reset_timeout=5.0, clock=clock)
    b.record_failure()
    clock.now += 11  # the first failure leaves the window
    b.record_failure()
    b.record_failure()
    assert b.state is CircuitState.CLOSED and b.failure_count == 2
    b.record_failure()
    assert b.state is CircuitState.OPEN
    assert not b.allow()
    assert b.retry_in == pytest.approx(5.0)


def test_breaker_half_open_lets_exactly_one_probe_and_closes_on_success() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, window=10.0, reset_timeout=5.0, clock=clock)
    b.record_failure()
    clock.now += 4.9
    assert not b.allow()
    clock.now += 0.2
    assert b.state is CircuitState.HALF_OPEN
    assert b.allow() is True
    assert b.allow() is False  # the probe is out
    b.record_success()
    assert b.state is CircuitState.CLOSED and b.failure_count == 0
    assert b.allow() and b.allow()


def test_breaker_failed_probe_opens_again_and_release_returns_the_probe() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, window=10.0, reset_timeout=5.0, clock=clock)
    b.record_failure()
    clock.now += 5
    assert b.allow()
    b.release()
    assert b.allow()  # released permit: another probe may go
    b.record_failure()
    assert b.state is CircuitState.OPEN and b.retry_in == pytest.approx(5.0)


def test_breaker_retry_after_is_the_open_time_and_is_capped() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=5, reset_timeout=5.0, max_open_time=60.0, clock=clock)
    b.record_failure(retry_after=12.0)
    assert b.state is CircuitState.OPEN and b.retry_in == pytest.approx(12.0)
    clock.now += 12
    assert b.state is CircuitState.HALF_OPEN
    b.reset()
    b.record_failure(retry_after=86400.0)
    assert b.retry_in == pytest.approx(60.0)


def test_breaker_validates_its_settings() -> None:
    with pytest.raises(ValueError, match="failure_threshold"):
        CircuitBreaker(failure_threshold=0)
    with pytest.raises(ValueError, match="window"):
        CircuitBreaker(window=0)


def test_breaker_one_probe_across_threads() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout=1.0, clock=clock)
    b.record_failure()
    clock.now += 1
    barrier = threading.Barrier(32)
    granted: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        barrier.wait()
        ok = b.allow()
        with lock:
            granted.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert granted.count(True) == 1


def test_breaker_one_probe_across_tasks() -> None:
    clock = FakeClock()
    b = CircuitBreaker(failure_threshold=1, reset_timeout=1.0, clock=clock)
    b.record_failure()
    clock.now += 1

    async def probe() -> bool:
        await asyncio.sleep(0)
        return b.allow()

    async def main() -> list[bool]:
        return list(await asyncio.gather(*(probe() for _ in range(50))))

    assert asyncio.run(main()).count(True) == 1


# -- fallback triggers ---------------------------------------------------------------------------

TRIGGER_CASES = [
    ("connection", ModelConnectionError("connection refused")),
    ("timeout", ModelTimeoutError("read timed out")),
    ("rate_limit", RateLimitError("slow down", retry_after=None)),
    ("server_error", ModelHTTPError("boom", status=502)),
    ("overloaded", ModelHTTPError("busy", status=529, type="overloaded_error")),
    ("overloaded", ModelHTTPError("busy", status=400, type="overloaded_error")),
    ("context_length", ModelHTTPError("too long", status=400, code="context_length_exceeded")),
    ("context_length", ModelHTTPError("prompt is too long: 210000 tokens > 200000 maximum", status=400)),
]


@pytest.mark.parametrize(("trigger", "error"), TRIGGER_CASES)
def test_each_trigger_falls_back_in_every_mode(trigger: str, error: Exception, mode: str) -> None:
    assert fallback_trigger(error) == trigger
    primary = ScriptedChatModel([error], model_name="primary")
    backup = ScriptedChatModel([["from ", "backup"]], model_name="backup")
    model = FallbackChatModel(primary, backup)
    client = ChatClient.builder(model).default_advisors(SimpleLoggerAdvisor()).build()
    response = run_spec(client.prompt("hi"), mode).chat_response
    assert response is not None and response.text == "from backup"
    assert response.metadata.extra["fallback_model"] == "backup"
    assert response.metadata.extra["fallback_failed"] == (f"primary: {type(error).__name__}",)
    assert len(primary.prompts) == 1 and len(backup.prompts) == 1


@pytest.mark.parametrize(
    "error",
    [AuthenticationError("bad key", status=401), ModelHTTPError("bad request", status=400), ValueError("bug")],
)
def test_other_errors_are_raised_without_trying_the_next_model(error: Exception) -> None:
    primary = ScriptedChatModel([error], model_name="primary")
    backup = ScriptedChatModel(["never"], model_name="backup")
    with pytest.raises(type(error)):
        FallbackChatModel(primary, backup).call(Prompt("hi"))
    assert backup.prompts == []


def test_on_restricts_the_triggers_and_accepts_classes_and_predicates() -> None:
    only_429 = FallbackChatModel(
        ScriptedChatModel([ModelHTTPError("boom", status=500)]), ScriptedChatModel(["x"]), on=("rate_limit",)
    )
    with pytest.raises(ModelHTTPError):
        only_429.call(Prompt("hi"))
    by_class = FallbackChatModel(ScriptedChatModel([KeyError("k")]), ScriptedChatModel(["ok"]), on=(KeyError,))
    assert by_class.call(Prompt("hi")).text == "ok"
    by_fn = FallbackChatModel(
        ScriptedChatModel([ModelHTTPError("teapot", status=418)]),
        ScriptedChatModel(["ok"]),
        on=lambda e: getattr(e, "status", None) == 418,
    )
    assert by_fn.call(Prompt("hi")).text == "ok"
    with pytest.raises(ValueError, match="trigger names"):
        FallbackChatModel(ScriptedChatModel([]), on=("nope",))


class _BreaksAfterFirstChunk(BaseChatModel):
    model_name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    def call(self, prompt: Prompt) -> ChatResponse:
        raise ModelConnectionError("reset")

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        self.calls += 1
        yield ChatResponse.of_text("partial ", finish_reason=None)
        raise ModelConnectionError("connection reset mid-stream")

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.calls += 1
        yield ChatResponse.of_text("partial ", finish_reason=None)
        raise ModelConnectionError("connection reset mid-stream")


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_never_falls_back_after_the_first_streamed_chunk(mode: str) -> None:
    flaky = _BreaksAfterFirstChunk()
    backup = ScriptedChatModel(["never"], model_name="backup")
    model = FallbackChatModel(flaky, backup, breaker=CircuitBreaker(failure_threshold=1))
    seen: list[str | None] = []

    async def consume() -> None:
        async for c in model.astream(Prompt("hi")):
            seen.append(c.text)

    with pytest.raises(ModelConnectionError, match="mid-stream"):
        if mode == "stream":
            for c in model.stream(Prompt("hi")):
                seen.append(c.text)
        else:
            asyncio.run(consume())
    assert seen == ["partial "] and backup.prompts == []
    assert model.breakers[0].state is CircuitState.OPEN  # the broken stream still counts against it


def test_breaker_skips_a_failing_primary_then_probes_it_again() -> None:
    clock = FakeClock()
    primary = ScriptedChatModel([ModelHTTPError("down", status=503)] * 2 + ["primary is back"], model_name="primary")
    backup = ScriptedChatModel(["b1", "b2", "b3"], model_name="backup")
    model = FallbackChatModel(
        primary, backup, breaker=CircuitBreaker(failure_threshold=2, window=60, reset_timeout=30, clock=clock)
    )
    assert [model.call(Prompt("q")).text for _ in range(3)] == ["b1", "b2", "b3"]
    assert len(primary.prompts) == 2  # third call skipped the open primary
    third = backup.prompts[-1]
    assert third.user_message.text == "q"
    clock.now += 30
    r = model.call(Prompt("q"))
    assert r.text == "primary is back" and r.metadata.extra["fallback_model"] == "primary"
    assert model.breakers[0].state is CircuitState.CLOSED


def test_retry_after_opens_the_primary_breaker_for_that_long() -> None:
    clock = FakeClock()
    primary = ScriptedChatModel([RateLimitError("429", retry_after=7.0)], model_name="primary")
    backup = ScriptedChatModel(["b1", "b2"], model_name="backup")
    model = FallbackChatModel(primary, backup, breaker=CircuitBreaker(failure_threshold=5, clock=clock))
    assert model.call(Prompt("q")).text == "b1"
    assert model.breakers[0].state is CircuitState.OPEN and model.breakers[0].retry_in == pytest.approx(7.0)
    r = model.call(Prompt("q"))
    assert r.metadata.extra["fallback_failed"] == ("primary: circuit open",)


def test_context_length_does_not_count_against_the_breaker() -> None:
    err = ModelHTTPError("too long", status=400, code="context_length_exceeded")
    primary = ScriptedChatModel([err, err], model_name="small")
    model = FallbackChatModel(primary, ScriptedChatModel(["a", "b"]), breaker=CircuitBreaker(failure_threshold=1))
    model.call(Prompt("q"))
    model.call(Prompt("q"))
    assert len(primary.prompts) == 2 and model.breakers[0].state is CircuitState.CLOSED


def test_all_failed_raises_the_last_error_with_notes_and_all_open_raises_circuit_open() -> None:
    a = ScriptedChatModel([ModelHTTPError("a down", status=500)], model_name="a")
    b = ScriptedChatModel([ModelTimeoutError("b slow")], model_name="b")
    model = FallbackChatModel(a, b, breaker=CircuitBreaker(failure_threshold=1, reset_timeout=30))
    with pytest.raises(ModelTimeoutError) as info:
        model.call(Prompt("q"))
    assert any("a down" in n for n in info.value.__notes__)
    with pytest.raises(CircuitOpenError, match="every model's circuit breaker is open") as open_info:
        model.call(Prompt("q"))
    assert open_info.value.retry_in is not None and 0 < open_info.value.retry_in <= 30


def test_shared_breakers_and_names() -> None:
    shared = CircuitBreaker(failure_threshold=1)
    one = FallbackChatModel(
        ScriptedChatModel([RateLimitError("x")]), ScriptedChatModel(["ok"]), breakers=[shared, CircuitBreaker()]
    )
    one.call(Prompt("q"))
    assert shared.state is CircuitState.OPEN
    with pytest.raises(ValueError, match="one CircuitBreaker per model"):
        FallbackChatModel(ScriptedChatModel([]), breakers=[shared, shared])
    same = FallbackChatModel(ScriptedChatModel([]), ScriptedChatModel([]))
    assert same.names == ("scripted", "scripted#2")


def test_capabilities_are_what_every_model_shares() -> None:
    native = ScriptedChatModel([], capabilities=ModelCapabilities(structured_output=("native", "tool")))
    tool_only = ScriptedChatModel([], capabilities=ModelCapabilities(structured_output=("tool",), vision=True))
    caps = FallbackChatModel(native, tool_only).capabilities
    assert caps.structured_output == ("tool",) and caps.vision is False


# -- routing -------------------------------------------------------------------------------------


def test_rule_router_picks_a_model_per_prompt_in_every_mode(mode: str) -> None:
    small = ScriptedChatModel([["small ", "answer"]], model_name="small")
    big = ScriptedChatModel([["big ", "answer"]], model_name="big")
    model = RoutingChatModel(lambda p: big if len(p.contents) > 20 else small, models=[small, big])
    client = ChatClient.create(model)
    r1 = run_spec(client.prompt("short"), mode).chat_response
    r2 = run_spec(client.prompt("a much longer question than that"), mode).chat_response
    assert r1 is not None and r2 is not None
    assert (r1.text, r1.metadata.extra["routed_model"]) == ("small answer", "small")
    assert (r2.text, r2.metadata.extra["routed_model"]) == ("big answer", "big")


def test_async_rule_router_in_async_modes_and_bad_router_results() -> None:
    target = ScriptedChatModel(["ok"], model_name="t")

    async def pick(prompt: Prompt) -> ScriptedChatModel:
        return target

    model = RoutingChatModel(pick)
    assert asyncio.run(model.acall(Prompt("q"))).text == "ok"
    with pytest.raises(TypeError, match="async router"):
        model.call(Prompt("q"))
    with pytest.raises(TypeError, match="must return a ChatModel"):
        RoutingChatModel(lambda p: "gpt-4o").call(Prompt("q"))


def test_classifier_router_asks_a_chat_client() -> None:
    judge = ScriptedChatModel(["code", "Key: chat.", "something unknown"], model_name="judge")
    coder = ScriptedChatModel(["def f(): ..."], model_name="coder")
    general = ScriptedChatModel(["hello!", "fallback route"], model_name="general")
    router = ClassifierRouter(
        ChatClient.create(judge),
        {"chat": (general, "small talk and anything else"), "code": (coder, "programming questions")},
    )
    model = RoutingChatModel(router)
    assert model.call(Prompt("write a function")).metadata.extra["routed_model"] == "coder"
    assert "code: programming questions" in (judge.prompts[0].user_message.text or "")
    assert "write a function" in (judge.prompts[0].user_message.text or "")
    assert model.call(Prompt("how are you")).text == "hello!"
    assert asyncio.run(model.acall(Prompt("??"))).text == "fallback route"  # unknown key -> default (first)
    assert router.last_key == "chat"
    with pytest.raises(ValueError, match="single words"):
        ClassifierRouter(ChatClient.create(judge), {"two words": (coder, "x")})


def test_wrappers_compose_fallback_over_routing() -> None:
    down = ScriptedChatModel([ModelConnectionError("down")], model_name="down")
    up = ScriptedChatModel(["up"], model_name="up")
    model = FallbackChatModel(RoutingChatModel(lambda p: down), up)
    r = model.call(Prompt("q"))
    assert r.text == "up" and r.metadata.extra["fallback_model"] == "up"
