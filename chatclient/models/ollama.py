"""Ollama's native API over httpx: ``/api/chat`` (NDJSON streaming) and ``/api/embed``.

    model = OllamaChatModel("llama3.2")      # OLLAMA_HOST or http://localhost:11434

Sampling settings go into Ollama's ``options`` object (``max_tokens`` becomes ``num_predict``),
``options.output_schema`` becomes ``format`` (Ollama constrains the output to the schema); the
structured-output ladder falls back to ``format: "json"`` plus the schema in the prompt, then to
instructions alone. Ollama has no tool-choice setting, so ``tool_choice``/``parallel_tool_calls`` are not sent. It gives tool
calls no ids; they get ``call_<n>`` (their position in the answer), and tool results are matched
back by tool name, which is how Ollama pairs them.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import httpx

from chatclient.errors import ModelResponseError
from chatclient.messages import (
    AssistantMessage,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models.base import (
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    Usage,
)
from chatclient.models.hosted_tools import function_tools
from chatclient.models.http import (
    DEFAULT_TIMEOUT,
    KEEPALIVE_EXPIRY,
    HTTPChatModel,
    HTTPTransport,
    PooledHTTPResource,
    ResponseLimits,
    RetryPolicy,
    assistant_text,
    env_or,
    resolve_api_key,
)
from chatclient.models.http.sse import NDJSONDecoder
from chatclient.models.reasoning import DEFAULT_THINK_TAGS, ThinkSplitter, split_think
from chatclient.models.tool_media import media_note, tool_text
from chatclient.models.wire import arguments_object, arguments_text, usage_count
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "OllamaChatModel",
    "OllamaEmbeddingModel",
    "OllamaStreamParser",
    "build_chat_body",
    "ollama_messages",
    "parse_chat",
]

DEFAULT_BASE_URL = "http://localhost:11434"
DEFAULT_MODEL = "llama3.2"
_PROVIDER = "ollama"  # the Reasoning.provider of Ollama's thinking

# Portable option -> Ollama `options` key.
_OPTION_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_tokens": "num_predict",
    "seed": "seed",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
}


def default_base_url() -> str:
    """``OLLAMA_HOST`` (with ``http://`` added when it has no scheme) or the local default."""
    host = env_or(None, "OLLAMA_HOST")
    if not host:
        return DEFAULT_BASE_URL
    return host if "://" in host else f"http://{host}"


# -- request ------------------------------------------------------------------------------------------


def _images(media: Sequence[Media]) -> list[str]:
    images = []
    for item in media:
        if isinstance(item.data, str):
            raise ValueError("Ollama accepts inline image bytes only, not URLs")
        images.append(base64.b64encode(item.data).decode("ascii"))
    return images


def ollama_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """``/api/chat`` messages: images as base64 strings, tool calls with object arguments."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.text})
        elif isinstance(m, UserMessage):
            msg: dict[str, Any] = {"role": "user", "content": m.text}
            if m.media:
                msg["images"] = _images(m.media)
            out.append(msg)
        elif isinstance(m, AssistantMessage):
            msg = {"role": "assistant", "content": m.text or ""}
            thinking = "".join(r.text for r in m.reasoning if r.provider == _PROVIDER)
            if thinking:
                # Ollama takes a message's thinking back; reasoning from other providers is not sent.
                msg["thinking"] = thinking
            if m.tool_calls:
                msg["tool_calls"] = [
                    {"function": {"name": c.name, "arguments": arguments_object(c)}} for c in m.tool_calls
                ]
            out.append(msg)
        elif isinstance(m, ToolResponseMessage):
            out.extend({"role": "tool", "content": tool_text(r), "tool_name": r.name} for r in m.responses)
            media = [media for r in m.responses for media in r.media]
            if media:
                # Tool messages take no images: they follow in a user message (the portable fallback).
                out.append({"role": "user", "content": media_note(m.responses), "images": _images(media)})
        else:  # pragma: no cover - Prompt validates message types
            raise TypeError(f"unsupported message type {type(m).__name__}")
    return out


def ollama_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """``/api/chat`` tool definitions (the OpenAI function format)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.input_schema) or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def build_chat_body(prompt: Prompt, options: ChatOptions, *, stream: bool) -> dict[str, Any]:
    """The ``/api/chat`` request body; ``options.extra`` merges at the top level, its
    ``options`` dict (if any) into Ollama's ``options``."""
    body: dict[str, Any] = {"model": options.model, "messages": ollama_messages(prompt.messages), "stream": stream}
    model_options: dict[str, Any] = {}
    for ours, theirs in _OPTION_KEYS.items():
        value = getattr(options, ours)
        if value is not None:
            model_options[theirs] = value
    if options.stop is not None:
        model_options["stop"] = list(options.stop)
    if prompt.tools:
        body["tools"] = ollama_tools(function_tools(prompt.tools, provider="Ollama"))
    if options.output_schema is not None:
        body["format"] = dict(options.output_schema)
    extra = dict(options.extra or {})
    if isinstance(extra.get("options"), Mapping):
        model_options.update(extra.pop("options"))
    if model_options:
        body["options"] = model_options
    body.update(extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def _calls(message: Mapping[str, Any], start: int) -> tuple[ToolCall, ...]:
    calls = []
    for n, tc in enumerate(message.get("tool_calls") or (), start=start):
        fn = tc["function"]
        args = fn.get("arguments")
        text = args if isinstance(args, str) else arguments_text(args)
        calls.append(ToolCall(str(tc.get("id") or f"call_{n}"), fn["name"], text))
    return tuple(calls)


def finish_reason(raw: str | None, has_tool_calls: bool, done: bool = False) -> str | None:
    """Ollama says ``stop`` even when it stopped to call tools; report ``tool_calls`` then.

    ``done: true`` without ``done_reason`` (Ollama's API reference shape, and older servers) is a
    normal end: ``"stop"``.
    """
    if has_tool_calls and raw in (None, "stop"):
        return "tool_calls"
    if raw is None and done:
        return "stop"
    return raw


# Timings of the final line (nanoseconds), kept in the response metadata extra.
_DURATION_KEYS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


def _final_metadata(payload: Mapping[str, Any]) -> ChatResponseMetadata:
    usage = Usage(usage_count(payload.get("prompt_eval_count")), usage_count(payload.get("eval_count")))
    extra = {k: payload[k] for k in _DURATION_KEYS if payload.get(k) is not None}
    return ChatResponseMetadata(None, payload.get("model"), usage, MappingProxyType(extra))


def _gen_meta(raw: str | None, has_tool_calls: bool, done: bool = False) -> GenerationMetadata:
    extra = MappingProxyType({"raw_finish_reason": raw}) if raw is not None else MappingProxyType({})
    return GenerationMetadata(finish_reason(raw, has_tool_calls, done), extra)


def _thinking(message: Mapping[str, Any]) -> list[Reasoning]:
    value = message.get("thinking")
    return [Reasoning(value, provider=_PROVIDER)] if isinstance(value, str) and value else []


def _raise_error(payload: Any) -> None:
    if isinstance(payload, Mapping) and payload.get("error"):
        raise ModelResponseError(f"Ollama reported an error: {str(payload['error'])[:300]}")


def parse_chat(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a non-streamed ``/api/chat`` answer."""
    _raise_error(payload)
    message = payload["message"]
    calls = _calls(message, 0)
    content = message.get("content")
    reasoning = _thinking(message)
    if isinstance(content, str) and content.lstrip().startswith("<"):
        # A thinking model run without Ollama's think option leaves its <think> block in the content.
        thought, content = split_think(content, DEFAULT_THINK_TAGS)
        if thought:
            reasoning.append(Reasoning(thought, provider=_PROVIDER))
    gen = Generation(
        AssistantMessage(assistant_text(content, bool(calls)), calls, reasoning=tuple(reasoning)),
        _gen_meta(payload.get("done_reason"), bool(calls), bool(payload.get("done"))),
    )
    return ChatResponse((gen,), _final_metadata(payload))


class OllamaStreamParser:
    """Turns ``/api/chat`` NDJSON lines into delta chunks; the ``done: true`` line ends the answer.

    ``message.thinking`` deltas become reasoning deltas (provider ``"ollama"``), and a leading
    ``<think>`` block in the content is split out the same way, also when its tags are cut across
    lines.
    """

    def __init__(self) -> None:
        self.done = False
        self._decoder = NDJSONDecoder()
        self._model: str | None = None
        self._calls = 0
        self._saw_text = False
        self._final: Mapping[str, Any] = {}
        self._splitter = ThinkSplitter(DEFAULT_THINK_TAGS)

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        payload = self._decoder.feed(line)
        if payload is None:
            return []
        _raise_error(payload)
        self._model = payload.get("model") or self._model
        message = payload.get("message") or {}
        reasoning = _thinking(message)
        content = message.get("content")
        text: str | None = None
        if isinstance(content, str) and content:
            pieces = self._splitter.feed(content)
            text = "".join(p for kind, p in pieces if kind == "text") or None
            thought = "".join(p for kind, p in pieces if kind == "reasoning")
            if thought:
                reasoning.append(Reasoning(thought, provider=_PROVIDER))
        calls = _calls(message, self._calls)
        self._calls += len(calls)
        self._saw_text = self._saw_text or bool(text)
        out = []
        if text or calls or reasoning:
            message_delta = AssistantMessage(text, calls, reasoning=tuple(reasoning))
            out.append(ChatResponse((Generation(message_delta),), ChatResponseMetadata(None, self._model)))
        if payload.get("done"):
            self.done = True
            self._final = payload
        return out

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage), once the end marker has arrived."""
        pieces = self._splitter.finish()
        tail = "".join(p for kind, p in pieces if kind == "text")
        thought = "".join(p for kind, p in pieces if kind == "reasoning")
        reasoning = (Reasoning(thought, provider=_PROVIDER),) if thought else ()
        text = tail or (None if (self._saw_text or self._calls) else "")
        done = bool(self._final.get("done"))
        gen = Generation(
            AssistantMessage(text, reasoning=reasoning),
            _gen_meta(self._final.get("done_reason"), self._calls > 0, done),
        )
        return [ChatResponse((gen,), _final_metadata(self._final))]


# -- chat model ---------------------------------------------------------------------------------------


class OllamaChatModel(HTTPChatModel):
    """Ollama ``POST {base_url}/api/chat`` on httpx.

    No API key by default; pass ``api_key`` (or set ``OLLAMA_API_KEY``) for an Ollama behind an
    authenticating proxy or a hosted one: it is sent as a bearer token.
    """

    provider = "Ollama"
    chat_path = "/api/chat"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        options: ChatOptions | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        capabilities: ModelCapabilities | None = None,
        headers: Mapping[str, str] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        response_limits: ResponseLimits | None = None,
        socket_lane: bool | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        key, credential = resolve_api_key(api_key, "OLLAMA_API_KEY", provider="Ollama", required=False)
        all_headers = dict(headers or {})
        if key:
            all_headers["authorization"] = f"Bearer {key}"
        super().__init__(
            model=model,
            base_url=base_url or default_base_url(),
            headers=all_headers,
            secrets=[key] if key else [],
            options=options,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            capabilities=capabilities
            or ModelCapabilities(tools=True, streaming=True, vision=True, structured_output=("native", "json_object")),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            response_limits=response_limits,
            socket_lane=socket_lane,
            keepalive_expiry=keepalive_expiry,
            credential=credential,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_chat_body(prompt, self.options_for(prompt), stream=stream)

    def structured_output_options(self, rung: str, schema: Mapping[str, Any]) -> ChatOptions | None:
        """``format: <schema>`` for the native rung, ``format: "json"`` (JSON mode) for ``json_object``."""
        if rung == "json_object":
            return ChatOptions(extra={"format": "json"})
        if rung == "native":
            return ChatOptions(output_schema=schema)
        return None

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_chat(payload)

    def stream_parser(self) -> OllamaStreamParser:
        """A fresh parser for one streamed answer."""
        return OllamaStreamParser()


# -- embeddings ---------------------------------------------------------------------------------------


class OllamaEmbeddingModel(PooledHTTPResource):
    """Ollama ``POST {base_url}/api/embed`` returning an (n, d) numpy array, in batches."""

    def __init__(
        self,
        model: str = "nomic-embed-text",
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 64,
        max_concurrency: int = 2,
        truncate: bool | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        key, credential = resolve_api_key(api_key, "OLLAMA_API_KEY", provider="Ollama", required=False)
        self.model = model
        self.batch_size = batch_size
        self.max_concurrency = max(1, max_concurrency)
        self.truncate = truncate
        self._requested_dimensions = dimensions
        self._dimensions = dimensions
        self._http = HTTPTransport(
            provider="Ollama",
            base_url=base_url or default_base_url(),
            headers={"authorization": f"Bearer {key}"} if key else {},
            secrets=[key] if key else [],
            credential=credential,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max),
            http_client=http_client,
            async_http_client=async_http_client,
        )

    def __repr__(self) -> str:
        return f"OllamaEmbeddingModel(model={self.model!r}, base_url={self._http.base_url!r})"

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch}
        if self.truncate is not None:
            body["truncate"] = self.truncate
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        return body

    @staticmethod
    def _rows(payload: Any, expected: int) -> list[list[float]]:
        _raise_error(payload)
        rows = [list(v) for v in payload["embeddings"]]
        if len(rows) != expected:
            raise ModelResponseError(f"expected {expected} embeddings, got {len(rows)}")
        return rows

    @property
    def dimensions(self) -> int:
        """Vector length; asks the server once when it is not known."""
        if self._dimensions is None:
            self.embed(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Embed ``texts`` (in batches); row i is the vector of ``texts[i]``."""
        from chatclient.models.openai import batches, to_matrix

        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; wrap a single text in a list")
        rows: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            rows.extend(self._rows(self._http.post("/api/embed", self._body(batch)), len(batch)))
        if rows:
            self._dimensions = len(rows[0])
        return to_matrix(rows, self._dimensions)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Async ``embed``; up to ``max_concurrency`` batches in flight."""
        from chatclient.models.openai import batches, to_matrix

        if isinstance(texts, str):
            raise TypeError("aembed() takes a sequence of texts; wrap a single text in a list")
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(batch: list[str]) -> list[list[float]]:
            async with gate:
                return self._rows(await self._http.apost("/api/embed", self._body(batch)), len(batch))

        parts = await asyncio.gather(*(one(b) for b in batches(texts, self.batch_size)))
        rows = [r for part in parts for r in part]
        if rows:
            self._dimensions = len(rows[0])
        return to_matrix(rows, self._dimensions)
