"""WebSearchContentRetriever over real HTTP: a loopback search engine that speaks SearXNG's JSON API
and Tavily's search API, searching a small corpus by words; faults typed as WebSearchError."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from advisors import RetrievalAugmentationAdvisor
from chatclient import ChatClient
from chatclient.errors import WebSearchError
from chatclient.rag import Query
from chatclient.rag.augmenters import ContextualQueryAugmenter
from chatclient.rag.web_search import (
    MAX_RESPONSE_BYTES,
    SearxngWebSearchEngine,
    TavilyWebSearchEngine,
    WebSearchContentRetriever,
    WebSearchRequest,
    WebSearchResult,
)
from chatclient.testing import ScriptedChatModel

pytestmark = pytest.mark.integration

CORPUS = [
    (
        "Oslo",
        "https://example.org/oslo",
        "Oslo is the capital of Norway.",
        "Oslo, on the Oslofjord, is Norway's capital.",
    ),
    ("Bergen", "https://example.org/bergen", "Bergen is the rainiest city in Norway.", "Bergen gets rain most days."),
    ("Lyon", "https://example.org/lyon", "Lyon is a city in France.", "Lyon sits where the Rhone meets the Saone."),
]
KEY = "tvly-SECRET-0123456789"


class SearchEngine(BaseHTTPRequestHandler):
    """A tiny search engine: results whose text shares a word with the query, best match first."""

    mode = "ok"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, query: str, limit: int, raw: bool) -> None:
        mode = self.server.mode  # type: ignore[attr-defined]
        if mode == "500":
            self._send(500, b'{"error": "down"}')
            return
        if mode == "not-json":
            self._send(200, b"<html>maintenance</html>")
            return
        if mode == "huge":
            self._send(200, b'{"results": [' + b'{"url": "x"},' * (MAX_RESPONSE_BYTES // 12) + b'{"url": "y"}]}')
            return
        if mode == "drip":  # a valid answer, a few bytes at a time: each read is quick, the whole is not
            body = json.dumps({"results": [{"url": "https://example.org/oslo", "title": "Oslo"}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            for i in range(0, len(body), 4):
                self.wfile.write(body[i : i + 4])
                self.wfile.flush()
                time.sleep(0.1)
            return
        if mode == "no-results":
            self._send(200, b'{"answer": "42"}')
            return
        words = set(query.lower().replace("?", "").split())
        scored = []
        for title, url, snippet, content in CORPUS:
            hits = len(words & set(snippet.lower().rstrip(".").split()))
            if hits:
                item = {"title": title, "url": url, "content": snippet, "score": hits}
                if raw:
                    item["raw_content"] = content
                scored.append((hits, item))
        scored.sort(key=lambda x: -x[0])
        results: list[Any] = [{"title": "no url"}] + [item for _, item in scored[:limit]]
        self._send(200, json.dumps({"query": query, "results": results}).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # SearXNG: /search?q=...&format=json
        url = urlparse(self.path)
        params = parse_qs(url.query)
        self.server.seen.append(("GET", self.path, dict(self.headers)))  # type: ignore[attr-defined]
        if url.path != "/search" or params.get("format") != ["json"]:
            self._send(403, b"{}")
            return
        self._answer(params["q"][0], 10, raw=False)

    def do_POST(self) -> None:  # Tavily: POST /search with a bearer key
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.seen.append(("POST", self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        if self.headers.get("authorization") != f"Bearer {KEY}":
            self._send(401, b'{"detail": {"error": "Unauthorized"}}')
            return
        self._answer(body["query"], body["max_results"], raw=body["include_raw_content"])


@pytest.fixture
def engine_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SearchEngine)
    server.mode = "ok"  # type: ignore[attr-defined]
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_searxng_results_become_documents(engine_server: ThreadingHTTPServer) -> None:
    retriever = WebSearchContentRetriever(SearxngWebSearchEngine(url(engine_server), language="en"), max_results=2)
    docs = retriever.retrieve(Query("Which city is the capital of Norway?"))
    assert [d.metadata["title"] for d in docs] == ["Oslo", "Bergen"]
    assert docs[0].text == "Oslo\nOslo is the capital of Norway."
    assert docs[0].metadata["url"] == "https://example.org/oslo" and docs[0].metadata["score"] == 5
    method, path, _ = engine_server.seen[0]  # type: ignore[attr-defined]
    assert method == "GET" and "format=json" in path and "language=en" in path


async def test_tavily_with_raw_content_async(engine_server: ThreadingHTTPServer) -> None:
    engine = TavilyWebSearchEngine(KEY, base_url=url(engine_server), include_raw_content=True)
    docs = await WebSearchContentRetriever(engine, max_results=1).aretrieve(Query("rain in Norway"))
    assert [d.text for d in docs] == ["Bergen\nBergen gets rain most days."]
    _, path, _headers, body = engine_server.seen[0]  # type: ignore[attr-defined]
    assert path == "/search" and body == {
        "query": "rain in Norway",
        "max_results": 1,
        "search_depth": "basic",
        "include_raw_content": True,
    }
    assert KEY not in repr(engine)


def test_web_search_in_retrieval_augmentation(engine_server: ThreadingHTTPServer) -> None:
    retriever = WebSearchContentRetriever(SearxngWebSearchEngine(url(engine_server)), max_results=1)
    model = ScriptedChatModel(["Oslo."])
    client = (
        ChatClient.builder(model)
        .default_advisors(
            RetrievalAugmentationAdvisor(document_retriever=retriever, query_augmenter=ContextualQueryAugmenter())
        )
        .build()
    )
    assert client.prompt("capital of Norway").call().content() == "Oslo."
    assert "Oslo is the capital of Norway." in (model.last_prompt.messages[-1].text or "")


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("500", "answered HTTP 500"),
        ("not-json", "not JSON"),
        ("huge", "over 4,194,304 bytes"),
        ("no-results", "no 'results' list"),
    ],
)
@pytest.mark.parametrize("asynchronous", [False, True])
async def test_engine_faults_are_web_search_errors(
    engine_server: ThreadingHTTPServer, mode: str, message: str, asynchronous: bool
) -> None:
    engine_server.mode = mode  # type: ignore[attr-defined]
    engine = SearxngWebSearchEngine(url(engine_server))
    with pytest.raises(WebSearchError, match=message):
        if asynchronous:
            await engine.asearch(WebSearchRequest("oslo"))
        else:
            engine.search(WebSearchRequest("oslo"))


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_slow_drip_answer_is_cut_at_the_timeout(engine_server: ThreadingHTTPServer, asynchronous: bool) -> None:
    # ``timeout`` bounds the whole search, not only the wait for each chunk of the body.
    engine_server.mode = "drip"  # type: ignore[attr-defined]
    engine = SearxngWebSearchEngine(url(engine_server), timeout=0.5)
    with pytest.raises(WebSearchError, match=r"did not answer within 0\.5 s"):
        if asynchronous:
            await engine.asearch(WebSearchRequest("oslo"))
        else:
            engine.search(WebSearchRequest("oslo"))


def test_wrong_key_and_unreachable_engine(engine_server: ThreadingHTTPServer) -> None:
    with pytest.raises(WebSearchError, match="HTTP 401") as info:
        TavilyWebSearchEngine("tvly-WRONG-KEY", base_url=url(engine_server)).search(WebSearchRequest("oslo"))
    assert info.value.status == 401 and "WRONG" not in str(info.value)
    engine_server.shutdown()
    engine_server.server_close()
    with pytest.raises(WebSearchError, match="could not be reached"):
        SearxngWebSearchEngine(url(engine_server), timeout=2).search(WebSearchRequest("oslo"))


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="non-empty query"):
        WebSearchRequest("  ")
    with pytest.raises(ValueError, match="between 1 and 50"):
        WebSearchRequest("x", 0)
    with pytest.raises(TypeError, match="must be an integer"):
        WebSearchRequest("x", "5")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="between 1 and 50"):
        WebSearchContentRetriever(SearxngWebSearchEngine("http://127.0.0.1:1"), max_results=500)
    with pytest.raises(TypeError, match="must have search"):
        WebSearchContentRetriever(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http\\(s\\) URL"):
        SearxngWebSearchEngine("ftp://example.org")
    with pytest.raises(ValueError, match="positive number"):
        SearxngWebSearchEngine("http://example.org", timeout=0)
    with pytest.raises(ValueError, match="api_key"):
        TavilyWebSearchEngine("")
    with pytest.raises(ValueError, match="search_depth"):
        TavilyWebSearchEngine("k", search_depth="deep")

    class Wrong:
        def search(self, request: WebSearchRequest) -> list[Any]:
            return [{"url": "x"}]

    with pytest.raises(TypeError, match="not WebSearchResult"):
        WebSearchContentRetriever(Wrong()).retrieve(Query("x"))


def test_results_are_cut_to_max_results_and_snippet_is_the_fallback() -> None:
    class Many:
        def search(self, request: WebSearchRequest) -> list[WebSearchResult]:
            return [WebSearchResult(f"t{i}", f"https://e.org/{i}", f"s{i}") for i in range(9)]

    docs = WebSearchContentRetriever(Many(), max_results=3).retrieve(Query("x"))
    assert [d.text for d in docs] == ["t0\ns0", "t1\ns1", "t2\ns2"]
