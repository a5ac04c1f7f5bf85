"""``SearchRequest``: what to look for in a vector store, how many results, and which documents qualify."""

from __future__ import annotations

from typing import Any

from chatclient.rag.filters import Expression, as_expression

DEFAULT_TOP_K = 4
SIMILARITY_THRESHOLD_ACCEPT_ALL = 0.0
_KEEP: Any = object()


class SearchRequest:
    """A similarity search: ``query`` text, at most ``top_k`` results with score >= ``similarity_threshold``,
    restricted to documents matching ``filter_expression`` (filter text is parsed on construction).

    Immutable and compared by value. A threshold of 0.0 accepts every document, whatever its score.

    >>> SearchRequest("capital of France", top_k=2, filter_expression="lang == 'en'").filter_expression
    Expression(op=<Op.EQ: '=='>, left=Key(name='lang'), right=Value(value='en'))
    """

    __slots__ = ("filter_expression", "query", "similarity_threshold", "top_k")

    query: str
    top_k: int
    similarity_threshold: float
    filter_expression: Expression | None

    def __reduce__(self) -> tuple[Any, ...]:
        return (SearchRequest, (self.query, self.top_k, self.similarity_threshold, self.filter_expression))

    def __init__(
        self,
        query: str = "",
        top_k: int = DEFAULT_TOP_K,
        similarity_threshold: float = SIMILARITY_THRESHOLD_ACCEPT_ALL,
        filter_expression: Expression | str | None = None,
    ) -> None:
        if query is None or not isinstance(query, str):
            raise ValueError("query cannot be None; use '' for no query")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
            raise ValueError(f"top_k must be an int >= 0, got {top_k!r}")
        t = similarity_threshold
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0.0 <= t <= 1.0:
            raise ValueError(f"similarity_threshold must be in [0, 1], got {t!r}")
        object.__setattr__(self, "query", query)
        object.__setattr__(self, "top_k", top_k)
        object.__setattr__(self, "similarity_threshold", float(t))
        object.__setattr__(self, "filter_expression", as_expression(filter_expression))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("SearchRequest is immutable; use copy(...)")

    def _fields(self) -> tuple[str, int, float, Expression | None]:
        return (self.query, self.top_k, self.similarity_threshold, self.filter_expression)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SearchRequest):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"SearchRequest(query={self.query!r}, top_k={self.top_k}, "
            f"similarity_threshold={self.similarity_threshold}, filter_expression={self.filter_expression!r})"
        )

    def copy(
        self,
        *,
        query: str = _KEEP,
        top_k: int = _KEEP,
        similarity_threshold: float = _KEEP,
        filter_expression: Expression | str | None = _KEEP,
    ) -> SearchRequest:
        """A copy with the given fields replaced (validated again)."""
        return SearchRequest(
            self.query if query is _KEEP else query,
            self.top_k if top_k is _KEEP else top_k,
            self.similarity_threshold if similarity_threshold is _KEEP else similarity_threshold,
            self.filter_expression if filter_expression is _KEEP else filter_expression,
        )


def as_search_request(request: SearchRequest | str) -> SearchRequest:
    """A ``SearchRequest`` for either a request or plain query text (defaults for the rest)."""
    if isinstance(request, SearchRequest):
        return request
    if isinstance(request, str):
        return SearchRequest(query=request)
    raise TypeError(f"expected a SearchRequest or query text, got {type(request).__name__}")
