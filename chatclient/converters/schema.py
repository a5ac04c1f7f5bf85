"""JSON Schema (draft 2020-12) for structured output, derived from pydantic's schema.

pydantic already produces draft 2020-12 with nested models under ``$defs`` and properties in
declaration order. Two rules are added because both prompted and native structured output work
better with a closed, fully specified shape (and OpenAI's strict mode requires it):

- every property of every object is listed in ``required`` (fields with defaults too: a model that
  sends them anyway is fine, and pydantic still fills a default if one is missing);
- every object with declared properties gets ``additionalProperties: false``. Free-form maps
  (``dict[str, T]``) keep their ``additionalProperties`` schema, since closing them would forbid
  every key.

``title`` keywords below the root are dropped: they cost prompt tokens and tell the model nothing
that the property name does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"

# Keywords whose value is a schema, a list of schemas, or a name -> schema map.
_SCHEMA_VALUED = frozenset(
    {"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames",
     "unevaluatedProperties", "unevaluatedItems", "additionalItems"}
)  # fmt: skip
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"})


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``schema`` with the rules above applied and ``$schema`` set to draft 2020-12."""
    out = _tighten(schema, root=True)
    return {"$schema": DRAFT_2020_12, **{k: v for k, v in out.items() if k != "$schema"}}


def _tighten(node: Any, *, root: bool = False) -> Any:
    if not isinstance(node, Mapping):
        return node  # booleans and malformed nodes pass through
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and not root:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = {name: _tighten(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_tighten(sub) for sub in value]
        elif key in _SCHEMA_VALUED:
            out[key] = _tighten(value)
        else:
            out[key] = value
    props = out.get("properties")
    if isinstance(props, Mapping) and (out.get("type") == "object" or "type" not in out):
        out["required"] = list(props)
        if not isinstance(out.get("additionalProperties"), Mapping):
            out["additionalProperties"] = False
    return out


__all__ = ["DRAFT_2020_12", "strict_schema"]
