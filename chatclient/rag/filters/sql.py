"""Translate a filter expression to a SQLite ``WHERE`` clause over a JSON metadata column.

Every constant and every key path is a bound parameter (``?``); nothing from the expression is
concatenated into the SQL text. Each leaf is wrapped so that it yields 0 or 1, never NULL, which
gives the same two-valued semantics as :mod:`chatclient.rag.filters.evaluator` (a missing key makes
every comparison false; values compare only within one kind — checked with ``json_type``).

Sizes the SQLite parser cannot take are avoided: a chain of AND/OR terms becomes balanced groups
of at most 8 terms (SQLite limits both parser nesting and expression-tree depth, to ~100 and 1000),
and an ``IN``/``NIN`` list is one JSON array parameter per value kind, read with ``json_each``,
however many values it has. Integers outside SQLite's 64-bit range raise ``FilterExpressionError``.

    >>> from chatclient.rag.filters import F
    >>> to_sql(F.eq("genre", "drama"))
    ('COALESCE(json_type("metadata", ?) = \\'text\\' AND json_extract("metadata", ?) = ?, 0)', ['$."genre"', '$."genre"', 'drama'])
"""

from __future__ import annotations

import json
import re
from typing import Any

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters.ast import Expression, Key, Op, Scalar, Value
from chatclient.rag.filters.evaluator import kind

_GUARDS = {
    "str": "= 'text'",
    "number": "IN ('integer', 'real')",
    "bool": "IN ('true', 'false')",
}
_CMP = {Op.EQ: "=", Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_GROUP = 8  # terms per parenthesised group of a long chain


def join_balanced(op: Op, parts: list[str]) -> str:
    """``parts`` joined by AND/OR in balanced parenthesised groups of ``_GROUP``.

    A flat chain of a thousand terms exceeds SQLite's expression depth (and deepens PostgreSQL's
    parse); balanced groups keep the depth logarithmic in the number of terms.
    """
    while len(parts) > _GROUP:
        parts = ["(" + f" {op.value} ".join(parts[i : i + _GROUP]) + ")" for i in range(0, len(parts), _GROUP)]
    return "(" + f" {op.value} ".join(parts) + ")"
_INT64 = (-(2**63), 2**63 - 1)
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")


class _Translator:
    def __init__(self, column: str) -> None:
        if not _COLUMN.match(column):
            raise ValueError(f"column must be a plain SQL identifier, got {column!r}")
        self.col = ".".join(f'"{part}"' for part in column.split("."))
        self.params: list[Any] = []

    def _path(self, key: Key) -> str:
        # SQLite JSON paths have no escape for '"' inside a quoted label, so such keys cannot be addressed
        if '"' in key.name:
            raise FilterExpressionError(f"The key {key.name!r} contains '\"', which SQLite JSON paths cannot address")
        return f'$."{_utf8(key.name)}"'

    def _type(self, key: Key) -> str:
        self.params.append(self._path(key))
        return f"json_type({self.col}, ?)"

    def _extract(self, key: Key) -> str:
        self.params.append(self._path(key))
        return f"json_extract({self.col}, ?)"

    def _bind(self, v: Scalar) -> str:
        # booleans are stored by json_extract as 1/0
        self.params.append(int(v) if isinstance(v, bool) else _utf8(_int64(v)))
        return "?"

    def _compare(self, key: Key, op: Op, const: Scalar) -> str:
        k = kind(const)
        assert k is not None
        guard = f"{self._type(key)} {_GUARDS[k]}"
        return f"COALESCE({guard} AND {self._extract(key)} {_CMP[op]} {self._bind(const)}, 0)"

    def _present(self, key: Key) -> str:
        return f"COALESCE({self._type(key)} != 'null', 0)"

    def _any_eq(self, key: Key, consts: tuple[Scalar, ...]) -> str:
        if not consts:
            return "0"
        if len(consts) == 1:
            return self._compare(key, Op.EQ, consts[0])
        # One JSON array per kind (a value only equals constants of its own kind), however many values.
        by_kind: dict[str, list[Scalar]] = {}
        for c in consts:
            k = kind(c)
            assert k is not None
            by_kind.setdefault(k, []).append(int(c) if isinstance(c, bool) else _utf8(_int64(c)))
        parts = []
        for k, values in by_kind.items():
            try:
                array = json.dumps(values, ensure_ascii=False, allow_nan=False)
            except ValueError:
                raise FilterExpressionError("Infinite numbers cannot be used in IN/NIN lists of SQL filters") from None
            guard = f"{self._type(key)} {_GUARDS[k]}"
            extract = self._extract(key)
            self.params.append(array)
            parts.append(f"COALESCE({guard} AND {extract} IN (SELECT value FROM json_each(?)), 0)")
        return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"

    def _chain(self, op: Op, operands: tuple[Expression, ...]) -> str:
        return join_balanced(op, [self.translate(o) for o in operands])

    def translate(self, e: Expression) -> str:
        op = e.op
        if op in (Op.AND, Op.OR):
            return self._chain(op, e.operands())
        if op is Op.NOT:
            assert isinstance(e.left, Expression)
            return f"(NOT {self.translate(e.left)})"
        key = e.left
        assert isinstance(key, Key)
        if op is Op.IS_NULL:
            return f"COALESCE({self._type(key)} = 'null', 1)"
        if op is Op.IS_NOT_NULL:
            return self._present(key)
        assert isinstance(e.right, Value)
        const = e.right.value
        if op is Op.NE:
            assert not isinstance(const, tuple)
            present = self._present(key)
            return f"({present} AND NOT {self._compare(key, Op.EQ, const)})"
        if op is Op.IN:
            assert isinstance(const, tuple)
            return self._any_eq(key, const)
        if op is Op.NIN:
            assert isinstance(const, tuple)
            present = self._present(key)
            return f"({present} AND NOT {self._any_eq(key, const)})"
        assert not isinstance(const, tuple)
        return self._compare(key, op, const)


def _utf8(v: Any) -> Any:
    # A lone surrogate is a valid Python str but no text: the driver would fail with UnicodeEncodeError.
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            raise FilterExpressionError(f"The filter text {v!r} holds a lone surrogate, which is not text") from None
    return v


def _int64(v: Scalar) -> Scalar:
    if isinstance(v, int) and not _INT64[0] <= v <= _INT64[1]:
        raise FilterExpressionError(f"The integer {v} is beyond the 64-bit range SQL stores compare")
    return v


def to_sql(expr: Expression, column: str = "metadata") -> tuple[str, list[Any]]:
    """A SQLite boolean SQL expression and its parameters for ``expr`` over the JSON ``column``."""
    if not isinstance(expr, Expression):
        raise TypeError(f"expected a filter Expression, got {type(expr).__name__}")
    t = _Translator(column)
    return t.translate(expr), t.params
