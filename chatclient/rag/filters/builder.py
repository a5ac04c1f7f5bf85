"""``F``: build filter expressions in code; the result equals what :func:`parse` gives for the text.

F.and_(F.eq("genre", "drama"), F.gte("year", 2020))   # == parse("genre == 'drama' && year >= 2020")
F.eq("genre", "drama") & ~F.lt("year", 2020)           # operators work too
"""

from __future__ import annotations

from collections.abc import Iterable

from chatclient.rag.filters.ast import Expression, Key, Op, Scalar, Value


def _key(key: str | Key) -> Key:
    return key if isinstance(key, Key) else Key(key)


def _list(values: tuple[Scalar | Iterable[Scalar], ...]) -> tuple[Scalar, ...]:
    # accept both F.in_("k", "a", "b") and F.in_("k", ["a", "b"])
    if len(values) == 1 and not isinstance(values[0], (str, bytes, int, float, bool)):
        return tuple(values[0])
    return tuple(values)  # type: ignore[arg-type]


class F:
    """Static constructors for every operator of the filter language."""

    @staticmethod
    def eq(key: str | Key, value: Scalar) -> Expression:
        """``key == value``"""
        return Expression(Op.EQ, _key(key), Value(value))

    @staticmethod
    def ne(key: str | Key, value: Scalar) -> Expression:
        """``key != value``"""
        return Expression(Op.NE, _key(key), Value(value))

    @staticmethod
    def gt(key: str | Key, value: Scalar) -> Expression:
        """``key > value``"""
        return Expression(Op.GT, _key(key), Value(value))

    @staticmethod
    def gte(key: str | Key, value: Scalar) -> Expression:
        """``key >= value``"""
        return Expression(Op.GTE, _key(key), Value(value))

    @staticmethod
    def lt(key: str | Key, value: Scalar) -> Expression:
        """``key < value``"""
        return Expression(Op.LT, _key(key), Value(value))

    @staticmethod
    def lte(key: str | Key, value: Scalar) -> Expression:
        """``key <= value``"""
        return Expression(Op.LTE, _key(key), Value(value))

    @staticmethod
    def in_(key: str | Key, *values: Scalar | Iterable[Scalar]) -> Expression:
        """``key IN [values]`` (values as arguments or one iterable)"""
        return Expression(Op.IN, _key(key), Value(_list(values)))

    @staticmethod
    def nin(key: str | Key, *values: Scalar | Iterable[Scalar]) -> Expression:
        """``key NIN [values]`` (values as arguments or one iterable)"""
        return Expression(Op.NIN, _key(key), Value(_list(values)))

    @staticmethod
    def and_(left: Expression, right: Expression, *more: Expression) -> Expression:
        """``left AND right`` (more operands fold to the left, as the parser does)."""
        expr = Expression(Op.AND, left, right)
        for e in more:
            expr = Expression(Op.AND, expr, e)
        return expr

    @staticmethod
    def or_(left: Expression, right: Expression, *more: Expression) -> Expression:
        """``left OR right`` (more operands fold to the left, as the parser does)."""
        expr = Expression(Op.OR, left, right)
        for e in more:
            expr = Expression(Op.OR, expr, e)
        return expr

    @staticmethod
    def not_(expr: Expression) -> Expression:
        """``NOT expr``"""
        return Expression(Op.NOT, expr)

    @staticmethod
    def is_null(key: str | Key) -> Expression:
        """``key IS NULL`` (missing or None)"""
        return Expression(Op.IS_NULL, _key(key))

    @staticmethod
    def is_not_null(key: str | Key) -> Expression:
        """``key IS NOT NULL``"""
        return Expression(Op.IS_NOT_NULL, _key(key))

    @staticmethod
    def group(expr: Expression) -> Expression:
        """Grouping is the tree's shape, so this returns ``expr`` (kept for Spring AI familiarity)."""
        return expr
