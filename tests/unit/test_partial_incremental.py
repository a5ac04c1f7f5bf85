"""The incremental partial-entity reader yields exactly the states the re-parsing reader yields.

The re-parsing reader (parse the whole text so far after every delta, shape it, skip repeats) is
the definition of the partial states; the incremental one must agree with it state for state, for
random JSON values cut at random points, inside and outside code fences and reasoning blocks.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from chatclient.converters import EntityOutputConverter, build_partial, parse_partial_json, stream_entities
from chatclient.converters.incremental import IncrementalJSON


def reparsed_states(target: Any, deltas: list[str]) -> list[Any]:
    """The reference: every delta re-parses the whole text (today's definition of a partial state)."""
    out: list[Any] = []
    text = ""
    for delta in deltas:
        text += delta
        value = parse_partial_json(text)
        if value is None or (not isinstance(value, (dict, list, str, int, float, bool))):
            continue
        state = build_partial(target, value)
        if state is None:
            continue
        if out and type(out[-1]) is type(state) and out[-1] == state:
            continue
        out.append(state)
    return out


def incremental_states(target: Any, deltas: list[str]) -> list[Any]:
    converter = EntityOutputConverter(target)
    states: list[Any] = []
    stream = stream_entities(converter, iter(deltas))
    try:
        for state in stream:
            states.append(state)
    except Exception:
        pass  # the final conversion may fail on a truncated text; the partial states are compared
    return states


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(points) if b > a]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=6), children, max_size=5),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=json_values, cuts=st.lists(st.integers(0, 10_000), max_size=30), indent=st.sampled_from([None, 2]),
       wrapper=st.sampled_from(["", "fence", "think", "fence_think", "spaces"]), ascii_only=st.booleans())
def test_same_states_as_reparsing_for_any_json(value: Any, cuts: list[int], indent: int | None, wrapper: str,
                                               ascii_only: bool) -> None:
    body = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    text = {
        "": body,
        "fence": "```json\n" + body + "\n```",
        "think": "<think>plan it</think>\n" + body,
        "fence_think": "<think>x</think>```\n" + body + "\n```\n",
        "spaces": "  \n" + body + "  \n",
    }[wrapper]
    deltas = split(text, cuts)
    expected = reparsed_states(Any, deltas)
    got = incremental_states(Any, deltas)
    # the stream adds the final, fully converted value unless it equals the last partial
    assert got[: len(expected)] == expected
    assert len(got) - len(expected) in (0, 1)


class Item(BaseModel):
    name: str
    tags: list[str] = []
    qty: int | None = None


class Order(BaseModel):
    id: int
    customer: str = Field(alias="customerName")
    items: list[Item]
    notes: dict[str, str] = {}


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = ""


class Shape(TypedDict):
    points: list[Point]
    closed: bool


orders = st.builds(
    lambda i, c, items, notes: {"id": i, "customerName": c, "items": items, "notes": notes},
    st.integers(0, 10**6),
    st.text(max_size=10),
    st.lists(
        st.fixed_dictionaries({"name": st.text(max_size=8)}, optional={"tags": st.lists(st.text(max_size=5), max_size=3),
                                                                       "qty": st.integers(0, 999) | st.none()}),
        max_size=4,
    ),
    st.dictionaries(st.text(max_size=4), st.text(max_size=6), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(order=orders, cuts=st.lists(st.integers(0, 10_000), max_size=40), indent=st.sampled_from([None, 1]))
def test_same_model_states_as_reparsing(order: dict[str, Any], cuts: list[int], indent: int | None) -> None:
    deltas = split(json.dumps(order, indent=indent), cuts)
    expected = reparsed_states(Order, deltas)
    got = incremental_states(Order, deltas)
    assert got[: len(expected)] == expected
    assert len(got) - len(expected) in (0, 1)


@settings(max_examples=200, deadline=None)
@given(points=st.lists(st.tuples(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6), st.text(max_size=4)), max_size=5),
       closed=st.booleans(), cuts=st.lists(st.integers(0, 10_000), max_size=30))
def test_same_dataclass_and_typeddict_states(points: list[tuple[float, float, str]], closed: bool,
                                             cuts: list[int]) -> None:
    value = {"points": [{"x": x, "y": y, "label": lbl} for x, y, lbl in points], "closed": closed}
    deltas = split(json.dumps(value), cuts)
    expected = reparsed_states(Shape, deltas)
    got = incremental_states(Shape, deltas)
    assert got[: len(expected)] == expected


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet='{}[]",:0123456789.eE+- \ntrufalsn\\u`ab', max_size=40),
       cuts=st.lists(st.integers(0, 100), max_size=10))
def test_arbitrary_text_gives_the_reparsing_states(text: str, cuts: list[int]) -> None:
    # invalid JSON makes the incremental parser hand over to the re-parsing path: same states
    deltas = split(text, cuts)
    expected = reparsed_states(Any, deltas)
    got = incremental_states(Any, deltas)
    assert got[: len(expected)] == expected


def test_parser_reads_each_character_once_and_keeps_completed_values() -> None:
    parser = IncrementalJSON()
    parser.feed('{"a": [1, 2, {"b": "x')
    node = parser.view_node()
    assert node.container == {}  # "a" is still open
    assert node.child.container == [1, 2]
    parser.feed('y"}], "c": true}')
    assert parser.done and parser.view_node() == {"a": [1, 2, {"b": "xy"}], "c": True}


def test_parser_hands_invalid_text_over() -> None:
    for bad in ('[1,]', '{"a" 1}', "[NaN]", '["\\x"]', '["a\x01"]', '["\\udc00"]'):
        parser = IncrementalJSON()
        parser.feed(bad)
        assert parser.failed, bad


def test_large_answer_is_linear() -> None:
    # 100 KB in 4-character deltas: the re-parsing reader needed ~35 s of CPU for this
    import time

    items = [{"name": f"item {i}", "tags": ["a", "b"], "qty": i} for i in range(1800)]
    text = json.dumps({"id": 1, "customerName": "Ana", "items": items})
    assert len(text) > 90_000
    deltas = [text[i : i + 4] for i in range(0, len(text), 4)]
    started = time.perf_counter()
    states = list(stream_entities(EntityOutputConverter(Order), iter(deltas)))
    elapsed = time.perf_counter() - started
    assert states[-1].items[-1].qty == 1799
    assert elapsed < 20  # generous: a quadratic reader takes minutes here; the benchmark prints the figure


def test_a_repeated_key_replaces_the_value_shaped_before() -> None:
    # JSON objects may repeat a key (the last value wins, at the first one's place). The reader keeps
    # the shaped members of an open object between deltas; a repeated key must replace that one.
    text = (
        '{"id": 1, "customerName": "ann", "items": [{"name": "a", "name": "b", "tags": ["x"]}], '
        '"customerName": "bob", "notes": {"k": "v", "j": "u", "k": "w"}, "id": 2}'
    )
    for target in (Order, dict[str, Any], Any):
        for deltas in ([text[i : i + 1] for i in range(len(text))], [text[i : i + 7] for i in range(0, len(text), 7)]):
            expected = reparsed_states(target, deltas)
            got = incremental_states(target, deltas)
            assert got[: len(expected)] == expected
    final = incremental_states(Order, [text])[-1]
    assert final.customer == "bob" and final.id == 2 and final.items[0].name == "b"
    assert final.notes == {"k": "w", "j": "u"}
