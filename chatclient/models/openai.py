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
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models._chunks import MAX_CHOICES, choice_index, message_chunk, message_generation, text_generation
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
from chatclient.models.http.sse import SSEDecoder, parse_event_json
from chatclient.models.reasoning import DEFAULT_THINK_TAGS, ThinkSplitter, split_think
from chatclient.models.tool_media import media_note, tool_text
from chatclient.models.wire import data_url, is_json, reported_total, usage_count
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


def openai_endpoint(base_url: str | None, api_key: str | None) -> tuple[str, str | None, str]:
    """(base URL, API key, where the key came from) for an OpenAI model.

    The URL is ``base_url``, else ``OPENAI_BASE_URL``, else the hosted API; the key is ``api_key``,
    else ``OPENAI_API_KEY``. The hosted API always needs a key; local OpenAI-compatible servers
    usually do not, so there a missing key is allowed.
    """
    url = env_or(base_url, "OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key, credential = resolve_api_key(
        api_key, "OPENAI_API_KEY", provider="OpenAI", required=url.rstrip("/") == DEFAULT_BASE_URL
    )
    return url, key, credential


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


# -- request ------------------------------------------------------------------------------------------


def _media_part(media: Media) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if mime.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": data_url(media)}}
    if isinstance(media.data, str) and not media.data.startswith("data:"):
        raise ValueError(f"OpenAI chat accepts URLs only for images, not {media.mime_type}")
    if mime in _AUDIO_FORMATS and isinstance(media.data, bytes):
        data = base64.b64encode(media.data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": _AUDIO_FORMATS[mime]}}
    return {"type": "file", "file": {"file_data": data_url(media)}}


def _tool_call(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }
    extra_content = call.metadata.get("extra_content")
    if isinstance(extra_content, Mapping):
        # Gemini's thought signature: required back, unchanged, on the call it came with.
        out["extra_content"] = dict(extra_content)
    return out


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
            if m.refusal is not None:
                msg["refusal"] = m.refusal
            details = m.metadata.get("reasoning_details")
            if isinstance(details, (list, tuple)) and details:
                # OpenRouter wants its reasoning_details back as received (signatures and encrypted
                # items included). Other reasoning is not sent: servers that validate request fields
                # strictly reject unknown ones, and OpenAI does not take reasoning back here.
                msg["reasoning_details"] = [dict(d) if isinstance(d, Mapping) else d for d in details]
            out.append(msg)
        elif isinstance(m, ToolResponseMessage):
            out.extend({"role": "tool", "tool_call_id": r.id, "content": tool_text(r)} for r in m.responses)
            media = [media for r in m.responses for media in r.media]
            if media:
                # Tool messages take text only: the media follow in a user message (the portable fallback).
                parts = [{"type": "text", "text": media_note(m.responses)}, *(_media_part(x) for x in media)]
                out.append({"role": "user", "content": parts})
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
        body["tools"] = openai_tools(function_tools(prompt.tools, provider="OpenAI Chat Completions"))
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

# Response-level fields kept in ``ChatResponseMetadata.extra`` as the server sent them: OpenAI's
# ``system_fingerprint`` and ``service_tier``, Cerebras' ``time_info``, OpenRouter's ``provider``.
_RESPONSE_EXTRA_KEYS = ("system_fingerprint", "service_tier", "time_info", "provider")
_REASONING_PROVIDER = "openai"
_OPENROUTER = "openrouter"


def finish_reason(raw: str | None) -> str | None:
    """OpenAI's vocabulary is the common one; only the legacy ``function_call`` is renamed."""
    return "tool_calls" if raw == "function_call" else raw


def _arguments(value: Any) -> str:
    # Some compatible servers send arguments as an object rather than JSON text.
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _usage(payload: Any) -> Usage:
    """Usage with its details; ``prompt_tokens`` is already the whole input (cached tokens included)."""
    if not isinstance(payload, dict | Mapping):  # dict first: the common case skips the ABC check
        return Usage()
    prompt = usage_count(payload.get("prompt_tokens"))
    completion = usage_count(payload.get("completion_tokens"))
    prompt_details = payload.get("prompt_tokens_details")
    completion_details = payload.get("completion_tokens_details")
    cached = usage_count(prompt_details.get("cached_tokens")) if isinstance(prompt_details, dict | Mapping) else 0
    # DeepSeek reports its cache hits beside prompt_tokens instead of in the details object.
    cached = cached or usage_count(payload.get("prompt_cache_hit_tokens"))
    reasoning = (
        usage_count(completion_details.get("reasoning_tokens")) if isinstance(completion_details, dict | Mapping) else 0
    )
    total = payload.get("total_tokens")
    reported = reported_total(total, prompt, completion)
    return Usage(prompt, completion, cached, 0, reasoning, reported)


def _response_extra(payload: Mapping[str, Any], into: dict[str, Any] | None = None) -> dict[str, Any]:
    extra = into if into is not None else {}
    for key in _RESPONSE_EXTRA_KEYS:
        value = payload.get(key)
        if value is not None and value != "":  # search models send an empty system_fingerprint
            extra[key] = value
    return extra


def _raise_payload_error(payload: Any) -> None:
    if isinstance(payload, dict | Mapping) and payload.get("error") is not None:
        err = payload["error"]
        message = err.get("message") if isinstance(err, Mapping) else err
        raise ModelResponseError(f"OpenAI-compatible server reported an error: {str(message)[:300]}")


def _detail_reasoning(detail: Any) -> Reasoning | None:
    """One OpenRouter ``reasoning_details`` item as a reasoning block (unknown types are skipped)."""
    if not isinstance(detail, Mapping):
        return None
    kind = detail.get("type")
    if kind == "reasoning.text":
        sig = detail.get("signature")
        return Reasoning(
            str(detail.get("text") or ""), sig if isinstance(sig, str) and sig else None, None, _OPENROUTER
        )
    if kind == "reasoning.summary":
        return Reasoning(str(detail.get("summary") or ""), None, None, _OPENROUTER)
    if kind == "reasoning.encrypted":
        data = detail.get("data")
        return Reasoning("", None, data if isinstance(data, str) and data else None, _OPENROUTER)
    return None


def _message_reasoning(message: Mapping[str, Any]) -> list[Reasoning]:
    """Reasoning of a message or delta: OpenRouter's ``reasoning_details`` (which carry signatures
    and encrypted data) when present, else vLLM/DeepSeek ``reasoning_content`` or the ``reasoning``
    string of OpenRouter, Ollama /v1, Cerebras and newer vLLM."""
    if "reasoning_details" not in message and "reasoning_content" not in message and "reasoning" not in message:
        return []
    details = message.get("reasoning_details")
    if isinstance(details, list) and details:
        return [r for r in (_detail_reasoning(d) for d in details) if r is not None]
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return [Reasoning(value, provider=_REASONING_PROVIDER)]
    return []


def _call_metadata(tc: Mapping[str, Any]) -> dict[str, Any]:
    # Gemini's OpenAI endpoint puts the call's thought signature in extra_content.google; it must go
    # back unchanged with the call in the next request, so the whole object is kept.
    extra_content = tc.get("extra_content")
    return {"extra_content": extra_content} if isinstance(extra_content, Mapping) else {}


def _split_content(content: Any, think_tags: Sequence[str] | None) -> tuple[str | None, list[Reasoning]]:
    if not isinstance(content, str) or not think_tags:
        return (content if isinstance(content, str) else None), []
    if not content.lstrip().startswith("<"):
        return content, []
    thought, answer = split_think(content, think_tags)
    return answer, ([Reasoning(thought, provider=_REASONING_PROVIDER)] if thought else [])


def _generation_extra(choice: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    raw = choice.get("finish_reason")
    if raw is not None:
        extra["raw_finish_reason"] = raw
    if choice.get("native_finish_reason") is not None:  # OpenRouter: the upstream provider's own reason
        extra["native_finish_reason"] = choice["native_finish_reason"]
    if choice.get("logprobs") is not None:
        extra["logprobs"] = choice["logprobs"]
    if message.get("annotations"):
        extra["annotations"] = message["annotations"]
    return extra


def parse_chat_completion(payload: Any, *, think_tags: Sequence[str] | None = DEFAULT_THINK_TAGS) -> ChatResponse:
    """A ``ChatResponse`` for a ``chat.completion`` object (one generation per choice).

    Reasoning (``reasoning_details``, ``reasoning_content``, ``reasoning``, or a leading ``<think>``
    block in the content when ``think_tags`` is set) goes to ``AssistantMessage.reasoning``,
    ``message.refusal`` to ``AssistantMessage.refusal``; ``logprobs``, ``annotations`` and the raw
    finish reason to the generation's ``extra``. A tool call whose arguments were cut by the token
    limit (finish reason ``length``, arguments not valid JSON) is kept, flagged ``{"partial": True}``
    in its metadata.
    """
    _raise_payload_error(payload)
    generations = []
    # A payload without "choices" raises KeyError here, which the model turns into a typed
    # ModelResponseError naming the unexpected shape.
    choices = payload["choices"]
    for choice in choices if len(choices) == 1 else sorted(choices, key=lambda c: c.get("index", 0)):
        message = choice.get("message") or {}
        raw = choice.get("finish_reason")
        calls = []
        for i, tc in enumerate(message.get("tool_calls") or ()):
            fn = tc.get("function") or {}
            args = _arguments(fn.get("arguments"))
            meta = _call_metadata(tc)
            if raw == "length" and not is_json(args):
                meta["partial"] = True
            calls.append(ToolCall(str(tc.get("id") or f"call_{i}"), str(fn.get("name") or ""), args, meta))
        text, thought = _split_content(message.get("content"), think_tags)
        reasoning = _message_reasoning(message) + thought
        details = message.get("reasoning_details")
        msg_meta = {"reasoning_details": details} if isinstance(details, list) and details else {}
        refusal = message.get("refusal")
        generations.append(
            Generation(
                AssistantMessage(
                    assistant_text(text, bool(calls)),
                    tuple(calls),
                    msg_meta,
                    tuple(reasoning),
                    refusal if isinstance(refusal, str) and refusal else None,
                ),
                GenerationMetadata(finish_reason(raw), MappingProxyType(_generation_extra(choice, message))),
            )
        )
    return ChatResponse(
        tuple(generations),
        ChatResponseMetadata(
            payload.get("id"),
            payload.get("model"),
            _usage(payload.get("usage")),
            MappingProxyType(_response_extra(payload)),
        ),
    )


_NO_DELTA = Generation(AssistantMessage(None))
_NO_ID_META = ChatResponseMetadata()
_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})
_PLAIN_DELTA_KEYS = frozenset({"content", "role"})
_RESPONSE_EXTRA_SET = frozenset(_RESPONSE_EXTRA_KEYS)


class _ChoiceStream:
    """What the stream parser remembers about one choice."""

    __slots__ = (
        "annotations",
        "args",
        "details",
        "extra",
        "ids",
        "logprobs",
        "names",
        "raw_finish",
        "saw_refusal",
        "saw_text",
        "splitter",
    )

    def __init__(self, think_tags: Sequence[str] | None) -> None:
        self.ids: dict[int, str] = {}
        self.names: dict[int, str] = {}
        self.args: dict[int, list[str]] = {}
        self.raw_finish: str | None = None
        self.saw_text = False
        self.saw_refusal = False
        self.extra: dict[str, Any] = {}
        self.logprobs: dict[str, list[Any]] | None = None
        self.annotations: list[Any] = []
        self.details: dict[tuple[Any, Any], dict[str, Any]] = {}
        self.splitter = ThinkSplitter(think_tags) if think_tags else None


class OpenAIStreamParser:
    """Turns a Chat Completions SSE stream into delta chunks.

    Text, reasoning and refusal deltas are passed on as they come. Tool-call fragments are tagged
    with their call's id (OpenAI sends the id only with a call's first fragment, then refers to it
    by ``index``), so ``aggregate()`` can stitch interleaved calls. With ``n > 1`` every choice is
    streamed: generation ``i`` of a chunk is a delta of choice ``i`` (see ``ResponseAggregator``).
    The finish reasons arrive before the usage chunk; they are held back and sent together with
    the usage, the logprobs, annotations and merged ``reasoning_details`` on the last chunk, after
    ``[DONE]``.
    """

    def __init__(self, think_tags: Sequence[str] | None = DEFAULT_THINK_TAGS) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._think_tags = tuple(think_tags) if think_tags else None
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._extra: dict[str, Any] = {}
        self._choices: dict[int, _ChoiceStream] = {}
        self._meta = _NO_ID_META  # shared by every delta until the id or model changes (frozen)

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        # Runs twice per streamed token (the data line, the blank line): the common shapes are read
        # with direct lookups and the chunk is built from shared, frozen parts (see models._chunks).
        sse = self._sse
        if type(sse) is SSEDecoder:
            data = sse.feed_data(line)
        else:  # a subclass's decoder (Azure's records each event it dispatches): its own feed
            event = sse.feed(line)
            data = None if event is None else event.data
        if data is None:
            return []
        if data[:1] != "{" and data.strip() == "[DONE]":
            self.done = True
            return []
        payload = parse_event_json(data)
        if type(payload) is not dict:
            _raise_payload_error(payload)
            if not isinstance(payload, Mapping):
                raise ModelResponseError("OpenAI-compatible stream event is not a JSON object")
        elif payload.get("error") is not None:
            _raise_payload_error(payload)
        chunk_id = payload.get("id") or self._id
        model = payload.get("model") or self._model
        if chunk_id != self._id or model != self._model:
            self._id, self._model = chunk_id, model
            self._meta = ChatResponseMetadata(chunk_id, model)
        if payload.get("usage"):
            self._usage = _usage(payload["usage"])
        if not _RESPONSE_EXTRA_SET.isdisjoint(payload):
            _response_extra(payload, self._extra)
        choices = payload.get("choices")
        if not choices:
            return []
        if len(choices) == 1:  # the common case, kept cheap: one choice per event
            choice = choices[0]
            index = choice.get("index", 0)
            if type(index) is not int or not 0 <= index < MAX_CHOICES:
                index = choice_index(index)
            state = self._choices.get(index) or self._choice(index)
            gen = self._choice_delta(choice, state)
            if gen is None:
                return []
            generations: tuple[Generation, ...] = (gen,) if index == 0 else (*([_NO_DELTA] * index), gen)
        else:
            deltas: dict[int, Generation] = {}
            for choice in choices:
                index = choice_index(choice.get("index", 0))
                delta_gen = self._choice_delta(choice, self._choice(index))
                if delta_gen is not None:
                    deltas[index] = delta_gen
            if not deltas:
                return []
            generations = tuple(deltas.get(i, _NO_DELTA) for i in range(max(deltas) + 1))
        return [message_chunk(generations, self._meta)]

    def _choice(self, index: int) -> _ChoiceStream:
        state = self._choices.get(index)
        if state is None:
            state = self._choices[index] = _ChoiceStream(self._think_tags)
        return state

    def _choice_delta(self, choice: Mapping[str, Any], state: _ChoiceStream) -> Generation | None:
        if choice.get("finish_reason"):
            state.raw_finish = choice["finish_reason"]
        if "native_finish_reason" in choice and choice["native_finish_reason"] is not None:
            state.extra["native_finish_reason"] = choice["native_finish_reason"]
        logprobs = choice.get("logprobs")
        if logprobs and isinstance(logprobs, Mapping):
            if state.logprobs is None:
                state.logprobs = {}
            for key in ("content", "refusal"):
                if isinstance(logprobs.get(key), list):
                    state.logprobs.setdefault(key, []).extend(logprobs[key])
        delta = choice.get("delta") or _NO_FIELDS
        content = delta.get("content")
        # The usual token: text only (a "role" key at most), no think-tag splitting left to do.
        if state.splitter is None and type(content) is str and content and _PLAIN_DELTA_KEYS.issuperset(delta):
            state.saw_text = True
            return text_generation(content)
        # Rare fields are looked up only when present: this runs once per streamed token.
        if "annotations" in delta and isinstance(delta["annotations"], list):
            state.annotations.extend(delta["annotations"])
        reasoning: list[Reasoning] = []
        if "reasoning_details" in delta or "reasoning_content" in delta or "reasoning" in delta:
            reasoning = _message_reasoning(delta)
            self._merge_details(delta.get("reasoning_details"), state)
        text: str | None = None
        if content and isinstance(content, str):
            splitter = state.splitter
            if splitter is not None:
                pieces = splitter.feed(content)
                text = "".join(p for kind, p in pieces if kind == "text") or None
                thought = "".join(p for kind, p in pieces if kind == "reasoning")
                if thought:
                    reasoning.append(Reasoning(thought, provider=_REASONING_PROVIDER))
                if splitter.answering:
                    state.splitter = None  # the answer has started: no block can open any more
            else:
                text = content
        refusal = delta.get("refusal")
        refusal = refusal if refusal and isinstance(refusal, str) else None
        tool_calls = delta.get("tool_calls")
        calls = tuple(self._call_fragments(tool_calls, state)) if tool_calls else ()
        if not (text or calls or reasoning or refusal):
            return None
        if text:
            state.saw_text = True
        if refusal is not None:
            state.saw_refusal = True
        if not (calls or reasoning or refusal):
            return text_generation(text)  # type: ignore[arg-type]  # text is a non-empty str here
        return message_generation(
            AssistantMessage(text, calls, reasoning=tuple(reasoning) if reasoning else (), refusal=refusal)
        )

    @staticmethod
    def _merge_details(details: Any, state: _ChoiceStream) -> None:
        # OpenRouter streams reasoning_details as fragments keyed by (type, index); they are rebuilt
        # into whole items so the follow-up request can send them back as the API requires.
        if not isinstance(details, list):
            return
        for d in details:
            if not isinstance(d, Mapping):
                continue
            key = (d.get("type"), d.get("index"))
            item = state.details.get(key)
            if item is None:
                state.details[key] = dict(d)
                continue
            for k, v in d.items():
                if k in ("text", "summary", "data") and isinstance(v, str) and isinstance(item.get(k), str):
                    item[k] += v
                elif v is not None:
                    item[k] = v

    def _call_fragments(self, deltas: Sequence[Mapping[str, Any]], state: _ChoiceStream) -> list[ToolCall]:
        fragments = []
        for position, tc in enumerate(deltas):
            index = int(tc.get("index", position))
            fn = tc.get("function") or {}
            name = fn.get("name") or ""
            args = _arguments(fn.get("arguments"))
            meta = _call_metadata(tc)
            new_id = tc.get("id")
            if new_id and state.ids.get(index) != new_id:
                state.ids[index] = str(new_id)
                state.names[index] = name
                state.args[index] = [args]
                fragments.append(ToolCall(str(new_id), name, args, meta))
                continue
            known = index in state.ids
            call_id = state.ids.setdefault(index, f"call_{index}")
            # Some servers (llama-cpp-python) repeat the id and name in every fragment.
            if known and name and name == state.names.get(index):
                name = ""
            elif name:
                state.names[index] = name
            state.args.setdefault(index, []).append(args)
            if name or args or meta or not known:
                fragments.append(ToolCall(call_id, name, args, meta))
        return fragments

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reasons, usage, per-choice metadata), once the end marker has arrived."""
        states = self._choices or {0: _ChoiceStream(None)}
        generations = []
        for index in range(max(states) + 1):
            state = states.get(index)
            generations.append(self._final_generation(state) if state is not None else _NO_DELTA)
        md = ChatResponseMetadata(self._id, self._model, self._usage, MappingProxyType(dict(self._extra)))
        return [ChatResponse(tuple(generations), md)]

    def _final_generation(self, state: _ChoiceStream) -> Generation:
        text_tail: str | None = None
        reasoning: tuple[Reasoning, ...] = ()
        if state.splitter is not None:
            pieces = state.splitter.finish()
            text_tail = "".join(p for kind, p in pieces if kind == "text") or None
            thought = "".join(p for kind, p in pieces if kind == "reasoning")
            reasoning = (Reasoning(thought, provider=_REASONING_PROVIDER),) if thought else ()
        state.saw_text = state.saw_text or bool(text_tail)
        text = text_tail if text_tail else (None if (state.saw_text or state.ids) else "")
        partial: tuple[ToolCall, ...] = ()
        if state.raw_finish == "length":
            partial = tuple(
                ToolCall(call_id, "", "", {"partial": True})
                for index, call_id in state.ids.items()
                if not is_json("".join(state.args.get(index, ())))
            )
        meta = {"reasoning_details": list(state.details.values())} if state.details else {}
        extra = dict(state.extra)
        if state.raw_finish is not None:
            extra["raw_finish_reason"] = state.raw_finish
        if state.logprobs is not None:
            extra["logprobs"] = {"content": state.logprobs.get("content"), "refusal": state.logprobs.get("refusal")}
        if state.annotations:
            extra["annotations"] = state.annotations
        return Generation(
            AssistantMessage(text, partial, meta, reasoning),
            GenerationMetadata(finish_reason(state.raw_finish), MappingProxyType(extra)),
        )


# -- chat model ---------------------------------------------------------------------------------------


class OpenAIChatModel(HTTPChatModel):
    """Chat Completions (``POST {base_url}/chat/completions``) on httpx.

    ``api_key`` defaults to ``OPENAI_API_KEY`` and ``base_url`` to ``OPENAI_BASE_URL`` or the
    OpenAI API. A server that needs no key (llama.cpp, vLLM, Ollama) gets no ``Authorization``
    header. ``backoff_base``/``backoff_max`` tune the retry delays (seconds).

    Structured output (``entity()``) walks a ladder without any configuration: ``response_format``
    ``json_schema`` first (OpenAI, vLLM, llama.cpp's own server), then ``{"type": "json_object",
    "schema": ...}`` (llama-cpp-python's server, which rejects ``json_schema``), then a forced answer
    tool, then prompt instructions; a rung the server rejects is remembered by this instance (see
    ``chatclient.models.structured_output``). ``structured_output="json_object"`` starts the ladder
    at JSON mode (and is the form ``options.output_schema`` is sent in); ``"json_schema"`` (or
    ``None``, the default) starts it at the native schema mode.

    >>> m = OpenAIChatModel("gpt-4o-mini", api_key="sk-test")
    >>> m
    OpenAIChatModel(model='gpt-4o-mini', base_url='https://api.openai.com/v1')
    """

    provider = "OpenAI"
    chat_path = "/chat/completions"
    think_tags: tuple[str, ...] | None = DEFAULT_THINK_TAGS
    """Tags of a leading reasoning block in the content (local models) that is split out into
    ``AssistantMessage.reasoning``; set to ``None`` on an instance to keep content untouched."""

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
        structured_output: StructuredOutputStyle | None = None,
        response_limits: ResponseLimits | None = None,
        socket_lane: bool | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        if structured_output not in (None, "json_schema", "json_object"):
            raise ValueError("structured_output must be None, 'json_schema' or 'json_object'")
        self.structured_output: StructuredOutputStyle = structured_output or "json_schema"
        rungs = ("json_object", "tool") if structured_output == "json_object" else ("native", "json_object", "tool")
        url, key, credential = openai_endpoint(base_url, api_key)
        all_headers = dict(headers or {})
        if key:
            all_headers["authorization"] = f"Bearer {key}"
        super().__init__(
            model=model,
            base_url=url,
            headers=all_headers,
            secrets=[key] if key else [],
            options=options,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            capabilities=capabilities
            or ModelCapabilities(tools=True, streaming=True, vision=True, structured_output=rungs, logprobs=True),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            response_limits=response_limits,
            socket_lane=socket_lane,
            keepalive_expiry=keepalive_expiry,
            credential=credential,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_chat_body(prompt, self.options_for(prompt), stream=stream, schema_style=self.structured_output)

    def structured_output_options(self, rung: str, schema: Mapping[str, Any]) -> ChatOptions | None:
        """How a structured-output rung is asked for: ``response_format`` in its two forms."""
        if rung == "json_object":
            return ChatOptions(extra={"response_format": response_format(schema, "json_object")})
        if rung == "native":
            return ChatOptions(output_schema=schema)
        return None

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_chat_completion(payload, think_tags=self.think_tags)

    def stream_parser(self) -> OpenAIStreamParser:
        """A fresh parser for one streamed answer."""
        return OpenAIStreamParser(self.think_tags)


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
        url, key, credential = openai_endpoint(base_url, api_key)
        self.model = model
        self.batch_size = batch_size
        self.max_concurrency = max(1, max_concurrency)
        self._requested_dimensions = dimensions
        self._dimensions = dimensions or _KNOWN_DIMENSIONS.get(model)
        self._http = HTTPTransport(
            provider="OpenAI",
            base_url=url,
            headers={"authorization": f"Bearer {key}"} if key else {},
            secrets=[key] if key else [],
            credential=credential,
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
