"""Translate a filter expression to a PostgreSQL ``WHERE`` clause over a ``jsonb`` metadata column.

Used by :class:`~chatclient.rag.stores.pgvector.PgVectorStore`. Every key and every constant is a
bound parameter (psycopg ``%s`` placeholders); nothing from the expression reaches the SQL text.
Each leaf yields ``true`` or ``false``, never ``NULL``, so the result has the two-valued semantics
of :mod:`chatclient.rag.filters.evaluator`:

* a missing key or a JSON ``null`` is *null* — every comparison on it is false, ``IS NULL`` true;
* values compare only within one kind (``jsonb_typeof`` guards each comparison): numbers as exact
  decimals (so integers of any size work), booleans ``false < true``, strings by code point
  (``COLLATE "C"``), whatever the database's collation;
* ``==`` is a ``jsonb`` containment test (``metadata @> {"key": value}``), which a GIN index on the
  column can answer; ``IN``/``NIN`` bind the whole list as one ``jsonb`` array parameter.

Long AND/OR chains become balanced groups of at most 8 terms; a filter needing more than 65,535
parameters (PostgreSQL's limit per statement) raises ``FilterExpressionError``.

    >>> from chatclient.rag.filters import F
    >>> to_postgres_sql(F.eq("genre", "drama"))
    ('COALESCE("metadata" @> %s::jsonb, false)', ['{"genre": "drama"}'])
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters.ast import Expression, Key, Op, Scalar, Value
from chatclient.rag.filters.evaluator import kind
from chatclient.rag.filters.sql import join_balanced

MAX_PARAMETERS = 65_535
"""PostgreSQL's limit on bound parameters in one statement."""

_JSON_TYPE = {"str": "string", "number": "number", "bool": "boolean"}
_CMP = {Op.GT: ">", Op.GTE: ">=", Op.LT: "<", Op.LTE: "<="}
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _text(v: str) -> str:
    # PostgreSQL text holds neither NUL nor lone surrogates; say so instead of failing in the driver
    if "\x00" in v:
        raise FilterExpressionError(f"The filter text {v!r} holds a NUL character, which PostgreSQL cannot store")
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise FilterExpressionError(f"The filter text {v!r} holds a lone surrogate, which is not text") from None
    return v


def _json(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        raise FilterExpressionError(f"{value} cannot be compared in PostgreSQL jsonb (JSON has no infinities)")
    if isinstance(value, tuple):
        for v in value:
            _json(v)
    if isinstance(value, str):
        _text(value)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


class _Translator:
    def __init__(self, column: str) -> None:
        if not _COLUMN.match(column):
            raise ValueError(f"column must be a plain SQL identifier, got {column!r}")
        self.col = f'"{column}"'
        self.params: list[Any] = []

    def _bind(self, value: Any) -> str:
        self.params.append(value)
        if len(self.params) > MAX_PARAMETERS:
            raise FilterExpressionError(
                f"The filter needs more than {MAX_PARAMETERS} parameters, PostgreSQL's limit per statement; "
                "use IN lists instead of long OR chains of ==, or split the filter"
            )
        return "%s"

    def _field(self, key: Key) -> str:
        return f"({self.col} -> {self._bind(_text(key.name))}::text)"

    def _typeof(self, key: Key) -> str:
        return f"jsonb_typeof{self._field(key)}"

    def _eq(self, key: Key, const: Scalar) -> str:
        # containment compares numbers by value (2 == 2.0) and never across kinds; a GIN index can serve it
        _json(const)  # refuses what jsonb cannot hold, with a filter error
        return f"COALESCE({self.col} @> {self._bind(_json({_text(key.name): const}))}::jsonb, false)"

    def _present(self, key: Key) -> str:
        return f"COALESCE({self._typeof(key)} <> 'null', false)"

    def _any_eq(self, key: Key, consts: tuple[Scalar, ...]) -> str:
        if not consts:
            return "false"
        if len(consts) == 1:
            return self._eq(key, consts[0])
        field = self._field(key)
        array = self._bind(_json(consts))
        return f"COALESCE({field} IN (SELECT jsonb_array_elements({array}::jsonb)), false)"

    def _order(self, key: Key, op: Op, const: Scalar) -> str:
        k = kind(const)
        assert k is not None
        guard = f"{self._typeof(key)} = '{_JSON_TYPE[k]}'"
        if k == "str":
            # code-point order whatever the database collation, as Python compares strings
            compare = f'(({self.col} ->> {self._bind(_text(key.name))}::text) COLLATE "C") {_CMP[op]} {self._bind(const)}::text'
        else:
            # jsonb orders numbers as exact decimals and false < true, within one type
            compare = f"{self._field(key)} {_CMP[op]} {self._bind(_json(const))}::jsonb"
        return f"COALESCE({guard} AND {compare}, false)"

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
            return f"COALESCE({self._typeof(key)} = 'null', true)"
        if op is Op.IS_NOT_NULL:
            return self._present(key)
        assert isinstance(e.right, Value)
        const = e.right.value
        if op is Op.EQ:
            assert not isinstance(const, tuple)
            return self._eq(key, const)
        if op is Op.NE:
            assert not isinstance(const, tuple)
            return f"({self._present(key)} AND NOT {self._eq(key, const)})"
        if op is Op.IN:
            assert isinstance(const, tuple)
            return self._any_eq(key, const)
        if op is Op.NIN:
            assert isinstance(const, tuple)
            return f"({self._present(key)} AND NOT {self._any_eq(key, const)})"
        assert not isinstance(const, tuple)
        return self._order(key, op, const)


def to_postgres_sql(expr: Expression, column: str = "metadata") -> tuple[str, list[Any]]:
    """A PostgreSQL boolean expression (``%s`` placeholders) and its parameters for ``expr`` over ``column``."""
    if not isinstance(expr, Expression):
        raise TypeError(f"expected a filter Expression, got {type(expr).__name__}")
    t = _Translator(column)
    return t.translate(expr), t.params
