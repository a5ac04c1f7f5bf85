"""Tool search: with many tools, the model first sees a search tool and discovers the rest on demand.

    client.prompt(question).tools(*two_hundred_tools).advisors(ToolSearchAdvisor(always_visible=["get_time"]))

The first model turn is offered only the search tool and the ``always_visible`` tools. When the
model calls the search tool, it gets the best-matching tools' names and descriptions back, and
from the next turn on those tools are offered with their full schemas. Discovered tools
accumulate: a tool stays offered for as long as the search result that found it is in the
conversation. Every tool stays callable the whole time (only what the model is *shown* changes).

The advisor sits inside the tool loop (order ``TOOL_CALL_ORDER + 2``), so every model turn passes
through it; the loop asks it for its search tool (``loop_tools``). Ranking is BM25 over each
tool's name (split at ``_`` and case changes), description and parameter names, or any
``ranker(query, definitions, top_k) -> names`` you pass, such as
``EmbeddingToolRanker(LocalEmbeddingModel())`` (the local embedding model, offline).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from typing import Any

from chatclient.advisor import TOOL_CALL_ORDER, AdvisorChain, BaseAdvisor
from chatclient.jsonsafe import loads as safe_loads
from chatclient.messages import AssistantMessage, ToolResponseMessage
from chatclient.prompt import ToolDefinition
from chatclient.request import ChatClientRequest
from chatclient.tools.callback import FunctionToolCallback, ToolCallback

__all__ = ["SEARCH_TOOL_NAME", "Bm25ToolRanker", "EmbeddingToolRanker", "ToolSearchAdvisor"]

SEARCH_TOOL_NAME = "search_tools"

Ranker = Callable[[str, Sequence[ToolDefinition], int], Sequence[str]]

_WORD = re.compile(r"[A-Za-z][a-z]*|[0-9]+|[A-Z]+(?![a-z])")
_MAX_QUERY = 1000


def _words(text: str) -> list[str]:
    # "getWeatherForecast" / "get_weather_forecast" -> get, weather, forecast
    return [w.lower() for w in _WORD.findall(text)]


def _tool_text(d: ToolDefinition) -> list[str]:
    props = d.input_schema.get("properties") if isinstance(d.input_schema, dict) else None
    params = " ".join(props) if isinstance(props, dict) else ""
    name = _words(d.name)
    return name * 2 + _words(d.description or "") + _words(params)  # the name counts double


class Bm25ToolRanker:
    """BM25 (k1=1.5, b=0.75) over tool names, descriptions and parameter names.

    Indexes are cached per tool set, so a request with the same 200 tools indexes them once.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, cache_size: int = 16) -> None:
        self.k1 = k1
        self.b = b
        self.cache_size = cache_size
        self._cache: dict[tuple[tuple[str, str], ...], tuple[list[Counter[str]], dict[str, float], float]] = {}

    def _index(self, definitions: Sequence[ToolDefinition]) -> tuple[list[Counter[str]], dict[str, float], float]:
        key = tuple((d.name, d.description) for d in definitions)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        docs = [Counter(_tool_text(d)) for d in definitions]
        n = len(docs)
        df: Counter[str] = Counter()
        for doc in docs:
            df.update(doc.keys())
        idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}
        avg = sum(sum(d.values()) for d in docs) / n if n else 0.0
        if len(self._cache) >= self.cache_size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = (docs, idf, avg)
        return docs, idf, avg

    def __call__(self, query: str, definitions: Sequence[ToolDefinition], top_k: int) -> list[str]:
        """The names of the ``top_k`` best-matching tools (only those matching at least one word)."""
        if not definitions:
            return []
        docs, idf, avg = self._index(definitions)
        terms = set(_words(query[:_MAX_QUERY]))
        scored: list[tuple[float, int]] = []
        for i, doc in enumerate(docs):
            length = sum(doc.values())
            score = 0.0
            for t in terms:
                f = doc.get(t, 0)
                if f:
                    score += idf[t] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * length / (avg or 1)))
            if score > 0:
                scored.append((-score, i))
        scored.sort()
        return [definitions[i].name for _, i in scored[:top_k]]


class EmbeddingToolRanker:
    """Ranks tools by the cosine similarity of their embeddings to the query's.

    ``embedding_model`` is any ``EmbeddingModel`` (``chatclient.rag.LocalEmbeddingModel`` runs
    offline on the CPU). Each tool is embedded once per tool set as ``"name words: description"``;
    tools scoring at most ``min_score`` are left out.
    """

    def __init__(self, embedding_model: Any, *, min_score: float = 0.0, cache_size: int = 4) -> None:
        if embedding_model is None or not callable(getattr(embedding_model, "embed", None)):
            raise TypeError("EmbeddingToolRanker needs an embedding model with embed(texts)")
        self.embedding_model = embedding_model
        self.min_score = min_score
        self.cache_size = cache_size
        self._cache: dict[tuple[tuple[str, str], ...], Any] = {}

    def _matrix(self, definitions: Sequence[ToolDefinition]) -> Any:
        import numpy as np

        key = tuple((d.name, d.description) for d in definitions)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        texts = [f"{' '.join(_words(d.name))}: {d.description or ''}" for d in definitions]
        raw = np.asarray(self.embedding_model.embed(texts), dtype=np.float32)
        norms = np.linalg.norm(raw, axis=1, keepdims=True)
        matrix = (raw / np.where(norms == 0, 1.0, norms)).astype(np.float32)
        if len(self._cache) >= self.cache_size:
            self._cache.pop(next(iter(self._cache)))
        self._cache[key] = matrix
        return matrix

    def __call__(self, query: str, definitions: Sequence[ToolDefinition], top_k: int) -> list[str]:
        """The names of the ``top_k`` tools most similar to ``query``."""
        import numpy as np

        if not definitions or not query.strip():
            return []
        matrix = self._matrix(definitions)
        q = np.asarray(self.embedding_model.embed([query[:_MAX_QUERY]]), dtype=np.float32)[0]
        norm = float(np.linalg.norm(q))
        if norm == 0:
            return []
        scores = matrix @ (q / norm)
        order = np.argsort(-scores)[:top_k]
        return [definitions[int(i)].name for i in order if float(scores[int(i)]) > self.min_score]


def _discovered(messages: Sequence[Any], search_name: str) -> set[str]:
    """Names found by the search tool's answers that are still in the conversation."""
    search_ids = {
        c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls if c.name == search_name
    }
    found: set[str] = set()
    if not search_ids:
        return found
    for m in messages:
        if not isinstance(m, ToolResponseMessage):
            continue
        for r in m.responses:
            if r.id not in search_ids or r.is_error:
                continue
            try:
                data = safe_loads(r.response_data)
            except ValueError:
                continue
            tools = data.get("tools") if isinstance(data, dict) else None
            for item in tools if isinstance(tools, list) else ():
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    found.add(item["name"])
    return found


class ToolSearchAdvisor(BaseAdvisor):
    """Shows the model a search tool (plus ``always_visible`` tools) instead of every tool.

    ``top_k`` tools come back per search; ``ranker`` replaces BM25; ``search_tool_name`` names the
    search tool. Put it in the advisors of a request (or client) that has tools.
    """

    def __init__(
        self,
        always_visible: Collection[str] = (),
        *,
        top_k: int = 5,
        ranker: Ranker | None = None,
        search_tool_name: str = SEARCH_TOOL_NAME,
        order: int = TOOL_CALL_ORDER + 2,
    ) -> None:
        if isinstance(always_visible, str):
            raise TypeError("always_visible is a collection of tool names, e.g. ['get_time'], not one string")
        if not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an int >= 1, got {top_k!r}")
        self.always_visible = frozenset(always_visible)
        self.top_k = top_k
        self.ranker: Ranker = ranker or Bm25ToolRanker()
        self.search_tool_name = search_tool_name
        self.order = order

    def loop_tools(self, callbacks: Sequence[ToolCallback]) -> Sequence[ToolCallback]:
        """The search tool for a tool loop over ``callbacks`` (the tool loop asks for it)."""
        definitions = tuple(
            cb.definition
            for cb in callbacks
            if cb.definition.name not in self.always_visible and cb.definition.name != self.search_tool_name
        )
        ranker, top_k = self.ranker, self.top_k

        def search_tools(query: str) -> str:
            names = list(ranker(query, definitions, top_k))[:top_k]
            by_name = {d.name: d for d in definitions}
            tools = [{"name": n, "description": by_name[n].description} for n in names if n in by_name]
            note = (
                "These tools are now available; call them directly."
                if tools
                else "No tool matched; search again with other words."
            )
            return json.dumps({"tools": tools, "note": note})

        description = (
            f"Search the {len(definitions)} available tools by what you need them for (a few keywords). "
            "The best matches become callable on your next step."
        )
        return (FunctionToolCallback(search_tools, name=self.search_tool_name, description=description),)

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        tools = request.prompt.tools
        if not any(t.name == self.search_tool_name for t in tools):
            return request  # not inside a tool loop that offers the search tool
        visible = {
            self.search_tool_name,
            *self.always_visible,
            *_discovered(request.prompt.messages, self.search_tool_name),
        }
        shown = tuple(t for t in tools if t.name in visible)
        if len(shown) == len(tools):
            return request
        return request.mutate(prompt=request.prompt.copy(tools=shown))
