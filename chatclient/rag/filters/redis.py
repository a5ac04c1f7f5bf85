"""Translate a filter expression to RediSearch query syntax (``DIALECT 2``).

RediSearch filters only on attributes declared in the index schema, so the store declares one
attribute per metadata key the user names in ``metadata_fields``, with a kind:

* ``"tag"`` — string values, matched exactly (``@f:{value}``, case-sensitive);
* ``"numeric"`` — int/float values (``@f:[low high]``, exclusive bounds with ``(``);
* ``"bool"`` — booleans, stored as the tags ``true``/``false``.

A key that is not declared raises ``FilterExpressionError``; so does ordering strings
(RediSearch cannot compare TAG values) and integers beyond ±2**53 (RediSearch numbers are
doubles). A constant of another kind than the attribute matches nothing (``==``) or everything
present (``!=``), as in the in-memory evaluator. Null tests use ``ismissing(@f)``, so the server
needs RediSearch 2.10+ (Redis 8, or Redis Stack 7.4) and the attributes are declared
``INDEXMISSING``. Values of a kind other than the declared one are not indexed and count as
missing. Every tag value is escaped: each ASCII character other than a letter, digit or ``_`` gets
a backslash; control characters are refused.

    >>> from chatclient.rag.filters import parse
    >>> to_redis_query(parse("genre == 'sci-fi' AND year >= 2020"), {"genre": "tag", "year": "numeric"})
    '(@m_0:{sci\\\\-fi} @m_1:[2020 +inf])'
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Mapping
from typing import Literal

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters.ast import Expression, Key, Op, Scalar, Value
from chatclient.rag.filters.evaluator import kind

FieldKind = Literal["tag", "numeric", "bool"]
FIELD_KINDS: tuple[str, ...] = ("tag", "numeric", "bool")
MAX_EXACT_INT = 2**53
"""Integers beyond this magnitude have no exact double, so RediSearch cannot compare them."""

_ESCAPE = re.compile(r"([^A-Za-z0-9_\x80-\U0010ffff])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KIND_OF_FIELD = {"tag": "str", "numeric": "number", "bool": "bool"}
_ORDER = {Op.GT: operator.gt, Op.GTE: operator.ge, Op.LT: operator.lt, Op.LTE: operator.le}


def escape_tag(value: str) -> str:
    """``value`` escaped for a RediSearch TAG query (``@f:{...}``)."""
    if not value:
        raise FilterExpressionError("RediSearch cannot match an empty tag value; store a placeholder instead")
    if _CONTROL.search(value):
        raise FilterExpressionError(
            f"The filter value {value!r} holds a control character, which tag queries cannot hold"
        )
    return _ESCAPE.sub(r"\\\1", value)


def field_alias(position: int) -> str:
    """The schema alias of the ``position``-th declared metadata field (aliases need no escaping)."""
    return f"m_{position}"


def _number(v: int | float) -> str:
    if isinstance(v, float):
        if math.isinf(v):
            return "+inf" if v > 0 else "-inf"
        return repr(v)
    if abs(v) > MAX_EXACT_INT:
        raise FilterExpressionError(
            f"The integer {v} is beyond ±2**53, which RediSearch (doubles) cannot compare exactly"
        )
    return str(v)


class _Translator:
    def __init__(self, fields: Mapping[str, str]) -> None:
        self.fields: dict[str, tuple[str, str]] = {}
        for i, (name, k) in enumerate(fields.items()):
            if k not in FIELD_KINDS:
                raise ValueError(f"metadata field kinds are {FIELD_KINDS}, got {k!r} for {name!r}")
            self.fields[name] = (field_alias(i), k)

    def _field(self, key: Key) -> tuple[str, str]:
        found = self.fields.get(key.name)
        if found is None:
            declared = ", ".join(sorted(self.fields)) or "none"
            raise FilterExpressionError(
                f"The metadata key {key.name!r} is not indexed in RediSearch; declare it in metadata_fields "
                f"(declared: {declared})"
            )
        return found

    @staticmethod
    def _nothing(alias: str) -> str:
        return f"(ismissing(@{alias}) -ismissing(@{alias}))"

    @staticmethod
    def _present(alias: str) -> str:
        return f"-ismissing(@{alias})"

    def _any_eq(self, key: Key, consts: tuple[Scalar, ...]) -> str:
        alias, fkind = self._field(key)
        wanted = [c for c in consts if kind(c) == _KIND_OF_FIELD[fkind]]
        if not wanted:
            return self._nothing(alias)
        if fkind == "numeric":
            ranges = [f"@{alias}:[{_number(c)} {_number(c)}]" for c in dict.fromkeys(wanted)]  # type: ignore[arg-type]
            return ranges[0] if len(ranges) == 1 else "(" + " | ".join(ranges) + ")"
        tags = [("true" if c else "false") if fkind == "bool" else escape_tag(c) for c in wanted]  # type: ignore[arg-type]
        return f"@{alias}:{{{' | '.join(dict.fromkeys(tags))}}}"

    def _order(self, key: Key, op: Op, const: Scalar) -> str:
        alias, fkind = self._field(key)
        if fkind == "tag":
            if kind(const) == "str":
                raise FilterExpressionError(
                    f"RediSearch cannot order TAG values ({key.name} {op.value} ...); declare a numeric field"
                )
            return self._nothing(alias)
        if kind(const) != _KIND_OF_FIELD[fkind]:
            return self._nothing(alias)
        if fkind == "bool":
            # two values, false < true: the bound keeps both, one or none of them
            keep = tuple(b for b in (False, True) if _ORDER[op](b, const))
            return self._any_eq(key, keep)
        v = _number(const)  # type: ignore[arg-type]
        if op is Op.GT:
            return f"@{alias}:[({v} +inf]"
        if op is Op.GTE:
            return f"@{alias}:[{v} +inf]"
        if op is Op.LT:
            return f"@{alias}:[-inf ({v}]"
        return f"@{alias}:[-inf {v}]"

    def translate(self, e: Expression) -> str:
        op = e.op
        if op in (Op.AND, Op.OR):
            parts = [self.translate(o) for o in e.operands()]
            return "(" + (" " if op is Op.AND else " | ").join(parts) + ")"
        if op is Op.NOT:
            assert isinstance(e.left, Expression)
            return f"-({self.translate(e.left)})"
        key = e.left
        assert isinstance(key, Key)
        alias, _ = self._field(key)
        if op is Op.IS_NULL:
            return f"ismissing(@{alias})"
        if op is Op.IS_NOT_NULL:
            return self._present(alias)
        assert isinstance(e.right, Value)
        const = e.right.value
        if op is Op.EQ:
            assert not isinstance(const, tuple)
            return self._any_eq(key, (const,))
        if op is Op.NE:
            assert not isinstance(const, tuple)
            return f"({self._present(alias)} -{self._any_eq(key, (const,))})"
        if op is Op.IN:
            assert isinstance(const, tuple)
            return self._any_eq(key, const)
        if op is Op.NIN:
            assert isinstance(const, tuple)
            return f"({self._present(alias)} -{self._any_eq(key, const)})"
        assert not isinstance(const, tuple)
        return self._order(key, op, const)


def to_redis_query(expr: Expression, fields: Mapping[str, str]) -> str:
    """The RediSearch query text for ``expr``; ``fields`` maps declared metadata keys to their kind,
    in declaration order (which fixes the ``m_<i>`` aliases)."""
    if not isinstance(expr, Expression):
        raise TypeError(f"expected a filter Expression, got {type(expr).__name__}")
    return _Translator(fields).translate(expr)
