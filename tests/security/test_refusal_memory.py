"""A refused turn does not poison the conversation: memory + safeguard in both orders, all modes."""

from __future__ import annotations

from typing import Any

import pytest

from advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor, SafeGuardAdvisor
from chatclient import ChatClient
from chatclient.advisor import DEFAULT_CHAT_MEMORY_ORDER, HIGHEST_PRECEDENCE
from chatclient.memory import MessageWindowChatMemory
from chatclient.messages import AssistantMessage, ToolCall, UserMessage
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.conftest import run_spec, run_text

# Memory wraps the safeguard (the defaults), or the safeguard wraps memory.
ORDERS = {"memory-outside": 0, "safeguard-outside": HIGHEST_PRECEDENCE + 100}
MEMORIES = {"message": MessageChatMemoryAdvisor, "prompt": PromptChatMemoryAdvisor}


@pytest.fixture(params=list(ORDERS))
def guard_order(request: pytest.FixtureRequest) -> int:
    order = ORDERS[str(request.param)]
    assert (order < DEFAULT_CHAT_MEMORY_ORDER) == (request.param == "safeguard-outside")
    return order


@pytest.fixture(params=list(MEMORIES))
def memory_advisor(request: pytest.FixtureRequest) -> Any:
    return MEMORIES[str(request.param)]


def client_for(model: ScriptedChatModel, memory: MessageWindowChatMemory, guard: SafeGuardAdvisor, kind: Any) -> Any:
    return ChatClient.builder(model).default_advisors(kind(memory), guard).build()


def test_refused_question_is_not_stored_and_later_turns_still_work(
    mode: str, guard_order: int, memory_advisor: Any
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["Paris.", "Rome."])
    guard = SafeGuardAdvisor(["bomb"], failure_response="refused", order=guard_order)
    client = client_for(model, memory, guard, memory_advisor)

    assert run_text(client.prompt("capital of France?"), mode) == "Paris."
    assert run_text(client.prompt("how to build a bomb"), mode) == "refused"
    assert run_text(client.prompt("capital of Italy?"), mode) == "Rome."  # not refused forever

    assert memory.get("default") == [
        UserMessage("capital of France?"),
        AssistantMessage("Paris."),
        UserMessage("capital of Italy?"),
        AssistantMessage("Rome."),
    ]
    assert "bomb" not in model.prompts[-1].contents


def test_refused_answer_is_not_stored_and_later_turns_still_work(
    mode: str, guard_order: int, memory_advisor: Any
) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["The password is 42.", "Fine, thanks."])
    guard = SafeGuardAdvisor(["password"], failure_response="refused", check_response=True, order=guard_order)
    client = client_for(model, memory, guard, memory_advisor)

    assert run_text(client.prompt("tell me a secret"), mode) == "refused"
    assert memory.get("default") == []
    assert run_text(client.prompt("how are you?"), mode) == "Fine, thanks."
    assert memory.get("default") == [UserMessage("how are you?"), AssistantMessage("Fine, thanks.")]
    assert "password" not in model.prompts[-1].contents  # the model never sees the refused answer


@tool(return_direct=True)
def read_note(name: str) -> str:
    """Reads a note straight to the user."""
    return "the password is hunter2"


def test_refused_return_direct_turn_stores_no_tool_exchange(mode: str, guard_order: int) -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("c1", "read_note", '{"name": "n"}'),)), "hello"])
    guard = SafeGuardAdvisor(["password"], failure_response="refused", check_response=True, order=guard_order)
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory), guard).build()

    response = run_spec(client.prompt("read note n").tools(read_note), mode)
    assert response.chat_response is not None and response.chat_response.text == "refused"
    assert memory.get("default") == []
    assert run_text(client.prompt("hi"), mode) == "hello"


def test_refusal_is_marked_in_the_response(mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([])).prompt("bomb").advisors(SafeGuardAdvisor(["bomb"]))
    response = run_spec(spec, mode)
    assert response.refused_by == "SafeGuardAdvisor"
    assert response.chat_response is not None and response.chat_response.metadata.extra["safeguard_blocked"] is True


def test_abandoned_stream_keeps_the_question_only() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([["one ", "two ", "three"]])
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    stream = client.prompt("count").stream().content()
    assert next(stream) == "one "
    stream.close()  # type: ignore[attr-defined]
    assert memory.get("default") == [UserMessage("count")]


def test_vector_memory_keeps_refused_turns_out_of_the_store(mode: str, guard_order: int) -> None:
    from advisors import VectorStoreChatMemoryAdvisor
    from chatclient.rag import HashingEmbeddingModel, SimpleVectorStore

    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=256))
    model = ScriptedChatModel(["Paris.", "Rome."])
    guard = SafeGuardAdvisor(["bomb"], failure_response="refused", order=guard_order)
    client = ChatClient.builder(model).default_advisors(VectorStoreChatMemoryAdvisor(store), guard).build()

    assert run_text(client.prompt("capital of France?"), mode) == "Paris."
    assert run_text(client.prompt("how to build a bomb"), mode) == "refused"
    # The refused question would come back by similarity and get this turn refused too.
    assert run_text(client.prompt("capital of Italy?"), mode) == "Rome."
    assert sorted(d.text for d in store.documents) == sorted(
        ["capital of France?", "Paris.", "capital of Italy?", "Rome."]
    )
