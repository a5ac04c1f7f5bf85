"""Evaluate a filter expression against a document's metadata (used by in-memory stores).

Semantics (shared with the SQL translation, and tested against it):

* a missing key, or a ``None`` value, is *null*: ``IS NULL`` is true, every comparison is false
  (including ``!=`` and ``NIN``), so ``NOT`` of a comparison on a null key is true;
* values compare only within one kind: strings with strings, numbers (int/float) with numbers,
  booleans with booleans. Across kinds ``==``/``<``/... are false and ``!=`` is true;
* ``IN`` is true when some list item equals the value; ``NIN`` when the value is not null and no item does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from chatclient.rag.filters.ast import Expression, Key, Op, Value

_ORDER: dict[Op, Callable[[Any, Any], bool]] = {
    Op.GT: operator.gt,
    Op.GTE: operator.ge,
    Op.LT: operator.lt,
    Op.LTE: operator.le,
}


def kind(v: Any) -> str | None:
    """The comparison kind of a value: ``"bool"``, ``"number"``, ``"str"`` or ``None`` (not comparable)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "str"
    return None


def _eq(actual: Any, const: Any) -> bool:
    k = kind(actual)
    return k is not None and k == kind(const) and bool(actual == const)


def evaluate(expr: Expression, metadata: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies ``expr``."""
    op = expr.op
    # A chain is evaluated as one flat list, so recursion follows nesting (bounded by
    # MAX_FILTER_DEPTH), not the number of terms.
    if op is Op.AND:
        return all(evaluate(e, metadata) for e in expr.operands())
    if op is Op.OR:
        return any(evaluate(e, metadata) for e in expr.operands())
    if op is Op.NOT:
        return not evaluate(expr.left, metadata)  # type: ignore[arg-type]
    key = expr.left
    assert isinstance(key, Key)
    actual = metadata.get(key.name)
    if op is Op.IS_NULL:
        return actual is None
    if op is Op.IS_NOT_NULL:
        return actual is not None
    if actual is None:
        return False
    value = expr.right
    assert isinstance(value, Value)
    const = value.value
    if op is Op.EQ:
        return _eq(actual, const)
    if op is Op.NE:
        return not _eq(actual, const)
    if op is Op.IN:
        assert isinstance(const, tuple)
        return any(_eq(actual, c) for c in const)
    if op is Op.NIN:
        assert isinstance(const, tuple)
        return not any(_eq(actual, c) for c in const)
    k = kind(actual)
    if k is None or k != kind(const):
        return False
    return _ORDER[op](actual, const)


def compile_filter(expr: Expression) -> Callable[[Mapping[str, Any]], bool]:
    """A predicate over metadata for ``expr`` (convenient for ``filter()``)."""
    return lambda metadata: evaluate(expr, metadata)
