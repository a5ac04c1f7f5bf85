"""Translate a filter expression to a Chroma ``where`` pre-filter plus an exact post-filter.

Chroma's ``where`` differs from the portable semantics in several places (``$ne``/``$nin`` match
documents that lack the key; ranges compare integers and floats in separate columns, so
``n < 2.5`` misses ``n == 2``; strings have no ranges; there is no ``NOT`` and no null test). So
the translation pushes down only what Chroma answers exactly — ``==`` and ``IN`` on strings and
booleans, combined with AND/OR — and reports whether that pushed-down part is the whole filter.
When it is not, the store over-fetches candidates with the weaker ``where`` and keeps those for
which :func:`chatclient.rag.filters.evaluate` holds, which gives exactly the portable result.

    >>> from chatclient.rag.filters import parse
    >>> to_chroma_where(parse("topic == 'x' AND n > 3"))
    ChromaFilter(where={'topic': {'$eq': 'x'}}, exact=False)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chatclient.rag.filters.ast import Expression, Key, Op, Value

RESERVED_PREFIX = "chatclient:"
"""Metadata keys starting with this are the store's own (the JSON copy of the metadata)."""


@dataclass(frozen=True, slots=True)
class ChromaFilter:
    """``where`` selects a superset of the matching documents (``None``: no restriction);
    ``exact`` is true when it selects exactly them, so no post-filter is needed."""

    where: dict[str, Any] | None
    exact: bool


def native_key(name: str) -> bool:
    """Whether the store keeps a native (filterable) copy of metadata key ``name`` in Chroma."""
    return not (name.startswith((RESERVED_PREFIX, "chroma:", "$")) or "\x00" in name)


def _pushable_value(v: Any) -> bool:
    # strings and booleans are stored and compared exactly by Chroma; numbers are not (int/float split)
    return isinstance(v, (str, bool))


def _translate(e: Expression) -> ChromaFilter:
    op = e.op
    if op in (Op.AND, Op.OR):
        parts = [_translate(o) for o in e.operands()]
        wheres = [p.where for p in parts if p.where is not None]
        exact = all(p.exact for p in parts)
        if op is Op.OR and len(wheres) < len(parts):
            # one unrestricted branch makes the whole OR unrestricted
            return ChromaFilter(None, False)
        if not wheres:
            return ChromaFilter(None, False)
        where = wheres[0] if len(wheres) == 1 else {"$and" if op is Op.AND else "$or": wheres}
        return ChromaFilter(where, exact)
    if op not in (Op.EQ, Op.IN):
        return ChromaFilter(None, False)
    key = e.left
    assert isinstance(key, Key) and isinstance(e.right, Value)
    if not native_key(key.name):
        return ChromaFilter(None, False)
    value = e.right.value
    if op is Op.EQ:
        if not _pushable_value(value):
            return ChromaFilter(None, False)
        return ChromaFilter({key.name: {"$eq": value}}, True)
    assert isinstance(value, tuple)
    kinds = {type(v) for v in value}
    if not value or len(kinds) != 1 or not _pushable_value(value[0]):
        return ChromaFilter(None, False)
    return ChromaFilter({key.name: {"$in": list(value)}}, True)


def to_chroma_where(expr: Expression) -> ChromaFilter:
    """The Chroma ``where`` pre-filter for ``expr`` and whether it is exact."""
    if not isinstance(expr, Expression):
        raise TypeError(f"expected a filter Expression, got {type(expr).__name__}")
    return _translate(expr)
