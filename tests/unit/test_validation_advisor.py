"""StructuredOutputValidationAdvisor: validation, re-asking, limits, usage, tool calls, streams."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, field_validator

from advisors import StructuredOutputValidationAdvisor
from advisors.validation import StructuredOutputValidationAdvisor as DirectImport
from chatclient import (
    STRUCTURED_OUTPUT_VALIDATION_ORDER,
    AssistantMessage,
    ChatClient,
    ChatResponse,
    ToolCall,
    Usage,
)
from chatclient.converters import converter_for
from chatclient.errors import OutputConversionError
from chatclient.testing import ScriptedChatModel


class Actor(BaseModel):
    name: str
    age: int


class Even(BaseModel):
    n: int

    @field_validator("n")
    @classmethod
    def even(cls, v: int) -> int:
        if v % 2:
            raise ValueError("n must be even")
        return v


GOOD = '{"name": "Ada", "age": 36}'
BAD_TYPE = '{"name": "Ada", "age": "old"}'
BAD_MISSING = '{"name": "Ada"}'
QUESTION = "Who is Ada?"


def _texts(model: ScriptedChatModel) -> list[str]:
    return [p.user_message.text for p in model.prompts]


def _client(model: ScriptedChatModel, advisor: StructuredOutputValidationAdvisor) -> ChatClient:
    return ChatClient.builder(model).default_advisors(advisor).build()


def test_is_exported_from_advisors_with_the_documented_defaults() -> None:
    assert StructuredOutputValidationAdvisor is DirectImport
    advisor = StructuredOutputValidationAdvisor(Actor)
    assert advisor.max_repeat_attempts == 3
    assert advisor.order == STRUCTURED_OUTPUT_VALIDATION_ORDER


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"output_type": None}, ValueError),
        ({"output_type": Actor, "max_repeat_attempts": -1}, ValueError),
        ({"output_type": Actor, "order": 2**31 - 1}, ValueError),
        ({"output_type": Actor, "order": -(2**31)}, ValueError),
    ],
)
def test_rejects_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        StructuredOutputValidationAdvisor(**kwargs)


def test_valid_first_answer_makes_one_call_and_adds_nothing() -> None:
    model = ScriptedChatModel([GOOD])
    actor = _client(model, StructuredOutputValidationAdvisor(Actor)).prompt(QUESTION).call().entity(Actor)
    assert actor == Actor(name="Ada", age=36)
    assert len(model.prompts) == 1
    assert "rejected" not in model.last_prompt.user_message.text


def test_wrapped_but_valid_answer_is_accepted_without_reasking() -> None:
    model = ScriptedChatModel(["<think>easy</think>\n```json\n" + GOOD + "\n```"])
    actor = _client(model, StructuredOutputValidationAdvisor(Actor)).prompt(QUESTION).call().entity(Actor)
    assert actor == Actor(name="Ada", age=36)
    assert len(model.prompts) == 1


def test_reasks_with_original_request_plus_one_line_naming_every_error() -> None:
    model = ScriptedChatModel(['{"age": "old"}', GOOD])
    client = _client(model, StructuredOutputValidationAdvisor(Actor))
    assert client.prompt(QUESTION).call().entity(Actor) == Actor(name="Ada", age=36)
    assert len(model.prompts) == 2
    fmt = converter_for(Actor).format
    first, second = _texts(model)
    assert first == f"{QUESTION}\n{fmt}"
    prefix = f"{QUESTION}\n"
    assert second.startswith(prefix)
    assert second.endswith(f"\n{fmt}")  # the terminal advisor still appends the instructions last
    feedback = second[len(prefix) : -len(fmt) - 1]
    assert "\n" not in feedback  # exactly one line
    assert "at $.age: 'old' is not of type 'integer'" in feedback
    assert "at $: 'name' is a required property" in feedback


def test_errors_never_accumulate_across_attempts() -> None:
    model = ScriptedChatModel([BAD_TYPE, BAD_MISSING, GOOD])
    client = _client(model, StructuredOutputValidationAdvisor(Actor))
    assert client.prompt(QUESTION).call().entity(Actor) == Actor(name="Ada", age=36)
    texts = _texts(model)
    assert len(texts) == 3
    assert "'old' is not of type" in texts[1]
    assert "'age' is a required property" not in texts[1]
    assert "'age' is a required property" in texts[2]
    assert "'old' is not of type" not in texts[2]  # the first attempt's error is gone
    assert texts[2].count("rejected") == 1


def test_pydantic_field_validators_count_as_validation() -> None:
    model = ScriptedChatModel(['{"n": 3}', '{"n": 4}'])
    result = _client(model, StructuredOutputValidationAdvisor(Even)).prompt("n?").call().entity(Even)
    assert result == Even(n=4)
    assert "at $.n: Value error, n must be even" in model.prompts[1].user_message.text


def test_prose_wrapped_json_is_reasked_as_invalid_json() -> None:
    model = ScriptedChatModel(["Here it is: " + GOOD, GOOD])
    result = _client(model, StructuredOutputValidationAdvisor(Actor)).prompt(QUESTION).call().entity(Actor)
    assert result == Actor(name="Ada", age=36)
    assert "not valid JSON" in model.prompts[1].user_message.text


@pytest.mark.parametrize(("attempts", "calls"), [(0, 1), (2, 3), (3, 4)])
def test_gives_up_after_max_repeat_attempts_plus_one_calls_and_returns_the_last(attempts: int, calls: int) -> None:
    answers = [f'{{"name": "Ada", "age": "v{i}"}}' for i in range(calls)]
    model = ScriptedChatModel([*answers, GOOD])  # a good answer exists but must never be reached
    client = _client(model, StructuredOutputValidationAdvisor(Actor, max_repeat_attempts=attempts))
    spec = client.prompt(QUESTION).call()
    with pytest.raises(OutputConversionError):
        spec.entity(Actor)
    assert spec.content() == answers[-1]
    assert len(model.prompts) == calls
    assert model.remaining == 1


def test_usage_of_every_attempt_is_summed() -> None:
    model = ScriptedChatModel(
        [
            ChatResponse.of_text(BAD_TYPE, usage=Usage(10, 1)),
            ChatResponse.of_text(BAD_MISSING, usage=Usage(20, 2)),
            ChatResponse.of_text(GOOD, usage=Usage(30, 3)),
        ]
    )
    response = _client(model, StructuredOutputValidationAdvisor(Actor)).prompt(QUESTION).call().chat_response()
    assert response is not None
    assert response.metadata.usage == Usage(60, 6)
    assert response.metadata.extra["validation_attempts"] == 3


def test_tool_call_responses_pass_through_unvalidated() -> None:
    call = AssistantMessage(None, (ToolCall("1", "lookup", "{}"),))
    model = ScriptedChatModel([call])
    response = _client(model, StructuredOutputValidationAdvisor(Actor)).prompt(QUESTION).call().chat_response()
    assert response is not None
    assert response.has_tool_calls()
    assert len(model.prompts) == 1


async def test_acall_reasks_and_sums_usage() -> None:
    model = ScriptedChatModel(
        [ChatResponse.of_text(BAD_TYPE, usage=Usage(5, 5)), ChatResponse.of_text(GOOD, usage=Usage(7, 7))]
    )
    client = _client(model, StructuredOutputValidationAdvisor(Actor))
    result = await client.prompt(QUESTION).acall().response_entity(Actor)
    assert result.entity == Actor(name="Ada", age=36)
    assert result.response is not None
    assert result.response.metadata.usage == Usage(12, 12)
    assert len(model.prompts) == 2
    assert "'old' is not of type 'integer'" in model.prompts[1].user_message.text


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_streams_buffer_validate_reask_and_replay_only_the_good_attempt(mode: str) -> None:
    bad_chunks = ['{"name": "Ada", ', '"age": "old"}']
    good_chunks = ['{"name": ', '"Ada", "age"', ": 36}"]
    model = ScriptedChatModel([bad_chunks, good_chunks])
    client = _client(model, StructuredOutputValidationAdvisor(Actor))
    if mode == "stream":
        responses = list(client.prompt(QUESTION).stream().chat_response())
    else:
        responses = [r async for r in client.prompt(QUESTION).astream().chat_response()]
    assert [r.text for r in responses] == good_chunks
    assert len(model.prompts) == 2
    assert "'old' is not of type 'integer'" in model.prompts[1].user_message.text
    # word-count usage of the scripted model, summed over both attempts, on the last chunk
    first_usage = Usage(len(model.prompts[0].contents.split()), len("".join(bad_chunks).split()))
    second_usage = Usage(len(model.prompts[1].contents.split()), len("".join(good_chunks).split()))
    assert responses[-1].metadata.usage == first_usage + second_usage
    assert responses[-1].metadata.extra["validation_attempts"] == 2


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_stream_entity_with_validation_yields_the_good_attempt(mode: str) -> None:
    model = ScriptedChatModel([[BAD_MISSING], ['{"name": "Ada",', ' "age": 36}']])
    client = _client(model, StructuredOutputValidationAdvisor(Actor))
    if mode == "stream":
        items = list(client.prompt(QUESTION).stream().entity(Actor))
    else:
        items = [a async for a in client.prompt(QUESTION).astream().entity(Actor)]
    assert items[-1] == Actor(name="Ada", age=36)
    assert len(model.prompts) == 2


def test_validate_lists_every_problem() -> None:
    advisor = StructuredOutputValidationAdvisor(Actor)
    assert advisor.validate(GOOD) == []
    assert advisor.validate(None) == ["at $: the answer has no JSON (it is empty)"]
    errors = advisor.validate('{"age": "x", "extra": 1}')
    assert "at $: 'name' is a required property" in errors
    assert "at $.age: 'x' is not of type 'integer'" in errors
    assert any("Additional properties are not allowed" in e for e in errors)
