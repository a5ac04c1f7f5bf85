"""The one JSON form of messages: every message type round-trips exactly."""

from __future__ import annotations

import json

import pytest

from chatclient.memory.serialization import (
    FORMAT_VERSION,
    message_from_dict,
    message_from_json,
    message_to_dict,
    message_to_json,
    messages_from_json,
    messages_to_json,
)
from chatclient.messages import (
    AssistantMessage,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

ALL_KINDS: list[Message] = [
    SystemMessage("Be brief.", metadata={"source": "default"}),
    UserMessage("plain"),
    UserMessage(
        'look <at> "this" & ünïcödé 🚀',
        media=(Media("image/png", b"\x89PNG\r\n\x1a\n\x00\xff"), Media("image/jpeg", "https://example.org/a.jpg")),
        metadata={"n": 1, "f": 1.5, "flag": True, "none": None, "nested": {"list": [1, "two", {"three": 3}]}},
    ),
    AssistantMessage("answer"),
    AssistantMessage(None),
    AssistantMessage(
        "",
        (ToolCall("call_1", "weather", '{"city": "Paris"}'), ToolCall("", "time", "")),
        metadata={"finish_reason": "tool_calls"},
    ),
    ToolResponseMessage(
        (ToolResponse("call_1", "weather", '{"temp": 20}'), ToolResponse("call_2", "time", "boom", is_error=True)),
        metadata={"ids": ("call_1", "call_2"), "raw": b"\x00\x01"},
    ),
    # What a provider needs back in the next request: thinking with its signature, redacted
    # thinking, provider data on a tool call, server-tool blocks kept as metadata.
    AssistantMessage(
        None,
        (ToolCall("toolu_1", "weather", '{"city": "Rome"}', metadata={"thought_signature": "c2ln", "partial": True}),),
        metadata={"anthropic_content": ({"type": "server_tool_use", "id": "srvtoolu_1", "input": {"q": "x"}},)},
        reasoning=(
            Reasoning("Let me think.", signature="EqQBCgIYAh", provider="anthropic"),
            Reasoning(redacted="EmwKAhgBEgy3va", provider="anthropic"),
            Reasoning("plain local thought"),
        ),
    ),
    AssistantMessage("", refusal="I can't help with that."),
]


@pytest.mark.parametrize("message", ALL_KINDS, ids=lambda m: type(m).__name__)
def test_every_message_round_trips_exactly(message: Message) -> None:
    text = message_to_json(message)
    back = message_from_json(text)
    assert back == message
    assert type(back) is type(message)
    assert dict(back.metadata) == dict(message.metadata)
    # Tagged values come back with their Python types, not as lists or strings.
    for key, value in message.metadata.items():
        assert type(back.metadata[key]) is type(value)


def test_version_and_type_are_written() -> None:
    data = json.loads(message_to_json(UserMessage("hi")))
    # The lowest version that holds the message, so older releases still read plain records.
    assert data["v"] == 1
    assert data["type"] == "user"
    assert json.loads(message_to_json(AssistantMessage("a", (ToolCall("1", "t", "{}"),))))["v"] == 1


@pytest.mark.parametrize(
    "message",
    [
        AssistantMessage("a", reasoning=(Reasoning("r"),)),
        AssistantMessage("", refusal="no"),
        AssistantMessage(None, (ToolCall("1", "t", "{}", metadata={"k": "v"}),)),
    ],
)
def test_new_fields_are_written_as_version_2(message: AssistantMessage) -> None:
    data = message_to_dict(message)
    assert data["v"] == 2 <= FORMAT_VERSION  # the lowest version that holds the message
    assert message_from_dict(data) == message


def test_reasoning_wire_form_keeps_only_set_fields() -> None:
    d = message_to_dict(AssistantMessage("x", reasoning=(Reasoning("t", signature="s", provider="anthropic"),)))
    assert d["reasoning"] == [{"text": "t", "signature": "s", "provider": "anthropic"}]


def test_version_1_records_written_before_reasoning_existed_still_read() -> None:
    old = {"v": 1, "type": "assistant", "text": None, "tool_calls": [{"id": "c", "name": "t", "arguments": "{}"}]}
    back = message_from_dict(old)
    assert back == AssistantMessage(None, (ToolCall("c", "t", "{}"),))
    assert isinstance(back, AssistantMessage) and back.reasoning == () and back.refusal is None


@pytest.mark.parametrize(
    "bad",
    [
        {"v": 2, "type": "assistant", "text": "x", "reasoning": ["not an object"]},
        {"v": 2, "type": "assistant", "text": "x", "reasoning": [{"text": "t", "signature": 5}]},
        {"v": 2, "type": "assistant", "text": "x", "refusal": ["no"]},
    ],
)
def test_malformed_reasoning_or_refusal_raises_value_error(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="malformed"):
        message_from_dict(bad)


def test_media_bytes_are_base64_and_urls_stay_strings() -> None:
    d = message_to_dict(UserMessage("x", media=(Media("a/b", b"\x00\x01"), Media("c/d", "http://h/x"))))
    assert d["media"] == [{"mime_type": "a/b", "base64": "AAE="}, {"mime_type": "c/d", "url": "http://h/x"}]


def test_tool_response_error_flag_survives() -> None:
    m = ToolResponseMessage((ToolResponse("1", "t", "failed", is_error=True),))
    back = message_from_json(message_to_json(m))
    assert isinstance(back, ToolResponseMessage)
    assert back.responses[0].is_error is True


def test_list_round_trip_keeps_order() -> None:
    assert messages_from_json(messages_to_json(ALL_KINDS)) == ALL_KINDS


def test_newer_format_version_is_rejected_with_advice() -> None:
    d = message_to_dict(UserMessage("hi"))
    d["v"] = FORMAT_VERSION + 1
    with pytest.raises(ValueError, match="upgrade chatclient"):
        message_from_dict(d)


@pytest.mark.parametrize(
    "bad",
    [{"v": 1, "type": "robot", "text": "x"}, {"v": 1, "type": "user"}, {"type": "user", "text": "x"}, ["not", "obj"]],
)
def test_malformed_stored_messages_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError):
        message_from_dict(bad)  # type: ignore[arg-type]


def test_invalid_json_raises_value_error() -> None:
    with pytest.raises(ValueError, match="not valid JSON"):
        message_from_json("{nope")


@pytest.mark.parametrize("value", [object(), {1: "int key"}, float("nan"), {1, 2}])
def test_metadata_that_would_not_read_back_equal_is_rejected(value: object) -> None:
    with pytest.raises(ValueError, match="metadata"):
        message_to_json(UserMessage("x", metadata={"k": value}))
