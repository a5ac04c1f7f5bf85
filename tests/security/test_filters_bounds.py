"""Filters: long chains and big IN lists work in every backend; deep nesting and huge integers are typed errors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient.errors import FilterExpressionError
from chatclient.rag.documents import Document
from chatclient.rag.embedding import HashingEmbeddingModel
from chatclient.rag.filters import Expression, F, evaluate, parse, to_sql, to_text
from chatclient.rag.filters.ast import MAX_FILTER_DEPTH
from chatclient.rag.search import SearchRequest
from chatclient.rag.stores.simple import SimpleVectorStore
from chatclient.rag.stores.sqlite import SqliteVectorStore

DOCS = [
    Document(f"document number {i}", {"n": i, "tag": f"t{i % 7}", "flag": i % 2 == 0, "score": i / 3}, id=f"d{i}")
    for i in range(60)
]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SimpleVectorStore, SqliteVectorStore]]:
    model = HashingEmbeddingModel(dimensions=32)
    memory = SimpleVectorStore(model)
    sqlite = SqliteVectorStore(tmp_path / "f.db", model)
    memory.add(DOCS)
    sqlite.add(DOCS)
    yield memory, sqlite
    sqlite.close()


def _ids(store: SimpleVectorStore | SqliteVectorStore, expr: Expression | str) -> set[str]:
    return {d.id for d in store.similarity_search(SearchRequest("document", top_k=1000, filter_expression=expr))}


def _same(stores: tuple[SimpleVectorStore, SqliteVectorStore], expr: Expression | str) -> set[str]:
    memory, sqlite = stores
    expected = {d.id for d in DOCS if evaluate(parse(expr) if isinstance(expr, str) else expr, d.metadata)}
    assert _ids(memory, expr) == expected
    assert _ids(sqlite, expr) == expected
    return expected


@pytest.mark.parametrize("terms", [100, 1000, 1500])
def test_long_and_chain_of_text_works_everywhere(
    stores: tuple[SimpleVectorStore, SqliteVectorStore], terms: int
) -> None:
    text = " AND ".join(f"n != {1000 + i}" for i in range(terms)) + " AND n < 10"
    start = time.perf_counter()
    assert _same(stores, text) == {f"d{i}" for i in range(10)}
    assert time.perf_counter() - start < 10.0  # generous: the machine running tests may be busy
    expr = parse(text)
    assert parse(to_text(expr)) == expr and hash(parse(to_text(expr))) == hash(expr)
    assert repr(expr).startswith("Expression(op=<Op.AND: 'AND'>")


@pytest.mark.parametrize("terms", [1000, 1500])  # 1500: past SQLite's expression depth of 1000
def test_long_or_chain_built_in_code(stores: tuple[SimpleVectorStore, SqliteVectorStore], terms: int) -> None:
    expr = F.or_(*(F.eq("n", 10_000 + i) for i in range(terms)), F.eq("tag", "t3"))
    assert _same(stores, expr) == {d.id for d in DOCS if d.metadata["tag"] == "t3"}
    chained = F.eq("n", -1)
    for i in range(terms):
        chained = chained | F.eq("n", i)  # the operators build the same left chain
    assert _same(stores, chained) == {d.id for d in DOCS}


def test_sql_for_a_long_chain_is_not_one_parenthesis_per_term() -> None:
    sql, params = to_sql(F.and_(*(F.eq("n", i) for i in range(1000))))
    assert sql.count("(") < 1000 * 6  # a handful per comparison, not one more per term of the chain
    assert len(params) == 3000


@pytest.mark.parametrize("count", [2, 999, 5000])
def test_in_lists_bind_one_array_per_kind(stores: tuple[SimpleVectorStore, SqliteVectorStore], count: int) -> None:
    values = list(range(0, count * 2, 2))
    evens = {f"d{i}" for i in range(0, min(60, count * 2), 2)}
    assert _same(stores, F.in_("n", values)) == evens
    assert _same(stores, F.nin("n", values)) == {d.id for d in DOCS} - evens
    tags = [f"t{i}" for i in range(count)]
    expected = {d.id for d in DOCS if d.metadata["tag"] in tags}
    assert _same(stores, F.in_("tag", [*tags, True, 3, 4.0])) == expected
    # values only equal constants of their own kind, also inside one mixed list
    assert _same(stores, F.in_("flag", [True, "True", 1])) == {d.id for d in DOCS if d.metadata["flag"]}
    assert _same(stores, F.in_("n", ["3", True, 3, 4.0])) == {"d3", "d4"}
    _, params = to_sql(F.in_("n", values))
    assert len(params) <= 3  # path, path, one JSON array: not one placeholder per value


def test_integers_beyond_64_bits(stores: tuple[SimpleVectorStore, SqliteVectorStore]) -> None:
    memory, sqlite = stores
    for expr in (F.eq("n", 2**64), F.gt("n", -(2**63) - 1), F.in_("n", [1, 2**70]), parse("n == 99999999999999999999")):
        # the in-memory evaluator compares Python integers exactly; SQL stores refuse them
        assert _ids(memory, expr) == {d.id for d in DOCS if evaluate(expr, d.metadata)}
        with pytest.raises(FilterExpressionError, match="64-bit"):
            to_sql(expr)
        with pytest.raises(FilterExpressionError, match="64-bit"):
            _ids(sqlite, expr)
    assert _same(stores, F.lt("n", 2**63 - 1)) == {d.id for d in DOCS}


DEEP_TEXT = {
    "parentheses": "(" * 10_000 + "n == 1" + ")" * 10_000,
    "unclosed parentheses": "(" * 10_000,
    "nots": "NOT " * 10_000 + "n == 1",
    "alternating": "n == 1" + "".join(f" {'AND' if i % 2 else 'OR'} (n == {i}" for i in range(5_000)) + ")" * 5_000,
}


@pytest.mark.parametrize("text", DEEP_TEXT.values(), ids=DEEP_TEXT.keys())
def test_deep_text_is_a_filter_error(text: str) -> None:
    with pytest.raises(FilterExpressionError, match="nests deeper"):
        parse(text)


def test_deep_builder_expressions_are_filter_errors() -> None:
    with pytest.raises(FilterExpressionError):
        e = F.eq("n", 1)
        for _ in range(10_000):
            e = F.not_(e)
    with pytest.raises(FilterExpressionError):
        e = F.eq("n", 1)
        for i in range(10_000):
            e = (e & F.eq("n", i)) if i % 2 else (e | F.eq("n", i))
    with pytest.raises(FilterExpressionError):
        e = F.eq("n", 1)
        for i in range(10_000):
            e = F.and_(F.eq("n", i), e)  # right-nested: each level is a parenthesised group
    with pytest.raises(FilterExpressionError):
        e = F.eq("n", 1)
        for _ in range(10_000):
            e = ~e


def test_the_deepest_allowed_nesting_works_everywhere(stores: tuple[SimpleVectorStore, SqliteVectorStore]) -> None:
    e = F.gte("n", 0)
    for i in range(MAX_FILTER_DEPTH):
        e = (e & F.gte("n", -i - 1)) if i % 2 else (e | F.eq("n", -5))
    assert e.depth == MAX_FILTER_DEPTH
    assert parse(to_text(e)) == e
    assert _same(stores, e) == {d.id for d in DOCS}
    with pytest.raises(FilterExpressionError):
        F.not_(e)
    nots = "NOT " * (MAX_FILTER_DEPTH - 1) + "n < 5"
    assert _same(stores, nots) == {f"d{i}" for i in range(5, 60)}
