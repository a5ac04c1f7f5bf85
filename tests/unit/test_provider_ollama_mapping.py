"""Ollama /api/chat mapping: request bodies (golden JSON), responses and NDJSON stream lines."""

from __future__ import annotations

import json

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
from chatclient.models.base import ChatResponse, Usage, aggregate
from chatclient.models.ollama import OllamaStreamParser, build_chat_body, parse_chat
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support.loopback import ollama_chat, ollama_stream

WEATHER = ToolDefinition(
    "get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def test_full_request_body_golden() -> None:
    prompt = Prompt(
        [
            SystemMessage("Be brief."),
            UserMessage("What is in it?", media=(Media("image/png", b"\x89PNG"),)),
            AssistantMessage(None, (ToolCall("call_0", "get_weather", '{"city": "Oslo"}'),)),
            ToolResponseMessage((ToolResponse("call_0", "get_weather", "-3C"),)),
        ],
        ChatOptions(
            model="llama-x",
            temperature=0.3,
            top_k=20,
            max_tokens=64,
            stop=["\n\n"],
            seed=5,
            tool_choice="auto",  # Ollama has no such setting: not sent
            output_schema=SCHEMA,
            extra={"keep_alive": "5m", "options": {"num_ctx": 4096}},
        ),
        tools=[WEATHER],
    )
    body = build_chat_body(prompt, prompt.options or ChatOptions(), stream=False)
    assert body == {
        "model": "llama-x",
        "stream": False,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is in it?", "images": ["iVBORw=="]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}],
            },
            {"role": "tool", "content": "-3C", "tool_name": "get_weather"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather by city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
                },
            }
        ],
        "format": SCHEMA,
        "options": {"temperature": 0.3, "top_k": 20, "num_predict": 64, "seed": 5, "stop": ["\n\n"], "num_ctx": 4096},
        "keep_alive": "5m",
    }


def test_image_urls_are_rejected() -> None:
    with pytest.raises(ValueError, match="inline image bytes"):
        build_chat_body(
            Prompt(UserMessage("x", media=(Media("image/png", "https://e/x.png"),))),
            ChatOptions(model="m"),
            stream=True,
        )


def test_parse_text_and_tool_calls() -> None:
    r = parse_chat(ollama_chat("Hi", usage=(3, 1)))
    assert r.text == "Hi" and r.metadata.usage == Usage(3, 1)
    assert r.result is not None and r.result.finish_reason == "stop"
    r = parse_chat(ollama_chat("", tool_calls=[("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Bergen"})]))
    assert r.result is not None
    assert r.result.output == AssistantMessage(
        None,
        (
            ToolCall("call_0", "get_weather", '{"city": "Oslo"}'),
            ToolCall("call_1", "get_weather", '{"city": "Bergen"}'),
        ),
    )
    assert r.result.finish_reason == "tool_calls"  # Ollama says "stop"
    assert r.result.metadata.extra["raw_finish_reason"] == "stop"


def test_parse_length_and_error() -> None:
    r = parse_chat(ollama_chat("cut", done_reason="length"))
    assert r.result is not None and r.result.finish_reason == "length"
    with pytest.raises(ModelResponseError, match="model 'x' not found"):
        parse_chat({"error": "model 'x' not found"})


def feed(lines: list[object]) -> tuple[OllamaStreamParser, list[ChatResponse]]:
    parser = OllamaStreamParser()
    chunks: list[ChatResponse] = []
    for line in lines:
        chunks += parser.feed(json.dumps(line))
    if parser.done:
        chunks += parser.finish()
    return parser, chunks


def test_stream_aggregates_to_chat() -> None:
    _, chunks = feed(list(ollama_stream(["Let me ", "see."], tool_calls=[("get_weather", {"city": "Oslo"})])))
    expected = parse_chat(ollama_chat("Let me see.", tool_calls=[("get_weather", {"city": "Oslo"})]))
    assert aggregate(chunks) == expected
    assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "tool_calls"
    assert chunks[-1].metadata.usage == Usage(11, 5)


def test_stream_without_done_is_not_done_and_error_line_raises() -> None:
    parser, _ = feed(list(ollama_stream(done=False)))
    assert not parser.done
    with pytest.raises(ModelResponseError, match="boom"):
        OllamaStreamParser().feed('{"error": "boom"}')
    with pytest.raises(ModelResponseError, match="malformed JSON"):
        OllamaStreamParser().feed('{"message": ')
