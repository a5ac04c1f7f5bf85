"""ToolCallingManager: validation, concurrency, ordering, errors, return-direct, user-controlled loops."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import ToolExecutionError, UnknownToolError
from chatclient.messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.base import ChatResponse
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel, response_for
from chatclient.tools import (
    RETURN_DIRECT,
    ToolCallingManager,
    ToolContext,
    ToolExecutionResult,
    ToolResultConversionError,
    tool,
)

PROMPT = Prompt([UserMessage("question")])


def calls(*specs: tuple[str, str]) -> ChatResponse:
    """A model response asking for the given (name, arguments) calls, ids c0, c1, ..."""
    message = AssistantMessage(tool_calls=tuple(ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(specs)))
    return response_for(PROMPT, message)


async def run(manager: ToolCallingManager, mode: str, response: ChatResponse, **kw: Any) -> ToolExecutionResult:
    if mode == "sync":
        return manager.execute(PROMPT, response, **kw)
    return await manager.aexecute(PROMPT, response, **kw)


MODES = ["sync", "async"]


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(return_direct=True)
def final_answer(text: str) -> str:
    """Return the final answer to the user."""
    return text


@tool
def explode(reason: str) -> str:
    raise ValueError(reason)


@pytest.mark.parametrize("mode", MODES)
async def test_history_is_prompt_plus_assistant_plus_responses(mode: str) -> None:
    response = calls(("add", '{"a": 1, "b": 2}'))
    result = await run(ToolCallingManager(), mode, response, tools=[add])
    assert result.conversation_history == (
        UserMessage("question"),
        response.result.output,  # type: ignore[union-attr]
        ToolResponseMessage((ToolResponse("c0", "add", "3"),)),
    )
    assert result.return_direct is False


@pytest.mark.parametrize("mode", MODES)
async def test_sync_tools_of_one_turn_run_concurrently_and_keep_model_order(mode: str) -> None:
    # 'first' cannot return until 'second' has returned: finishing at all proves concurrency,
    # and 'first' completing last proves responses follow the model's order, not completion order.
    both_entered = threading.Barrier(2, timeout=30)
    second_done = threading.Event()

    @tool
    def first() -> str:
        both_entered.wait()
        assert second_done.wait(timeout=30)
        return "one"

    @tool
    def second() -> str:
        both_entered.wait()
        second_done.set()
        return "two"

    result = await run(ToolCallingManager(), mode, calls(("first", ""), ("second", "")), tools=[first, second])
    assert [r.response_data for r in result.tool_response_message.responses] == ["one", "two"]
    assert [r.id for r in result.tool_response_message.responses] == ["c0", "c1"]


async def test_async_tools_run_concurrently_with_gather() -> None:
    entered: list[str] = []
    gate = asyncio.Event()

    @tool
    async def slow(name: str) -> str:
        entered.append(name)
        if len(entered) == 2:
            gate.set()
        await asyncio.wait_for(gate.wait(), timeout=30)  # only released once both are running
        return name.upper()

    response = calls(("slow", '{"name": "a"}'), ("slow", '{"name": "b"}'))
    result = await ToolCallingManager().aexecute(PROMPT, response, tools=[slow])
    assert [r.response_data for r in result.tool_response_message.responses] == ["A", "B"]


@pytest.mark.parametrize("mode", MODES)
async def test_concurrency_cap_is_respected(mode: str) -> None:
    lock = threading.Lock()
    active = [0, 0]  # current, maximum

    @tool
    def work(n: int) -> int:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        threading.Event().wait(0.01)
        with lock:
            active[0] -= 1
        return n

    response = calls(*[("work", f'{{"n": {i}}}') for i in range(4)])
    result = await run(ToolCallingManager(max_concurrency=1), mode, response, tools=[work])
    assert active[1] == 1
    assert [r.response_data for r in result.tool_response_message.responses] == ["0", "1", "2", "3"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_error_becomes_error_response_naming_tool(mode: str) -> None:
    response = calls(("explode", '{"reason": "no network"}'), ("add", '{"a": 2, "b": 2}'))
    result = await run(ToolCallingManager(), mode, response, tools=[explode, add])
    bad, good = result.tool_response_message.responses
    assert bad.is_error and "explode" in bad.response_data and "ValueError: no network" in bad.response_data
    assert (good.response_data, good.is_error) == ("4", False)


@pytest.mark.parametrize("mode", MODES)
async def test_raise_on_tool_error(mode: str) -> None:
    with pytest.raises(ToolExecutionError, match="explode") as info:
        await run(
            ToolCallingManager(raise_on_tool_error=True), mode, calls(("explode", '{"reason": "x"}')), tools=[explode]
        )
    assert info.value.tool_name == "explode"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1, "b": ', "not valid JSON"),
        ('{"a": "one", "b": 2}', "a: Input should be a valid integer"),
        ('{"a": 1}', "b: Field required"),
        ('{"a": 1, "b": 2, "c": 3}', "c: Extra inputs are not permitted"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
async def test_bad_arguments_become_error_responses_without_calling(mode: str, arguments: str, expected: str) -> None:
    called: list[int] = []

    @tool
    def add_tracked(a: int, b: int) -> int:
        called.append(1)
        return a + b

    result = await run(ToolCallingManager(), mode, calls(("add_tracked", arguments)), tools=[add_tracked])
    (response,) = result.tool_response_message.responses
    assert response.is_error and "add_tracked" in response.response_data and expected in response.response_data
    assert called == []
    with pytest.raises(ToolExecutionError, match=expected):
        await run(
            ToolCallingManager(raise_on_tool_error=True), mode, calls(("add_tracked", arguments)), tools=[add_tracked]
        )


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_lists_available_tools(mode: str) -> None:
    response = calls(("get_stock_price", "{}"), ("add", '{"a": 1, "b": 1}'))
    result = await run(ToolCallingManager(), mode, response, tools=[add, explode])
    unknown, ok = result.tool_response_message.responses
    assert unknown.is_error
    assert "get_stock_price" in unknown.response_data and "Available tools: add, explode" in unknown.response_data
    assert ok.response_data == "2"


@pytest.mark.parametrize("mode", MODES)
async def test_raise_on_unknown_tool_runs_nothing(mode: str) -> None:
    ran: list[int] = []

    @tool
    def side_effect() -> str:
        ran.append(1)
        return "done"

    with pytest.raises(UnknownToolError, match="nope") as info:
        await run(
            ToolCallingManager(raise_on_unknown_tool=True),
            mode,
            calls(("side_effect", ""), ("nope", "")),
            tools=[side_effect],
        )
    assert info.value.tool_name == "nope"
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_only_when_every_tool_is_direct_and_none_failed(mode: str) -> None:
    manager = ToolCallingManager()
    pure = await run(manager, mode, calls(("final_answer", '{"text": "42"}')), tools=[final_answer, add])
    assert pure.return_direct is True
    direct_response = pure.to_chat_response()
    assert direct_response.text == "42"
    assert direct_response.result.finish_reason == RETURN_DIRECT  # type: ignore[union-attr]
    assert dict(direct_response.result.metadata.extra) == {"tool_id": "c0", "tool_name": "final_answer"}  # type: ignore[union-attr]
    mixed = await run(
        manager, mode, calls(("final_answer", '{"text": "42"}'), ("add", '{"a":1,"b":1}')), tools=[final_answer, add]
    )
    assert mixed.return_direct is False
    failed = await run(manager, mode, calls(("final_answer", "{}")), tools=[final_answer])
    assert failed.return_direct is False  # an error must go back to the model


@pytest.mark.parametrize("mode", MODES)
async def test_tool_context_from_request_context_reaches_tools(mode: str) -> None:
    seen: list[ToolContext] = []

    @tool
    def tenant(ctx: ToolContext) -> str:
        seen.append(ctx)
        return str(ctx["tenant"])

    request = (
        ChatClient.create(ScriptedChatModel()).prompt("q").tools(tenant).tool_context({"tenant": "acme"}).to_request()
    )
    response = calls(("tenant", "{}"))
    manager = ToolCallingManager()
    result = (
        manager.execute(request.prompt, response, request.context)
        if mode == "sync"
        else (await manager.aexecute(request.prompt, response, request))
    )
    assert result.tool_response_message.responses[0].response_data == "acme"
    assert seen[0].tool_call_history[-1] == response.result.output  # type: ignore[union-attr]


def test_non_serialisable_result_raises_conversion_error_even_without_raise_flag() -> None:
    @tool
    def handle() -> Any:
        return object()

    with pytest.raises(ToolResultConversionError, match="handle"):
        ToolCallingManager().execute(PROMPT, calls(("handle", "")), tools=[handle])


def test_misuse_is_reported_clearly() -> None:
    with pytest.raises(ValueError, match="no tool calls"):
        ToolCallingManager().execute(PROMPT, response_for(PROMPT, "text"), tools=[add])
    with pytest.raises(ValueError, match="no tools to run"):
        ToolCallingManager().execute(PROMPT, calls(("add", "{}")))
    with pytest.raises(ValueError, match="max_concurrency"):
        ToolCallingManager(max_concurrency=0)


def test_user_controlled_execution_loop() -> None:
    """A user calls the model, inspects has_tool_calls(), runs the tools and continues themselves."""
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=(ToolCall("t1", "add", '{"a": 20, "b": 22}'),)), "It is 42."]
    )
    client = ChatClient.create(model)
    request = client.prompt("What is 20 + 22?").tools(add).to_request()
    manager = ToolCallingManager()
    prompt = request.prompt
    response = model.call(prompt)
    assert response.has_tool_calls()
    while response.has_tool_calls():
        result = manager.execute(prompt, response, request.context)
        prompt = prompt.copy(messages=result.conversation_history)
        response = model.call(prompt)
    assert response.text == "It is 42."
    sent = model.prompts[-1]
    assert isinstance(sent.messages[-1], ToolResponseMessage)
    assert sent.messages[-1].responses[0].response_data == "42"
    assert [d.name for d in sent.tools] == ["add"]
    # ... and continues the conversation through the client with the full history
    model.add("Anything else?")
    follow_up = client.prompt().messages(*result.conversation_history, AssistantMessage("It is 42.")).user("thanks")
    assert follow_up.call().content() == "Anything else?"
    assert len(model.prompts[-1].messages) == 5


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_cut_off_by_max_tokens_is_not_run(mode: str) -> None:
    ran: list[str] = []

    @tool
    def record(text: str) -> str:
        """Record a text."""
        ran.append(text)
        return "recorded"

    cut = ToolCall("c0", "record", '{"text": "half', metadata={"partial": True})
    whole = ToolCall("c1", "record", '{"text": "whole"}')
    response = response_for(PROMPT, AssistantMessage(tool_calls=(cut, whole)))
    result = await run(ToolCallingManager(), mode, response, tools=[record])
    first, second = result.conversation_history[-1].responses
    assert first.is_error and "cut off by max_tokens" in first.response_data
    assert (second.is_error, second.response_data) == (False, "recorded")
    assert ran == ["whole"]
    with pytest.raises(ToolExecutionError, match="cut off by max_tokens"):
        await run(ToolCallingManager(raise_on_tool_error=True), mode, response, tools=[record])
    assert set(ran) == {"whole"}  # the complete call may run; the cut-off one never does
