"""Tool timeouts: a hung tool becomes an error tool response (or ToolTimeoutError), in every mode.

Hung sync tools wait on an event the test releases at the end, so no thread outlives the module.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import ToolExecutionError
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.models.base import ChatResponse, Generation
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel
from chatclient.tools import (
    FunctionToolCallback,
    ToolCallAdvisor,
    ToolCallingManager,
    ToolTimeoutError,
    tool,
)
from tests.conftest import run_spec

RELEASE = threading.Event()
HANG = 30.0  # how long a "hung" sync tool would block if the test never released it


@pytest.fixture(autouse=True)
def _release_hung_tools() -> Iterator[None]:
    RELEASE.clear()
    yield
    RELEASE.set()


@tool(timeout=0.2)
def hangs(city: str) -> str:
    """A sync tool that hangs."""
    RELEASE.wait(HANG)
    return f"late answer for {city}"


@tool
def hangs_without_own_limit(city: str) -> str:
    """A sync tool that hangs, with no limit of its own."""
    RELEASE.wait(HANG)
    return "late"


@tool
def quick(city: str) -> str:
    """A fast tool."""
    return f"sunny in {city}"


CANCELLED = threading.Event()


@tool(timeout=0.2)
async def hangs_async(city: str) -> str:
    """An async tool that hangs (cooperatively)."""
    try:
        await asyncio.sleep(HANG)
    except asyncio.CancelledError:
        CANCELLED.set()
        raise
    return "late"


def turn(*calls: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(None, tuple(ToolCall(f"call-{i}", n, a) for i, (n, a) in enumerate(calls)))


def tool_responses(model: ScriptedChatModel) -> tuple[Any, ...]:
    last = model.prompts[-1].messages[-1]
    assert isinstance(last, ToolResponseMessage)
    return last.responses


def test_hung_sync_tool_becomes_an_error_response(mode: str) -> None:
    model = ScriptedChatModel([turn(("hangs", '{"city": "Oslo"}')), "The tool timed out."])
    start = time.perf_counter()
    response = run_spec(ChatClient.create(model).prompt("weather?").tools(hangs), mode)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0  # 0.2 s limit; generous for a loaded 2-core machine
    assert response.chat_response is not None and response.chat_response.text == "The tool timed out."
    (answer,) = tool_responses(model)
    assert answer.is_error
    assert "did not finish within its timeout of 0.2 s" in answer.response_data
    (record,) = response.tool_executions
    assert record.is_error and record.name == "hangs"
    assert 0.15 <= record.duration < 5.0


def test_manager_default_applies_to_tools_without_their_own(mode: str) -> None:
    model = ScriptedChatModel([turn(("hangs_without_own_limit", '{"city": "Oslo"}')), "ok"])
    advisor = ToolCallAdvisor(tool_calling_manager=ToolCallingManager(timeout=0.2))
    spec = ChatClient.create(model).prompt("weather?").tools(hangs_without_own_limit).advisors(advisor)
    start = time.perf_counter()
    run_spec(spec, mode)
    assert time.perf_counter() - start < 5.0
    (answer,) = tool_responses(model)
    assert answer.is_error and "timeout of 0.2 s" in answer.response_data


def test_tool_limit_wins_over_the_manager_default(mode: str) -> None:
    @tool(timeout=10)
    def slowish(city: str) -> str:
        """Takes longer than the manager's default, less than its own limit."""
        time.sleep(0.3)
        return f"cloudy in {city}"

    model = ScriptedChatModel([turn(("slowish", '{"city": "Rome"}')), "done"])
    advisor = ToolCallAdvisor(tool_calling_manager=ToolCallingManager(timeout=0.05))
    run_spec(ChatClient.create(model).prompt("weather?").tools(slowish).advisors(advisor), mode)
    (answer,) = tool_responses(model)
    assert not answer.is_error and answer.response_data == "cloudy in Rome"


def test_raise_on_tool_error_raises_tool_timeout_error(mode: str) -> None:
    model = ScriptedChatModel([turn(("hangs", '{"city": "Oslo"}'))])
    advisor = ToolCallAdvisor(tool_calling_manager=ToolCallingManager(raise_on_tool_error=True))
    spec = ChatClient.create(model).prompt("weather?").tools(hangs).advisors(advisor)
    start = time.perf_counter()
    with pytest.raises(ToolTimeoutError, match=r"'hangs' did not finish .* @tool\(timeout=\.\.\.\)") as info:
        run_spec(spec, mode)
    assert time.perf_counter() - start < 5.0
    assert isinstance(info.value, ToolExecutionError)
    assert info.value.tool_name == "hangs" and info.value.timeout == 0.2


def test_hung_async_tool_is_cancelled_in_every_mode(mode: str) -> None:
    CANCELLED.clear()
    model = ScriptedChatModel([turn(("hangs_async", '{"city": "Oslo"}')), "ok"])
    start = time.perf_counter()
    run_spec(ChatClient.create(model).prompt("weather?").tools(hangs_async), mode)
    assert time.perf_counter() - start < 5.0
    (answer,) = tool_responses(model)
    assert answer.is_error and "timeout of 0.2 s" in answer.response_data
    # Async tools really stop (sync modes run them on a private loop, where they are cancelled too).
    assert CANCELLED.wait(5.0)


def test_one_hung_call_does_not_hold_up_the_others_of_its_turn(mode: str) -> None:
    model = ScriptedChatModel([turn(("hangs", '{"city": "A"}'), ("quick", '{"city": "B"}')), "ok"])
    start = time.perf_counter()
    response = run_spec(ChatClient.create(model).prompt("weather?").tools(hangs, quick), mode)
    assert time.perf_counter() - start < 5.0
    first, second = tool_responses(model)
    assert first.is_error and not second.is_error and second.response_data == "sunny in B"
    assert [r.is_error for r in response.tool_executions] == [True, False]


def test_hung_sync_tools_never_exhaust_asyncio_default_executor() -> None:
    """More hung calls than the default executor has workers; to_thread must still answer at once."""
    manager = ToolCallingManager(timeout=0.05)
    callback = FunctionToolCallback(lambda: RELEASE.wait(HANG), name="stuck", description="hangs")
    calls = tuple(ToolCall(f"c{i}", "stuck", "{}") for i in range(12))
    response = ChatResponse((Generation(AssistantMessage(None, calls)),))

    async def scenario() -> float:
        result = await manager.aexecute(Prompt("go"), response, tools=[callback])
        assert all(r.is_error for r in result.tool_response_message.responses)
        start = time.perf_counter()
        await asyncio.wait_for(asyncio.to_thread(lambda: None), 5.0)
        return time.perf_counter() - start

    assert asyncio.run(scenario()) < 1.0
    stuck = [t for t in threading.enumerate() if t.name == "chatclient-tool-stuck"]
    assert len(stuck) == 12 and all(t.daemon for t in stuck)  # still running, but never blocking exit


def test_a_tool_that_raises_timeout_error_itself_is_not_reported_as_our_limit(mode: str) -> None:
    @tool(timeout=5)
    async def flaky(city: str) -> str:
        """Its own network call times out."""
        raise TimeoutError("upstream took too long")

    model = ScriptedChatModel([turn(("flaky", '{"city": "Oslo"}')), "ok"])
    run_spec(ChatClient.create(model).prompt("weather?").tools(flaky), mode)
    (answer,) = tool_responses(model)
    assert answer.is_error and "upstream took too long" in answer.response_data
    assert "did not finish" not in answer.response_data


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_invalid_timeouts_are_value_errors(bad: float) -> None:
    with pytest.raises(ValueError, match="positive, finite"):
        tool(timeout=bad)
    with pytest.raises(ValueError, match="positive, finite"):
        ToolCallingManager(timeout=bad)
    with pytest.raises(ValueError, match="positive, finite"):
        FunctionToolCallback(lambda: None, name="x", description="x", timeout=bad)


@pytest.mark.parametrize("bad", ["1", True])
def test_non_numeric_timeouts_are_type_errors(bad: Any) -> None:
    with pytest.raises(TypeError, match="number of seconds"):
        tool(timeout=bad)
    with pytest.raises(TypeError, match="number of seconds"):
        ToolCallingManager(timeout=bad)


def test_timeouts_are_visible_on_the_callback_and_manager() -> None:
    assert FunctionToolCallback(lambda: None, name="x", description="x", timeout=2).timeout == 2.0
    manager = ToolCallingManager(timeout=3)
    assert manager.timeout == 3.0 and "timeout=3.0" in repr(manager)
    cb_own = FunctionToolCallback(lambda: None, name="a", description="a", timeout=1)
    cb_none = FunctionToolCallback(lambda: None, name="b", description="b")
    assert manager.timeout_for(cb_own) == 1.0 and manager.timeout_for(cb_none) == 3.0
