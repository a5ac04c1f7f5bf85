"""SummarizingChatMemory: summaries replace old messages, exchanges stay whole, usage is reported."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisors import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.errors import ModelConnectionError
from chatclient.memory import (
    ChatMemory,
    SqliteChatMemoryRepository,
    SummarizingChatMemory,
    SummaryEvent,
)
from chatclient.memory.summarizing import SUMMARY_METADATA_KEY, SUMMARY_PREFIX, is_summary
from chatclient.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel, ScriptedChatModel

U = UserMessage
A = AssistantMessage
S = SystemMessage


def call(*ids: str) -> AssistantMessage:
    return AssistantMessage(None, tuple(ToolCall(i, "lookup", '{"q": 1}') for i in ids))


def result(*ids: str) -> ToolResponseMessage:
    return ToolResponseMessage(tuple(ToolResponse(i, "lookup", f"r{i}") for i in ids))


def counting_client() -> tuple[ChatClient, FunctionChatModel]:
    counter = itertools.count(1)
    model = FunctionChatModel(lambda prompt: f"summary #{next(counter)}")
    return ChatClient.create(model), model


def parts(messages: Sequence[Message]) -> tuple[list[Message], list[Message], list[Message]]:
    own = [m for m in messages if isinstance(m, SystemMessage) and not is_summary(m)]
    summaries = [m for m in messages if is_summary(m)]
    rest = [m for m in messages if not isinstance(m, SystemMessage)]
    return own, summaries, rest


def test_below_the_bound_nothing_is_summarised() -> None:
    client, model = counting_client()
    memory = SummarizingChatMemory(client, max_messages=4, keep_last=2)
    assert isinstance(memory, ChatMemory)
    memory.add("c", [S("be brief"), U("u1"), A("a1"), U("u2"), A("a2")])
    assert [m.text for m in memory.get("c")] == ["be brief", "u1", "a1", "u2", "a2"]
    assert model.prompts == [] and memory.summary("c") is None and memory.usage is None


def test_overflow_folds_older_messages_into_one_system_summary() -> None:
    client, model = counting_client()
    events: list[SummaryEvent] = []
    memory = SummarizingChatMemory(client, max_messages=4, keep_last=2, on_summary=events.append)
    memory.add("c", [S("be brief"), U("My name is Ada."), A("Hi Ada."), U("I live in Oslo."), A("Nice.")])
    memory.add("c", U("What is my name?"))
    stored = memory.get("c")
    assert [m.text for m in stored] == ["be brief", SUMMARY_PREFIX + "summary #1", "Nice.", "What is my name?"]
    summary = stored[1]
    assert isinstance(summary, SystemMessage) and summary.metadata[SUMMARY_METADATA_KEY] is True
    assert summary.metadata["summarized_messages"] == 3
    sent = model.prompts[0].user_message.text
    assert "user: My name is Ada." in sent and "assistant: Hi Ada." in sent and "user: I live in Oslo." in sent
    assert "Nice." not in sent  # kept verbatim, not summarised
    # usage: on the memory, in the event and in the stored summary
    assert memory.usage is not None and memory.usage.total_tokens > 0
    assert events[0].usage == memory.usage and events[0].summarized_messages == 3 and events[0].conversation_id == "c"
    assert summary.metadata["summary_usage"]["total_tokens"] == memory.usage.total_tokens


def test_the_previous_summary_is_folded_into_the_next() -> None:
    client, model = counting_client()
    memory = SummarizingChatMemory(client, max_messages=3, keep_last=1)
    memory.add("c", [U("u1"), A("a1"), U("u2"), A("a2")])
    memory.add("c", [U("u3"), A("a3"), U("u4")])
    _own, summaries, rest = parts(memory.get("c"))
    assert [m.text for m in summaries] == [SUMMARY_PREFIX + "summary #2"]
    assert "Summary so far:\nsummary #1" in model.prompts[1].user_message.text
    assert summaries[0].metadata["summarized_messages"] == 6 and [m.text for m in rest] == ["u4"]
    assert memory.summaries == 2


def test_a_tool_exchange_is_never_split() -> None:
    client, _ = counting_client()
    memory = SummarizingChatMemory(client, max_messages=4, keep_last=2)
    memory.add("c", [U("u1"), A("a1"), U("weather?"), call("t1", "t2"), result("t1"), result("t2"), A("sunny")])
    _, _, rest = parts(memory.get("c"))
    # keep_last=2 would start at result("t2"); the cut moves back to the call
    assert rest == [call("t1", "t2"), result("t1"), result("t2"), A("sunny")]


def test_new_system_message_replaces_old_ones_but_keeps_the_summary() -> None:
    client, _ = counting_client()
    memory = SummarizingChatMemory(client, max_messages=2, keep_last=1)
    memory.add("c", [S("old"), U("u1"), A("a1"), U("u2")])
    memory.add("c", [S("new"), A("a2")])
    own, summaries, _rest = parts(memory.get("c"))
    assert [m.text for m in own] == ["new"] and len(summaries) == 1
    assert memory.get("c")[1] == summaries[0]


def test_summary_is_stored_in_the_repository_and_survives_a_restart(tmp_path: Path) -> None:
    client, _ = counting_client()
    repo = SqliteChatMemoryRepository(tmp_path / "chat.db")
    memory = SummarizingChatMemory(client, max_messages=2, keep_last=1, repository=repo)
    memory.add("c", [U("u1"), A("a1"), U("u2")])
    reopened = SummarizingChatMemory(client, repository=SqliteChatMemoryRepository(tmp_path / "chat.db"))
    summary = reopened.summary("c")
    assert summary is not None and summary.text == SUMMARY_PREFIX + "summary #1"
    assert summary.metadata["summarized_messages"] == 2
    reopened.clear("c")
    assert memory.get("c") == []


def test_failed_summary_keeps_messages_then_bounds_them(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedChatModel([ModelConnectionError("down")] * 20)
    memory = SummarizingChatMemory(ChatClient.create(model), max_messages=2, keep_last=1)
    with caplog.at_level(logging.WARNING):
        memory.add("c", [U("u1"), A("a1"), U("u2")])
    assert [m.text for m in memory.get("c")] == ["u1", "a1", "u2"]
    assert "keeping the messages" in caplog.text
    memory.add("c", [A("a2"), U("u3")])  # 5 > 2 * max_messages: window eviction keeps memory bounded
    assert [m.text for m in memory.get("c")] == ["a2", "u3"]


def test_empty_model_answer_is_a_failure_not_an_empty_summary() -> None:
    memory = SummarizingChatMemory(ChatClient.create(ScriptedChatModel(["   "])), max_messages=1, keep_last=0)
    memory.add("c", [U("u1"), A("a1")])
    assert memory.summary("c") is None and len(memory.get("c")) == 2


def test_input_to_the_model_is_bounded() -> None:
    client, model = counting_client()
    memory = SummarizingChatMemory(client, max_messages=2, keep_last=0, max_message_chars=50, max_input_chars=200)
    memory.add("c", [U("x" * 1000), A("y" * 1000), U("z" * 1000)])
    sent = model.prompts[0].user_message.text
    assert "x" * 51 not in sent and "z" * 50 + "…" in sent
    assert memory.summary("c") is not None


def test_works_behind_the_memory_advisor() -> None:
    answers = iter(["Nice to meet you, Ada.", "You live in Oslo.", "Your name is Ada."])
    chat_model = FunctionChatModel(lambda p: next(answers))
    summarizer = ChatClient.create(FunctionChatModel(lambda p: "The user, Ada, lives in Oslo."))
    memory = SummarizingChatMemory(summarizer, max_messages=3, keep_last=1)
    client = ChatClient.builder(chat_model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    for question in ("I am Ada.", "I live in Oslo.", "What is my name?"):
        client.prompt().user(question).call().content()
    last = chat_model.prompts[-1]
    assert last.user_message.text == "What is my name?"
    assert any(is_summary(m) and "Ada, lives in Oslo" in (m.text or "") for m in last.messages)
    assert "I am Ada." not in [m.text for m in last.messages]  # folded into the summary


def test_a_summariser_that_remembers_through_the_same_memory_does_not_recurse() -> None:
    holder: dict[str, SummarizingChatMemory] = {}
    model = FunctionChatModel(lambda p: "short summary")
    summarizer = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(_Late(holder))).build()
    memory = SummarizingChatMemory(summarizer, max_messages=2, keep_last=1)
    holder["m"] = memory
    memory.add("default", [U("u1"), A("a1"), U("u2")])
    assert len(model.prompts) == 1 and memory.summaries == 1


class _Late:
    """A ChatMemory that forwards to one created later (to wire a memory into its own summariser)."""

    def __init__(self, holder: dict[str, SummarizingChatMemory]) -> None:
        self.holder = holder

    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        self.holder["m"].add(conversation_id, messages)

    def get(self, conversation_id: str) -> list[Message]:
        return self.holder["m"].get(conversation_id)

    def clear(self, conversation_id: str) -> None:
        self.holder["m"].clear(conversation_id)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_messages": 0}, "max_messages"),
        ({"max_messages": 4, "keep_last": 4}, "keep_last"),
        ({"keep_last": -1}, "keep_last"),
        ({"max_messages": True}, "max_messages"),
        ({"template": "no transcript"}, "placeholders"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], match: str) -> None:
    client, _ = counting_client()
    with pytest.raises(ValueError, match=match):
        SummarizingChatMemory(client, **kwargs)  # type: ignore[arg-type]


def test_conversation_id_is_checked() -> None:
    client, _ = counting_client()
    with pytest.raises(ValueError, match="conversation_id"):
        SummarizingChatMemory(client).add(" ", U("x"))


# -- property test --------------------------------------------------------------------------------


@st.composite
def message_stream(draw: st.DrawFn) -> tuple[list[list[Message]], bool]:
    """Batches as a chat adds them: turns, whole tool exchanges, system messages, stray tool responses."""
    batches: list[list[Message]] = []
    strays = False
    for n in range(1, draw(st.integers(1, 30)) + 1):
        kind = draw(st.sampled_from(["user", "assistant", "exchange", "exchange", "system", "stray"]))
        if kind == "user":
            batches.append([U(f"u{n}")])
        elif kind == "assistant":
            batches.append([A(f"a{n}")])
        elif kind == "system":
            batches.append([S(f"s{draw(st.integers(0, 2))}")])
        elif kind == "stray":
            strays = True
            batches.append([result(f"stray{n}")])
        else:
            ids = [f"t{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            responses: list[Message] = [result(*ids)] if draw(st.booleans()) else [result(i) for i in ids]
            batches.append([call(*ids), *responses, A(f"done{n}")])
    return batches, strays


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=message_stream(), keep_last=st.integers(0, 5), extra=st.integers(4, 8))
def test_summarizing_properties(stream: tuple[list[list[Message]], bool], keep_last: int, extra: int) -> None:
    batches, strays = stream
    max_messages = keep_last + extra  # room for keep_last plus one whole exchange (up to 4 messages)
    summarizer_prompts: list[Prompt] = []

    def summarize(prompt: Prompt) -> str:
        summarizer_prompts.append(prompt)
        return f"S{len(summarizer_prompts)}"

    memory = SummarizingChatMemory(
        ChatClient.create(FunctionChatModel(summarize)), max_messages=max_messages, keep_last=keep_last
    )
    added: list[Message] = []
    for batch in batches:
        memory.add("p", batch)
        added += [m for m in batch if not isinstance(m, SystemMessage)]
        stored = memory.get("p")
        own, summaries, rest = parts(stored)
        # 1. bounded: at most max_messages verbatim, at most one summary, right after own system messages
        assert len(rest) <= max_messages
        assert len(summaries) <= 1
        assert stored[: len(own) + len(summaries)] == own + summaries
        # 2. nothing lost: every message is either verbatim (the newest ones, in order) or summarised
        #    (a stray tool response that would start the verbatim part is dropped, as in windows)
        summarized = summaries[0].metadata["summarized_messages"] if summaries else 0
        if not strays:
            assert rest == added[len(added) - len(rest) :]
            assert summarized + len(rest) == len(added)
        else:
            it = iter(added)
            assert all(any(m == x for x in it) for m in rest)
        if summaries:
            assert summaries[0].text == SUMMARY_PREFIX + f"S{len(summarizer_prompts)}"
        # 3. the newest keep_last messages stay verbatim (strays aside, which are folded away)
        if not strays:
            assert len(rest) >= min(keep_last, len(added))
        # 4. no split exchange: never starts with a tool response; a response follows its call;
        #    a call that is not the newest unit has all its responses
        if rest:
            assert not isinstance(rest[0], ToolResponseMessage), rest
        for i, m in enumerate(rest):
            if isinstance(m, ToolResponseMessage) and not m.responses[0].id.startswith("stray"):
                calls = {c.id for x in rest[:i] if isinstance(x, AssistantMessage) for c in x.tool_calls}
                assert {r.id for r in m.responses} <= calls, ("orphan tool response", rest)
            if isinstance(m, AssistantMessage) and m.tool_calls and i < len(rest) - 1:
                answered = {r.id for x in rest[i + 1 :] if isinstance(x, ToolResponseMessage) for r in x.responses}
                assert {c.id for c in m.tool_calls} <= answered, ("call without its responses", rest)
