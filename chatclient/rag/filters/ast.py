"""The filter-expression tree shared by the parser, the ``F`` builder, the evaluator and translators.

An expression is ``Expression(op, left, right)``: comparisons have a ``Key`` on the left and a
``Value`` on the right; ``AND``/``OR`` combine two expressions; ``NOT`` has one operand; the null
tests have only a key. Parentheses leave no node behind: grouping is the tree's shape, and
:func:`to_text` puts parentheses back wherever precedence needs them.

Long chains are cheap, deep nesting is refused: ``a AND b AND c ...`` with thousands of terms is
fine everywhere (every walker treats a chain of one operator as one flat list, without
recursion), but nesting -- a change of operator, a ``NOT``, a parenthesised group of another
operator -- deeper than :data:`MAX_FILTER_DEPTH` levels raises ``FilterExpressionError`` when the
expression is built, whether by the parser, ``F`` or the ``&``/``|``/``~`` operators.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from chatclient.errors import FilterExpressionError

MAX_FILTER_DEPTH = 32
"""Nesting levels an expression may have (chains of one operator count as one level)."""

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


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Expression:
    """One node of a filter expression."""

    op: Op
    left: Expression | Key
    right: Expression | Value | None = None
    # Computed at construction from the children (already built), so neither needs recursion.
    depth: int = field(default=0, init=False, compare=False, repr=False)
    _hash: int = field(default=0, init=False, compare=False, repr=False)
    _operands: tuple[Expression, ...] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        op, left, right = self.op, self.left, self.right
        self._check(op, left, right)
        depth = 0
        for child in (left, right):
            if isinstance(child, Expression):
                # a left child of the same AND/OR continues the chain (AND/OR are left-associative,
                # as the parser and F build them); anything else opens a level
                same_chain = op in (Op.AND, Op.OR) and child.op is op and child is left
                depth = max(depth, child.depth if same_chain else child.depth + 1)
        if depth > MAX_FILTER_DEPTH:
            raise FilterExpressionError(
                f"The filter nests deeper than {MAX_FILTER_DEPTH} levels; flatten it (long AND/OR chains are fine)"
            )
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "_hash", hash((op, left, right)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Expression):
            return NotImplemented
        pending: list[tuple[object, object]] = [(self, other)]
        while pending:  # iterative: a 10000-term chain is 10000 levels of left children
            a, b = pending.pop()
            if a is b:
                continue
            if isinstance(a, Expression) and isinstance(b, Expression):
                if a.op is not b.op or a._hash != b._hash:
                    return False
                pending.append((a.left, b.left))
                pending.append((a.right, b.right))
            elif isinstance(a, Expression) or isinstance(b, Expression) or a != b:
                return False
        return True

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        # The dataclass layout, built with an explicit stack instead of recursion.
        out: list[str] = []
        pending: list[object] = [self]
        while pending:
            item = pending.pop()
            if isinstance(item, _Text):
                out.append(item.text)
            elif isinstance(item, Expression):
                pending += [_Text(")"), item.right, _Text(", right="), item.left]
                pending.append(_Text(f"Expression(op={item.op!r}, left="))
            else:
                out.append(repr(item))
        return "".join(out)

    @staticmethod
    def _check(op: Op, left: object, right: object) -> None:
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

    def operands(self) -> tuple[Expression, ...]:
        """The operands of the maximal chain of this node's AND/OR operator, in order (``(self,)`` otherwise)."""
        if self.op not in (Op.AND, Op.OR):
            return (self,)
        if self._operands is not None:  # computed once: evaluators call this per document
            return self._operands
        out: list[Expression] = []
        pending: list[Expression] = [self]
        while pending:
            e = pending.pop()
            if e.op is self.op:
                assert isinstance(e.left, Expression) and isinstance(e.right, Expression)
                pending += [e.right, e.left]
            else:
                out.append(e)
        object.__setattr__(self, "_operands", tuple(out))
        return tuple(out)

    def __and__(self, other: Expression) -> Expression:
        return Expression(Op.AND, self, other)

    def __or__(self, other: Expression) -> Expression:
        return Expression(Op.OR, self, other)

    def __invert__(self) -> Expression:
        return Expression(Op.NOT, self)

    def __str__(self) -> str:
        return to_text(self)


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


def walk(expr: Expression) -> Iterator[Expression]:
    """Every node of ``expr`` (pre-order), without recursion."""
    pending = [expr]
    while pending:
        e = pending.pop()
        yield e
        for child in (e.right, e.left):
            if isinstance(child, Expression):
                pending.append(child)


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
        # Walk down the left spine of the chain (no recursion per term). AND/OR are
        # left-associative: a right operand of the same operator needs parentheses.
        rights: list[Expression] = []
        node = e
        while node.op is op:
            assert isinstance(node.left, Expression) and isinstance(node.right, Expression)
            rights.append(node.right)
            node = node.left
        parts = [_text(node, prec)] + [_text(r, prec + 1) for r in reversed(rights)]
        s = f" {op.value} ".join(parts)
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
