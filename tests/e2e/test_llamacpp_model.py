"""LlamaCppChatModel on the real model: the four modes, usage, finish reasons, forced tools, locking.

Greedy decoding (temperature 0) with a fixed seed makes every answer reproducible, so the modes
can be compared answer for answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from chatclient.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import ChatResponse, Generation, aggregate
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

pytestmark = pytest.mark.e2e

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
GREEDY = ChatOptions(temperature=0.0, seed=42, max_tokens=48)
WEATHER = ToolDefinition(
    "get_weather",
    "Current weather of a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolDefinition(
    "get_time",
    "Current local time in a city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def first(response: ChatResponse) -> Generation:
    assert response.result is not None
    return response.result


def person_prompt(text: str = "Alice Smith is 34 years old.") -> Prompt:
    return Prompt(f"Extract the person (name, age) from this text: {text}", GREEDY.copy(output_schema=PERSON_SCHEMA))


def collect_astream(model: Any, prompt: Prompt) -> list[ChatResponse]:
    async def run() -> list[ChatResponse]:
        return [c async for c in model.astream(prompt)]

    return asyncio.run(run())


def test_call_gives_schema_valid_json_usage_and_finish_reason(local_model: Any, gguf_path: str) -> None:
    response = local_model.call(person_prompt())
    assert json.loads(response.text) == {"name": "Alice Smith", "age": 34}
    assert first(response).finish_reason == "stop"
    usage = response.metadata.usage
    assert usage.prompt_tokens > 10 and usage.completion_tokens > 5
    assert response.metadata.model == gguf_path.rsplit("/", 1)[-1]


def test_the_four_modes_give_the_same_answer_and_usage(local_model: Any) -> None:
    prompt = person_prompt("Bob Jones, 52, is a carpenter.")
    called = local_model.call(prompt)
    chunks = list(local_model.stream(prompt))
    streamed = aggregate(chunks)
    acalled = asyncio.run(local_model.acall(prompt))
    achunks = collect_astream(local_model, prompt)
    # streaming is native: one chunk per few tokens, not the whole answer in one piece
    assert len(chunks) > 5 and len(achunks) == len(chunks)
    # only the last chunk carries the finish reason and the usage
    assert [c.has_finish_reason() for c in chunks].count(True) == 1 and chunks[-1].has_finish_reason()
    for other in (streamed, acalled, aggregate(achunks)):
        assert other.text == called.text
        assert first(other).finish_reason == first(called).finish_reason == "stop"
        assert other.metadata.usage == called.metadata.usage


def test_max_tokens_cuts_the_answer_with_finish_reason_length(local_model: Any) -> None:
    # a JSON schema keeps the model from ending early: the grammar admits no end before the object closes
    prompt = person_prompt().copy(options=GREEDY.copy(output_schema=PERSON_SCHEMA, max_tokens=4))
    response = local_model.call(prompt)
    assert first(response).finish_reason == "length"
    assert response.metadata.usage.completion_tokens == 4
    streamed = aggregate(local_model.stream(prompt))
    assert first(streamed).finish_reason == "length"
    assert streamed.metadata.usage.completion_tokens == 4


def test_forced_tool_call_in_call_and_stream(local_model: Any) -> None:
    prompt = Prompt(
        "What is the weather like in Oslo today?", GREEDY.copy(tool_choice="get_weather"), tools=[WEATHER, TIME]
    )
    response = local_model.call(prompt)
    assert first(response).finish_reason == "tool_calls"
    (call,) = first(response).output.tool_calls
    assert call.name == "get_weather" and call.id
    assert json.loads(call.arguments) == {"city": "Oslo"}

    chunks = list(local_model.stream(prompt))
    assert len(chunks) > 2  # the arguments arrive as tool-call deltas
    (streamed_call,) = first(aggregate(chunks)).output.tool_calls
    assert streamed_call.name == "get_weather"
    assert json.loads(streamed_call.arguments) == {"city": "Oslo"}
    assert first(aggregate(chunks)).finish_reason == "tool_calls"


def test_required_tool_choice_lets_the_model_pick_among_the_tools(default_model: Any) -> None:
    # The instruction-tuned default model: the Gemma base model, with its own turn format, picks
    # get_weather here (it did pick right under the Llama 2 format it was never trained on).
    prompt = Prompt("What time is it now in Tokyo?", GREEDY.copy(tool_choice="required"), tools=[WEATHER, TIME])
    for response in (default_model.call(prompt), aggregate(default_model.stream(prompt))):
        (call,) = first(response).output.tool_calls
        assert call.name == "get_time"
        assert json.loads(call.arguments)["city"].lower() == "tokyo"  # SmolLM2 writes "tokyo"
        assert first(response).finish_reason == "tool_calls"


def test_after_a_tool_result_the_model_answers_instead_of_calling_again(local_model: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "conditions": {"type": "string"}},
        "required": ["city", "conditions"],
    }
    prompt = Prompt(
        [
            SystemMessage("You report the weather."),
            UserMessage("What is the weather like in Oslo?"),
            AssistantMessage(None, (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),)),
            ToolResponseMessage((ToolResponse("c1", "get_weather", '{"city": "Oslo", "conditions": "foggy"}'),)),
        ],
        GREEDY.copy(tool_choice="get_weather", output_schema=schema),
        tools=[WEATHER],
    )
    response = local_model.call(prompt)
    assert not response.has_tool_calls()
    assert json.loads(response.text) == {"city": "Oslo", "conditions": "foggy"}


def test_concurrent_calls_on_one_instance_are_serialised(local_model: Any) -> None:
    # A llama.cpp context is not thread-safe: without the model's lock these calls would interleave
    # in one KV cache and corrupt each other (or crash). With it, each matches the sequential answer.
    prompts = [person_prompt("Carla Gomez is 28."), person_prompt("Ivan Petrov is 70.")]
    expected = [local_model.call(p).text for p in prompts]
    results: dict[int, str | None] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            results[i] = local_model.call(prompts[i % 2]).text
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [results[i] for i in range(4)] == [expected[0], expected[1], expected[0], expected[1]]


async def test_acall_leaves_the_event_loop_free(local_model: Any) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    try:
        response = await local_model.acall(person_prompt())
    finally:
        task.cancel()
    assert json.loads(response.text)["name"] == "Alice Smith"
    # inference took far longer than 10 ms; had it run on the loop, the ticker could not have run
    assert ticks >= 3


def test_missing_model_file_is_a_clear_error(tmp_path: Any) -> None:
    from chatclient.models.llamacpp import LlamaCppChatModel

    with pytest.raises(FileNotFoundError, match="no model file"):
        LlamaCppChatModel(tmp_path / "absent.gguf")


def test_grammar_prefilter_picks_what_the_full_grammar_check_picks(local_model: Any) -> None:
    # Greedy decoding: checking the likely tokens first must not change a single token.
    prompts = [
        person_prompt("Kenji Sato, 63, sent a letter from Tokyo."),
        Prompt("Weather in Lima?", GREEDY.copy(tool_choice="required"), tools=[WEATHER, TIME]),
    ]
    fast = [local_model.call(p).result for p in prompts]
    k = local_model.grammar_prefilter_k
    local_model.grammar_prefilter_k = 0  # the stock llama-cpp-python path: the grammar checks the whole vocabulary
    try:
        full = [local_model.call(p).result for p in prompts]
    finally:
        local_model.grammar_prefilter_k = k
    assert [g.output.text for g in fast] == [g.output.text for g in full]
    assert [[(c.name, c.arguments) for c in g.output.tool_calls] for g in fast] == [
        [(c.name, c.arguments) for c in g.output.tool_calls] for g in full
    ]


def test_a_prompt_longer_than_the_context_is_a_model_error(local_model: Any) -> None:
    from chatclient.errors import ModelError

    prompt = Prompt("word " * 3000, GREEDY)  # n_ctx is 2048 in this suite
    with pytest.raises(ModelError, match="context window"):
        local_model.call(prompt)
    with pytest.raises(ModelError, match="context window"):
        list(local_model.stream(prompt))
    # the model is still usable afterwards
    assert json.loads(local_model.call(person_prompt()).text)["age"] == 34
