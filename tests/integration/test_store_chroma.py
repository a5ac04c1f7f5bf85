"""ChromaVectorStore: the contract suite on a persistent client and on a real Chroma server.

The server is the package's own ``chroma run`` started as a subprocess on a free loopback port
(and stopped after the session). Then Chroma-specific behaviour: filters Chroma cannot express
natively are exact post-filters over an over-fetched candidate list, metadata round-trips.
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.rag import Document, SearchRequest
from chatclient.rag.filters import F, evaluate, parse
from chatclient.rag.filters.chroma import to_chroma_where
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

chromadb = pytest.importorskip("chromadb", reason="chromadb is not installed (pip install 'chatclient[chroma]')")

from chatclient.rag.stores.chroma import ChromaVectorStore, chroma_settings  # noqa: E402

pytestmark = pytest.mark.integration

_names = itertools.count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    if exe is None:  # pragma: no cover - the chroma extra installs the CLI
        pytest.skip("the 'chroma' command (from chromadb) is not on PATH")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(
        [exe, "run", "--path", str(data), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma run did not start (exit code {proc.poll()})")
                time.sleep(0.2)
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            proc.kill()
            proc.wait()


@pytest.fixture(params=["persistent", "http"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    created: list[ChromaVectorStore] = []
    if request.param == "http":
        host, port = request.getfixturevalue("chroma_server")
        client = chromadb.HttpClient(host=host, port=port, settings=chroma_settings())
    else:
        client = chromadb.PersistentClient(str(tmp_path / "chroma"), settings=chroma_settings())

    def factory() -> ChromaVectorStore:
        store = ChromaVectorStore(contract_model(), client=client, collection=f"contract-{next(_names)}")
        created.append(store)
        return store

    yield factory
    for s in created:
        s.drop()


@pytest.fixture
def store(make_store: Any) -> ChromaVectorStore:
    s: ChromaVectorStore = make_store()
    s.add(DOCS)
    return s


@pytest.fixture
def local() -> Iterator[ChromaVectorStore]:
    s = ChromaVectorStore(contract_model(), collection=f"local-{next(_names)}")
    yield s
    s.drop()


def test_default_client_has_telemetry_off(local: ChromaVectorStore) -> None:
    assert local.client.get_settings().anonymized_telemetry is False


def test_native_pushdown_is_exact_only_for_strings_and_booleans() -> None:
    assert to_chroma_where(parse("topic == 'x' OR flag == true")).exact
    assert to_chroma_where(parse("topic IN ['a', 'b'] AND flag == false")).exact
    for text in ("n == 2", "topic != 'x'", "NOT topic == 'x'", "topic IS NULL", "n > 1", "topic IN ['a', 1]"):
        assert not to_chroma_where(parse(text)).exact, text
    # an unrestricted branch of an OR lifts the whole pre-filter; an AND keeps the other conjuncts
    assert to_chroma_where(parse("topic == 'x' OR n > 1")).where is None
    assert to_chroma_where(parse("topic == 'x' AND n > 1")).where == {"topic": {"$eq": "x"}}


def test_post_filter_finds_rare_matches_far_down_the_ranking(local: ChromaVectorStore) -> None:
    # 300 documents close to the query, 3 rare ones far from it: NOT / ranges / IS NULL are post-filters,
    # so the store must keep over-fetching until it has found them
    docs = [Document(f"coffee espresso beans roast {i}", {"n": i, "tag": "common"}, id=f"c{i}") for i in range(300)]
    docs += [Document(f"mountain glacier {i}", {"n": 1000 + i, "rare": True}, id=f"r{i}") for i in range(3)]
    local.add(docs)
    for expr in (
        F.gte("n", 1000),
        F.not_(F.eq("tag", "common")),
        F.is_not_null("rare"),
        parse("tag IS NULL AND n < 1002"),
    ):
        got = local.similarity_search(SearchRequest("coffee espresso", top_k=5, filter_expression=expr))
        want = {d.id for d in docs if evaluate(expr, d.metadata)}
        assert {d.id for d in got} == set(sorted(want)[:5]) == want & {d.id for d in got}
        assert len(got) == min(5, len(want))


def test_metadata_round_trips_exactly(local: ChromaVectorStore) -> None:
    md = {"none": None, "list": [1, "a"], "nested": {"x": 1}, "big": 2**70, "f": 2.0, "chatclient:metadata": "mine"}
    local.add([Document("alpha", md, id="a")])
    (hit,) = local.similarity_search(SearchRequest("alpha", top_k=1, filter_expression="big > 1000 AND none IS NULL"))
    assert dict(hit.metadata) == md and hit.id == "a"


def test_bad_collection_names_are_refused() -> None:
    for name in ("ab", "-x-", "a b c"):
        with pytest.raises(ValueError, match="collection"):
            ChromaVectorStore(contract_model(), collection=name)
