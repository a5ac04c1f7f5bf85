"""AgenticScope: state, JSON round trip with registered types, and hostile JSON."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import uuid

import pytest
from pydantic import BaseModel

from chatclient import AssistantMessage, ToolCall, UserMessage
from chatclient.agents import AgenticScope, register_type
from chatclient.errors import AgenticScopeError


class Review(BaseModel):
    score: float
    notes: list[str]


@dataclasses.dataclass(frozen=True)
class Span:
    start: int
    end: int
    when: datetime.date


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


class Opaque:
    def __init__(self, v: int) -> None:
        self.v = v


def test_state_read_write_has() -> None:
    scope = AgenticScope({"a": 1}, id="s1")
    scope.write("b", None)
    assert scope.read("a") == 1 and scope.has("b") and scope.read("b", 5) is None
    assert scope.read("missing", "d") == "d" and not scope.has("missing")
    with pytest.raises(TypeError):
        scope.state["a"] = 2  # type: ignore[index]
    with pytest.raises(ValueError):
        scope.write("", 1)
    assert scope.id == "s1"


def test_round_trip_keeps_types() -> None:
    register_type(Review)
    register_type(Span)
    register_type(Mood)
    values = {
        "review": Review(score=0.8, notes=["tight", "funny"]),
        "span": Span(1, 2, datetime.date(2026, 12, 3)),
        "mood": Mood.SAD,
        "when": datetime.datetime(2026, 12, 3, 14, 30, tzinfo=datetime.UTC),
        "day": datetime.date(2026, 1, 2),
        "money": decimal.Decimal("1.10"),
        "uid": uuid.UUID(int=7),
        "blob": b"\x00\xff",
        "pair": (1, "two"),
        "tags": {"x", "y"},
        "int_keys": {1: "one", 2: "two"},
        "nested": {"list": [Mood.HAPPY, (1, 2)], "$t": "not a tag"},
        "messages": [UserMessage("hi"), AssistantMessage(None, (ToolCall("1", "f", "{}"),))],
        "nan": float("nan"),
        "text": "{{ not a template }}",
    }
    scope = AgenticScope(values)
    again = AgenticScope.from_json(scope.to_json())
    for key, value in values.items():
        if key == "nan":
            assert again.read(key) != again.read(key)
            continue
        assert again.read(key) == value, key
        assert type(again.read(key)) is type(value), key
    assert again.id == scope.id


def test_unregistered_type_is_refused_at_to_json() -> None:
    scope = AgenticScope({"thing": Opaque(1)})
    with pytest.raises(AgenticScopeError, match="register_type"):
        scope.to_json()


def test_custom_encoder_registration() -> None:
    register_type(Opaque, name="test.opaque", encode=lambda o: o.v, decode=lambda d: Opaque(int(d)))
    again = AgenticScope.from_json(AgenticScope({"o": Opaque(3)}).to_json())
    assert isinstance(again.read("o"), Opaque) and again.read("o").v == 3
    with pytest.raises(ValueError, match="already registered"):
        register_type(Mood, name="test.opaque")
    with pytest.raises(TypeError, match="encode"):
        register_type(int)
    with pytest.raises(ValueError, match="tag"):
        register_type(Opaque, name="tuple", encode=lambda o: o.v, decode=lambda d: Opaque(int(d)))


def _doc(state: dict) -> str:
    return json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": state})


def test_unknown_type_name_is_an_error_never_an_import() -> None:
    with pytest.raises(AgenticScopeError, match="not registered"):
        AgenticScope.from_json(_doc({"x": {"$t": "os.system", "v": "echo pwned"}}))


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        json.dumps({"format": "other"}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 99, "id": "x", "state": {}}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": []}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "", "state": {}}),
        _doc({"x": {"$t": "tuple", "v": 5}}),
        _doc({"x": {"$t": "dict", "v": [[1]]}}),
        _doc({"x": {"$t": "date", "v": "yesterday"}}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": {}, "journal": {"k": 5}}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": {}, "pending": {"key": 1}}),
        json.dumps({"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": {}, "invocations": [{"x": 1}]}),
    ],
)
def test_malformed_json_is_a_typed_error(text: str) -> None:
    with pytest.raises(AgenticScopeError):
        AgenticScope.from_json(text)


def test_deep_nesting_and_huge_text_are_bounded() -> None:
    deep = (
        '{"format": "chatclient.agentic_scope", "v": 1, "id": "x", "state": {"a": '
        + "[" * 100_000
        + "]" * 100_000
        + "}}"
    )
    with pytest.raises(AgenticScopeError, match="deeper"):
        AgenticScope.from_json(deep)
    huge = _doc({"a": "x" * 2000})
    with pytest.raises(AgenticScopeError, match="max_chars"):
        AgenticScope.from_json(huge, max_chars=1000)
    assert AgenticScope.from_json(huge).read("a") == "x" * 2000


def test_deep_value_written_is_refused_cleanly() -> None:
    value: list = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(AgenticScopeError):
        AgenticScope({"deep": value}).to_json()


def test_scope_pickles_through_its_json() -> None:
    import pickle

    scope = AgenticScope({"a": (1, 2)}, id="p")
    again = pickle.loads(pickle.dumps(scope))
    assert again.read("a") == (1, 2) and again.id == "p"
