"""Schema-constrained output on the embedded model cannot run away (issue 27.2).

``bounded_schema`` closes what a schema leaves open (strings without ``maxLength``, arrays without
``maxItems``), so the grammar itself ends every answer; ``max_output_tokens`` is the longest answer
such a grammar allows, the token limit ``LlamaCppChatModel`` then uses when the caller set none.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field

from chatclient.models.llamacpp import (
    DEFAULT_SCHEMA_MAX_ITEMS,
    DEFAULT_SCHEMA_MAX_STRING,
    bounded_schema,
    max_output_tokens,
)


class LineItem(BaseModel):
    description: str
    quantity: int
    unit_price: float


class Invoice(BaseModel):
    number: str
    date: str
    total: float
    items: list[LineItem]
    note: str | None = None
    summary: str = Field(max_length=500)
    tags: list[str] = Field(max_length=3)


def test_open_strings_and_arrays_get_bounds_and_what_the_schema_says_is_kept() -> None:
    schema = Invoice.model_json_schema()
    bounded = bounded_schema(schema)
    props = bounded["properties"]
    assert props["number"]["maxLength"] == DEFAULT_SCHEMA_MAX_STRING
    assert props["items"]["maxItems"] == DEFAULT_SCHEMA_MAX_ITEMS
    assert bounded["$defs"]["LineItem"]["properties"]["description"]["maxLength"] == DEFAULT_SCHEMA_MAX_STRING
    assert props["note"]["anyOf"][0]["maxLength"] == DEFAULT_SCHEMA_MAX_STRING  # inside anyOf too
    assert props["summary"]["maxLength"] == 500  # the schema's own bound wins
    assert props["tags"]["maxItems"] == 3 and props["tags"]["items"]["maxLength"] == DEFAULT_SCHEMA_MAX_STRING
    assert "maxLength" not in props["total"] and "maxItems" not in props["number"]
    assert schema == Invoice.model_json_schema()  # the input is not changed


def test_shaped_strings_data_values_and_minimums_are_respected() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "day": {"type": "string", "format": "date"},
            "kind": {"type": "string", "enum": ["a", "b"]},
            "long": {"type": "string", "minLength": 200},
            "many": {"type": "array", "items": {"type": "integer"}, "minItems": 20},
            # a property named "type" and data under "default"/"examples" are not schemas
            "type": {"type": "string", "default": "x", "examples": [{"type": "string"}]},
        },
        "required": ["type"],
    }
    props = bounded_schema(schema, max_string=50, max_items=5)["properties"]
    assert "maxLength" not in props["code"] and "maxLength" not in props["day"] and "maxLength" not in props["kind"]
    assert props["long"]["maxLength"] == 200 and props["many"]["maxItems"] == 20  # never below the minimum
    assert props["type"]["maxLength"] == 50 and props["type"]["examples"] == [{"type": "string"}]
    with pytest.raises(ValueError, match="at least 1"):
        bounded_schema(schema, max_string=0)


def test_a_schema_nested_without_end_is_a_clear_error() -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(100):
        deep = {"type": "array", "items": deep}
    with pytest.raises(ValueError, match="nests more than 64 levels"):
        bounded_schema(deep)


def test_the_longest_answer_is_bounded_only_when_nothing_is_open() -> None:
    schema = Invoice.model_json_schema()
    assert max_output_tokens(schema) is None  # open strings and arrays
    bounded = bounded_schema(schema)
    limit = max_output_tokens(bounded)
    assert limit is not None
    # the longest answer the bounds allow, written out, fits in the limit (one character per token)
    longest = {
        "number": "x" * DEFAULT_SCHEMA_MAX_STRING,
        "date": "x" * DEFAULT_SCHEMA_MAX_STRING,
        "total": -1.2345678901234567e-123,
        "items": [{"description": "x" * DEFAULT_SCHEMA_MAX_STRING, "quantity": -10**15, "unit_price": 1.5}]
        * DEFAULT_SCHEMA_MAX_ITEMS,
        "note": "x" * DEFAULT_SCHEMA_MAX_STRING,
        "summary": "x" * 500,
        "tags": ["x" * DEFAULT_SCHEMA_MAX_STRING] * 3,
    }
    assert len(json.dumps(longest, indent=1)) <= limit
    recursive = {"$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    assert max_output_tokens(recursive) is None
    assert max_output_tokens({"type": "object", "additionalProperties": True}) is None
    assert max_output_tokens({"enum": ["yes", "no"]}) == 6


def test_llama_cpp_turns_the_bounds_into_a_finite_grammar() -> None:
    grammar = pytest.importorskip("llama_cpp.llama_grammar", reason="the local extra is not installed")
    gbnf = grammar.json_schema_to_gbnf(json.dumps(bounded_schema(Invoice.model_json_schema(), max_string=4)))
    # no unbounded repetition is left: a string is at most 4 chars, the item list at most 8 items
    rules = dict(line.split(" ::= ", 1) for line in gbnf.splitlines() if " ::= " in line)
    number_rule = next(v for k, v in rules.items() if k.startswith("number") and "char" in v)
    assert "*" not in number_rule and "+" not in number_rule and number_rule.count("char") == 4
    items_rule = next(v for k, v in rules.items() if k == "items")
    assert "*" not in items_rule and items_rule.count("items-item") == DEFAULT_SCHEMA_MAX_ITEMS
