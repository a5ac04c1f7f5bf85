"""Bounds and checks for JSON Schemas an MCP server sends (tool input schemas, elicitation forms)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from chatclient import jsonsafe

MAX_SCHEMA_CHARS = 65_536
MAX_SCHEMA_DEPTH = 32


def check_input_schema(schema: Any) -> str | None:
    """Why ``schema`` cannot be offered to a model (``None`` when it can): an object-typed, valid, bounded JSON Schema."""
    if not isinstance(schema, Mapping):
        return "the input schema is not a JSON object"
    if schema.get("type") != "object":
        return "the input schema's root type is not 'object'"
    try:
        encoded = json.dumps(schema)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"the input schema is not JSON ({exc})"
    if len(encoded) > MAX_SCHEMA_CHARS:
        return f"the input schema is {len(encoded)} characters, more than {MAX_SCHEMA_CHARS}"
    try:
        jsonsafe.loads(encoded, max_depth=MAX_SCHEMA_DEPTH)
    except ValueError:
        return f"the input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    import importlib

    jsonschema: Any = importlib.import_module("jsonschema")  # a dependency of the mcp SDK (untyped)
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"the input schema is not valid JSON Schema: {exc.message[:300]}"
    except Exception as exc:  # a hostile schema can break the meta-validator itself
        return f"the input schema could not be checked: {type(exc).__name__}"
    return None


__all__ = ["MAX_SCHEMA_CHARS", "MAX_SCHEMA_DEPTH", "check_input_schema"]
