"""``Query``: the unit that flows through modular RAG (transform -> expand -> retrieve -> augment)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatclient.messages import Message

_KEEP: Any = object()


class Query:
    """Query text plus the conversation ``history`` and the advisor ``context`` it came with.

    Immutable; compares by value and hashes by text, so it can key the joiner's mapping.
    """

    __slots__ = ("context", "history", "text")

    text: str
    history: tuple[Message, ...]
    context: Mapping[str, Any]

    def __init__(self, text: str, history: Sequence[Message] = (), context: Mapping[str, Any] | None = None) -> None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("query text cannot be None or blank")
        object.__setattr__(self, "text", text)
        object.__setattr__(self, "history", tuple(history))
        object.__setattr__(self, "context", MappingProxyType(dict(context or {})))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Query is immutable; use mutate(...)")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Query):
            return NotImplemented
        return (self.text, self.history, dict(self.context)) == (other.text, other.history, dict(other.context))

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Query(text={self.text!r}, history={len(self.history)} messages, context={sorted(self.context)})"

    def mutate(
        self, *, text: str = _KEEP, history: Sequence[Message] = _KEEP, context: Mapping[str, Any] = _KEEP
    ) -> Query:
        """A copy with the given parts replaced."""
        return Query(
            self.text if text is _KEEP else text,
            self.history if history is _KEEP else history,
            self.context if context is _KEEP else context,
        )
