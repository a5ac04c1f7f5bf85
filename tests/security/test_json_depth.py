"""JSON nested deeper than the parsers take is the library's typed error at every parse site, never RecursionError."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from advisors import StructuredOutputValidationAdvisor
from chatclient import ChatClient
from chatclient.converters import EntityOutputConverter
from chatclient.converters.cleaning import first_json_value, too_deep
from chatclient.converters.partial import parse_partial_json, stream_entities
from chatclient.errors import OutputConversionError, ToolExecutionError
from chatclient.memory.serialization import message_from_json, message_to_json, messages_from_json
from chatclient.messages import AssistantMessage, ToolCall, UserMessage
from chatclient.prompt import Prompt
from chatclient.rag.etl import JsonReader
from chatclient.testing import ScriptedChatModel, response_for
from chatclient.tools import ToolCallingManager, tool

DEEP_TEXTS = {
    "open arrays": "[" * 100_000,
    "closed arrays": "[" * 50_000 + "]" * 50_000,
    "objects": '{"a":' * 20_000 + "1" + "}" * 20_000,
    "past pydantic, under python": "[" * 700 + "]" * 700,
}
DEEP = list(DEEP_TEXTS.values())
IDS = list(DEEP_TEXTS.keys())


class Box(BaseModel):
    a: Any = None


@pytest.mark.parametrize("text", DEEP, ids=IDS)
@pytest.mark.parametrize("target", [list, dict, Box, str])
def test_entity_conversion_is_an_output_conversion_error(text: str, target: Any) -> None:
    converter = EntityOutputConverter(target)
    if target is str:
        assert converter.convert(text) == text  # a str target takes any text as it is
        return
    with pytest.raises(OutputConversionError):
        converter.convert(text)


@pytest.mark.parametrize("text", DEEP, ids=IDS)
def test_partial_entities_end_in_output_conversion_error(text: str) -> None:
    half = len(text) // 2
    with pytest.raises(OutputConversionError):
        list(stream_entities(EntityOutputConverter(list[Any]), [text[:half], text[half:]]))


@pytest.mark.parametrize("text", DEEP, ids=IDS)
def test_partial_parser_bounds_depth_without_recursion(text: str) -> None:
    start = time.perf_counter()
    parse_partial_json(text)  # no usable state or a value; never an exception
    assert time.perf_counter() - start < 1.0


def test_first_json_value_and_depth_check() -> None:
    assert first_json_value("[" * 100_000) is None
    assert first_json_value("[[1]] and a remark") == "[[1]]"
    assert too_deep("[" * 600) and not too_deep("[" * 10)
    assert not too_deep('"' + "[" * 600 + '"')  # brackets inside a string do not nest


@tool
def echo(value: Any) -> str:
    """Echo the value's type."""
    return type(value).__name__


PROMPT = Prompt([UserMessage("q")])


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_deep_tool_arguments_become_an_error_tool_response(mode: str) -> None:
    arguments = '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = response_for(PROMPT, AssistantMessage(tool_calls=(ToolCall("c0", "echo", arguments),)))
    manager = ToolCallingManager()
    if mode == "sync":
        result = manager.execute(PROMPT, response, tools=[echo])
    else:
        result = await manager.aexecute(PROMPT, response, tools=[echo])
    (tool_response,) = result.tool_response_message.responses
    assert tool_response.is_error and "nests deeper" in tool_response.response_data
    strict = ToolCallingManager(raise_on_tool_error=True)
    with pytest.raises(ToolExecutionError, match="nests deeper"):
        if mode == "sync":
            strict.execute(PROMPT, response, tools=[echo])
        else:
            await strict.aexecute(PROMPT, response, tools=[echo])


@pytest.mark.parametrize("text", DEEP, ids=IDS)
def test_memory_records_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError):
        message_from_json(text)
    with pytest.raises(ValueError):
        messages_from_json(text)


def test_deep_metadata_is_refused_on_write_and_on_read() -> None:
    nested: dict[str, Any] = {}
    node = nested
    for _ in range(5_000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ValueError, match="nests too deeply"):
        message_to_json(UserMessage("x", metadata={"deep": nested}))
    record = '{"v":1,"type":"user","text":"x","metadata":{"a":' + '{"a":' * 5_000 + "1" + "}" * 5_001 + "}"
    with pytest.raises(ValueError):
        message_from_json(record)


def test_validation_advisor_reasks_after_a_too_deep_answer() -> None:
    good = '{"a": 1}'
    model = ScriptedChatModel(["[" * 100_000, "[" * 700 + "]" * 700, good])
    client = ChatClient.builder(model).default_advisors(StructuredOutputValidationAdvisor(Box)).build()
    assert client.prompt("q").call().entity(Box) == Box(a=1)
    assert len(model.prompts) == 3
    assert "nests too deeply" in model.prompts[1].user_message.text


def test_json_reader_refuses_a_deep_file(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(ValueError, match="nests deeper"):
        JsonReader(path).read()


class Node(BaseModel):
    c: list[Node] = []


Node.model_rebuild()


def test_validation_advisor_reasks_when_a_recursive_schema_meets_a_deep_answer() -> None:
    deep = '{"c":[' * 250 + "]}" * 250  # within the JSON bound, beyond what the validator can walk
    model = ScriptedChatModel([deep, '{"c": [{"c": []}]}'])
    client = ChatClient.builder(model).default_advisors(StructuredOutputValidationAdvisor(Node)).build()
    assert client.prompt("q").call().entity(Node) == Node(c=[Node()])
    assert len(model.prompts) == 2
    assert "nests too deeply" in model.prompts[1].user_message.text
