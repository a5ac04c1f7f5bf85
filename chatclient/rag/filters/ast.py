"""The filter-expression tree shared by the parser, the ``F`` builder, the evaluator and translators.

An expression is ``Expression(op, left, right)``: comparisons have a ``Key`` on the left and a
``Value`` on the right; ``AND``/``OR`` combine two expressions; ``NOT`` has one operand; the null
tests have only a key. Parentheses leave no node behind: grouping is the tree's shape, and
:func:`to_text` puts parentheses back wherever precedence needs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

Scalar = str | int | float | bool


class Op(StrEnum):
    """Operators of the filter language."""

    AND = "AND"
    OR = "OR"
    NOT = "NOT"
    EQ = "=="
    NE = "!="
    GT = ">"
    GTE = ">="
    LT = "<"
    LTE = "<="
    IN = "IN"
    NIN = "NIN"
    IS_NULL = "IS NULL"
    IS_NOT_NULL = "IS NOT NULL"


COMPARISONS = frozenset({Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE})
SET_OPS = frozenset({Op.IN, Op.NIN})
NULL_OPS = frozenset({Op.IS_NULL, Op.IS_NOT_NULL})


@dataclass(frozen=True, slots=True)
class Key:
    """A metadata key (a flat name; ``a.b`` is the key ``"a.b"``, not a nested lookup)."""

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a filter key must be a non-empty string")


@dataclass(frozen=True, slots=True)
class Value:
    """A constant: a scalar, or a tuple of scalars for ``IN``/``NIN``."""

    value: Scalar | tuple[Scalar, ...]

    def __post_init__(self) -> None:
        v = self.value
        if isinstance(v, list):
            object.__setattr__(self, "value", v := tuple(v))
        items = v if isinstance(v, tuple) else (v,)
        for item in items:
            if not isinstance(item, (str, int, float, bool)):
                raise TypeError(f"filter values must be str, int, float or bool, got {type(item).__name__}")
            if isinstance(item, float) and item != item:
                raise ValueError("NaN is not a valid filter value")


@dataclass(frozen=True, slots=True)
class Expression:
    """One node of a filter expression."""

    op: Op
    left: Expression | Key
    right: Expression | Value | None = None

    def __post_init__(self) -> None:
        op, left, right = self.op, self.left, self.right
        if op in (Op.AND, Op.OR):
            if not isinstance(left, Expression) or not isinstance(right, Expression):
                raise TypeError(f"{op} combines two expressions")
        elif op is Op.NOT:
            if not isinstance(left, Expression) or right is not None:
                raise TypeError("NOT takes exactly one expression")
        elif op in NULL_OPS:
            if not isinstance(left, Key) or right is not None:
                raise TypeError(f"{op} takes a key only")
        else:
            if not isinstance(left, Key) or not isinstance(right, Value):
                raise TypeError(f"{op} compares a key with a value")
            if (op in SET_OPS) != isinstance(right.value, tuple):
                raise TypeError(f"{op} needs {'a list' if op in SET_OPS else 'a single value'}")

    def __and__(self, other: Expression) -> Expression:
        return Expression(Op.AND, self, other)

    def __or__(self, other: Expression) -> Expression:
        return Expression(Op.OR, self, other)

    def __invert__(self) -> Expression:
        return Expression(Op.NOT, self)

    def __str__(self) -> str:
        return to_text(self)


_PRECEDENCE = {Op.OR: 1, Op.AND: 2, Op.NOT: 3}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_KEYWORDS = {"and", "or", "not", "in", "nin", "is", "null", "true", "false", "where"}


def _key_text(key: Key) -> str:
    if _IDENT.match(key.name) and key.name.lower() not in _KEYWORDS:
        return key.name
    return _quote(key.name)


def _quote(s: str) -> str:
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _scalar_text(v: Scalar) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return _quote(v)
    return repr(v)


def _value_text(v: Value) -> str:
    if isinstance(v.value, tuple):
        return "[" + ", ".join(_scalar_text(x) for x in v.value) + "]"
    return _scalar_text(v.value)


def to_text(expr: Expression) -> str:
    """Render an expression in the filter language; ``parse(to_text(e)) == e`` for every ``e``."""
    return _text(expr, 0)


def _text(e: Expression, parent: int) -> str:
    op = e.op
    if op in (Op.AND, Op.OR):
        prec = _PRECEDENCE[op]
        assert isinstance(e.left, Expression) and isinstance(e.right, Expression)
        # AND/OR are left-associative: a right operand of the same operator needs parentheses
        s = f"{_text(e.left, prec)} {op.value} {_text(e.right, prec + 1)}"
        return f"({s})" if prec < parent else s
    if op is Op.NOT:
        assert isinstance(e.left, Expression)
        return f"NOT {_text(e.left, _PRECEDENCE[Op.NOT])}"
    assert isinstance(e.left, Key)
    key = _key_text(e.left)
    if op in NULL_OPS:
        return f"{key} {op.value}"
    assert isinstance(e.right, Value)
    return f"{key} {op.value} {_value_text(e.right)}"
