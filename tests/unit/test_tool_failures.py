"""Tool failure policy (on_execution_error / on_arguments_error, visible errors) and compensation."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import ToolExecutionError
from chatclient.messages import AssistantMessage, ToolCall, UserMessage
from chatclient.models.base import ChatResponse
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel, response_for
from chatclient.tools import (
    ToolArgumentsError,
    ToolCallAdvisor,
    ToolCallingManager,
    ToolContext,
    ToolErrorContext,
    ToolErrorResult,
    ToolErrorVisibleToModel,
    ToolExecution,
    ToolExecutionResult,
    compensates,
    fail_invocation,
    fail_unless_visible,
    send_generic_message_unless_visible,
    send_message_to_model,
    tool,
)

PROMPT = Prompt([UserMessage("question")])
MODES = ["sync", "async"]


def calls(*specs: tuple[str, str]) -> ChatResponse:
    message = AssistantMessage(tool_calls=tuple(ToolCall(f"c{i}", n, a) for i, (n, a) in enumerate(specs)))
    return response_for(PROMPT, message)


async def run(manager: ToolCallingManager, mode: str, response: ChatResponse, **kw: Any) -> ToolExecutionResult:
    if mode == "sync":
        return manager.execute(PROMPT, response, **kw)
    return await manager.aexecute(PROMPT, response, **kw)


class SecretLeak(Exception):
    pass


@tool
def lookup_order(order_id: int) -> str:
    """Find an order."""
    if order_id == 42:
        raise ToolErrorVisibleToModel("no order 42; ask the user for the order number on the receipt")
    raise SecretLeak("SELECT * FROM orders WHERE password='hunter2'")


class OutOfStock(Exception):
    visible_to_model = True


@tool
def reserve(item: str) -> str:
    """Reserve an item."""
    raise OutOfStock(f"{item} is out of stock")


# -- defaults (backwards compatible) ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_default_sends_error_text_and_visible_errors_verbatim(mode: str) -> None:
    result = await run(
        ToolCallingManager(),
        mode,
        calls(("lookup_order", '{"order_id": 1}'), ("lookup_order", '{"order_id": 42}')),
        tools=[lookup_order],
    )
    hidden, visible = result.tool_response_message.responses
    # The documented default: "Error: ..." with the exception's text.
    assert hidden.is_error and hidden.response_data.startswith("Error: tool 'lookup_order' failed: SecretLeak")
    assert (visible.response_data, visible.is_error) == (
        "no order 42; ask the user for the order number on the receipt",
        True,
    )


@pytest.mark.parametrize("mode", MODES)
async def test_visible_to_model_attribute_marks_foreign_exceptions(mode: str) -> None:
    result = await run(ToolCallingManager(), mode, calls(("reserve", '{"item": "tent"}')), tools=[reserve])
    assert result.tool_response_message.responses[0].response_data == "tent is out of stock"


# -- built-in policies ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_generic_message_hides_details_unless_visible(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    manager = ToolCallingManager(on_execution_error=send_generic_message_unless_visible("Error: lookup failed."))
    with caplog.at_level(logging.WARNING, logger="chatclient.tools.failures"):
        result = await run(
            manager,
            mode,
            calls(("lookup_order", '{"order_id": 1}'), ("lookup_order", '{"order_id": 42}')),
            tools=[lookup_order],
        )
    hidden, visible = result.tool_response_message.responses
    assert (hidden.response_data, hidden.is_error) == ("Error: lookup failed.", True)
    assert "hunter2" not in hidden.response_data
    assert visible.response_data.startswith("no order 42")
    assert "lookup_order" in caplog.text and "hunter2" in caplog.text  # the application still learns it
    assert result.executions[0].result == "Error: lookup failed."


@pytest.mark.parametrize("mode", MODES)
async def test_fail_unless_visible_raises_hidden_errors_only(mode: str) -> None:
    manager = ToolCallingManager(on_execution_error=fail_unless_visible)
    ok = await run(manager, mode, calls(("lookup_order", '{"order_id": 42}')), tools=[lookup_order])
    assert ok.tool_response_message.responses[0].response_data.startswith("no order 42")
    with pytest.raises(ToolExecutionError, match="lookup_order") as info:
        await run(manager, mode, calls(("lookup_order", '{"order_id": 1}')), tools=[lookup_order])
    assert isinstance(info.value.__cause__, SecretLeak)


@pytest.mark.parametrize("mode", MODES)
async def test_fail_invocation_raises_even_visible_errors(mode: str) -> None:
    with pytest.raises(ToolExecutionError):
        await run(
            ToolCallingManager(on_execution_error=fail_invocation),
            mode,
            calls(("lookup_order", '{"order_id": 42}')),
            tools=[lookup_order],
        )


def test_send_message_to_model_is_the_default_as_a_handler() -> None:
    a = ToolCallingManager().execute(PROMPT, calls(("lookup_order", '{"order_id": 1}')), tools=[lookup_order])
    b = ToolCallingManager(on_execution_error=send_message_to_model).execute(
        PROMPT, calls(("lookup_order", '{"order_id": 1}')), tools=[lookup_order]
    )
    assert a.tool_response_message == b.tool_response_message


# -- custom handlers --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_custom_execution_handler_gets_the_tools_own_error_and_context(mode: str) -> None:
    seen: list[tuple[BaseException, ToolErrorContext]] = []

    def handler(error: BaseException, ctx: ToolErrorContext) -> ToolErrorResult:
        seen.append((error, ctx))
        return ToolErrorResult(f"{ctx.tool_name} is down; try later")

    manager = ToolCallingManager(on_execution_error=handler, raise_on_tool_error=True)  # the handler wins
    result = await run(
        manager, mode, calls(("lookup_order", '{"order_id": 1}')), tools=[lookup_order], context={"tenant": "acme"}
    )
    assert result.tool_response_message.responses[0].response_data == "lookup_order is down; try later"
    assert result.tool_response_message.responses[0].is_error
    ((error, ctx),) = seen
    assert isinstance(error, SecretLeak)  # unwrapped from the callback's ToolExecutionError
    assert isinstance(ctx.raw_error, ToolExecutionError) and ctx.raw_error.__cause__ is error
    assert (ctx.call_id, ctx.arguments, ctx.kind, ctx.tool_context["tenant"]) == (
        "c0",
        '{"order_id": 1}',
        "execution",
        "acme",
    )


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_handler_is_separate_and_may_raise(mode: str) -> None:
    called: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        called.append(1)
        return a + b

    def text_only(error: BaseException, ctx: ToolErrorContext) -> str:
        assert isinstance(error, ToolArgumentsError) and ctx.kind == "arguments"
        return f"bad arguments for {ctx.tool_name}: send two integers"

    manager = ToolCallingManager(on_arguments_error=text_only, on_execution_error=fail_invocation)
    result = await run(manager, mode, calls(("add", '{"a": "x"}')), tools=[add])
    assert result.tool_response_message.responses[0].response_data == "bad arguments for add: send two integers"
    assert called == []

    class Stop(Exception):
        pass

    def stop(error: BaseException, ctx: ToolErrorContext) -> ToolErrorResult:
        raise Stop("no retries for bad arguments")

    with pytest.raises(Stop):
        await run(ToolCallingManager(on_arguments_error=stop), mode, calls(("add", "{not json")), tools=[add])


def test_handler_with_wrong_return_type_is_a_clear_type_error() -> None:
    manager = ToolCallingManager(on_execution_error=lambda e, c: 42)
    with pytest.raises(TypeError, match="returned int; return a ToolErrorResult"):
        manager.execute(PROMPT, calls(("lookup_order", '{"order_id": 1}')), tools=[lookup_order])


def test_bad_policy_arguments() -> None:
    with pytest.raises(TypeError, match="on_execution_error must be a callable"):
        ToolCallingManager(on_execution_error="generic")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_arguments_error must be a callable"):
        ToolCallingManager(on_arguments_error=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        send_generic_message_unless_visible("  ")
    with pytest.raises(TypeError, match="must be a str"):
        ToolErrorResult(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not to the advisor"):
        ToolCallAdvisor(tool_calling_manager=ToolCallingManager(), on_execution_error=fail_invocation)


def test_tool_call_advisor_takes_the_policy() -> None:
    model = ScriptedChatModel(
        [AssistantMessage(tool_calls=(ToolCall("c1", "lookup_order", '{"order_id": 1}'),)), "Sorry, try later."]
    )
    advisor = ToolCallAdvisor(on_execution_error=send_generic_message_unless_visible("Error: unavailable."))
    response = ChatClient.create(model).prompt("where is my order?").advisors(advisor).tools(lookup_order).call()
    assert response.content() == "Sorry, try later."
    sent = model.prompts[1].messages[-1]
    assert sent.responses[0].response_data == "Error: unavailable."  # type: ignore[attr-defined]


# -- compensation -----------------------------------------------------------------------------------


class Bank:
    def __init__(self) -> None:
        self.balance = 100
        self.log: list[str] = []

    @tool
    def credit(self, amount: int) -> str:
        """Credit the account."""
        self.balance += amount
        self.log.append(f"credit {amount}")
        return f"tx-credit-{amount}"

    @compensates("credit")
    def undo_credit(self, amount: int) -> None:
        self.balance -= amount
        self.log.append(f"undo credit {amount}")

    @tool
    def fee(self, amount: int) -> str:
        """Charge a fee."""
        self.balance -= amount
        self.log.append(f"fee {amount}")
        return "fee charged"

    @compensates("fee")
    def undo_fee(self, execution: ToolExecution) -> None:
        self.log.append(f"undo fee ({execution.result}, {execution.arguments})")
        self.balance += 5

    @tool
    def withdraw(self, amount: int) -> str:
        """Withdraw money."""
        if amount > self.balance:
            raise ToolErrorVisibleToModel(f"insufficient funds for {amount}")
        self.balance -= amount
        return "ok"


@pytest.mark.parametrize("mode", MODES)
async def test_successful_calls_are_undone_last_first_when_a_call_of_the_turn_fails(mode: str) -> None:
    bank = Bank()
    response = calls(("credit", '{"amount": 10}'), ("fee", '{"amount": 5}'), ("withdraw", '{"amount": 999}'))
    result = await run(ToolCallingManager(max_concurrency=1), mode, response, tools=[bank])
    assert bank.balance == 100
    assert bank.log == ["credit 10", "fee 5", 'undo fee (fee charged, {"amount": 5})', "undo credit 10"]
    credit, fee, withdraw = result.tool_response_message.responses
    assert credit.response_data == (
        "Tool 'credit' was executed successfully but was rolled back due to failure of tool 'withdraw'."
    )
    assert fee.is_error and "rolled back" in fee.response_data
    assert withdraw.response_data == "insufficient funds for 999"
    assert [e.compensated for e in result.executions] == [True, True, False]
    assert result.return_direct is False


@pytest.mark.parametrize("mode", MODES)
async def test_nothing_is_undone_when_every_call_succeeds(mode: str) -> None:
    bank = Bank()
    result = await run(
        ToolCallingManager(), mode, calls(("credit", '{"amount": 10}'), ("withdraw", '{"amount": 5}')), tools=[bank]
    )
    assert bank.balance == 105 and "undo credit 10" not in bank.log
    assert [e.compensated for e in result.executions] == [False, False]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_undo_is_logged_and_the_others_still_run(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    undone: list[str] = []

    def broken_undo(name: str) -> None:
        raise RuntimeError("undo service down")

    async def undo_book(name: str) -> None:
        undone.append(name)

    @tool(compensate=undo_book)
    async def book(name: str) -> str:
        """Book a room."""
        return "booked"

    @tool(compensate=broken_undo)
    def pay(name: str) -> str:
        """Pay."""
        return "paid"

    @tool
    def notify(name: str) -> str:
        """Notify."""
        raise ValueError("smtp down")

    with caplog.at_level(logging.WARNING, logger="chatclient.tools.compensation"):
        result = await run(
            ToolCallingManager(),
            mode,
            calls(("book", '{"name": "ada"}'), ("pay", '{"name": "ada"}'), ("notify", '{"name": "ada"}')),
            tools=[book, pay, notify],
        )
    assert undone == ["ada"]
    assert "undo service down" in caplog.text and "'pay'" in caplog.text
    assert [e.compensated for e in result.executions] == [True, True, False]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", ["raise_on_tool_error", "fail_invocation"])
async def test_successful_calls_are_undone_when_a_failure_fails_the_request(mode: str, policy: str) -> None:
    # A policy that raises still leaves the turn's successful calls done: they are undone first.
    bank = Bank()
    manager = (
        ToolCallingManager(raise_on_tool_error=True, max_concurrency=1)
        if policy == "raise_on_tool_error"
        else ToolCallingManager(on_execution_error=fail_invocation, max_concurrency=1)
    )
    response = calls(("credit", '{"amount": 10}'), ("withdraw", '{"amount": 999}'))
    with pytest.raises(ToolExecutionError, match="insufficient funds"):
        await run(manager, mode, response, tools=[bank])
    assert bank.log == ["credit 10", "undo credit 10"] and bank.balance == 100


def test_compensation_misdeclarations_fail_early() -> None:
    with pytest.raises(TypeError, match="compensate= must be a callable"):
        tool(compensate="undo")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid tool name"):
        compensates("not a name")

    class Orphan:
        @tool
        def a(self) -> str:
            """A."""
            return "a"

        @compensates("b")
        def undo_b(self) -> None: ...

    from chatclient.tools import resolve_tools

    with pytest.raises(ValueError, match="@compensates names tool\\(s\\) it does not have: b"):
        resolve_tools([Orphan()])

    def undo(self: Any) -> None: ...

    class Both:
        @tool(compensate=undo)
        def a(self) -> str:
            """A."""
            return "a"

        @compensates("a")
        def undo_a(self) -> None: ...

    with pytest.raises(ValueError, match="keep one"):
        resolve_tools([Both()])


def test_undo_receives_tool_context_like_the_tool() -> None:
    seen: list[str] = []

    def undo(city: str, ctx: ToolContext) -> None:
        seen.append(f"{city}/{ctx['tenant']}")

    @tool(compensate=undo)
    def reserve_table(city: str, ctx: ToolContext) -> str:
        """Reserve."""
        return "ok"

    ToolCallingManager().execute(
        PROMPT,
        calls(("reserve_table", '{"city": "Oslo"}'), ("reserve", '{"item": "x"}')),
        {"tenant": "acme"},
        tools=[reserve_table, reserve],
    )
    assert seen == ["Oslo/acme"]


def test_a_denied_call_does_not_undo_the_approved_ones() -> None:
    bank = Bank()
    denied = ToolCall("c1", "withdraw", '{"amount": 5}', {"approval": {"decision": "deny", "message": "no"}})
    message = AssistantMessage(tool_calls=(ToolCall("c0", "credit", '{"amount": 10}'), denied))
    result = ToolCallingManager().execute(PROMPT, response_for(PROMPT, message), tools=[bank])
    assert bank.balance == 110 and [e.compensated for e in result.executions] == [False, False]
    assert result.tool_response_message.responses[1].response_data == "Denied: no"
