"""The incremental reader shapes a state only when the parsed view changed (issue 40.4)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from chatclient.converters import EntityOutputConverter, stream_entities
from chatclient.converters import partial as partial_module
from chatclient.converters.incremental import IncrementalJSON


class Item(BaseModel):
    name: str
    qty: int


class Order(BaseModel):
    id: str
    items: list[Item]
    note: str = "none"


def test_the_change_count_moves_with_values_not_with_keys_or_whitespace() -> None:
    parser = IncrementalJSON()
    parser.feed('{"a_long_key')
    opened = parser.changes
    parser.feed('_name"  :  ')
    assert parser.changes == opened  # a key and whitespace: the view is the same
    parser.feed('"va')
    started = parser.changes
    assert started > opened
    parser.feed("\\")  # an escape still arriving is left out of the view
    assert parser.changes == started
    parser.feed('n"')
    assert parser.changes > started


def test_deltas_that_change_nothing_are_not_shaped(monkeypatch: Any) -> None:
    text = '{"id": "o-1", "items": [{"name": "kettle", "qty": 2}]}'
    shaped: list[int] = []
    real = IncrementalJSON.view_node

    def counting(self: IncrementalJSON) -> Any:  # read once per state shaped
        shaped.append(1)
        return real(self)

    monkeypatch.setattr(IncrementalJSON, "view_node", counting)
    deltas = [text[i : i + 1] for i in range(len(text))]
    states = list(stream_entities(EntityOutputConverter(Order), deltas))
    assert states[-1] == Order(id="o-1", items=[Item(name="kettle", qty=2)])
    # keys, colons, commas and spaces are most of the characters: far fewer shapings than deltas
    assert 0 < sum(shaped) < len(deltas) // 2


class Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    full_name: str = Field(alias="fullName")
    age: int | None = None


def test_fast_model_construction_equals_model_construct() -> None:
    built = partial_module._model_from(Order, partial_module._plan(Order)[1][1], {"id": "x", "items": [], "note": "n"})
    assert built == Order.model_construct(id="x", items=[], note="n")
    assert built.model_fields_set == {"id", "items", "note"}
    # a missing field with a default takes model_construct's path: the default is filled in
    partly = partial_module._model_from(Order, partial_module._plan(Order)[1][1], {"id": "x"})
    assert partly.note == "none" and partly.items is None  # type: ignore[attr-defined]
    aliased = partial_module._model_from(Aliased, partial_module._plan(Aliased)[1][1], {"fullName": "Ada"})
    assert aliased == Aliased.model_construct(full_name="Ada")
