"""OpenAI Chat Completions and embeddings over httpx, for OpenAI and any compatible server.

    model = OpenAIChatModel("gpt-4o-mini")                         # OPENAI_API_KEY from the environment
    local = OpenAIChatModel("gemma", base_url="http://127.0.0.1:8080/v1")   # llama.cpp, vLLM, Ollama /v1…

The mapping functions (``build_chat_body``, ``parse_chat_completion``, ``OpenAIStreamParser``) are
pure and shared by the sync and async paths.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import httpx

from chatclient.errors import ModelResponseError
from chatclient.messages import (
    AssistantMessage,
    Media,
    Message,
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
from chatclient.models.http import (
    DEFAULT_TIMEOUT,
    HTTPChatModel,
    HTTPTransport,
    PooledHTTPResource,
    RetryPolicy,
    assistant_text,
    env_or,
)
from chatclient.models.sse import SSEDecoder
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "OpenAIChatModel",
    "OpenAIEmbeddingModel",
    "OpenAIStreamParser",
    "batches",
    "build_chat_body",
    "is_strict_schema",
    "openai_messages",
    "parse_chat_completion",
    "to_matrix",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
StructuredOutputStyle = Literal["json_schema", "json_object"]
_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


# -- request ------------------------------------------------------------------------------------------


def _data_url(media: Media) -> str:
    if isinstance(media.data, str):
        return media.data
    return f"data:{media.mime_type};base64,{base64.b64encode(media.data).decode('ascii')}"


def _media_part(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": _data_url(media)}}
    if isinstance(media.data, str) and not media.data.startswith("data:"):
        raise ValueError(f"OpenAI chat accepts URLs only for images, not {media.mime_type}")
    if mime in _AUDIO_FORMATS and isinstance(media.data, bytes):
        data = base64.b64encode(media.data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": _AUDIO_FORMATS[mime]}}
    return {"type": "file", "file": {"file_data": _data_url(media)}}


def _tool_call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat Completions messages for chatclient messages (a tool message per tool response)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.text})
        elif isinstance(m, UserMessage):
            if m.media:
                parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
                parts.extend(_media_part(media) for media in m.media)
                out.append({"role": "user", "content": parts})
            else:
                out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            # Always a string: OpenAI accepts "" beside tool_calls, and OpenAI-compatible servers
            # (llama-cpp-python's among them) reject a null content in their request validation.
            msg: dict[str, Any] = {"role": "assistant", "content": m.text if m.text is not None else ""}
            if m.tool_calls:
                msg["tool_calls"] = [_tool_call(c) for c in m.tool_calls]
            out.append(msg)
        elif isinstance(m, ToolResponseMessage):
            out.extend({"role": "tool", "tool_call_id": r.id, "content": r.response_data} for r in m.responses)
        else:  # pragma: no cover - Prompt validates message types
            raise TypeError(f"unsupported message type {type(m).__name__}")
    return out


def openai_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Function tools for tool definitions."""
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


def openai_tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    """``"auto"``/``"none"``/``"required"`` pass through; another string names the function to call."""
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_KEYWORDS:
            return choice
        return {"type": "function", "function": {"name": choice}}
    return dict(choice)


def is_strict_schema(schema: Any) -> bool:
    """Whether OpenAI's strict mode can take ``schema`` unchanged.

    Strict mode needs every object to forbid additional properties and to require all of its
    properties; rewriting a schema to force that would change its meaning, so we only detect it.
    """
    if isinstance(schema, Mapping):
        props = schema.get("properties")
        if schema.get("type") == "object" or isinstance(props, Mapping):
            props = props if isinstance(props, Mapping) else {}
            if schema.get("additionalProperties") is not False:
                return False
            if set(schema.get("required") or ()) != set(props):
                return False
        return all(is_strict_schema(v) for k, v in schema.items() if k not in ("enum", "const", "default"))
    if isinstance(schema, list):
        return all(is_strict_schema(v) for v in schema)
    return True


def response_format(schema: Mapping[str, Any], style: StructuredOutputStyle = "json_schema") -> dict[str, Any]:
    """The ``response_format`` for a schema.

    ``"json_schema"`` is OpenAI's form (strict when the schema allows it); ``"json_object"`` is the
    older ``{"type": "json_object", "schema": ...}`` form that llama-cpp-python's server and some
    other compatible servers understand instead.
    """
    if style == "json_object":
        return {"type": "json_object", "schema": dict(schema)}
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64] if isinstance(title, str) and title else "response"
    return {
        "type": "json_schema",
        "json_schema": {"name": name, "schema": dict(schema), "strict": is_strict_schema(schema)},
    }


def build_chat_body(
    prompt: Prompt, options: ChatOptions, *, stream: bool, schema_style: StructuredOutputStyle = "json_schema"
) -> dict[str, Any]:
    """The Chat Completions request body for a prompt and its merged options.

    ``top_k`` has no Chat Completions field and is left out (compatible servers that accept it can
    get it through ``options.extra``).
    """
    body: dict[str, Any] = {"model": options.model, "messages": openai_messages(prompt.messages)}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    for key in ("temperature", "top_p", "max_tokens", "frequency_penalty", "presence_penalty", "seed"):
        value = getattr(options, key)
        if value is not None:
            body[key] = value
    if options.stop is not None:
        body["stop"] = list(options.stop)
    if prompt.tools:
        # OpenAI rejects tool_choice/parallel_tool_calls when no tools are offered.
        body["tools"] = openai_tools(prompt.tools)
        if options.tool_choice is not None:
            body["tool_choice"] = openai_tool_choice(options.tool_choice)
        if options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = options.parallel_tool_calls
    if options.output_schema is not None:
        body["response_format"] = response_format(options.output_schema, schema_style)
    if options.extra:
        body.update(options.extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def finish_reason(raw: str | None) -> str | None:
    """OpenAI's vocabulary is the common one; only the legacy ``function_call`` is renamed."""
    return "tool_calls" if raw == "function_call" else raw


def _arguments(value: Any) -> str:
    # Some compatible servers send arguments as an object rather than JSON text.
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _gen_extra(raw: str | None, refusal: str | None) -> Mapping[str, Any]:
    extra: dict[str, Any] = {}
    if raw is not None:
        extra["raw_finish_reason"] = raw
    if refusal:
        extra["refusal"] = refusal
    return MappingProxyType(extra)


def _usage(payload: Any) -> Usage:
    if not isinstance(payload, Mapping):
        return Usage()
    return Usage(int(payload.get("prompt_tokens") or 0), int(payload.get("completion_tokens") or 0))


def _response_extra(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    fingerprint = payload.get("system_fingerprint")
    return MappingProxyType({"system_fingerprint": fingerprint}) if fingerprint else MappingProxyType({})


def _raise_payload_error(payload: Any) -> None:
    if isinstance(payload, Mapping) and payload.get("error") is not None:
        err = payload["error"]
        message = err.get("message") if isinstance(err, Mapping) else err
        raise ModelResponseError(f"OpenAI-compatible server reported an error: {str(message)[:300]}")


def parse_chat_completion(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a ``chat.completion`` object (one generation per choice)."""
    _raise_payload_error(payload)
    generations = []
    for choice in sorted(payload["choices"], key=lambda c: c.get("index", 0)):
        message = choice.get("message") or {}
        calls = tuple(
            ToolCall(
                str(tc.get("id") or f"call_{i}"), tc["function"]["name"], _arguments(tc["function"].get("arguments"))
            )
            for i, tc in enumerate(message.get("tool_calls") or ())
        )
        raw = choice.get("finish_reason")
        generations.append(
            Generation(
                AssistantMessage(assistant_text(message.get("content"), bool(calls)), calls),
                GenerationMetadata(finish_reason(raw), _gen_extra(raw, message.get("refusal"))),
            )
        )
    return ChatResponse(
        tuple(generations),
        ChatResponseMetadata(
            payload.get("id"), payload.get("model"), _usage(payload.get("usage")), _response_extra(payload)
        ),
    )


class OpenAIStreamParser:
    """Turns a Chat Completions SSE stream into delta chunks.

    Text deltas are passed on as they come. Tool-call fragments are tagged with their call's id
    (OpenAI sends the id only with a call's first fragment, then refers to it by ``index``), so
    ``aggregate()`` can stitch interleaved calls. The finish reason arrives before the usage chunk;
    both are held back and sent together on the last chunk, after ``[DONE]``.
    """

    def __init__(self) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._id: str | None = None
        self._model: str | None = None
        self._raw_finish: str | None = None
        self._usage = Usage()
        self._extra: Mapping[str, Any] = MappingProxyType({})
        self._ids: dict[int, str] = {}
        self._names: dict[int, str] = {}
        self._refusal: list[str] = []
        self._saw_text = False

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        event = self._sse.feed(line)
        if event is None:
            return []
        if event.data.strip() == "[DONE]":
            self.done = True
            return []
        payload = event.json()
        _raise_payload_error(payload)
        self._id = payload.get("id") or self._id
        self._model = payload.get("model") or self._model
        if payload.get("usage"):
            self._usage = _usage(payload["usage"])
        if payload.get("system_fingerprint"):
            self._extra = _response_extra(payload)
        out: list[ChatResponse] = []
        for choice in payload.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # one generation is streamed; n > 1 is not supported here
            if choice.get("finish_reason"):
                self._raw_finish = choice["finish_reason"]
            delta = choice.get("delta") or {}
            if delta.get("refusal"):
                self._refusal.append(delta["refusal"])
            text = delta.get("content") or None
            calls = tuple(self._call_fragments(delta.get("tool_calls") or ()))
            if text or calls:
                self._saw_text = self._saw_text or bool(text)
                out.append(
                    ChatResponse(
                        (Generation(AssistantMessage(text, calls)),), ChatResponseMetadata(self._id, self._model)
                    )
                )
        return out

    def _call_fragments(self, deltas: Sequence[Mapping[str, Any]]) -> list[ToolCall]:
        fragments = []
        for position, tc in enumerate(deltas):
            index = int(tc.get("index", position))
            fn = tc.get("function") or {}
            name = fn.get("name") or ""
            args = _arguments(fn.get("arguments"))
            new_id = tc.get("id")
            if new_id and self._ids.get(index) != new_id:
                self._ids[index] = str(new_id)
                self._names[index] = name
                fragments.append(ToolCall(str(new_id), name, args))
                continue
            known = index in self._ids
            call_id = self._ids.setdefault(index, f"call_{index}")
            # Some servers (llama-cpp-python) repeat the id and name in every fragment.
            if known and name and name == self._names.get(index):
                name = ""
            elif name:
                self._names[index] = name
            if name or args or not known:
                fragments.append(ToolCall(call_id, name, args))
        return fragments

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage), once the end marker has arrived."""
        text = None if (self._saw_text or self._ids) else ""
        refusal = "".join(self._refusal) or None
        gen = Generation(
            AssistantMessage(text),
            GenerationMetadata(finish_reason(self._raw_finish), _gen_extra(self._raw_finish, refusal)),
        )
        return [ChatResponse((gen,), ChatResponseMetadata(self._id, self._model, self._usage, self._extra))]


# -- chat model ---------------------------------------------------------------------------------------


class OpenAIChatModel(HTTPChatModel):
    """Chat Completions (``POST {base_url}/chat/completions``) on httpx.

    ``api_key`` defaults to ``OPENAI_API_KEY`` and ``base_url`` to ``OPENAI_BASE_URL`` or the
    OpenAI API. A server that needs no key (llama.cpp, vLLM, Ollama) gets no ``Authorization``
    header. ``backoff_base``/``backoff_max`` tune the retry delays (seconds).
    ``structured_output`` picks the ``response_format`` form for ``options.output_schema``:
    ``"json_schema"`` (OpenAI, vLLM, llama.cpp's own server) or ``"json_object"`` (llama-cpp-python's
    server, which takes ``{"type": "json_object", "schema": ...}``).

    >>> m = OpenAIChatModel("gpt-4o-mini", api_key="sk-test")
    >>> m
    OpenAIChatModel(model='gpt-4o-mini', base_url='https://api.openai.com/v1')
    """

    provider = "OpenAI"
    chat_path = "/chat/completions"

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
        structured_output: StructuredOutputStyle = "json_schema",
    ) -> None:
        if structured_output not in ("json_schema", "json_object"):
            raise ValueError("structured_output must be 'json_schema' or 'json_object'")
        self.structured_output: StructuredOutputStyle = structured_output
        key = env_or(api_key, "OPENAI_API_KEY")
        all_headers = dict(headers or {})
        if key:
            all_headers["authorization"] = f"Bearer {key}"
        super().__init__(
            model=model,
            base_url=env_or(base_url, "OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            headers=all_headers,
            secrets=[key] if key else [],
            options=options,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            capabilities=capabilities
            or ModelCapabilities(native_structured_output=True, tools=True, streaming=True, vision=True),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_chat_body(prompt, self.options_for(prompt), stream=stream, schema_style=self.structured_output)

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_chat_completion(payload)

    def stream_parser(self) -> OpenAIStreamParser:
        """A fresh parser for one streamed answer."""
        return OpenAIStreamParser()


# -- embeddings ---------------------------------------------------------------------------------------

_KNOWN_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


def batches(texts: Sequence[str], size: int) -> list[list[str]]:
    """``texts`` cut into lists of at most ``size``."""
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


def _embedding_rows(payload: Any, expected: int) -> list[list[float]]:
    data = sorted(payload["data"], key=lambda d: d.get("index", 0))
    if len(data) != expected:
        raise ModelResponseError(f"expected {expected} embeddings, got {len(data)}")
    return [list(d["embedding"]) for d in data]


def to_matrix(rows: list[list[float]], dimensions: int | None) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Stack embedding rows into an (n, d) float64 array; numpy is imported only here."""
    import numpy as np

    if not rows:
        return np.zeros((0, dimensions or 0), dtype=np.float64)
    matrix: npt.NDArray[np.float64] = np.asarray(rows, dtype=np.float64)
    if matrix.ndim != 2:
        raise ModelResponseError("embeddings have inconsistent lengths")
    return matrix


class OpenAIEmbeddingModel(PooledHTTPResource):
    """Embeddings (``POST {base_url}/embeddings``) returning an (n, d) numpy array.

    Texts are sent in batches of ``batch_size`` (OpenAI accepts up to 2048 inputs per request);
    ``dimensions`` asks text-embedding-3 models for shortened vectors.
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 512,
        max_concurrency: int = 4,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        key = env_or(api_key, "OPENAI_API_KEY")
        self.model = model
        self.batch_size = batch_size
        self.max_concurrency = max(1, max_concurrency)
        self._requested_dimensions = dimensions
        self._dimensions = dimensions or _KNOWN_DIMENSIONS.get(model)
        self._http = HTTPTransport(
            provider="OpenAI",
            base_url=env_or(base_url, "OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            headers={"authorization": f"Bearer {key}"} if key else {},
            secrets=[key] if key else [],
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base, backoff_max=backoff_max),
            http_client=http_client,
            async_http_client=async_http_client,
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbeddingModel(model={self.model!r}, base_url={self._http.base_url!r})"

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._requested_dimensions is not None:
            body["dimensions"] = self._requested_dimensions
        return body

    def _remember(self, rows: list[list[float]]) -> None:
        if rows:
            self._dimensions = len(rows[0])

    @property
    def dimensions(self) -> int:
        """Vector length; asks the server once (embedding a probe text) when it is not known."""
        if self._dimensions is None:
            self.embed(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Embed ``texts`` (in batches); row i is the vector of ``texts[i]``."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; wrap a single text in a list")
        rows: list[list[float]] = []
        for batch in batches(texts, self.batch_size):
            rows.extend(_embedding_rows(self._http.post("/embeddings", self._body(batch)), len(batch)))
        self._remember(rows)
        return to_matrix(rows, self._dimensions)

    async def aembed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Async ``embed``; up to ``max_concurrency`` batches are in flight at once."""
        if isinstance(texts, str):
            raise TypeError("aembed() takes a sequence of texts; wrap a single text in a list")
        gate = asyncio.Semaphore(self.max_concurrency)

        async def one(batch: list[str]) -> list[list[float]]:
            async with gate:
                return _embedding_rows(await self._http.apost("/embeddings", self._body(batch)), len(batch))

        results = await asyncio.gather(*(one(b) for b in batches(texts, self.batch_size)))
        rows = [row for part in results for row in part]
        self._remember(rows)
        return to_matrix(rows, self._dimensions)
