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
    assert data["v"] == FORMAT_VERSION
    assert data["type"] == "user"


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
