"""Messages, Prompt accessors and augment helpers, ChatOptions merge."""

from __future__ import annotations

import pytest

from chatclient import (
    AssistantMessage,
    ChatOptions,
    Media,
    MessageType,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def test_messages_are_immutable_values() -> None:
    a = UserMessage("hi", metadata={"k": 1})
    b = UserMessage("hi", metadata={"k": 1})
    assert a == b and hash(a) == hash(b)
    assert a != UserMessage("hi", metadata={"k": 2})
    with pytest.raises(AttributeError):
        a.text = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.metadata["k"] = 3  # type: ignore[index]


def test_metadata_is_copied_not_shared() -> None:
    meta = {"k": 1}
    m = SystemMessage("s", meta)
    meta["k"] = 2
    assert m.metadata["k"] == 1


def test_types_and_tool_response_text() -> None:
    call = ToolCall("c1", "weather", '{"city": "Oslo"}')
    assert AssistantMessage(None, (call,)).type is MessageType.ASSISTANT
    assert AssistantMessage(None, [call]).tool_calls == (call,)
    tr = ToolResponseMessage((ToolResponse("c1", "weather", "sunny"), ToolResponse("c2", "time", "noon")))
    assert tr.type is MessageType.TOOL
    assert tr.text == "sunny\nnoon"
    assert SystemMessage("s").type == "system"


def test_prompt_accessors() -> None:
    p = Prompt(
        [
            SystemMessage("first"),
            UserMessage("u1"),
            SystemMessage("second"),
            AssistantMessage("a"),
            UserMessage("u2"),
            ToolResponseMessage((ToolResponse("1", "t", "r"),)),
        ]
    )
    assert p.system_message.text == "first"
    assert p.user_message.text == "u2"
    assert isinstance(p.last_user_or_tool_response_message, ToolResponseMessage)
    assert p.contents == "first\nu1\nsecond\na\nu2\nr"


def test_prompt_defaults_when_missing() -> None:
    p = Prompt([AssistantMessage("a")])
    assert p.system_message == SystemMessage("")
    assert p.user_message == UserMessage("")
    assert p.last_user_or_tool_response_message == UserMessage("")


def test_prompt_from_string_and_single_message() -> None:
    assert Prompt("hello").messages == (UserMessage("hello"),)
    assert Prompt(SystemMessage("s")).messages == (SystemMessage("s"),)
    with pytest.raises(TypeError):
        Prompt(["not a message"])  # type: ignore[list-item]


def test_augment_user_message_replaces_last_and_keeps_media() -> None:
    media = (Media("image/png", b"\x89PNG"),)
    p = Prompt([UserMessage("first"), UserMessage("last", media=media)], ChatOptions(temperature=0.1))
    q = p.augment_user_message("changed")
    assert q.messages[0].text == "first"
    assert q.messages[1] == UserMessage("changed", media=media)
    assert q.options == p.options
    assert p.user_message.text == "last"  # the original is untouched
    r = p.augment_user_message(lambda u: UserMessage(u.text + "!", media=u.media))
    assert r.user_message.text == "last!"


def test_augment_user_message_appends_when_missing() -> None:
    p = Prompt([SystemMessage("s")]).augment_user_message("added")
    assert p.messages == (SystemMessage("s"), UserMessage("added"))


def test_augment_system_message_replaces_first_or_inserts() -> None:
    p = Prompt([UserMessage("u"), SystemMessage("a"), SystemMessage("b")])
    assert p.augment_system_message("X").messages == (UserMessage("u"), SystemMessage("X"), SystemMessage("b"))
    q = Prompt([UserMessage("u")]).augment_system_message(lambda s: SystemMessage(s.text + "new"))
    assert q.messages == (SystemMessage("new"), UserMessage("u"))


def test_prompt_copy_and_immutability() -> None:
    p = Prompt("q")
    with pytest.raises(AttributeError):
        p.messages = ()  # type: ignore[misc]
    opts = ChatOptions(model="m")
    assert p.copy(options=opts).options is opts
    assert p.copy(options=opts).messages == p.messages
    assert p.copy(messages=[UserMessage("other")]).user_message.text == "other"


def test_options_merge_other_wins_and_extra_merges() -> None:
    base = ChatOptions(model="a", temperature=0.5, extra={"x": 1, "y": 1})
    override = ChatOptions(temperature=0.9, max_tokens=10, extra={"y": 2})
    merged = base.merge(override)
    assert merged == ChatOptions(model="a", temperature=0.9, max_tokens=10, extra={"x": 1, "y": 2})
    assert base.temperature == 0.5
    assert base.merge(None) is base
    assert base.merge(ChatOptions()) == base
