"""The VectorStore contract, run against every built-in store, plus store-specific behaviour."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chatclient.errors import FilterExpressionError
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest, SimpleVectorStore, SqliteVectorStore
from chatclient.rag.filters import F
from chatclient.rag.stores.base import BaseVectorStore, VectorStore, top_k

CORPUS = json.loads((Path(__file__).parents[1] / "data" / "rag" / "corpus.json").read_text())
DOCS = [Document(d["text"], {"topic": d["topic"], "n": i}, id=d["id"]) for i, d in enumerate(CORPUS["documents"])]

StoreFactory = Callable[[], BaseVectorStore]


_HAS_QDRANT = importlib.util.find_spec("qdrant_client") is not None
STORE_KINDS = [
    "simple",
    "sqlite",
    pytest.param("qdrant", marks=pytest.mark.skipif(not _HAS_QDRANT, reason="qdrant-client is not installed")),
]


@pytest.fixture(params=STORE_KINDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    created: list[BaseVectorStore] = []

    def factory() -> BaseVectorStore:
        model = HashingEmbeddingModel(dimensions=512, char_ngrams=True)
        store: BaseVectorStore
        if request.param == "simple":
            store = SimpleVectorStore(model)
        elif request.param == "qdrant":
            from chatclient.rag.stores.qdrant import QdrantVectorStore

            store = QdrantVectorStore(model)
        else:
            store = SqliteVectorStore(tmp_path / f"store{len(created)}.db", model)
        created.append(store)
        return store

    yield factory
    for s in created:
        if isinstance(s, SqliteVectorStore):
            s.close()


@pytest.fixture
def store(make_store: StoreFactory) -> BaseVectorStore:
    s = make_store()
    s.add(DOCS)
    return s


def ids(docs: list[Document]) -> list[str]:
    return [d.id for d in docs]


def test_is_a_vector_store(store: BaseVectorStore) -> None:
    assert isinstance(store, VectorStore)


def test_search_returns_scored_documents_best_first(store: BaseVectorStore) -> None:
    found = store.similarity_search(SearchRequest("Who wrote Hamlet and Macbeth?", top_k=5))
    assert len(found) == 5
    assert found[0].id == "shakespeare"
    scores = [d.score for d in found]
    assert all(isinstance(s, float) for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    original = next(d for d in DOCS if d.id == "shakespeare")
    assert found[0].text == original.text and dict(found[0].metadata) == dict(original.metadata)


def test_plain_text_query_uses_default_top_k(store: BaseVectorStore) -> None:
    assert len(store.similarity_search("espresso coffee")) == 4


def test_top_k_zero_and_larger_than_store(store: BaseVectorStore) -> None:
    assert store.similarity_search(SearchRequest("coffee", top_k=0)) == []
    assert len(store.similarity_search(SearchRequest("coffee", top_k=1000))) == len(DOCS)


def test_threshold_keeps_only_scores_at_or_above(store: BaseVectorStore) -> None:
    everything = store.similarity_search(SearchRequest("espresso coffee beans", top_k=100))
    cut = everything[2].score
    assert cut is not None and 0 < cut < 1
    kept = store.similarity_search(SearchRequest("espresso coffee beans", top_k=100, similarity_threshold=cut))
    assert ids(kept) == ids(everything[: len(kept)])
    assert len(kept) >= 3 and all(d.score is not None and d.score >= cut for d in kept)
    assert store.similarity_search(SearchRequest("espresso", top_k=100, similarity_threshold=1.0)) == []


@pytest.mark.parametrize(
    ("flt", "expected_topics"),
    [
        ("topic == 'biology'", {"biology"}),
        (F.in_("topic", "cooking", "sport"), {"cooking", "sport"}),
        ("topic != 'biology' AND n < 5", {"landmark", "computing", "geography"}),
        ("NOT (topic IN ['biology', 'geography', 'computing', 'landmark'])", None),
    ],
)
def test_filters_restrict_results(store: BaseVectorStore, flt: Any, expected_topics: set[str] | None) -> None:
    found = store.similarity_search(SearchRequest("energy", top_k=100, filter_expression=flt))
    request = SearchRequest(filter_expression=flt)
    from chatclient.rag.filters import evaluate

    assert request.filter_expression is not None
    want = {d.id for d in DOCS if evaluate(request.filter_expression, d.metadata)}
    assert set(ids(found)) == want and want
    if expected_topics is not None:
        assert {d.metadata["topic"] for d in found} == expected_topics


def test_filter_with_threshold_and_top_k(store: BaseVectorStore) -> None:
    found = store.similarity_search(
        SearchRequest("cells energy ATP", top_k=2, similarity_threshold=0.01, filter_expression="topic == 'biology'")
    )
    assert found[0].id == "mitochondria" and len(found) <= 2
    assert all(d.metadata["topic"] == "biology" for d in found)


def test_add_replaces_same_id(store: BaseVectorStore) -> None:
    store.add(
        [
            Document(
                "Croissants are flaky French pastries made with laminated butter dough.", {"topic": "x"}, id="eiffel"
            )
        ]
    )
    found = store.similarity_search(SearchRequest("flaky butter pastry croissant", top_k=1))
    assert found[0].id == "eiffel" and found[0].metadata["topic"] == "x"
    assert len(store.similarity_search(SearchRequest("anything", top_k=1000))) == len(DOCS)


def test_delete_by_ids_ignores_unknown(store: BaseVectorStore) -> None:
    store.delete(["shakespeare", "no-such-id"])
    found = store.similarity_search(SearchRequest("Who wrote Hamlet?", top_k=100))
    assert "shakespeare" not in ids(found) and len(found) == len(DOCS) - 1


def test_delete_by_filter_text_and_expression(store: BaseVectorStore) -> None:
    store.delete("topic == 'biology'")
    store.delete(F.eq("topic", "support"))
    left = store.similarity_search(SearchRequest("x", top_k=100))
    assert {d.metadata["topic"] for d in left}.isdisjoint({"biology", "support"})
    assert len(left) == len(DOCS) - 6  # 4 biology + 2 support documents
    # search still works on the compacted data
    assert store.similarity_search(SearchRequest("Who wrote Hamlet?", top_k=1))[0].id == "shakespeare"


def test_delete_bad_arguments(store: BaseVectorStore) -> None:
    with pytest.raises(FilterExpressionError):
        store.delete("topic ==")
    with pytest.raises(ValueError):
        store.delete("   ")
    with pytest.raises(TypeError):
        store.delete([1, 2])  # type: ignore[list-item]


def test_empty_store_and_delete_everything(make_store: StoreFactory) -> None:
    s = make_store()
    assert s.similarity_search("anything") == []
    s.add(DOCS[:3])
    s.delete([d.id for d in DOCS[:3]])
    assert s.similarity_search("anything") == []
    s.add(DOCS[3:5])
    assert len(s.similarity_search(SearchRequest("x", top_k=10))) == 2


def test_dimension_change_is_rejected(make_store: StoreFactory) -> None:
    s = make_store()
    s.add(DOCS[:2])
    s.embedding_model = HashingEmbeddingModel(dimensions=16)
    with pytest.raises(ValueError, match="dimension"):
        s.add(DOCS[2:3])


def test_concurrent_adds_lose_nothing(make_store: StoreFactory) -> None:
    s = make_store()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def worker(w: int) -> None:
        try:
            barrier.wait()
            for j in range(10):
                s.add([Document(f"worker {w} item {j} text", {"w": w}, id=f"{w}-{j}-{k}") for k in range(3)])
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    found = s.similarity_search(SearchRequest("worker item", top_k=1000))
    assert len(found) == 120 and len(set(ids(found))) == 120
    # every document is still findable by its own text (rows and documents stayed aligned)
    for w, j in [(0, 0), (3, 9), (2, 5)]:
        hit = s.similarity_search(SearchRequest(f"worker {w} item {j} text", top_k=3, filter_expression=F.eq("w", w)))
        assert hit[0].id.startswith(f"{w}-{j}-") and hit[0].score == pytest.approx(1.0, abs=1e-5)


def test_async_variants(store: BaseVectorStore) -> None:
    async def scenario() -> list[Document]:
        await store.aadd(
            [Document("Giraffes have very long necks to reach acacia leaves.", {"topic": "zoo"}, id="giraffe")]
        )
        first = await store.asimilarity_search(SearchRequest("long neck giraffe", top_k=1))
        await store.adelete(["giraffe"])
        after = await store.asimilarity_search(SearchRequest("long neck giraffe", top_k=1))
        return first + after

    first, after = asyncio.run(scenario())
    assert first.id == "giraffe" and after.id != "giraffe"


# -- store-specific --------------------------------------------------------------------------------


def test_top_k_matches_full_sort() -> None:
    rng = np.random.default_rng(7)
    scores = rng.random(1000).astype(np.float32)
    for k in (1, 5, 50, 999, 1000, 2000):
        assert list(top_k(scores, k)) == list(np.argsort(-scores, kind="stable")[:k])
    assert list(top_k(np.array([0.5, 0.5, 0.9, 0.5], dtype=np.float32), 3)) == [2, 0, 1]


def test_simple_store_save_and_load_round_trip(tmp_path: Path) -> None:
    model = HashingEmbeddingModel(dimensions=512, char_ngrams=True)
    store = SimpleVectorStore(model)
    store.add(DOCS)
    path = tmp_path / "sub" / "store.npz"
    store.save(path)
    loaded = SimpleVectorStore(model).load(path)
    # the class-level form builds a new store
    assert len(SimpleVectorStore.load(path, model)) == len(DOCS)
    request = SearchRequest("Who wrote Hamlet?", top_k=5, filter_expression="n >= 0")
    assert [(d.id, d.text, dict(d.metadata), d.score) for d in loaded.similarity_search(request)] == [
        (d.id, d.text, dict(d.metadata), d.score) for d in store.similarity_search(request)
    ]
    # the file is a plain npz (no pickled objects): numpy can read it with pickle disabled
    with np.load(path, allow_pickle=False) as npz:
        assert npz["embeddings"].shape == (len(DOCS), 512)
    assert not list(tmp_path.glob("sub/*.tmp"))


def test_simple_store_load_rejects_foreign_file(tmp_path: Path) -> None:
    path = tmp_path / "other.npz"
    with path.open("wb") as fh:
        np.savez(fh, embeddings=np.zeros((1, 2), np.float32), documents=np.frombuffer(b'{"format": "x"}', np.uint8))
    with pytest.raises(ValueError, match="not written by"):
        SimpleVectorStore(HashingEmbeddingModel()).load(path)


def test_simple_store_empty_save_load(tmp_path: Path) -> None:
    SimpleVectorStore(HashingEmbeddingModel()).save(tmp_path / "e.npz")
    assert SimpleVectorStore(HashingEmbeddingModel()).load(tmp_path / "e.npz").similarity_search("x") == []


def test_sqlite_store_persists_and_sees_other_connections(tmp_path: Path) -> None:
    model = HashingEmbeddingModel(dimensions=512, char_ngrams=True)
    path = tmp_path / "kb.db"
    with SqliteVectorStore(path, model) as writer:
        writer.add(DOCS)
    reader = SqliteVectorStore(path, model)
    other = SqliteVectorStore(path, model)
    try:
        assert reader.similarity_search(SearchRequest("Who wrote Hamlet?", top_k=1))[0].id == "shakespeare"
        # a commit through another connection invalidates the reader's cached matrix
        other.add([Document("Hamlet is a tragedy about a Danish prince, written by Shakespeare.", id="hamlet")])
        top = reader.similarity_search(SearchRequest("Hamlet Danish prince tragedy", top_k=1))
        assert top[0].id == "hamlet"
        other.delete(["hamlet"])
        assert "hamlet" not in ids(reader.similarity_search(SearchRequest("Hamlet Danish prince", top_k=3)))
        assert len(reader) == len(DOCS)
        assert [d.id for d in reader.get(["moon", "nope", "eiffel"])] == ["moon", "eiffel"]
    finally:
        reader.close()
        other.close()


def test_sqlite_store_rejects_bad_table_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SqliteVectorStore(tmp_path / "x.db", HashingEmbeddingModel(), table="t; DROP TABLE x")


def test_embedding_calls_are_batched() -> None:
    model = HashingEmbeddingModel()
    store = SimpleVectorStore(model, embed_batch_size=10)
    store.add([Document(f"doc {i}") for i in range(25)])
    assert model.calls == 3


def test_sqlite_store_sees_writes_from_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "shared.db"
    model = HashingEmbeddingModel(dimensions=512, char_ngrams=True)
    reader = SqliteVectorStore(path, model)
    try:
        reader.add(DOCS)
        assert reader.similarity_search(SearchRequest("zebra stripes savanna", top_k=1))[0].id != "zebra"
        code = (
            "import sys\n"
            "from chatclient.rag import Document, HashingEmbeddingModel, SqliteVectorStore\n"
            "s = SqliteVectorStore(sys.argv[1], HashingEmbeddingModel(dimensions=512, char_ngrams=True))\n"
            "s.add([Document('Zebras have black and white stripes and live on the savanna.', {'topic': 'zoo'}, id='zebra')])\n"
            "s.delete(['moon'])\n"
            "s.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=120)
        assert reader.similarity_search(SearchRequest("zebra stripes savanna", top_k=1))[0].id == "zebra"
        assert "moon" not in ids(reader.similarity_search(SearchRequest("Apollo moon landing", top_k=100)))
    finally:
        reader.close()
