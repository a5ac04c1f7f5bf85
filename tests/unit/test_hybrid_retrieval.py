"""BM25 keyword retrieval and hybrid (vector + keyword, reciprocal rank fusion) retrieval."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from advisors import RetrievalAugmentationAdvisor
from chatclient import ChatClient, ContextKeys
from chatclient.rag import (
    BM25DocumentRetriever,
    Document,
    DocumentRetriever,
    HashingEmbeddingModel,
    HybridDocumentRetriever,
    LocalEmbeddingModel,
    Query,
    SimpleVectorStore,
    SqliteFtsDocumentRetriever,
)
from chatclient.rag.bm25 import tokenize
from chatclient.testing import ScriptedChatModel

DOCS = [
    Document("Error E1042 means the disk quota is exhausted.", {"kind": "error"}, id="e1042"),
    Document("The storage volume ran out of free space last night.", {"kind": "incident"}, id="space"),
    Document("Our cafeteria serves soup on Mondays.", {"kind": "misc"}, id="soup"),
    Document("Restart the sync agent when uploads stall.", {"kind": "howto"}, id="sync"),
    Document("Error E2001 is raised when a token expires.", {"kind": "error"}, id="e2001"),
]


@pytest.fixture(scope="module")
def minilm() -> LocalEmbeddingModel:
    return LocalEmbeddingModel()


def ids(docs: list[Document]) -> list[str]:
    return [d.id for d in docs]


def test_tokenize_lowercases_and_drops_stop_words() -> None:
    assert tokenize("What does Error E1042 mean for THE disk?") == ["error", "e1042", "mean", "disk"]


def test_bm25_ranks_exact_terms_first_and_sets_scores() -> None:
    bm25 = BM25DocumentRetriever(DOCS, top_k=3)
    hits = bm25.retrieve(Query("what is error E1042"))
    assert hits[0].id == "e1042"
    assert "e2001" in ids(hits)  # shares the word "error"
    assert all(d.score is not None and d.score > 0 for d in hits)
    assert [d.score for d in hits] == sorted((d.score or 0.0 for d in hits), reverse=True)
    assert isinstance(bm25, DocumentRetriever)


def test_bm25_returns_nothing_without_a_shared_word_and_respects_top_k() -> None:
    bm25 = BM25DocumentRetriever(DOCS, top_k=1)
    assert bm25.retrieve(Query("quantum chromodynamics")) == []
    assert len(bm25.retrieve(Query("error"))) == 1
    assert len(bm25.retrieve(Query("error"), top_k=5)) == 2


def test_bm25_filters_exactly_from_argument_and_query_context() -> None:
    bm25 = BM25DocumentRetriever(DOCS, top_k=5, filter_expression="kind == 'error'")
    assert set(ids(bm25.retrieve(Query("error disk space soup")))) == {"e1042", "e2001"}
    q = Query("error disk space soup", context={ContextKeys.FILTER_EXPRESSION: "kind == 'misc'"})
    assert ids(bm25.retrieve(q)) == ["soup"]
    assert ids(bm25.search("disk error", filter_expression="kind IN ['incident']")) == []


def test_bm25_reads_a_store_and_refreshes_after_changes() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    store.add(DOCS[:2])
    bm25 = BM25DocumentRetriever(store)
    assert len(bm25) == 2 and bm25.retrieve(Query("soup")) == []
    store.add([DOCS[2]])
    bm25.refresh()
    assert ids(bm25.retrieve(Query("soup"))) == ["soup"]


def test_bm25_empty_corpus_and_bad_arguments() -> None:
    assert BM25DocumentRetriever([]).retrieve(Query("anything")) == []
    with pytest.raises(ValueError, match="top_k"):
        BM25DocumentRetriever(DOCS, top_k=0)
    with pytest.raises(ValueError, match="documents_or_store"):
        BM25DocumentRetriever(None)
    with pytest.raises(TypeError, match="Document"):
        BM25DocumentRetriever(["plain text"])


def test_bm25_bounds_the_query_it_tokenizes() -> None:
    bm25 = BM25DocumentRetriever(DOCS)
    # the term is beyond the first MAX_QUERY_CHARS characters, so it is not searched
    assert bm25.retrieve(Query("x " * 6000 + "soup")) == []


def test_hybrid_finds_what_either_side_alone_misses(minilm: LocalEmbeddingModel) -> None:
    store = SimpleVectorStore(minilm)
    store.add(DOCS)
    query = Query("the volume is out of space, what does E1042 say?")
    vector_top1 = store.similarity_search(query.text)[0].id
    keyword_top1 = BM25DocumentRetriever(store).retrieve(query)[0].id
    hybrid = HybridDocumentRetriever(vector_store=store, keyword_retriever=BM25DocumentRetriever(store), top_k=2)
    fused = hybrid.retrieve(query)
    assert set(ids(fused)) == {"e1042", "space"}
    assert {vector_top1, keyword_top1} <= {"e1042", "space"}
    # RRF scores: 1/(60+r1) + 1/(60+r2); a document at rank 1 on both sides would score 2/61
    assert all(0 < (d.score or 0) <= 2 / 61 + 1e-9 for d in fused)


def test_hybrid_fused_scores_follow_reciprocal_rank_fusion() -> None:
    class Fixed:
        def __init__(self, order: list[str]) -> None:
            self.order = order

        def retrieve(self, query: Query) -> list[Document]:
            by_id = {d.id: d for d in DOCS}
            return [by_id[i] for i in self.order]

    hybrid = HybridDocumentRetriever(
        vector_store=Fixed(["soup", "sync", "space"]), keyword_retriever=Fixed(["space", "e1042"]), top_k=3
    )
    fused = hybrid.retrieve(Query("q"))
    # sync and e1042 tie (both rank 2, 1/62); ties keep first-seen order, and the vector list comes first
    assert ids(fused) == ["space", "soup", "sync"]
    assert fused[0].score == pytest.approx(1 / 63 + 1 / 61)
    weighted = HybridDocumentRetriever(
        vector_store=Fixed(["soup"]), keyword_retriever=Fixed(["e1042"]), top_k=2, keyword_weight=2.0
    )
    assert ids(weighted.retrieve(Query("q"))) == ["e1042", "soup"]


def test_hybrid_defaults_to_bm25_over_the_store_and_passes_filters() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    store.add(DOCS)
    hybrid = HybridDocumentRetriever(vector_store=store, top_k=3)
    assert isinstance(hybrid.keyword_retriever, BM25DocumentRetriever)
    q = Query("error token disk", context={ContextKeys.FILTER_EXPRESSION: "kind == 'error'"})
    assert set(ids(hybrid.retrieve(q))) == {"e1042", "e2001"}
    assert set(ids(asyncio.run(hybrid.aretrieve(q)))) == {"e1042", "e2001"}


def test_hybrid_validates_arguments() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    with pytest.raises(ValueError, match="top_k"):
        HybridDocumentRetriever(vector_store=store, keyword_retriever=BM25DocumentRetriever(DOCS), top_k=0)
    with pytest.raises(ValueError, match="candidates"):
        HybridDocumentRetriever(vector_store=store, keyword_retriever=BM25DocumentRetriever(DOCS), candidates=1)
    with pytest.raises(TypeError, match="vector_store"):
        HybridDocumentRetriever(vector_store=object(), keyword_retriever=BM25DocumentRetriever(DOCS))  # type: ignore[arg-type]


def test_hybrid_behind_the_retrieval_augmentation_advisor() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    store.add(DOCS)
    model = ScriptedChatModel(["E1042 means the quota is exhausted."])
    advisor = RetrievalAugmentationAdvisor(document_retriever=HybridDocumentRetriever(vector_store=store, top_k=2))
    response = ChatClient.create(model).prompt().user("What is E1042?").advisors(advisor).call().chat_client_response()
    sent = model.last_prompt.user_message.text
    assert "Error E1042 means the disk quota is exhausted." in sent
    docs = response.context[ContextKeys.DOCUMENT_CONTEXT]
    assert docs[0].id == "e1042" and len(docs) == 2


# -- SQLite FTS5 -----------------------------------------------------------------------------------


def test_fts_ranks_with_stemming_and_takes_updates(tmp_path: Path) -> None:
    path = tmp_path / "kw.db"
    with SqliteFtsDocumentRetriever(path, documents=DOCS, top_k=2) as fts:
        assert isinstance(fts, DocumentRetriever) and len(fts) == 5
        hits = fts.retrieve(Query("errors about the disk"))  # "errors" matches "error" (porter)
        assert ids(hits)[0] == "e1042" and len(hits) == 2 and all((d.score or 0) > 0 for d in hits)
        assert dict(hits[0].metadata) == {"kind": "error"}
        fts.add([Document("Soup is now served on Fridays.", {"kind": "misc"}, id="soup")])  # replaces by id
        assert len(fts) == 5 and "Fridays" in fts.retrieve(Query("soup"))[0].text
        fts.delete(["soup"])
        assert fts.retrieve(Query("soup")) == []
    with SqliteFtsDocumentRetriever(path) as reopened:  # the index survives a restart
        assert len(reopened) == 4


def test_fts_filters_and_ignores_query_operators() -> None:
    fts = SqliteFtsDocumentRetriever(documents=DOCS, top_k=5, filter_expression="kind == 'error'")
    assert set(ids(fts.retrieve(Query("error soup space")))) == {"e1042", "e2001"}
    q = Query("error soup", context={ContextKeys.FILTER_EXPRESSION: "kind == 'misc'"})
    assert ids(fts.retrieve(q)) == ["soup"]
    # FTS5 syntax in user text is quoted away: no column filter, NEAR or syntax error, just words
    plain = SqliteFtsDocumentRetriever(documents=DOCS, top_k=5)
    assert ids(plain.retrieve(Query('text: NEAR("soup" ) * OR - AND'))) == ["soup"]
    assert plain.retrieve(Query('" " the of')) == []
    with pytest.raises(ValueError, match="table"):
        SqliteFtsDocumentRetriever(table="bad name")


def test_hybrid_with_fts_keyword_side() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel())
    store.add(DOCS)
    hybrid = HybridDocumentRetriever(
        vector_store=store, keyword_retriever=SqliteFtsDocumentRetriever(documents=DOCS), top_k=2
    )
    assert ids(hybrid.retrieve(Query("what does E1042 mean")))[0] == "e1042"
