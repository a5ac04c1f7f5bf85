"""ToolApprovalAdvisor: callback decisions, pausing with PendingToolCalls and spec.resume()."""

from __future__ import annotations

import asyncio

import pytest

from advisors import ApprovalDecision, PendingToolCalls, ToolApprovalAdvisor
from chatclient import ChatClient
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.request import ContextKeys
from chatclient.testing import ScriptedChatModel
from tests.conftest import run_spec
from tests.support.approval_tools import SENT, balance, send_money


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()


def turn() -> AssistantMessage:
    return AssistantMessage(
        None,
        (ToolCall("c1", "balance", "{}"), ToolCall("c2", "send_money", '{"to": "bob", "amount": 50}')),
    )


def exchange_messages(response: object) -> list[object]:
    return list(response.context[ContextKeys.TOOL_EXCHANGE])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("decision", "sent", "tool_text"),
    [
        (ApprovalDecision.approve(), [("bob", 50)], "sent 50 to bob"),
        (ApprovalDecision.deny("not today"), [], "Denied: not today"),
        (ApprovalDecision.edit({"to": "bob", "amount": 5}), [("bob", 5)], "sent 5 to bob"),
    ],
)
def test_callback_decides_in_every_mode(
    mode: str, decision: ApprovalDecision, sent: list[tuple[str, int]], tool_text: str
) -> None:
    asked: list[str] = []

    def callback(call: ToolCall) -> ApprovalDecision:
        asked.append(call.name)
        return decision

    model = ScriptedChatModel([turn(), "done"])
    spec = (
        ChatClient.create(model)
        .prompt("pay bob")
        .tools(send_money, balance)
        .advisors(ToolApprovalAdvisor(callback=callback))
    )
    response = run_spec(spec, mode)
    assert asked == ["send_money"]  # balance needs no approval
    assert sent == SENT
    assistant, tools = exchange_messages(response)
    assert isinstance(tools, ToolResponseMessage)
    assert tools.responses[1].response_data == tool_text
    recorded = assistant.tool_calls[1]  # type: ignore[attr-defined]
    assert recorded.metadata["approval"]["decision"] == decision.decision
    if decision.decision == "edit":
        assert recorded.metadata["approval"]["original_arguments"] == '{"to": "bob", "amount": 50}'
        assert recorded.arguments == decision.arguments
    # The model saw the decision's outcome.
    last_prompt_tools = [m for m in model.prompts[-1].messages if isinstance(m, ToolResponseMessage)][-1]
    assert last_prompt_tools.responses[1].response_data == tool_text


def test_async_callback_and_policy_by_name() -> None:
    async def callback(call: ToolCall) -> ApprovalDecision:
        await asyncio.sleep(0)
        return ApprovalDecision.deny("balance is private")

    model = ScriptedChatModel([turn(), "ok"])
    spec = (
        ChatClient.create(model)
        .prompt("pay")
        .tools(send_money, balance)
        .advisors(ToolApprovalAdvisor(policy={"balance", "send_money"}, callback=callback))
    )
    response = spec.call().chat_client_response()  # an async callback in a sync call
    assert SENT == []
    assert [e.result for e in response.tool_executions] == ["Denied: balance is private"] * 2


def test_pause_then_resume_in_every_mode(mode: str) -> None:
    model = ScriptedChatModel([turn()])
    client = ChatClient.builder(model).default_system("You move money.").default_advisors(ToolApprovalAdvisor()).build()
    paused = run_spec(client.prompt("pay bob 50").tools(send_money, balance), mode)
    assert SENT == []  # nothing ran, not even the call that needs no approval
    assert paused.chat_response is not None and paused.chat_response.result is not None
    assert paused.chat_response.result.finish_reason == "approval_required"
    pending = ToolApprovalAdvisor.pending(paused)
    assert pending is not None and [c.name for c in pending.calls] == ["send_money"]
    restored = PendingToolCalls.from_json(pending.to_json())
    assert restored == pending

    model.add("Sent 50 to bob; your balance was 100.")
    resumed = run_spec(
        client.prompt().tools(send_money, balance).resume(restored, {"c2": ApprovalDecision.approve()}), mode
    )
    assert SENT == [("bob", 50)]
    assert resumed.chat_response is not None and resumed.chat_response.text == "Sent 50 to bob; your balance was 100."
    final_prompt = model.prompts[-1]
    assert [type(m).__name__ for m in final_prompt.messages] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]
    assert len(model.prompts) == 2  # the resumed turn did not ask the model for the calls again


def test_resume_checks_its_inputs() -> None:
    model = ScriptedChatModel([turn()])
    client = ChatClient.builder(model).default_advisors(ToolApprovalAdvisor()).build()
    pending = ToolApprovalAdvisor.pending(client.prompt("pay").tools(send_money, balance).call().chat_client_response())
    assert pending is not None
    with pytest.raises(ValueError, match="no decision"):
        client.prompt().tools(send_money, balance).resume(pending, {})
    with pytest.raises(ValueError, match=r"\.tools"):
        client.prompt().resume(pending, [ApprovalDecision.approve()])
    with pytest.raises(TypeError, match="PendingToolCalls"):
        client.prompt().tools(send_money).resume("nope", {})
    with pytest.raises(ValueError, match="needs a message"):
        ApprovalDecision.deny("  ")
    with pytest.raises(ValueError, match="JSON object"):
        ApprovalDecision.edit("[1, 2]")


def test_resume_with_a_memory_advisor_sends_and_stores_the_conversation_once(mode: str) -> None:
    from advisors import MessageChatMemoryAdvisor
    from chatclient.memory import MessageWindowChatMemory

    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Hello Ana.", turn()])
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory), ToolApprovalAdvisor()).build()
    run_spec(client.prompt("I am Ana"), mode)
    paused = run_spec(client.prompt("pay bob 50").tools(send_money, balance), mode)
    pending = ToolApprovalAdvisor.pending(paused)
    assert pending is not None
    model.add("Sent 50 to bob.")
    run_spec(client.prompt().tools(send_money, balance).resume(pending, {"c2": ApprovalDecision.approve()}), mode)

    def shape(messages: object) -> list[tuple[str, str]]:
        return [(type(m).__name__, m.text or "") for m in messages]  # type: ignore[attr-defined]

    sent = shape(model.prompts[-1].messages)
    assert sent[:3] == [("UserMessage", "I am Ana"), ("AssistantMessage", "Hello Ana."), ("UserMessage", "pay bob 50")]
    assert [kind for kind, _ in sent].count("UserMessage") == 2  # the history once, not twice
    stored = shape(memory.get("default"))
    assert stored[:3] == sent[:3]
    assert [kind for kind, _ in stored].count("UserMessage") == 2  # the question stored at the pause only
    assert stored[-1] == ("AssistantMessage", "Sent 50 to bob.")
    assert any(kind == "ToolResponseMessage" for kind, _ in stored)
