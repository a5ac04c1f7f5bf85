"""ContextWindowAdvisor: oldest whole units dropped, tool exchanges never split, typed error before HTTP."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Sequence

import pytest

from advisors import ContextWindowAdvisor, MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.errors import ContextWindowExceededError
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import ModelCapabilities
from chatclient.prompt import ToolDefinition
from chatclient.testing import ScriptedChatModel
from chatclient.tokens import ContextWindowAdvisor as FromTokens


class WordCounter:
    """One token per word of every text, one per tool: easy to reason about in assertions."""

    def count(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = ()) -> int:
        n = len(tools)
        for m in messages:
            if isinstance(m, ToolResponseMessage):
                n += sum(len(r.response_data.split()) for r in m.responses)
            else:
                n += len((m.text or "").split())
                if isinstance(m, AssistantMessage):
                    n += len(m.tool_calls)
        return n


def words(n: int, tag: str) -> str:
    return " ".join([tag] * n)


def history() -> list[Message]:
    return [
        SystemMessage(words(5, "sys")),
        UserMessage(words(10, "u1")),
        AssistantMessage(words(10, "a1")),
        UserMessage(words(10, "u2")),
        AssistantMessage("", (ToolCall("c1", "t", "{}"), ToolCall("c2", "t", "{}"))),
        ToolResponseMessage((ToolResponse("c1", "t", words(10, "r1")), ToolResponse("c2", "t", words(10, "r2")))),
        AssistantMessage(words(10, "a2")),
    ]


def test_is_importable_from_chatclient_tokens() -> None:
    assert FromTokens is ContextWindowAdvisor


def test_under_budget_nothing_changes() -> None:
    model = ScriptedChatModel(["ok"])
    response = (
        ChatClient.create(model)
        .prompt()
        .messages(*history())
        .user("hello")
        .advisors(ContextWindowAdvisor(WordCounter(), max_input_tokens=1000))
        .call()
        .chat_client_response()
    )
    assert len(model.prompts[0].messages) == 8
    assert response.context[ContextWindowAdvisor.DROPPED] == 0


def test_drops_oldest_whole_units_and_keeps_newer_ones_that_fit() -> None:
    model = ScriptedChatModel(["ok"])
    # system 5 + newest user 1 + a2 10 + tool exchange 22 = 38; + u2 10 = 48; + a1 = 58
    advisor = ContextWindowAdvisor(WordCounter(), max_input_tokens=50)
    response = (
        ChatClient.create(model).prompt().messages(*history()).user("hello").advisors(advisor).call().chat_client_response()
    )
    labels = [
        type(m).__name__ if isinstance(m, ToolResponseMessage) or not m.text else m.text.split()[0]
        for m in model.prompts[0].messages
    ]
    assert labels == ["sys", "u2", "AssistantMessage", "ToolResponseMessage", "a2", "hello"]
    assert response.context[ContextWindowAdvisor.DROPPED] == 2  # u1 and a1


def test_a_tool_call_is_never_kept_without_its_results() -> None:
    model = ScriptedChatModel(["ok"])
    # 5 + 1 + 10 = 16 fits a2; the tool exchange (22) does not: it goes whole, results and all
    advisor = ContextWindowAdvisor(WordCounter(), max_input_tokens=30)
    ChatClient.create(model).prompt().messages(*history()).user("hello").advisors(advisor).call().content()
    sent = model.prompts[0].messages
    assert not any(isinstance(m, ToolResponseMessage) for m in sent)
    assert not any(isinstance(m, AssistantMessage) and m.tool_calls for m in sent)
    assert [m.text.split()[0] for m in sent] == ["sys", "a2", "hello"]


def test_newest_message_too_large_fails_before_the_model_is_called() -> None:
    model = ScriptedChatModel(["never"])
    advisor = ContextWindowAdvisor(WordCounter(), max_input_tokens=20)
    spec = ChatClient.create(model).prompt().messages(*history()).user(words(30, "big")).advisors(advisor)
    with pytest.raises(ContextWindowExceededError) as info:
        spec.call().content()
    assert info.value.tokens == 35 and info.value.limit == 20
    assert model.prompts == []  # no call was made


def test_budget_comes_from_the_model_and_reserve_output() -> None:
    model = ScriptedChatModel(["ok"], capabilities=ModelCapabilities(context_window=1060))
    advisor = ContextWindowAdvisor(WordCounter(), reserve_output=1024)  # budget 36
    ChatClient.create(model).prompt().messages(*history()).user("hello").advisors(advisor).call().content()
    assert [m.text.split()[0] for m in model.prompts[0].messages if m.text] == ["sys", "a2", "hello"]

    unknown = ScriptedChatModel(["ok"])
    with pytest.raises(ValueError, match="does not know the context window"):
        ChatClient.create(unknown).prompt("x").advisors(ContextWindowAdvisor(WordCounter())).call().content()


def test_trims_every_turn_of_a_tool_loop() -> None:
    from chatclient.tools import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return words(30, "result")

    model = ScriptedChatModel(
        [AssistantMessage("", (ToolCall("x1", "lookup", '{"q": "a"}'),)), "done"],
    )
    advisor = ContextWindowAdvisor(WordCounter(), max_input_tokens=45)
    answer = ChatClient.create(model).prompt().messages(*history()).user("hello").tools(lookup).advisors(advisor)
    assert answer.call().content() == "done"
    second = model.prompts[1].messages
    assert isinstance(second[-1], ToolResponseMessage)  # the running exchange stays whole
    assert WordCounter().count(second, model.prompts[1].tools) <= 45


def test_summarize_folds_dropped_units_into_a_summary() -> None:
    summarizer_model = ScriptedChatModel(["Earlier: u1 greeted."])
    model = ScriptedChatModel(["ok"])
    # 68 words in all; dropping u1 and a1 leaves 48, and the 8-word summary brings it to 56
    advisor = ContextWindowAdvisor(
        WordCounter(), max_input_tokens=57, strategy="summarize", summarizer=ChatClient.create(summarizer_model)
    )
    ChatClient.create(model).prompt().messages(*history()).user("hello").advisors(advisor).call().content()
    sent = model.prompts[0].messages
    assert isinstance(sent[1], SystemMessage) and "u1 greeted" in sent[1].text
    assert "u1 u1" in summarizer_model.prompts[0].user_message.text  # the dropped text went to the summarizer
    assert "a1 a1" in summarizer_model.prompts[0].user_message.text
    assert not any("u1" in (m.text or "") for m in sent[2:])
    assert WordCounter().count(sent) <= 57


def test_works_with_memory_async_and_streams() -> None:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=100)
    model = ScriptedChatModel([words(20, "answer")] * 3 + [["a", "b"]])
    client = (
        ChatClient.builder(model)
        .default_advisors(MessageChatMemoryAdvisor(memory), ContextWindowAdvisor(WordCounter(), max_input_tokens=30))
        .build()
    )
    for _ in range(3):
        asyncio.run(client.prompt(words(5, "q")).acall().content())
    assert "".join(client.prompt(words(5, "q")).stream().content()) == "ab"
    assert all(WordCounter().count(p.messages) <= 30 for p in model.prompts)
    assert len(memory.get("default")) == 8  # memory itself keeps everything


def test_bad_arguments() -> None:
    with pytest.raises(TypeError):
        ContextWindowAdvisor(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ContextWindowAdvisor(max_input_tokens=0)
    with pytest.raises(ValueError):
        ContextWindowAdvisor(strategy="summarize")
    with pytest.raises(ValueError):
        ContextWindowAdvisor(strategy="shrink")  # type: ignore[arg-type]


def test_pickles() -> None:
    advisor = pickle.loads(pickle.dumps(ContextWindowAdvisor(max_input_tokens=100, reserve_output=10)))
    assert advisor.max_input_tokens == 100 and advisor.reserve_output == 10
