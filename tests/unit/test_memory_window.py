"""Window memories: the reference eviction rules, tool exchanges kept whole, and property tests."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatclient.memory import (
    ChatMemory,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    SimpleTokenCounter,
    TiktokenTokenCounter,
    TokenCounterUnavailableError,
    TokenWindowChatMemory,
)
from chatclient.memory.window import tool_units
from chatclient.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

U = UserMessage
A = AssistantMessage
S = SystemMessage


def call(*ids: str) -> AssistantMessage:
    return AssistantMessage(None, tuple(ToolCall(i, "tool", "{}") for i in ids))


def result(*ids: str) -> ToolResponseMessage:
    return ToolResponseMessage(tuple(ToolResponse(i, "tool", f"r{i}") for i in ids))


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text or "" for m in messages]


# -- the reference rules (Spring AI's MessageWindowChatMemory) ----------------------------------


def test_is_a_chat_memory_and_defaults() -> None:
    memory = MessageWindowChatMemory()
    assert isinstance(memory, ChatMemory)
    assert memory.max_messages == 20
    assert isinstance(memory.repository, InMemoryChatMemoryRepository)


def test_oldest_non_system_messages_go_first() -> None:
    memory = MessageWindowChatMemory(max_messages=3)
    memory.add("c", [S("sys"), U("u1"), A("a1"), U("u2")])
    memory.add("c", [A("a2")])
    assert texts(memory.get("c")) == ["sys", "u2", "a2"]


def test_system_messages_are_never_evicted_even_above_the_bound() -> None:
    memory = MessageWindowChatMemory(max_messages=2)
    memory.add("c", [S("s1"), S("s2")])
    memory.add("c", [U("u"), A("a")])
    # The window exceeds its bound only through system messages.
    assert texts(memory.get("c")) == ["s1", "s2"]


def test_new_system_message_replaces_old_ones() -> None:
    memory = MessageWindowChatMemory(max_messages=10)
    memory.add("c", [S("old"), U("u1")])
    memory.add("c", [S("new"), U("u2")])
    assert texts(memory.get("c")) == ["u1", "new", "u2"]


def test_known_system_message_is_not_stored_twice() -> None:
    memory = MessageWindowChatMemory(max_messages=10)
    memory.add("c", [S("same"), U("u1")])
    memory.add("c", [S("same"), U("u2")])
    assert texts(memory.get("c")) == ["same", "u1", "u2"]


def test_order_is_kept_and_conversations_are_separate() -> None:
    memory = MessageWindowChatMemory(max_messages=5)
    for i in range(7):
        memory.add("a", U(f"a{i}"))
    memory.add("b", U("b0"))
    assert texts(memory.get("a")) == ["a2", "a3", "a4", "a5", "a6"]
    assert texts(memory.get("b")) == ["b0"]
    memory.clear("a")
    assert memory.get("a") == []
    assert texts(memory.get("b")) == ["b0"]


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_max_messages_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_messages"):
        MessageWindowChatMemory(max_messages=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("cid", ["", "   ", None])
def test_empty_conversation_id_is_rejected(cid: object) -> None:
    memory = MessageWindowChatMemory()
    for op in (lambda: memory.add(cid, U("x")), lambda: memory.get(cid), lambda: memory.clear(cid)):  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="conversation_id"):
            op()


def test_bad_messages_are_rejected() -> None:
    memory = MessageWindowChatMemory()
    with pytest.raises(ValueError):
        memory.add("c", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        memory.add("c", [U("x"), None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        memory.add("c", "text")  # type: ignore[arg-type]
    assert memory.get("c") == []


# -- tool exchanges ---------------------------------------------------------------------------


def test_tool_units_group_a_call_with_its_responses() -> None:
    msgs: list[Message] = [U("u"), call("1", "2"), result("1"), result("2"), A("a"), result("x")]
    assert tool_units(msgs) == [[0], [1, 2, 3], [4], [5]]


def test_tool_exchange_is_evicted_whole() -> None:
    memory = MessageWindowChatMemory(max_messages=4)
    memory.add("c", [U("u1"), call("1"), result("1"), A("a1")])
    memory.add("c", U("u2"))
    # Dropping only u1 would leave 4 messages, but then the next eviction must take the whole
    # exchange; here one eviction of u1 suffices.
    assert memory.get("c") == [call("1"), result("1"), A("a1"), U("u2")]
    memory.add("c", A("a2"))
    # The exchange (2 messages) goes as one unit, never leaving result("1") at the start.
    assert memory.get("c") == [A("a1"), U("u2"), A("a2")]


def test_tool_exchange_larger_than_remaining_room_is_evicted_whole() -> None:
    memory = MessageWindowChatMemory(max_messages=3)
    memory.add("c", [call("1", "2"), result("1"), result("2"), U("u")])
    assert memory.get("c") == [U("u")]


def test_orphan_tool_response_at_window_start_is_dropped() -> None:
    memory = MessageWindowChatMemory(max_messages=10)
    memory.add("c", [result("9"), U("u")])
    assert memory.get("c") == [U("u")]


def test_pending_tool_call_as_newest_message_is_kept_until_its_responses_arrive() -> None:
    memory = MessageWindowChatMemory(max_messages=10)
    memory.add("c", call("1"))
    assert memory.get("c") == [call("1")]
    memory.add("c", result("1"))
    assert memory.get("c") == [call("1"), result("1")]


def test_unanswered_tool_call_at_window_start_is_dropped() -> None:
    memory = MessageWindowChatMemory(max_messages=10)
    memory.add("c", [call("1"), U("u")])
    assert memory.get("c") == [U("u")]


# -- token window -----------------------------------------------------------------------------


def length_counter(m: Message) -> int:
    return len(m.text or "")


def test_token_window_keeps_the_newest_messages_that_fit() -> None:
    memory = TokenWindowChatMemory(10, length_counter)
    memory.add("c", [U("aaaa"), A("bbbb"), U("cccc")])
    assert texts(memory.get("c")) == ["bbbb", "cccc"]


def test_token_window_never_cuts_a_message_and_keeps_system() -> None:
    memory = TokenWindowChatMemory(5, length_counter)
    memory.add("c", [S("sys"), U("toolongmessage")])
    assert texts(memory.get("c")) == ["sys"]


def test_token_window_accepts_counter_objects_and_defaults_to_simple() -> None:
    memory = TokenWindowChatMemory(12, SimpleTokenCounter(chars_per_token=1, per_message=0))
    memory.add("c", [U("x" * 8), U("y" * 8)])
    assert texts(memory.get("c")) == ["y" * 8]
    default = TokenWindowChatMemory(100)
    default.add("c", U("hello"))
    assert texts(default.get("c")) == ["hello"]
    with pytest.raises(ValueError, match="max_tokens"):
        TokenWindowChatMemory(0)


def test_simple_token_counter_counts_tool_parts_and_media() -> None:
    counter = SimpleTokenCounter(chars_per_token=4, per_message=4, per_media=85)
    assert counter.count(U("12345678")) == 4 + 2
    assert counter.count(A(None, (ToolCall("1", "abcd", "12345678"),))) == 4 + 1 + 2
    assert counter.count(ToolResponseMessage((ToolResponse("1", "abcd", "1234"),))) == 4 + 1 + 1
    from chatclient.messages import Media

    assert counter.count(U("", media=(Media("image/png", b"x"),))) == 4 + 85


def test_tiktoken_counter_counts_or_explains_why_it_cannot() -> None:
    # tiktoken downloads its BPE file on first use; offline that must be a clear, actionable error.
    try:
        counter = TiktokenTokenCounter()
    except TokenCounterUnavailableError as exc:
        assert "TIKTOKEN_CACHE_DIR" in str(exc)
        assert "SimpleTokenCounter" in str(exc)
        return
    assert counter.count(U("hello world")) == 4 + 2


def test_tiktoken_counter_rejects_unknown_encoding() -> None:
    with pytest.raises(ValueError, match="no encoding"):
        TiktokenTokenCounter("no-such-encoding")


# -- property tests ---------------------------------------------------------------------------


@st.composite
def message_stream(draw: st.DrawFn) -> list[list[Message]]:
    """Batches of messages as a chat would add them: user turns, answers, whole tool exchanges,
    system messages, and sometimes a stray tool response."""
    batches: list[list[Message]] = []
    for n in range(1, draw(st.integers(1, 25)) + 1):
        kind = draw(st.sampled_from(["user", "assistant", "exchange", "system", "stray"]))
        if kind == "user":
            batches.append([U(f"u{n}")])
        elif kind == "assistant":
            batches.append([A(f"a{n}" * draw(st.integers(1, 3)))])
        elif kind == "system":
            batches.append([S(f"s{draw(st.integers(0, 2))}")])
        elif kind == "stray":
            batches.append([result(f"stray{n}")])
        else:
            ids = [f"t{n}_{k}" for k in range(draw(st.integers(1, 3)))]
            responses: list[Message] = [result(*ids)] if draw(st.booleans()) else [result(i) for i in ids]
            batches.append([call(*ids), *responses, A(f"done{n}")])
    return batches


def check_window(kept: list[Message], added: list[Message], size: int, bound: int, count: object) -> None:
    non_system = [m for m in kept if not isinstance(m, SystemMessage)]
    # 1. the bound holds unless only system messages are left
    if non_system:
        assert size <= bound, (size, bound, kept)
    # 2. order is kept: the non-system messages are a subsequence of what was added, in order
    it = iter(m for m in added if not isinstance(m, SystemMessage))
    assert all(any(m == x for x in it) for m in non_system)
    # 3. no split exchange: the window never starts with a tool response; a tool response of an
    #    exchange follows its call; a call that is not the newest message keeps all its responses.
    #    (Stray responses the caller added mid-conversation are the caller's business.)
    if non_system:
        assert not isinstance(non_system[0], ToolResponseMessage), ("window starts with a tool response", kept)
    for i, m in enumerate(non_system):
        if isinstance(m, ToolResponseMessage) and not m.responses[0].id.startswith("stray"):
            before = non_system[:i]
            calls = {c.id for x in before if isinstance(x, AssistantMessage) for c in x.tool_calls}
            assert {r.id for r in m.responses} <= calls, ("orphan tool response", kept)
        if isinstance(m, AssistantMessage) and m.tool_calls and i < len(non_system) - 1:
            answered = {r.id for x in non_system[i + 1 :] if isinstance(x, ToolResponseMessage) for r in x.responses}
            assert {c.id for c in m.tool_calls} <= answered, ("call without its responses", kept)
    # 4. only the newest system message (and repeats of it are not stored twice)
    systems = [m for m in kept if isinstance(m, SystemMessage)]
    assert len(systems) <= 1 or len(set(systems)) == len(systems)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=message_stream(), bound=st.integers(1, 8))
def test_message_window_properties(batches: list[list[Message]], bound: int) -> None:
    memory = MessageWindowChatMemory(max_messages=bound)
    added: list[Message] = []
    for batch in batches:
        memory.add("p", batch)
        added += batch
        kept = memory.get("p")
        check_window(kept, added, len(kept), bound, None)
    # The newest whole unit that fits is always kept: the last batch's final message survives
    # when it alone fits in the room the system messages leave.
    kept = memory.get("p")
    last = batches[-1]
    systems = sum(isinstance(m, SystemMessage) for m in kept)
    stray = isinstance(last[-1], ToolResponseMessage)
    if not isinstance(last[-1], SystemMessage) and not stray and len(last) + systems <= bound:
        assert kept[-1] == last[-1]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=message_stream(), bound=st.integers(3, 40))
def test_token_window_properties(batches: list[list[Message]], bound: int) -> None:
    memory = TokenWindowChatMemory(bound, length_counter)
    added: list[Message] = []
    for batch in batches:
        memory.add("p", batch)
        added += batch
        kept = memory.get("p")
        check_window(kept, added, sum(length_counter(m) for m in kept), bound, None)
