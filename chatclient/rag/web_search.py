"""Web search as a retriever: documents from a search engine instead of a vector store.

``WebSearchContentRetriever(engine, max_results=5)`` is a ``DocumentRetriever``: each query goes to
a ``WebSearchEngine`` and each result becomes a ``Document`` (title and content or snippet as text;
``url``, ``title`` and the engine's own fields as metadata), so it plugs into
``RetrievalAugmentationAdvisor`` like any retriever (LangChain4j's ``WebSearchContentRetriever``).

An engine is anything with ``search(WebSearchRequest) -> list[WebSearchResult]`` (and optionally an
async ``asearch``). Two come with chatclient, both over plain HTTP with a time limit and a cap on the
answer's size: ``SearxngWebSearchEngine`` for a self-hosted SearXNG instance (its JSON API) and
``TavilyWebSearchEngine`` for Tavily's search API.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from chatclient.errors import WebSearchError
from chatclient.rag.documents import Document
from chatclient.rag.query import Query

MAX_RESULTS = 50
"""The most results one search may ask for."""
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""A search engine's answer larger than this is refused (``WebSearchError``)."""
MAX_FIELD_CHARS = 20_000
"""Longer titles, snippets or contents are cut to this many characters."""


@dataclass(frozen=True, slots=True)
class WebSearchRequest:
    """One search: the ``query`` text and how many results to return at most."""

    query: str
    max_results: int = 5

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not self.query.strip():
            raise ValueError("a web search needs non-empty query text")
        if isinstance(self.max_results, bool) or not isinstance(self.max_results, int):
            raise TypeError(f"max_results must be an integer, not {type(self.max_results).__name__}")
        if not 1 <= self.max_results <= MAX_RESULTS:
            raise ValueError(f"max_results must be between 1 and {MAX_RESULTS}, got {self.max_results}")


@dataclass(frozen=True, slots=True)
class WebSearchResult:
    """One result: ``title``, ``url``, a short ``snippet``, the page ``content`` when the engine gives
    it, and the engine's other fields in ``metadata``."""

    title: str
    url: str
    snippet: str = ""
    content: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_document(self) -> Document:
        """The result as a ``Document``: title, then the content (or the snippet)."""
        body = self.content if self.content else self.snippet
        text = f"{self.title}\n{body}" if self.title and body else (self.title or body)
        return Document(text, {**self.metadata, "url": self.url, "title": self.title})


@runtime_checkable
class WebSearchEngine(Protocol):
    """Anything that answers a ``WebSearchRequest`` with results, best first."""

    def search(self, request: WebSearchRequest) -> list[WebSearchResult]: ...


class WebSearchContentRetriever:
    """A ``DocumentRetriever`` over a ``WebSearchEngine``: up to ``max_results`` documents per query.

    >>> class Fixed:
    ...     def search(self, request):
    ...         return [WebSearchResult("Oslo", "https://example.org/oslo", "Capital of Norway")]
    >>> WebSearchContentRetriever(Fixed()).retrieve(Query("capital of Norway"))[0].text
    'Oslo\\nCapital of Norway'
    """

    def __init__(self, engine: WebSearchEngine, *, max_results: int = 5) -> None:
        if not callable(getattr(engine, "search", None)):
            raise TypeError(f"engine must have search(WebSearchRequest), got {type(engine).__name__}")
        WebSearchRequest("check", max_results)  # validates max_results now, not at the first query
        self.engine = engine
        self.max_results = max_results

    def retrieve(self, query: Query) -> list[Document]:
        """Search the web for ``query.text``; the results as documents, best first."""
        results = self.engine.search(WebSearchRequest(query.text, self.max_results))
        return [_checked(r).to_document() for r in list(results)[: self.max_results]]

    async def aretrieve(self, query: Query) -> list[Document]:
        """Async ``retrieve``: the engine's ``asearch`` when it has one, else ``search`` in a thread."""
        request = WebSearchRequest(query.text, self.max_results)
        asearch = getattr(self.engine, "asearch", None)
        if asearch is not None:
            results = await asearch(request)
        else:
            results = await asyncio.to_thread(self.engine.search, request)
        return [_checked(r).to_document() for r in list(results)[: self.max_results]]

    def __repr__(self) -> str:
        return f"WebSearchContentRetriever({type(self.engine).__name__}, max_results={self.max_results})"


def _checked(result: Any) -> WebSearchResult:
    if not isinstance(result, WebSearchResult):
        raise TypeError(f"a web search engine returned {type(result).__name__}, not WebSearchResult")
    return result


# -- engines over HTTP ------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return value[:MAX_FIELD_CHARS] if isinstance(value, str) else ""


def _read_json(response: Any, engine: str, timeout: float, deadline: float) -> Any:
    """The JSON body of an httpx response read with a size cap and by ``deadline`` (httpx's own
    timeout bounds each read, not the whole body); ``WebSearchError`` otherwise."""
    if response.status_code >= 400:
        raise WebSearchError(f"{engine} answered HTTP {response.status_code}", response.status_code)
    data = bytearray()
    for chunk in response.iter_bytes():
        _add_chunk(data, chunk, engine, timeout, deadline)
    return _decode(bytes(data), engine)


async def _aread_json(response: Any, engine: str, timeout: float, deadline: float) -> Any:
    if response.status_code >= 400:
        raise WebSearchError(f"{engine} answered HTTP {response.status_code}", response.status_code)
    data = bytearray()
    async for chunk in response.aiter_bytes():
        _add_chunk(data, chunk, engine, timeout, deadline)
    return _decode(bytes(data), engine)


def _add_chunk(data: bytearray, chunk: bytes, engine: str, timeout: float, deadline: float) -> None:
    data.extend(chunk)
    if len(data) > MAX_RESPONSE_BYTES:
        raise WebSearchError(f"{engine}'s answer is over {MAX_RESPONSE_BYTES:,} bytes")
    if time.monotonic() > deadline:
        raise WebSearchError(f"{engine} did not answer within {timeout:g} s")


def _decode(data: bytes, engine: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        raise WebSearchError(f"{engine} answered something that is not JSON ({len(data)} bytes)") from None


def _results(payload: Any, engine: str, limit: int, content_key: str | None) -> list[WebSearchResult]:
    items = payload.get("results") if isinstance(payload, Mapping) else None
    if not isinstance(items, list):
        raise WebSearchError(f"{engine}'s answer has no 'results' list")
    out: list[WebSearchResult] = []
    for item in items:
        if not isinstance(item, Mapping) or not isinstance(item.get("url"), str):
            continue  # an entry without a URL is not a citable result
        extra = {k: item[k] for k in ("score", "engine", "published_date", "publishedDate") if k in item}
        content = _text(item.get(content_key)) if content_key else ""
        out.append(
            WebSearchResult(_text(item.get("title")), item["url"], _text(item.get("content")), content or None, extra)
        )
        if len(out) >= limit:
            break
    return out


class _HttpEngine:
    name = "web search"

    def __init__(self, base_url: str, *, timeout: float) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.timeout = float(timeout)

    def _request(self, request: WebSearchRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, payload: Any, request: WebSearchRequest) -> list[WebSearchResult]:
        raise NotImplementedError

    def search(self, request: WebSearchRequest) -> list[WebSearchResult]:
        """Send the search over HTTP and parse the results."""
        import httpx

        deadline = time.monotonic() + self.timeout
        try:
            with httpx.Client(timeout=self.timeout) as client, client.stream(**self._request(request)) as response:
                payload = _read_json(response, self.name, self.timeout, deadline)
        except httpx.HTTPError as exc:
            raise WebSearchError(f"{self.name} could not be reached: {type(exc).__name__}") from None
        return self._parse(payload, request)

    async def asearch(self, request: WebSearchRequest) -> list[WebSearchResult]:
        """Async ``search``."""
        import httpx

        deadline = time.monotonic() + self.timeout
        try:
            async with (
                httpx.AsyncClient(timeout=self.timeout) as client,
                client.stream(**self._request(request)) as response,
            ):
                payload = await _aread_json(response, self.name, self.timeout, deadline)
        except httpx.HTTPError as exc:
            raise WebSearchError(f"{self.name} could not be reached: {type(exc).__name__}") from None
        return self._parse(payload, request)


class SearxngWebSearchEngine(_HttpEngine):
    """A SearXNG instance's JSON API (``GET /search?q=...&format=json``; the instance must allow
    the ``json`` format). ``categories``/``language`` are passed on when given."""

    name = "SearXNG"

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 15.0,
        categories: str | None = None,
        language: str | None = None,
    ) -> None:
        super().__init__(base_url, timeout=timeout)
        self.params = {k: v for k, v in (("categories", categories), ("language", language)) if v}

    def _request(self, request: WebSearchRequest) -> dict[str, Any]:
        params = {"q": request.query, "format": "json", **self.params}
        return {"method": "GET", "url": f"{self.base_url}/search", "params": params}

    def _parse(self, payload: Any, request: WebSearchRequest) -> list[WebSearchResult]:
        return _results(payload, self.name, request.max_results, None)

    def __repr__(self) -> str:
        return f"SearxngWebSearchEngine({self.base_url!r})"


class TavilyWebSearchEngine(_HttpEngine):
    """Tavily's search API (``POST /search`` with a bearer key). ``include_raw_content`` asks for the
    pages' text, which then becomes the documents' text instead of the snippets."""

    name = "Tavily"

    def __init__(
        self,
        api_key: str,
        *,
        base_url: str = "https://api.tavily.com",
        timeout: float = 30.0,
        search_depth: str = "basic",
        include_raw_content: bool = False,
    ) -> None:
        super().__init__(base_url, timeout=timeout)
        if not isinstance(api_key, str) or not api_key.strip():
            raise ValueError("TavilyWebSearchEngine needs an api_key")
        if search_depth not in ("basic", "advanced"):
            raise ValueError(f"search_depth must be 'basic' or 'advanced', got {search_depth!r}")
        self._api_key = api_key
        self.search_depth = search_depth
        self.include_raw_content = include_raw_content

    def _request(self, request: WebSearchRequest) -> dict[str, Any]:
        body = {
            "query": request.query,
            "max_results": request.max_results,
            "search_depth": self.search_depth,
            "include_raw_content": self.include_raw_content,
        }
        headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"}
        return {"method": "POST", "url": f"{self.base_url}/search", "json": body, "headers": headers}

    def _parse(self, payload: Any, request: WebSearchRequest) -> list[WebSearchResult]:
        return _results(payload, self.name, request.max_results, "raw_content")

    def __repr__(self) -> str:
        return f"TavilyWebSearchEngine({self.base_url!r})"  # never the key


__all__: Sequence[str] = [
    "SearxngWebSearchEngine",
    "TavilyWebSearchEngine",
    "WebSearchContentRetriever",
    "WebSearchEngine",
    "WebSearchRequest",
    "WebSearchResult",
]
