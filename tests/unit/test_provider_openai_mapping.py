"""OpenAI Chat Completions mapping: request bodies (golden JSON), responses and stream chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatclient.errors import ModelResponseError
from chatclient.messages import (
    AssistantMessage,
    Media,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import Usage, aggregate
from chatclient.models.openai import (
    OpenAIStreamParser,
    build_chat_body,
    is_strict_schema,
    parse_chat_completion,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support.loopback import openai_completion, openai_stream

WEATHER = ToolDefinition(
    "get_weather",
    "Current weather for a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def conversation() -> Prompt:
    return Prompt(
        [
            SystemMessage("Be brief."),
            UserMessage("Weather in Paris and this picture?", media=(Media("image/png", b"\x89PNG"),)),
            AssistantMessage(None, (ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
            ToolResponseMessage((ToolResponse("call_1", "get_weather", '{"temp": 21}'),)),
            AssistantMessage("It is 21 degrees."),
            UserMessage("Thanks"),
        ],
        tools=[WEATHER],
    )


def test_full_request_body_golden() -> None:
    options = ChatOptions(
        model="gpt-x",
        temperature=0.2,
        max_tokens=50,
        top_p=0.9,
        top_k=40,  # no Chat Completions field: must be left out
        stop=["END"],
        frequency_penalty=0.1,
        presence_penalty=0.3,
        seed=7,
        tool_choice="required",
        parallel_tool_calls=False,
        extra={"user": "u-1"},
    )
    body = build_chat_body(conversation(), options, stream=False)
    assert body == {
        "model": "gpt-x",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Weather in Paris and this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}},
                ],
            },
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 21}'},
            {"role": "assistant", "content": "It is 21 degrees."},
            {"role": "user", "content": "Thanks"},
        ],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 50,
        "frequency_penalty": 0.1,
        "presence_penalty": 0.3,
        "seed": 7,
        "stop": ["END"],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Current weather for a city",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "user": "u-1",
    }


def test_stream_body_asks_for_usage() -> None:
    body = build_chat_body(Prompt("hi"), ChatOptions(model="m"), stream=True)
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        ({"type": "function", "function": {"name": "x"}}, {"type": "function", "function": {"name": "x"}}),
    ],
)
def test_tool_choice_mapping(choice: Any, expected: Any) -> None:
    body = build_chat_body(Prompt("hi", tools=[WEATHER]), ChatOptions(model="m", tool_choice=choice), stream=False)
    assert body["tool_choice"] == expected


def test_tool_settings_are_dropped_without_tools() -> None:
    body = build_chat_body(
        Prompt("hi"), ChatOptions(model="m", tool_choice="auto", parallel_tool_calls=True), stream=False
    )
    assert "tool_choice" not in body and "parallel_tool_calls" not in body and "tools" not in body


def test_tool_without_schema_gets_empty_object_schema() -> None:
    body = build_chat_body(Prompt("hi", tools=[ToolDefinition("now", "Time")]), ChatOptions(model="m"), stream=False)
    assert body["tools"][0]["function"]["parameters"] == {"type": "object", "properties": {}}


STRICT = {
    "title": "Person record",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "pets": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"kind": {"type": "string"}},
                "required": ["kind"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["name", "pets"],
    "additionalProperties": False,
}


def test_output_schema_strict_when_schema_allows() -> None:
    body = build_chat_body(Prompt("hi"), ChatOptions(model="m", output_schema=STRICT), stream=False)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Person_record", "schema": STRICT, "strict": True},
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},  # extra props allowed
        {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},  # a optional
        {  # nested object not strict
            "type": "object",
            "properties": {"a": {"type": "object", "properties": {"b": {"type": "integer"}}}},
            "required": ["a"],
            "additionalProperties": False,
        },
    ],
)
def test_output_schema_not_strict_otherwise(schema: dict[str, Any]) -> None:
    assert not is_strict_schema(schema)
    body = build_chat_body(Prompt("hi"), ChatOptions(model="m", output_schema=schema), stream=False)
    assert body["response_format"]["json_schema"] == {"name": "response", "schema": schema, "strict": False}


def test_media_kinds() -> None:
    prompt = Prompt(
        UserMessage(
            "look",
            media=(
                Media("image/jpeg", "https://example.com/cat.jpg"),
                Media("audio/wav", b"RIFF"),
                Media("application/pdf", b"%PDF"),
            ),
        )
    )
    content = build_chat_body(prompt, ChatOptions(model="m"), stream=False)["messages"][0]["content"]
    assert content == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERg=="}},
    ]


def test_non_image_url_is_rejected() -> None:
    with pytest.raises(ValueError, match="only for images"):
        build_chat_body(
            Prompt(UserMessage("x", media=(Media("audio/wav", "https://x/a.wav"),))),
            ChatOptions(model="m"),
            stream=False,
        )


def test_parse_text_completion() -> None:
    r = parse_chat_completion(openai_completion("Hi there", usage=(5, 2)))
    assert r.text == "Hi there"
    assert r.result is not None and r.result.finish_reason == "stop"
    assert dict(r.result.metadata.extra) == {"raw_finish_reason": "stop"}
    assert r.metadata.id == "chatcmpl-1" and r.metadata.model == "gpt-test"
    assert r.metadata.usage == Usage(5, 2)
    assert dict(r.metadata.extra) == {"system_fingerprint": "fp_test"}


def test_parse_tool_calls_and_legacy_finish_reason() -> None:
    payload = openai_completion(
        None, tool_calls=[("c1", "f", '{"a":1}'), ("c2", "g", "{}")], finish_reason="function_call"
    )
    r = parse_chat_completion(payload)
    assert r.result is not None
    assert r.result.output == AssistantMessage(None, (ToolCall("c1", "f", '{"a":1}'), ToolCall("c2", "g", "{}")))
    assert r.result.finish_reason == "tool_calls"
    assert r.result.metadata.extra["raw_finish_reason"] == "function_call"


def test_parse_error_payload_and_bad_shape() -> None:
    with pytest.raises(ModelResponseError, match="quota"):
        parse_chat_completion({"error": {"message": "quota exceeded"}})
    with pytest.raises(KeyError):
        parse_chat_completion({"id": "x"})


def feed_events(events: list[Any], done: bool = True) -> tuple[OpenAIStreamParser, list[Any]]:
    parser = OpenAIStreamParser()
    chunks = []
    lines = []
    for e in events:
        lines += [f"data: {json.dumps(e)}", ""]
    if done:
        lines += ["data: [DONE]", ""]
    for line in lines:
        chunks += parser.feed(line)
    if parser.done:
        chunks += parser.finish()
    return parser, chunks


def test_stream_text_aggregates_to_call_result() -> None:
    parser, chunks = feed_events(openai_stream(["Hi", " there"], usage=(5, 2)))
    assert parser.done
    assert [c.text for c in chunks] == ["Hi", " there", None]
    last = chunks[-1]
    assert last.result is not None and last.result.finish_reason == "stop"
    assert last.metadata.usage == Usage(5, 2)
    assert aggregate(chunks) == parse_chat_completion(openai_completion("Hi there", usage=(5, 2)))


def test_stream_tool_calls_aggregate_to_call_result() -> None:
    stream = openai_stream([], tool_calls=[("c1", "f", ['{"a"', ":1}"]), ("c2", "g", ["{}"])])
    _, chunks = feed_events(stream)
    expected = parse_chat_completion(openai_completion(None, tool_calls=[("c1", "f", '{"a":1}'), ("c2", "g", "{}")]))
    assert aggregate(chunks) == expected
    assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "tool_calls"


def test_stream_interleaved_tool_call_fragments_by_index() -> None:
    def chunk(tool_calls: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "x",
            "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": tool_calls}, "finish_reason": finish}],
        }

    events = [
        chunk([{"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x"'}}]),
        chunk([{"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}}]),
        chunk([{"index": 0, "function": {"arguments": ":1}"}}]),
        chunk([{"index": 1, "function": {"arguments": ":2}"}}], "tool_calls"),
    ]
    _, chunks = feed_events(events)
    result = aggregate(chunks).result
    assert result is not None
    assert result.output.tool_calls == (ToolCall("a", "f", '{"x":1}'), ToolCall("b", "g", '{"y":2}'))


def test_stream_without_done_is_not_finished() -> None:
    parser, _ = feed_events(openai_stream(), done=False)
    assert not parser.done


def test_stream_malformed_json_raises() -> None:
    parser = OpenAIStreamParser()
    parser.feed("data: {not json")
    with pytest.raises(ModelResponseError, match="malformed JSON"):
        parser.feed("")


def test_stream_error_event_raises() -> None:
    parser = OpenAIStreamParser()
    parser.feed('data: {"error": {"message": "overloaded"}}')
    with pytest.raises(ModelResponseError, match="overloaded"):
        parser.feed("")


def test_stream_repeated_id_and_name_in_every_fragment() -> None:
    # llama-cpp-python's server repeats the call id and name in each fragment.
    def chunk(args: str, finish: str | None = None) -> dict[str, Any]:
        call = {"index": 0, "id": "call_x", "type": "function", "function": {"name": "f", "arguments": args}}
        return {
            "id": "x",
            "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": finish}],
        }

    _, chunks = feed_events([chunk('{"a"'), chunk(": 1"), chunk("}", "tool_calls")])
    assert [c.result.output.tool_calls[0].name for c in chunks[:3] if c.result] == ["f", "", ""]
    result = aggregate(chunks).result
    assert result is not None and result.output.tool_calls == (ToolCall("call_x", "f", '{"a": 1}'),)


def test_json_object_schema_style() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = build_chat_body(
        Prompt("x"), ChatOptions(model="m", output_schema=schema), stream=False, schema_style="json_object"
    )
    assert body["response_format"] == {"type": "json_object", "schema": schema}
