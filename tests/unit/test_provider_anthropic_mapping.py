"""Anthropic Messages mapping: request bodies (golden JSON), responses and stream events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatclient.errors import ModelHTTPError, ModelResponseError
from chatclient.messages import (
    AssistantMessage,
    Media,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.anthropic import AnthropicStreamParser, build_messages_body, parse_message
from chatclient.models.base import ChatResponse, Usage, aggregate
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support.loopback import anthropic_message, anthropic_stream

WEATHER = ToolDefinition(
    "get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}
)


def test_full_request_body_golden() -> None:
    prompt = Prompt(
        [
            SystemMessage("Be brief."),
            SystemMessage("Answer in English."),
            UserMessage("What is this and the weather?", media=(Media("image/png", b"\x89PNG"),)),
            AssistantMessage("Checking.", (ToolCall("tu_1", "get_weather", '{"city": "Paris"}'),)),
            ToolResponseMessage(
                (ToolResponse("tu_1", "get_weather", "21C"), ToolResponse("tu_2", "get_weather", "boom", is_error=True))
            ),
            UserMessage("And tomorrow?"),
        ],
        ChatOptions(
            model="claude-x",
            temperature=0.1,
            top_p=0.8,
            top_k=5,
            stop=["###"],
            seed=3,  # no Anthropic field: left out
            tool_choice="get_weather",
            parallel_tool_calls=False,
            extra={"metadata": {"user_id": "u1"}},
        ),
        tools=[WEATHER],
    )
    body = build_messages_body(prompt, prompt.options or ChatOptions(), stream=False)
    assert body == {
        "model": "claude-x",
        "max_tokens": 1024,
        "system": "Be brief.\nAnswer in English.",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw=="}},
                    {"type": "text", "text": "What is this and the weather?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
            {
                "role": "user",  # tool results and the next user turn merge: roles must alternate
                "content": [
                    {"type": "tool_result", "tool_use_id": "tu_1", "content": "21C"},
                    {"type": "tool_result", "tool_use_id": "tu_2", "content": "boom", "is_error": True},
                    {"type": "text", "text": "And tomorrow?"},
                ],
            },
        ],
        "temperature": 0.1,
        "top_p": 0.8,
        "top_k": 5,
        "stop_sequences": ["###"],
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather by city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "metadata": {"user_id": "u1"},
    }


def test_minimal_stream_body_and_output_schema_ignored() -> None:
    options = ChatOptions(model="m", max_tokens=99, output_schema={"type": "object"})
    assert build_messages_body(Prompt("hi"), options, stream=True) == {
        "model": "m",
        "max_tokens": 99,
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
    }


@pytest.mark.parametrize(
    ("choice", "parallel", "expected"),
    [
        ("auto", None, {"type": "auto"}),
        ("required", None, {"type": "any"}),
        ("none", None, {"type": "none"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        ({"type": "any"}, None, {"type": "any"}),
    ],
)
def test_tool_choice(choice: Any, parallel: bool | None, expected: dict[str, Any]) -> None:
    options = ChatOptions(model="m", tool_choice=choice, parallel_tool_calls=parallel)
    assert build_messages_body(Prompt("hi", tools=[WEATHER]), options, stream=False)["tool_choice"] == expected


def test_image_url_source() -> None:
    body = build_messages_body(
        Prompt(UserMessage("x", media=(Media("image/jpeg", "https://e.com/a.jpg"),))),
        ChatOptions(model="m"),
        stream=False,
    )
    assert body["messages"][0]["content"][0] == {
        "type": "image",
        "source": {"type": "url", "url": "https://e.com/a.jpg"},
    }


@pytest.mark.parametrize(
    ("raw", "mapped"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls")],
)
def test_parse_message_finish_reasons(raw: str, mapped: str) -> None:
    r = parse_message(anthropic_message("hi", stop_reason=raw))
    assert r.result is not None
    assert r.result.finish_reason == mapped
    assert r.result.metadata.extra["raw_finish_reason"] == raw


def test_parse_message_with_tools() -> None:
    r = parse_message(anthropic_message("Sure.", tool_uses=[("tu_1", "get_weather", {"city": "Rome"})], usage=(20, 8)))
    assert r.result is not None
    assert r.result.output == AssistantMessage("Sure.", (ToolCall("tu_1", "get_weather", '{"city": "Rome"}'),))
    assert r.metadata.usage == Usage(20, 8)
    assert (r.metadata.id, r.metadata.model) == ("msg_1", "claude-test")


def stream_chunks(events: list[tuple[str, dict[str, Any]]]) -> tuple[AnthropicStreamParser, list[ChatResponse]]:
    parser = AnthropicStreamParser()
    chunks: list[ChatResponse] = []
    for name, data in events:
        for line in (f"event: {name}", f"data: {json.dumps(data)}", ""):
            chunks += parser.feed(line)
    if parser.done:
        chunks += parser.finish()
    return parser, chunks


def test_stream_aggregates_to_message() -> None:
    _, chunks = stream_chunks(
        anthropic_stream(
            ["Su", "re."], tool_uses=[("tu_1", "get_weather", ['{"ci', 'ty": ', '"Rome"}'])], usage=(20, 8)
        )
    )
    expected = parse_message(
        anthropic_message("Sure.", tool_uses=[("tu_1", "get_weather", {"city": "Rome"})], usage=(20, 8))
    )
    assert aggregate(chunks) == expected
    assert [c.text for c in chunks[:2]] == ["Su", "re."]
    assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "tool_calls"
    assert chunks[-1].metadata.usage == Usage(20, 8)


def test_stream_without_message_stop_is_not_done() -> None:
    parser, _ = stream_chunks(anthropic_stream(stop=False))
    assert not parser.done


def test_stream_error_event_raises() -> None:
    parser = AnthropicStreamParser()
    parser.feed("event: error")
    parser.feed('data: {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}')
    # The same class and status as an HTTP 529 answer, so it is retried and handled alike.
    with pytest.raises(ModelHTTPError, match="overloaded_error") as info:
        parser.feed("")
    assert info.value.status == 529


def test_unknown_block_and_delta_types_are_kept_or_skipped_not_fatal() -> None:
    start, *rest = anthropic_stream(["ok"])
    future = [
        ("content_block_start", {"type": "content_block_start", "index": 5, "content_block": {"type": "future_block"}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 5, "delta": {"type": "future_delta"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 5}),
        ("future_event", {"type": "future_event", "payload": 1}),
    ]
    parser, chunks = stream_chunks([start, *future, *rest])
    assert parser.done
    message = aggregate(chunks).result
    assert message is not None and message.output.text == "ok"
    # The unknown block is kept with the turn's content so it can be sent back.
    assert [b["type"] for b in message.output.metadata["anthropic_content"]] == ["text", "future_block"]


def test_invalid_tool_json_without_max_tokens_is_a_response_error() -> None:
    events = anthropic_stream([], tool_uses=[("tu_1", "get_weather", ['{"city": '])], stop_reason="tool_use")
    with pytest.raises(ModelResponseError, match="not valid JSON"):
        stream_chunks(events)  # raised by finish(), once stop_reason says it was no max_tokens cut
