"""RedisVectorStore against the Redis at 127.0.0.1:6379.

With a server that has vector search (Redis 8, Redis Stack 7.4+) the whole contract suite runs.
The Redis on this machine has no search module (FT.CREATE is an unknown command; redis-stack
wheels need OpenSSL 1.1 and Debian's RediSearch 1.2 has no vectors), so there those tests skip
with that reason, and what can run does: the store's refusal on a server without search.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient.errors import VectorStoreError
from chatclient.rag import Document, HashingEmbeddingModel
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

redis = pytest.importorskip("redis", reason="redis-py is not installed (pip install 'chatclient[redis]')")

from chatclient.rag.stores.redis import RedisVectorStore  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.redis]

URL = os.environ.get("CHATCLIENT_REDIS_URL", "redis://127.0.0.1:6379/0")
_names = itertools.count()
# the contract suite filters on these keys
FIELDS = {"topic": "tag", "n": "numeric", "w": "numeric"}


def _client() -> Any:
    client = redis.Redis.from_url(URL, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as exc:
        from tests.conftest import unavailable

        unavailable(f"no Redis at {URL}: {exc}")
    return client


def _has_vector_search(client: Any) -> bool:
    try:
        client.execute_command("FT._LIST")
    except redis.ResponseError as exc:
        if "unknown command" in str(exc).lower():
            return False
        raise
    return True


@pytest.fixture(scope="module")
def search_client() -> Any:
    client = _client()
    if not _has_vector_search(client):
        pytest.skip(
            f"the Redis at {URL} has no search module (FT.CREATE is an unknown command); "
            "the live RedisVectorStore tests need Redis 8 or Redis Stack 7.4+"
        )
    return client


@pytest.fixture(params=["hnsw", "flat"])
def make_store(request: pytest.FixtureRequest, search_client: Any) -> Iterator[Any]:
    created: list[RedisVectorStore] = []

    def factory() -> RedisVectorStore:
        n = next(_names)
        store = RedisVectorStore(
            URL, contract_model(), index=f"cc_test_{os.getpid()}_{n}", algorithm=request.param, metadata_fields=FIELDS
        )
        created.append(store)
        return store

    yield factory
    for s in created:
        s.drop()


@pytest.fixture
def store(make_store: Any) -> RedisVectorStore:
    s: RedisVectorStore = make_store()
    s.add(DOCS)
    return s


def test_a_server_without_search_is_a_clear_error() -> None:
    client = _client()
    if _has_vector_search(client):
        pytest.skip(f"the Redis at {URL} has vector search; this test covers servers without it")
    store = RedisVectorStore(URL, HashingEmbeddingModel(dimensions=8), index=f"cc_nosearch_{os.getpid()}")
    with pytest.raises(VectorStoreError, match="no vector search"):
        store.add([Document("hello", id="a")])
    with pytest.raises(VectorStoreError, match="Redis 8"):
        store.similarity_search("hello")
    assert client.exists(f"cc_nosearch_{os.getpid()}:a") == 0  # nothing was written


def test_schema_declares_vector_and_metadata_fields() -> None:
    store = RedisVectorStore(
        URL, HashingEmbeddingModel(dimensions=8), index="kb", algorithm="flat", distance="l2",
        metadata_fields={"topic": "tag", "year": "numeric", "ok": "bool"},
    )  # fmt: skip
    assert store.schema(8) == [
        "kb", "ON", "HASH", "PREFIX", "1", "kb:", "SCHEMA",
        "embedding", "VECTOR", "FLAT", "6", "TYPE", "FLOAT32", "DIM", "8", "DISTANCE_METRIC", "L2",
        "m:topic", "AS", "m_0", "TAG", "SEPARATOR", "\x1f", "CASESENSITIVE", "INDEXMISSING",
        "m:year", "AS", "m_1", "NUMERIC", "INDEXMISSING",
        "m:ok", "AS", "m_2", "TAG", "SEPARATOR", "\x1f", "CASESENSITIVE", "INDEXMISSING",
    ]  # fmt: skip


def test_bad_configuration_is_refused() -> None:
    model = HashingEmbeddingModel()
    for kwargs in ({"index": "a b"}, {"algorithm": "ivf"}, {"distance": "dot"}, {"metadata_fields": {"x": "text"}}):
        with pytest.raises(ValueError):
            RedisVectorStore(URL, model, **kwargs)
