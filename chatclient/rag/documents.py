"""The unit of retrieval: a piece of text with metadata, an id and (after a search) a score."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

_EMPTY: Mapping[str, Any] = MappingProxyType({})
_KEEP: Any = object()


def _new_id() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class Document:
    """A text with metadata; ``score`` is set by vector stores on search results (higher = closer).

    >>> d = Document("Paris is the capital of France.", {"lang": "en"})
    >>> d.metadata["lang"], d.score
    ('en', None)
    """

    text: str
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    id: str = field(default_factory=_new_id)
    score: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"Document text must be a str, got {type(self.text).__name__}")
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("Document id must be a non-empty string")
        md = self.metadata
        if md is None:
            md = _EMPTY
        for k in md:
            if not isinstance(k, str) or not k:
                raise ValueError("Document metadata keys must be non-empty strings")
        # a private copy: callers mutating their dict afterwards must not change the document
        object.__setattr__(self, "metadata", MappingProxyType(dict(md)) if md else _EMPTY)

    def __hash__(self) -> int:
        # metadata is a mapping (unhashable); equal documents always share an id, so this is consistent
        return hash(self.id)

    def copy(
        self,
        *,
        text: str = _KEEP,
        metadata: Mapping[str, Any] = _KEEP,
        score: float | None = _KEEP,
    ) -> Document:
        """A copy with the given fields replaced; the id is kept."""
        changes: dict[str, Any] = {}
        if text is not _KEEP:
            changes["text"] = text
        if metadata is not _KEEP:
            changes["metadata"] = metadata
        if score is not _KEEP:
            changes["score"] = score
        return replace(self, **changes)

    def with_score(self, score: float | None) -> Document:
        """A copy carrying ``score``."""
        # hot path of every search result: the fields are already validated, so skip __init__
        doc = object.__new__(Document)
        object.__setattr__(doc, "text", self.text)
        object.__setattr__(doc, "metadata", self.metadata)
        object.__setattr__(doc, "id", self.id)
        object.__setattr__(doc, "score", score)
        return doc

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (used by ``save``)."""
        return {"id": self.id, "text": self.text, "metadata": dict(self.metadata), "score": self.score}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Document:
        """The inverse of :meth:`to_dict`."""
        return cls(
            text=data["text"],
            metadata=data.get("metadata") or {},
            id=data.get("id") or _new_id(),
            score=data.get("score"),
        )


def join_texts(documents: Any) -> str:
    """The documents' texts joined with ``\\n`` (how advisors put retrieved context into a prompt)."""
    return "\n".join(d.text for d in documents)
