"""PromptCachingAdvisor + Anthropic cache_control: breakpoints land on the right blocks and move with the conversation.

The request bodies are the ones the loopback server received from a real AnthropicChatModel.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from advisors import MessageChatMemoryAdvisor, PromptCachingAdvisor
from chatclient import ChatClient
from chatclient.memory import MessageWindowChatMemory
from chatclient.messages import AssistantMessage, Message, Reasoning, SystemMessage, ToolCall, UserMessage
from chatclient.models.anthropic import MAX_CACHE_BREAKPOINTS, AnthropicChatModel, build_messages_body
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply, anthropic_message

loopback_server, server = server_fixtures()

PATH = "/v1/messages"
EPHEMERAL = {"type": "ephemeral"}


@tool
def lookup(term: str) -> str:
    """Look a term up in the glossary."""
    return f"{term}: a word"


def breakpoints(body: Any, where: str = "") -> list[str]:
    """Paths of every block carrying cache_control, e.g. ``messages[2].content[0]``."""
    found: list[str] = []
    if isinstance(body, dict):
        if "cache_control" in body:
            found.append(where)
        for k, v in body.items():
            found += breakpoints(v, f"{where}.{k}" if where else k)
    elif isinstance(body, list):
        for i, v in enumerate(body):
            found += breakpoints(v, f"{where}[{i}]")
    return found


def test_breakpoints_move_with_the_conversation(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=anthropic_message("Noted.")))
    memory = MessageWindowChatMemory()
    with AnthropicChatModel("claude-test", api_key="sk-ant-test-0123456789", base_url=server.url) as model:
        client = (
            ChatClient.builder(model)
            .default_system("You are a glossary bot. " * 50)
            .default_tools(lookup)
            .default_advisors(MessageChatMemoryAdvisor(memory, conversation_id="c1"), PromptCachingAdvisor())
            .build()
        )
        for question in ("first", "second", "third"):
            client.prompt().user(question).call().content()
    bodies = [r.body for r in server.requests_to(PATH)]
    assert len(bodies) == 3
    for body in bodies:
        assert body["tools"][-1]["cache_control"] == EPHEMERAL
        assert body["system"] == [{"type": "text", "text": "You are a glossary bot. " * 50, "cache_control": EPHEMERAL}]
        assert len(breakpoints(body)) <= MAX_CACHE_BREAKPOINTS
    # Turn 1: only the question so far.
    assert bodies[0]["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "first", "cache_control": EPHEMERAL}]}
    ]
    assert breakpoints(bodies[0]) == ["messages[0].content[0]", "system[0]", "tools[0]"]
    # Turn 2: the end of the history (the previous answer) and the new question.
    assert bodies[1]["messages"] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": [{"type": "text", "text": "Noted.", "cache_control": EPHEMERAL}]},
        {"role": "user", "content": [{"type": "text", "text": "second", "cache_control": EPHEMERAL}]},
    ]
    # Turn 3: both marks moved forward; the older turns are plain again (nothing was stored marked).
    assert bodies[2]["messages"][:3] == [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "second"},
    ]
    assert breakpoints(bodies[2]) == ["messages[3].content[0]", "messages[4].content[0]", "system[0]", "tools[0]"]
    assert memory.get("c1")[-1] == AssistantMessage("Noted.")  # marks never reach the memory


def test_tool_loop_marks_the_tool_results_of_each_pass(server: LoopbackServer) -> None:
    server.script(
        PATH,
        Reply(json=anthropic_message("Checking.", tool_uses=[("toolu_1", "lookup", {"term": "cache"})])),
        Reply(json=anthropic_message("A cache is a store.")),
    )
    with AnthropicChatModel("claude-test", api_key="sk-ant-test-0123456789", base_url=server.url) as model:
        spec = ChatClient.create(model).prompt().user("What is a cache?").tools(lookup)
        assert spec.advisors(PromptCachingAdvisor(ttl="1h")).call().content() == "A cache is a store."
    second = server.requests_to(PATH)[1].body
    marker = {"type": "ephemeral", "ttl": "1h"}
    assert second["messages"][1]["content"][-1] == {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "lookup",
        "input": {"term": "cache"},
        "cache_control": marker,
    }
    assert second["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "cache: a word", "cache_control": marker}
    ]
    assert second["tools"][-1]["cache_control"] == marker and "system" not in second


def test_without_the_advisor_nothing_is_marked() -> None:
    prompt = Prompt([SystemMessage("s"), UserMessage("q")], tools=[ToolDefinition("t", "d")])
    assert breakpoints(build_messages_body(prompt, ChatOptions(model="m"), stream=False)) == []


def test_never_more_than_four_breakpoints_oldest_marks_dropped() -> None:
    marked = {"cache_control": EPHEMERAL}
    messages: list[Message] = [SystemMessage("s", metadata=marked)]
    for i in range(6):
        messages += [UserMessage(f"q{i}", metadata=marked), AssistantMessage(f"a{i}", metadata=marked)]
    messages.append(UserMessage("last", metadata=marked))
    body = build_messages_body(Prompt(messages, tools=[ToolDefinition("t", "d")]), ChatOptions(model="m"), stream=False)
    # The tool and the system keep theirs; the two latest messages get the other two.
    assert breakpoints(body) == ["messages[11].content[0]", "messages[12].content[0]", "system[0]", "tools[0]"]


def test_breakpoint_skips_blocks_that_cannot_carry_one() -> None:
    turn = AssistantMessage(
        "", (ToolCall("toolu_1", "t", "{}"),), reasoning=(Reasoning("hm", "sig", provider="anthropic"),)
    )
    marked = AssistantMessage(
        turn.text, turn.tool_calls, metadata={"cache_control": EPHEMERAL}, reasoning=turn.reasoning
    )
    body = build_messages_body(Prompt([UserMessage("q"), marked]), ChatOptions(model="m"), stream=False)
    blocks = body["messages"][1]["content"]
    assert [b["type"] for b in blocks] == ["thinking", "tool_use"]
    assert "cache_control" not in blocks[0] and blocks[1]["cache_control"] == EPHEMERAL


def test_a_mark_placed_by_the_user_wins() -> None:
    own = {"type": "ephemeral", "ttl": "1h"}
    model = ScriptedChatModel(["ok"])
    ChatClient.create(model).prompt().messages(UserMessage("doc", metadata={"cache_control": own})).advisors(
        PromptCachingAdvisor()
    ).call().content()
    assert model.prompts[0].messages[-1].metadata["cache_control"] == own


def test_marks_are_metadata_other_providers_never_send() -> None:
    model = ScriptedChatModel(["ok"])
    ChatClient.create(model).prompt().system("sys").user("q").advisors(PromptCachingAdvisor()).call().content()
    sent = model.prompts[0].messages
    assert [dict(m.metadata) for m in sent] == [{"cache_control": EPHEMERAL}, {"cache_control": EPHEMERAL}]
    assert json.dumps([m.text for m in sent]) == '["sys", "q"]'


@pytest.mark.parametrize("ttl", ["10m", "", "1H"])
def test_bad_ttl_is_rejected_with_the_allowed_values(ttl: str) -> None:
    with pytest.raises(ValueError, match="5m"):
        PromptCachingAdvisor(ttl=ttl)
