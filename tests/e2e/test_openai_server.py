"""OpenAIChatModel against a real OpenAI-compatible server: llama-cpp-python serving Gemma 3 270M.

The ``llama_server`` fixture (tests/e2e/conftest.py) starts ``python -m llama_cpp.server`` with the
``chatml-function-calling`` chat format on a free loopback port; these tests skip only when the
``local`` extra is not installed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import jsonschema  # type: ignore[import-untyped]
import pytest

from chatclient.models.base import ChatResponse, aggregate
from chatclient.models.openai import OpenAIChatModel
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

pytestmark = pytest.mark.e2e

WEATHER = ToolDefinition(
    "get_weather",
    "Get the current weather for a city",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


@pytest.fixture(scope="module")
def model(llama_server: str) -> Iterator[OpenAIChatModel]:
    # llama-cpp-python's server takes {"type": "json_object", "schema": ...} for schemas; an empty
    # api_key sends no Authorization header whatever OPENAI_API_KEY holds.
    with OpenAIChatModel(
        "gemma-3-270m",
        base_url=llama_server,
        api_key="",
        timeout=120.0,
        structured_output="json_object",
        options=ChatOptions(temperature=0.0, seed=42, max_tokens=48),
    ) as m:
        yield m


def test_plain_call(model: OpenAIChatModel) -> None:
    response = model.call(Prompt("Say hello in one short sentence."))
    assert response.text and response.text.strip()
    assert response.result is not None and response.result.finish_reason in ("stop", "length")
    assert response.metadata.usage.prompt_tokens > 0 and response.metadata.usage.completion_tokens > 0


def test_streaming(model: OpenAIChatModel) -> None:
    chunks = list(model.stream(Prompt("Write a short poem about the sea.")))
    assert len(chunks) > 2  # really streamed, not one blob
    text_chunks = [c for c in chunks if c.text]
    assert len(text_chunks) > 1
    merged = aggregate(chunks)
    assert merged.text and merged.text.strip()
    assert chunks[-1].result is not None and chunks[-1].result.finish_reason in ("stop", "length")


def test_async_streaming(model: OpenAIChatModel) -> None:
    async def collect() -> list[ChatResponse]:
        return [c async for c in model.astream(Prompt("Name a colour."))]

    merged = aggregate(asyncio.run(collect()))
    assert merged.text and merged.text.strip()


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
def test_forced_tool_call(model: OpenAIChatModel, streamed: bool) -> None:
    prompt = Prompt(
        "What is the weather in Paris right now?",
        ChatOptions(tool_choice="get_weather", max_tokens=64),
        tools=[WEATHER],
    )
    response = aggregate(model.stream(prompt)) if streamed else model.call(prompt)
    assert response.result is not None
    calls = response.result.output.tool_calls
    assert len(calls) >= 1
    assert calls[0].name == "get_weather"
    assert calls[0].id
    arguments = json.loads(calls[0].arguments)
    jsonschema.validate(arguments, WEATHER.input_schema)
    assert response.result.finish_reason == "tool_calls"


def test_output_schema_produces_valid_json(model: OpenAIChatModel) -> None:
    prompt = Prompt(
        "Invent a person and give their name and age as JSON.",
        ChatOptions(output_schema=PERSON, max_tokens=64),
    )
    response = model.call(prompt)
    assert response.text is not None
    jsonschema.validate(json.loads(response.text), PERSON)
