"""QdrantVectorStore's filter translation agrees with the in-memory evaluator (Qdrant's local mode).

The store contract itself runs in test_rag_stores.py. Skipped when qdrant-client is not installed.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters import Expression, F, Key, Op, Value, evaluate, parse, to_text

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("qdrant_client") is None, reason="qdrant-client is not installed"
)

# Each key holds one kind of value; a constant's kind may still differ from its key's kind.
# (Booleans are kept apart from numbers: Qdrant's local mode compares them as Python does, True == 1.)
STR_KEY, NUM_KEY, BOOL_KEY = "s", "n", "b"
str_values = st.sampled_from(["", "a", "b", "ab", "é"])
num_values = st.one_of(st.integers(-2, 2), st.sampled_from([-1.5, 0.5, 2.0]))
bool_values = st.booleans()


def comparison(key: str, values: st.SearchStrategy[Any], ordered: bool) -> st.SearchStrategy[Expression]:
    ops = [Op.EQ, Op.NE, *([Op.GT, Op.GTE, Op.LT, Op.LTE] if ordered else [])]
    return st.builds(lambda op, v: Expression(op, Key(key), Value(v)), st.sampled_from(ops), values)


leaf = st.one_of(
    comparison(STR_KEY, st.one_of(str_values, num_values), ordered=False),
    comparison(NUM_KEY, st.one_of(num_values, str_values), ordered=False),
    comparison(NUM_KEY, num_values, ordered=True),
    comparison(BOOL_KEY, bool_values, ordered=False),
    st.builds(
        lambda op, vs: Expression(op, Key(STR_KEY), Value(tuple(vs))),
        st.sampled_from([Op.IN, Op.NIN]),
        st.lists(str_values, max_size=3),
    ),
    st.builds(
        lambda op, vs: Expression(op, Key(NUM_KEY), Value(tuple(vs))),
        st.sampled_from([Op.IN, Op.NIN]),
        st.lists(num_values, max_size=3),
    ),
    st.builds(
        lambda op, k: Expression(op, Key(k)),
        st.sampled_from([Op.IS_NULL, Op.IS_NOT_NULL]),
        st.sampled_from([STR_KEY, NUM_KEY, BOOL_KEY]),
    ),
)
expressions = st.recursive(
    leaf,
    lambda sub: st.one_of(
        st.builds(lambda a, b: Expression(Op.AND, a, b), sub, sub),
        st.builds(lambda a, b: Expression(Op.OR, a, b), sub, sub),
        st.builds(lambda a: Expression(Op.NOT, a), sub),
    ),
    max_leaves=6,
)
rows = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            STR_KEY: st.one_of(str_values, st.none()),
            NUM_KEY: st.one_of(num_values, st.none()),
            BOOL_KEY: bool_values,
        },
    ),
    min_size=1,
    max_size=6,
)


@pytest.fixture(scope="module")
def client() -> Any:
    from qdrant_client import QdrantClient

    c = QdrantClient(":memory:")
    yield c
    c.close()


@given(expressions, rows)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_qdrant_filter_agrees_with_evaluator(
    client: Any, expr: Expression, metadata_rows: list[dict[str, Any]]
) -> None:
    from qdrant_client import models

    from chatclient.rag.stores.qdrant import to_qdrant_filter

    if client.collection_exists("t"):
        client.delete_collection("t")
    client.create_collection("t", vectors_config=models.VectorParams(size=2, distance=models.Distance.COSINE))
    client.upsert(
        "t",
        points=[
            models.PointStruct(id=i, vector=[1.0, 0.0], payload={"metadata": m}) for i, m in enumerate(metadata_rows)
        ],
    )
    points, _ = client.scroll("t", scroll_filter=to_qdrant_filter(expr), limit=100)
    selected = {p.id for p in points}
    expected = {i for i, m in enumerate(metadata_rows) if evaluate(expr, m)}
    assert selected == expected, (to_text(expr), metadata_rows)


def test_unsupported_filters_raise() -> None:
    from chatclient.rag.stores.qdrant import to_qdrant_filter

    with pytest.raises(FilterExpressionError, match="numbers only"):
        to_qdrant_filter(parse("name > 'm'"))
    with pytest.raises(FilterExpressionError, match="path"):
        to_qdrant_filter(F.eq("a.b", 1))


def test_store_round_trip_on_disk(tmp_path: Any) -> None:
    from qdrant_client import QdrantClient

    from chatclient.rag import Document, HashingEmbeddingModel, SearchRequest
    from chatclient.rag.stores.qdrant import QdrantVectorStore

    model = HashingEmbeddingModel()
    client = QdrantClient(path=str(tmp_path / "q"))
    store = QdrantVectorStore(model, client, collection_name="kb")
    store.add(
        [Document("red apples are sweet", {"k": 1}, id="doc-1"), Document("fast cars are loud", {"k": 2}, id="doc-2")]
    )
    client.close()
    reopened = QdrantVectorStore(model, QdrantClient(path=str(tmp_path / "q")), collection_name="kb")
    [hit] = reopened.similarity_search(SearchRequest("sweet apples", top_k=1, filter_expression="k IN [1, 3]"))
    assert (hit.id, hit.text, dict(hit.metadata)) == ("doc-1", "red apples are sweet", {"k": 1})
    reopened.client.close()
