"""Hostile scope JSON (deep nesting, huge numbers, wrong types, NaN, malformed tags) is refused
with ``AgenticScopeError`` — never a bare ``ValueError``/``TypeError``/``OverflowError``/
``RecursionError`` — by ``AgenticScope.from_json`` and by ``resume``. A property-style sweep puts
every hostile value in every place of a valid scope's JSON."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from chatclient.agents import AgenticScope, agent_function, human_input, sequence
from chatclient.errors import AgenticScopeError


@agent_function(output_key="out")
def echo(approval: str) -> str:
    return approval


def suspended_json() -> dict[str, Any]:
    wf = sequence(human_input(question="ok?", output_key="approval"), echo)
    scope = wf.run(topic="t", n=(1, 2)).suspended.scope  # type: ignore[union-attr]
    scope.write("tags", {"a", "b"})
    return json.loads(scope.to_json())  # type: ignore[no-any-return]


HOSTILE: list[Any] = [
    None,
    True,
    -1,
    10**200,
    1e308,
    "NaN-marker",
    "",
    "x" * 300,
    [],
    [[[[[[[[]]]]]]]],
    {},
    {"$t": "float", "v": "not a float"},
    {"$t": "float", "v": [1]},
    {"$t": "dict", "v": [[[1], 2]]},  # an unhashable key
    {"$t": "dict", "v": [[1]]},
    {"$t": "dict", "v": "x"},
    {"$t": "set", "v": [[1, 2]]},  # an unhashable member
    {"$t": "frozenset", "v": [{"a": 1}]},
    {"$t": "tuple", "v": 3},
    {"$t": "datetime", "v": "yesterday"},
    {"$t": "decimal", "v": "1e999999999"},
    {"$t": "uuid", "v": 12},
    {"$t": "bytes", "v": "!!!"},
    {"$t": "timedelta", "v": 1e308},
    {"$t": "message.UserMessage", "v": {"role": 3}},
    {"$t": "no.such.Type", "v": 1},
    {"$t": ["list", "tag"], "v": 1},
    {"$t": None},
]

# Where in the scope JSON a hostile value goes (paths into the dict).
PLACES: list[tuple[Any, ...]] = [
    ("id",),
    ("v",),
    ("state",),
    ("state", "topic"),
    ("initial",),
    ("initial", "n"),
    ("journal",),
    ("journal", "0"),
    ("journal", "0", "output"),
    ("journal", "0", "writes"),
    ("invocations",),
    ("invocations", 0),
    ("invocations", 0, "name"),
    ("invocations", 0, "inputs"),
    ("invocations", 0, "started"),
    ("invocations", 0, "finished"),
    ("invocations", 0, "children"),
    ("invocations", 0, "usage"),
    ("invocations", 0, "output"),
    ("pending",),
    ("pending", "key"),
    ("pending", "question"),
    ("pending", "output_key"),
    ("pending", "token"),
]


def _put(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> bool:
    node: Any = data
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, list) and (not isinstance(path[-1], int) or path[-1] >= len(node)):
        return False
    node[path[-1]] = value
    return True


def _only_typed_errors(text: str | bytes) -> None:
    try:
        scope = AgenticScope.from_json(text)
    except AgenticScopeError:
        return
    # Accepted: the scope must be usable — written back and resumed without a bare error.
    try:
        scope.to_json()
        if scope._pending:
            sequence(human_input(question="ok?", output_key="approval"), echo).resume(scope, "yes")
    except AgenticScopeError:
        pass
    except Exception as exc:
        if type(exc).__module__.startswith("chatclient") and not isinstance(exc, (ValueError, TypeError)):
            return  # another typed error of ours (an agent's own failure)
        raise AssertionError(f"{type(exc).__name__} escaped from an accepted hostile scope: {exc}") from exc


@pytest.mark.parametrize("place", PLACES, ids=lambda p: "/".join(map(str, p)))
def test_every_hostile_value_in_every_place_is_a_typed_error(place: tuple[Any, ...]) -> None:
    base = suspended_json()
    for value in HOSTILE:
        data = json.loads(json.dumps(base))
        if not _put(data, place, value):
            continue
        text = json.dumps(data, allow_nan=True)
        try:
            _only_typed_errors(text)
        except AgenticScopeError:
            pass
        except AssertionError:
            raise
        except Exception as exc:
            raise AssertionError(f"{place} = {value!r:.80}: bare {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize(
    "text",
    [
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{"n":' + "9" * 5000 + "}}",  # > int digits limit
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{"n":NaN,"m":Infinity,"k":-Infinity}}',
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":' + "[" * 5000 + "]" * 5000 + "}",
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{"d":'
        + '{"$t":"tuple","v":[' * 60
        + "1"
        + "]}" * 60
        + "}}",
        '{"format":"chatclient.agentic_scope","v":1e999,"id":"x","state":{}}',
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{},"invocations":[{"name":"a","started":1e999}]}',
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{},"invocations":[{"name":"a","started":'
        + "1" * 400
        + "}]}",
        '{"format":"chatclient.agentic_scope","v":1,"id":"x","state":{},"invocations":[{"name":"a","usage":[1e999,1]}]}',
        b"\xff\xfe not utf-8",
        "\ud800",
        "",
        "[]",
        "null",
    ],
)
def test_crafted_texts_are_typed_errors(text: str | bytes) -> None:
    _only_typed_errors(text)


def test_random_mutations_of_a_valid_scope_are_typed_errors() -> None:
    rng = random.Random(36)
    base = json.dumps(suspended_json())
    for _ in range(400):
        chars = list(base)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(chars))
            chars[i] = rng.choice('{}[]",:0123456789.eE-+tfnNaIy$\\ ')
        _only_typed_errors("".join(chars))
