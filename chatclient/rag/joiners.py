"""Joiners merge the documents retrieved for several queries (and retrievers) into one list."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from chatclient.rag.documents import Document
    from chatclient.rag.query import Query

Retrieved = Mapping["Query", Sequence[Sequence["Document"]]]


@runtime_checkable
class DocumentJoiner(Protocol):
    """Merges ``{query: [documents of retriever 1, ...]}`` into one ranked list."""

    def join(self, documents_for_query: Retrieved) -> list[Document]:
        """One ranked, de-duplicated list."""
        ...


class ConcatenationDocumentJoiner:
    """Concatenates every list, keeps the first document for each id, sorts by score (highest first).

    A missing score counts as 0.0; the sort is stable, so equal scores keep their first-seen order.
    """

    def join(self, documents_for_query: Retrieved) -> list[Document]:
        """The joined list (see the class docstring)."""
        seen: dict[str, Document] = {}
        for lists in documents_for_query.values():
            for docs in lists:
                for d in docs:
                    seen.setdefault(d.id, d)
        return sorted(seen.values(), key=lambda d: -(d.score or 0.0))

    __call__ = join


def reciprocal_rank_fusion(lists: Sequence[Sequence[Document]], k: int = 60) -> list[Document]:
    """Fuse ranked lists: each document scores ``sum(1 / (k + rank))`` over the lists it is in (rank from 1).

    Documents are identified by id (the first occurrence is kept) and carry the fused score; equal
    scores keep first-seen order.
    """
    fused: dict[str, float] = {}
    first: dict[str, Document] = {}
    for docs in lists:
        for rank, d in enumerate(docs, start=1):
            fused[d.id] = fused.get(d.id, 0.0) + 1.0 / (k + rank)
            first.setdefault(d.id, d)
    ranked = sorted(fused, key=lambda i: -fused[i])
    return [first[i].with_score(fused[i]) for i in ranked]


class ReciprocalRankFusionJoiner:
    """Joins with Reciprocal Rank Fusion in two stages: the lists of each query, then across queries.

    Scores of different retrievers are not comparable; ranks are. Output scores are the fused ones.
    """

    def __init__(self, k: int = 60) -> None:
        if k < 1:
            raise ValueError("k must be at least 1")
        self.k = k

    def join(self, documents_for_query: Retrieved) -> list[Document]:
        """The fused list, highest fused score first."""
        per_query = [reciprocal_rank_fusion(lists, self.k) for lists in documents_for_query.values()]
        return reciprocal_rank_fusion(per_query, self.k)

    __call__ = join
