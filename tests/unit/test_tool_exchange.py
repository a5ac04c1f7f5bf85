"""``ChatClientResponse.tool_executions``: which tools ran, without unpacking the context."""

from __future__ import annotations

import time

from chatclient import ChatClient, ContextKeys
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.models.base import ChatResponse, Generation
from chatclient.prompt import Prompt
from chatclient.request import ChatClientResponse
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolCallingManager, ToolExecution, tool
from tests.conftest import run_spec


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    time.sleep(0.05)
    return a + b


@tool
def fail(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(reason)


@tool(return_direct=True)
def order_status(order_id: str) -> str:
    """Status of an order, straight to the user."""
    return f"{order_id}: shipped"


def turn(*calls: tuple[str, str, str]) -> AssistantMessage:
    return AssistantMessage(None, tuple(ToolCall(i, n, a) for i, n, a in calls))


def test_records_every_call_of_every_iteration_in_order(mode: str) -> None:
    model = ScriptedChatModel(
        [
            turn(("c1", "add", '{"a": 1, "b": 2}'), ("c2", "fail", '{"reason": "disk full"}')),
            turn(("c3", "add", '{"a": 3, "b": 4}')),
            "3 and 7",
        ]
    )
    response = run_spec(ChatClient.create(model).prompt("sums").tools(add, fail), mode)
    records = response.tool_executions
    assert [(r.id, r.name, r.arguments) for r in records] == [
        ("c1", "add", '{"a": 1, "b": 2}'),
        ("c2", "fail", '{"reason": "disk full"}'),
        ("c3", "add", '{"a": 3, "b": 4}'),
    ]
    assert [r.result for r in records][0::2] == ["3", "7"]
    assert [r.is_error for r in records] == [False, True, False]
    assert "disk full" in records[1].result
    assert all(isinstance(r, ToolExecution) for r in records)
    # add sleeps 50 ms: the duration is measured, not a placeholder.
    assert records[0].duration >= 0.04 and records[2].duration >= 0.04
    assert 0 <= records[1].duration < 5.0
    assert response.context[ContextKeys.TOOL_EXECUTIONS] == records


def test_return_direct_turn_is_recorded(mode: str) -> None:
    model = ScriptedChatModel([turn(("c1", "order_status", '{"order_id": "A7"}'))])
    response = run_spec(ChatClient.create(model).prompt("A7?").tools(order_status), mode)
    (record,) = response.tool_executions
    assert (record.name, record.result, record.is_error) == ("order_status", "A7: shipped", False)


def test_no_tool_ran(mode: str) -> None:
    response = run_spec(ChatClient.create(ScriptedChatModel(["hi"])).prompt("hi").tools(add), mode)
    assert response.tool_executions == ()
    assert ChatClientResponse().tool_executions == ()


def test_reachable_from_the_call_spec() -> None:
    model = ScriptedChatModel([turn(("c1", "add", '{"a": 1, "b": 1}')), "2"])
    executions = ChatClient.create(model).prompt("1+1").tools(add).call().chat_client_response().tool_executions
    assert [(e.name, e.result) for e in executions] == [("add", "2")]


def test_manager_result_carries_the_records() -> None:
    response = ChatResponse((Generation(turn(("x", "add", '{"a": 5, "b": 5}'), ("y", "nope", "{}"))),))
    result = ToolCallingManager().execute(Prompt("go"), response, tools=[add])
    first = result.executions[0]
    assert (first.id, first.result, first.is_error) == ("x", "10", False)
    assert result.executions[1].is_error and "no tool named 'nope'" in result.executions[1].result
