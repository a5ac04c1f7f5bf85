"""Converters: text cleaning, strict schemas, conversion of every supported target, bad input."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from typing import Any, Literal, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, field_validator

from chatclient.converters import (
    DRAFT_2020_12,
    EntityOutputConverter,
    ListOutputConverter,
    MapOutputConverter,
    StructuredOutputConverter,
    clean_text,
    converter_for,
    first_json_value,
    strict_schema,
    type_name,
)
from chatclient.errors import OutputConversionError

# -- targets ---------------------------------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(BaseModel):
    city: str
    zip_code: str | None = None


class Person(BaseModel):
    name: str
    age: int
    address: Address
    tags: list[str] = Field(default_factory=list)


class Shouty(BaseModel):
    word: str

    @field_validator("word")
    @classmethod
    def upper(cls, v: str) -> str:
        return v.upper()


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: int


# -- cleaning --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('  {"a": 1}\n\n', '{"a": 1}'),
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```\n{"a": 1}\n```', '{"a": 1}'),
        ('```{"a": 1}```', '{"a": 1}'),
        ('```json {"a": 1}```', '{"a": 1}'),
        ("```true```", "true"),
        ('```JSON5\r\n{"a": 1}\r\n```', '{"a": 1}'),
        ('<think>let me see {"a": 2}</think>\n{"a": 1}', '{"a": 1}'),
        ("<THINKING>x</THINKING><reasoning>y</reasoning>  [1]", "[1]"),
        ('<think>\nplan\n</think>\n```json\n{"a": 1}\n```', '{"a": 1}'),
        ('"<think>kept</think>"', '"<think>kept</think>"'),  # inside a JSON string: not a block
    ],
)
def test_clean_text_removes_wrappers_only(raw: str, expected: str) -> None:
    assert clean_text(raw) == expected


def test_first_json_value_cuts_trailing_text_and_refuses_leading_prose() -> None:
    assert first_json_value('{"a": 1}, hope this helps') == '{"a": 1}'
    assert first_json_value("[1, 2]\n```") == "[1, 2]"
    assert first_json_value('Sure! {"a": 1}') is None


# -- schemas ---------------------------------------------------------------------------------------


def _objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


def test_schema_is_strict_draft_2020_12_with_defs_and_declared_order() -> None:
    schema = EntityOutputConverter(Person).json_schema
    assert schema["$schema"] == DRAFT_2020_12
    assert list(schema["properties"]) == ["name", "age", "address", "tags"]
    assert schema["required"] == ["name", "age", "address", "tags"]  # defaults are required too
    assert schema["additionalProperties"] is False
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    nested = schema["$defs"]["Address"]
    assert nested["required"] == ["city", "zip_code"]
    assert nested["additionalProperties"] is False
    objects = _objects(schema)
    assert len(objects) == 2
    assert all(o["additionalProperties"] is False for o in objects)


def test_schema_of_list_and_map_targets() -> None:
    list_schema = EntityOutputConverter(list[Point]).json_schema
    assert list_schema["type"] == "array"
    assert "additionalProperties" not in list_schema  # only objects are closed
    assert list_schema["$defs"]["Point"]["additionalProperties"] is False
    map_schema = EntityOutputConverter(dict[str, int]).json_schema
    assert map_schema["additionalProperties"] == {"type": "integer"}  # a map stays open


def test_strict_schema_keeps_a_property_named_title_and_drops_title_keywords() -> None:
    class Book(BaseModel):
        title: str

    schema = strict_schema(Book.model_json_schema())
    assert schema["properties"] == {"title": {"type": "string"}}
    assert schema["title"] == "Book"  # the root keeps its name


def test_format_instructions_say_json_only_and_contain_the_schema() -> None:
    converter = EntityOutputConverter(Person)
    fmt = converter.format
    assert "JSON" in fmt
    assert "no markdown code fences" in fmt
    assert "nothing else" in fmt
    schema_text = fmt[fmt.index("{") :]
    assert json.loads(schema_text) == converter.json_schema


# -- conversion of every supported target ----------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "text", "expected"),
    [
        (Person, '{"name": "Ada", "age": 36, "address": {"city": "London"}}', None),
        (Point, '{"x": 1, "y": 2}', Point(1, 2)),
        (Movie, '{"title": "Dune", "year": 2021}', {"title": "Dune", "year": 2021}),
        (Color, '"green"', Color.GREEN),
        (Color, "red", Color.RED),  # a bare enum value
        (list[int], "[1, 2, 3]", [1, 2, 3]),
        (dict[str, int], '{"a": 1}', {"a": 1}),
        (Literal["yes", "no"], '"yes"', "yes"),
        (int | str, "7", 7),
        (int, "42", 42),
        (float, "2.5", 2.5),
        (bool, "true", True),
        (str, '"quoted"', "quoted"),
        (str, "plain text answer", "plain text answer"),
        (datetime.date, "2024-02-29", datetime.date(2024, 2, 29)),
        (list[Point], '[{"x": 0, "y": 1}]', [Point(0, 1)]),
    ],
)
def test_entity_converter_converts_every_supported_kind(target: Any, text: str, expected: Any) -> None:
    result = EntityOutputConverter(target).convert(text)
    if expected is None:
        assert result == Person(name="Ada", age=36, address=Address(city="London"))
    else:
        assert result == expected


def test_pydantic_field_validators_run() -> None:
    assert EntityOutputConverter(Shouty).convert('{"word": "hi"}') == Shouty(word="HI")


def test_wrapped_json_converts() -> None:
    text = '<think>The user wants a point.</think>\n```json\n{"x": 3, "y": 4}\n```\nAnything else?'
    assert EntityOutputConverter(Point).convert(text) == Point(3, 4)


def test_map_converter_tolerates_trailing_text_and_has_no_schema() -> None:
    converter = MapOutputConverter()
    assert converter.convert('{"name": "Max", "age": 10},') == {"name": "Max", "age": 10}
    assert converter.convert('```json\n{"a": [1]}\n```') == {"a": [1]}
    assert converter.json_schema is None
    assert "JSON object" in converter.format
    with pytest.raises(OutputConversionError):
        converter.convert("[1, 2]")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a, b, c", ["a", "b", "c"]),
        ("", []),
        ("A, , C", ["A", "", "C"]),
        (",,", ["", "", ""]),
        ("A, B,", ["A", "B", ""]),
        ("<think>hmm</think> x,y", ["x", "y"]),
    ],
)
def test_list_converter_splits_on_commas_like_the_reference(text: str, expected: list[str]) -> None:
    assert ListOutputConverter().convert(text) == expected


def test_list_converter_format_and_schema() -> None:
    converter = ListOutputConverter()
    assert "comma-separated" in converter.format
    assert converter.json_schema is None


def test_converters_satisfy_the_protocol() -> None:
    for converter in (EntityOutputConverter(Point), MapOutputConverter(), ListOutputConverter()):
        assert isinstance(converter, StructuredOutputConverter)


# -- converter_for ---------------------------------------------------------------------------------


def test_converter_for_picks_and_caches() -> None:
    assert isinstance(converter_for(dict), MapOutputConverter)
    assert isinstance(converter_for(dict[str, Any]), MapOutputConverter)
    assert isinstance(converter_for(list), ListOutputConverter)
    entity = converter_for(list[Point])
    assert isinstance(entity, EntityOutputConverter)
    assert entity.target == list[Point]
    assert converter_for(list[Point]) is entity  # schema and validator built once
    custom = ListOutputConverter()
    assert converter_for(custom) is custom  # a converter passes through


def test_converter_for_rejects_none_and_unsupported_types() -> None:
    with pytest.raises(ValueError, match="cannot be None"):
        converter_for(None)
    with pytest.raises(TypeError, match="Cannot convert"):
        EntityOutputConverter(type(lambda: None))


def test_type_names_are_readable() -> None:
    assert type_name(list[Point]) == "list[Point]"
    assert type_name(dict[str, int]) == "dict[str, int]"
    assert type_name(Literal["a", "b"]) == "Literal['a', 'b']"
    assert type_name(int | None) == "int | None"


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"name": "Ada", "age": ', "not valid JSON"),
        ('{"name": "Ada"}', "Field required"),
        ("[1, 2]", "Input should be"),
        ("", "empty"),
        ("   \n ", "empty"),
        ('Here is the person you asked for: {"name": "Ada", "age": 1, "address": {"city": "X"}}', "not valid JSON"),
    ],
)
def test_bad_input_raises_conversion_error_naming_type_and_text(text: str, reason: str) -> None:
    with pytest.raises(OutputConversionError) as info:
        EntityOutputConverter(Person).convert(text)
    message = str(info.value)
    assert "Person" in message
    assert reason in message
    assert repr(text) in message  # the text is shown
    assert info.value.text == text
    assert info.value.target is Person


def test_none_text_raises_conversion_error() -> None:
    with pytest.raises(OutputConversionError, match="no content"):
        EntityOutputConverter(Point).convert(None)  # type: ignore[arg-type]


def test_long_text_is_truncated_in_the_message() -> None:
    text = '{"x": "' + "z" * 5000
    with pytest.raises(OutputConversionError) as info:
        EntityOutputConverter(Point).convert(text)
    assert len(str(info.value)) < 1000
    assert "more characters" in str(info.value)
    assert info.value.text == text  # the full text stays available on the error


def test_typing_typeddict_works_on_this_python() -> None:
    converter = EntityOutputConverter(list[Movie])
    assert converter.convert('[{"title": "Alien", "year": 1979}]') == [{"title": "Alien", "year": 1979}]
    assert converter.json_schema["$defs"]["Movie"]["required"] == ["title", "year"]


# -- property tests: serialise any value, optionally wrap it, convert it back ----------------------


def _wrap(text: str, how: str) -> str:
    if how == "fence":
        return f"```json\n{text}\n```"
    if how == "bare_fence":
        return f"```\n{text}\n```"
    if how == "padded":
        return f" \n\t{text}  \n"
    if how == "thinking":
        return f"<think>I should answer with {{json}} only.</think>\n{text}"
    if how == "trailing":
        return f"{text}\nHope this helps!"
    return text


WRAPS = st.sampled_from(["plain", "fence", "bare_fence", "padded", "thinking", "trailing"])
TEXT = st.text(max_size=30)
INTS = st.integers(min_value=-(10**12), max_value=10**12)
FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64)

address_st = st.builds(Address, city=TEXT, zip_code=st.none() | TEXT)
person_st = st.builds(
    Person, name=TEXT, age=INTS, address=address_st, tags=st.lists(TEXT, max_size=3)
)  # fmt: skip
point_st = st.builds(Point, x=INTS, y=INTS)
movie_st = st.fixed_dictionaries({"title": TEXT, "year": INTS})

CASES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (Person, person_st),
    (Point, point_st),
    (Movie, movie_st),
    (Color, st.sampled_from(list(Color))),
    (list[Point], st.lists(point_st, max_size=4)),
    (dict[str, int], st.dictionaries(TEXT, INTS, max_size=4)),
    (Literal["a", "b", "c"], st.sampled_from(["a", "b", "c"])),
    (int | str, INTS | TEXT.filter(lambda s: not s.strip().lstrip("-").isdigit())),
    (int, INTS),
    (float, FLOATS),
    (bool, st.booleans()),
    (str, TEXT),
    (list[str], st.lists(TEXT, max_size=4)),
    (datetime.date, st.dates()),
]


@pytest.mark.parametrize(("target", "strategy"), CASES, ids=[type_name(t) for t, _ in CASES])
def test_any_value_round_trips(target: Any, strategy: st.SearchStrategy[Any]) -> None:
    converter = EntityOutputConverter(target)

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(value=strategy, how=WRAPS)
    def check(value: Any, how: str) -> None:
        text = _wrap(converter.type_adapter.dump_json(value).decode(), how)
        assert converter.convert(text) == value

    check()
