"""Partial entities: stream().entity(T) / astream().entity(T) and the functions behind them."""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import AsyncIterator, Iterable
from typing import Any, TypedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from chatclient import ChatClient
from chatclient.converters import (
    EntityOutputConverter,
    ListOutputConverter,
    astream_entities,
    parse_partial_json,
    stream_entities,
)
from chatclient.converters.partial import _NOTHING
from chatclient.errors import OutputConversionError
from chatclient.testing import ScriptedChatModel


class Mood(enum.Enum):
    HAPPY = "happy"
    GRUMPY = "grumpy"


class Pet(BaseModel):
    name: str
    legs: int = 4


class Owner(BaseModel):
    name: str
    mood: Mood
    pets: list[Pet] = Field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


class Note(TypedDict):
    title: str
    body: str


OWNER_JSON = '{"name": "Ada Lovelace", "mood": "happy", "pets": [{"name": "Rex", "legs": 3}, {"name": "Tom"}]}'
OWNER = Owner(name="Ada Lovelace", mood=Mood.HAPPY, pets=[Pet(name="Rex", legs=3), Pet(name="Tom")])


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _assert_no_consecutive_duplicates(items: list[Any]) -> None:
    for a, b in itertools.pairwise(items):
        assert a != b


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_client_stream_entity_yields_growing_partials_then_the_validated_object(mode: str) -> None:
    model = ScriptedChatModel([_chunks(OWNER_JSON, 3)])
    spec = ChatClient.create(model).prompt("Describe Ada")
    items = list(spec.stream().entity(Owner)) if mode == "stream" else [o async for o in spec.astream().entity(Owner)]
    assert items[-1] == OWNER
    assert len(items) > 5  # partial states really were produced while streaming
    _assert_no_consecutive_duplicates(items)
    first = items[0]
    assert isinstance(first, Owner)
    assert first.name is None and first.mood is None and first.pets == []  # not received: None, or default
    names = [o.name for o in items if o.name]
    assert names == sorted(names, key=len)  # the string only grows
    assert all(OWNER.name.startswith(n) for n in names)
    assert any(o.name == "Ada Lovelace" and o.mood is None for o in items)  # before the mood arrived
    pet_counts = [len(o.pets) for o in items]
    assert pet_counts == sorted(pet_counts)
    assert "JSON Schema" in model.last_prompt.user_message.text  # instructions are sent when streaming too


def test_partial_enum_stays_none_until_complete_and_numbers_are_not_cut() -> None:
    deltas = ['{"name": "A", "mood": "ha', 'ppy", "pets": [{"name": "R", "legs": 1', "2", "}]}"]
    items = list(stream_entities(EntityOutputConverter(Owner), deltas))
    assert items[0].mood is None
    assert all(o.mood in (None, Mood.HAPPY) for o in items)
    legs = [o.pets[0].legs for o in items if o.pets]
    assert 1 not in legs  # "1" was the start of "12", never shown
    assert items[-1] == Owner(name="A", mood=Mood.HAPPY, pets=[Pet(name="R", legs=12)])


def test_thinking_block_and_fence_are_skipped_while_streaming() -> None:
    text = "<think>Let me think {about it}</think>\n```json\n" + '{"x": 1, "y": 2}' + "\n```"
    items = list(stream_entities(EntityOutputConverter(Point), _chunks(text, 2)))
    assert items[-1] == Point(1, 2)
    assert all(isinstance(p, Point) for p in items)
    _assert_no_consecutive_duplicates(items)


def test_dataclass_typeddict_list_and_map_partials() -> None:
    points = list(stream_entities(EntityOutputConverter(list[Point]), ['[{"x": 1, "y": 2}, ', '{"x": 3', ', "y": 4}]']))
    assert points[0] == [Point(1, 2)]
    assert points[-1] == [Point(1, 2), Point(3, 4)]
    notes = list(stream_entities(EntityOutputConverter(Note), ['{"title": "Hi", "bo', 'dy": "there"}']))
    assert notes[0] == {"title": "Hi"}  # a TypedDict holds only the keys received so far
    assert notes[-1] == {"title": "Hi", "body": "there"}
    maps = list(stream_entities(EntityOutputConverter(dict[str, int]), ['{"a": 1, ', '"b": 2}']))
    assert maps == [{"a": 1}, {"a": 1, "b": 2}]


def test_none_and_empty_deltas_are_ignored() -> None:
    items = list(stream_entities(EntityOutputConverter(Point), [None, "", '{"x": 5, ', None, '"y": 6}', ""]))
    assert items[-1] == Point(5, 6)
    assert list(stream_entities(EntityOutputConverter(Point), [None, None])) == []


def test_invalid_final_text_raises_after_the_partials() -> None:
    seen: list[Any] = []
    with pytest.raises(OutputConversionError, match="Point"):
        for item in stream_entities(EntityOutputConverter(Point), ['{"x": 1,', ' "y": "north"}']):
            seen.append(item)
    assert seen  # partials were delivered before the failure


def test_list_converter_yields_complete_items_as_they_arrive() -> None:
    items = list(stream_entities(ListOutputConverter(), ["red, gr", "een, bl", "ue"]))
    assert items == [["red"], ["red", "green"], ["red", "green", "blue"]]


def test_custom_converter_gets_only_its_final_value() -> None:
    class Upper:
        format = "Answer in words."
        json_schema = None

        def convert(self, text: str) -> str:
            return text.upper()

    assert list(stream_entities(Upper(), ["ab", "cd"])) == ["ABCD"]


async def test_astream_entities_matches_stream_entities() -> None:
    deltas = _chunks(OWNER_JSON, 5)

    async def agen(parts: Iterable[str]) -> AsyncIterator[str | None]:
        for p in parts:
            yield p

    async_items = [o async for o in astream_entities(EntityOutputConverter(Owner), agen(deltas))]
    assert async_items == list(stream_entities(EntityOutputConverter(Owner), deltas))


def test_parse_partial_json_waits_for_an_open_thinking_block_and_fence_line() -> None:
    assert parse_partial_json("<think>still thinking {") is _NOTHING
    assert parse_partial_json("```js") is _NOTHING
    assert parse_partial_json("```json") is _NOTHING
    assert parse_partial_json('```json {"a": 1, ') == {"a": 1}
    assert parse_partial_json('```json\n{"a": "b') == {"a": "b"}
    assert parse_partial_json('{"a": 12') is _NOTHING  # the number may go on
    assert parse_partial_json('{"a": 12,') == {"a": 12}


@settings(max_examples=80, deadline=None, derandomize=True)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(OWNER_JSON) - 1), max_size=25, unique=True))
def test_any_split_of_the_text_ends_with_the_full_object_and_no_duplicates(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(OWNER_JSON)]
    deltas = [OWNER_JSON[a:b] for a, b in itertools.pairwise(bounds)]
    items = list(stream_entities(EntityOutputConverter(Owner), deltas))
    assert items[-1] == OWNER
    _assert_no_consecutive_duplicates(items)
    assert all(isinstance(o, Owner) for o in items)


def test_a_value_of_the_wrong_kind_gives_no_partial_state_and_the_final_error() -> None:
    seen: list[Any] = []
    with pytest.raises(OutputConversionError, match="Point"):
        for item in stream_entities(EntityOutputConverter(Point), ["[1, ", "2]"]):
            seen.append(item)
    assert seen == []  # never a None (or list) posing as a partial Point
    assert list(stream_entities(EntityOutputConverter(Point | None), ["nu", "ll"])) == [None]  # a real final None
