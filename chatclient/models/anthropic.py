"""Anthropic Messages API over httpx.

    model = AnthropicChatModel("claude-sonnet-4-5")     # ANTHROPIC_API_KEY from the environment

System messages are lifted into the top-level ``system`` field, tool calls and results become
``tool_use`` / ``tool_result`` blocks, consecutive turns of one role are merged (the API wants
alternating roles) and ``max_tokens`` (required by the API) defaults to 1024. Finish reasons are
mapped to the common vocabulary (``stop``, ``length``, ``tool_calls``, ``content_filter``); the raw
``stop_reason`` is kept in the generation metadata as ``raw_finish_reason`` and the matched stop
sequence as ``stop_sequence``. Structured output (``entity()``) uses the "tool" rung of the
structured-output ladder, Anthropic's own recipe: a synthetic tool whose ``input_schema`` is the
target's schema, forced with ``tool_choice: {"type": "tool", ...}``; its input is the answer.
``options.output_schema`` itself is not sent (the Messages API has no such field).

What a response carries and where it lands:

* ``thinking`` / ``redacted_thinking`` blocks -> ``AssistantMessage.reasoning`` (``provider="anthropic"``,
  with the block's ``signature`` / ``data``); they are sent back, before the text and ``tool_use``
  blocks of their turn, as extended thinking with tools requires. Reasoning made by another
  provider is never sent (Anthropic could not verify it).
* server tools (hosted tools of ``chatclient.tools.builtin``: ``web_search_20250305``,
  ``code_execution_20250825``, ``web_fetch_20250910``, declared with their beta headers): each
  ``server_tool_use`` block and its ``*_tool_result`` block -> one ``HostedToolCall`` (name, input,
  sources / stdout / fetched page, ``raw`` = both blocks); text ``citations`` -> ``citations``.
* blocks chatclient has no field for (server-tool blocks, text ``citations``, unknown future
  types) also keep the turn's whole content, as sent, in
  ``AssistantMessage.metadata["anthropic_content"]``; a follow-up request sends that content back
  verbatim as long as the message's text and tool calls still match it (otherwise the turn is
  rebuilt from its fields, hosted tool blocks included).
* a tool's media (``ToolResult``) -> ``image`` / ``document`` blocks inside its ``tool_result``.
* ``stop_reason: "pause_turn"`` (the API paused long server-tool work): the paused content is sent
  back as is so the model continues, up to ``pause_continuations`` times, and the parts come back
  as one answer (contents, text, hosted tool calls, citations and usage joined; in a stream the
  parts' deltas flow on and only the last part finishes).
* ``usage``: ``prompt_tokens`` is the WHOLE input (``input_tokens`` + ``cache_read_input_tokens`` +
  ``cache_creation_input_tokens``, the library-wide rule), ``cached_input_tokens`` the cache reads,
  ``cache_write_tokens`` the cache writes.
* a stream's ``error`` event (``overloaded_error``, ``rate_limit_error``, ...) raises the same error
  class as the matching HTTP status (529, 429, ...), so the retry rules treat both alike.
* a ``tool_use`` whose input was cut off by ``max_tokens`` in a stream arrives as a tool call with
  the partial input text and ``ToolCall.metadata["partial"] = True`` (finish reason ``length``).
* ``stop_reason: "refusal"`` -> ``AssistantMessage.refusal`` (``stop_details.explanation`` when given).

Prompt caching: a message whose ``metadata["cache_control"]`` is set (``PromptCachingAdvisor`` sets
it) gets that value as ``cache_control`` on its last content block; when any message is marked and
the prompt offers tools, the last tool is marked too (tools lead the cached prefix). At most four
breakpoints are sent, as the API allows: the last tool, the system prompt, then the latest marked
messages.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import httpx

from chatclient import jsonsafe
from chatclient.errors import ModelHTTPError, ModelResponseError, UnsupportedFeatureError
from chatclient.messages import (
    AssistantMessage,
    Citation,
    HostedToolCall,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.models._chunks import message_chunk, message_generation, text_chunk
from chatclient.models.base import (
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    GenerationMetadata,
    ModelCapabilities,
    ResponseAggregator,
    Usage,
)
from chatclient.models.hosted_tools import split_tools
from chatclient.models.http import (
    DEFAULT_TIMEOUT,
    KEEPALIVE_EXPIRY,
    HTTPChatModel,
    ResponseLimits,
    assistant_text,
    env_or,
    error_for_status,
    resolve_api_key,
)
from chatclient.models.http.sse import SSEDecoder, parse_event_json
from chatclient.models.wire import arguments_object, arguments_text
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.redaction import MaskedMapping, Secret

__all__ = [
    "CACHE_CONTROL_KEY",
    "CONTENT_KEY",
    "MAX_CACHE_BREAKPOINTS",
    "PROVIDER",
    "AnthropicChatModel",
    "AnthropicStreamParser",
    "anthropic_messages",
    "build_messages_body",
    "parse_message",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_MODEL = "claude-sonnet-4-5"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024

PROVIDER = "anthropic"
"""``Reasoning.provider`` of the blocks this module makes; only such blocks are sent back."""

CONTENT_KEY = "anthropic_content"
"""``AssistantMessage.metadata`` key holding a turn's raw content blocks when some have no chatclient field."""

CACHE_CONTROL_KEY = "cache_control"
"""Message metadata key: its value becomes the ``cache_control`` of the message's last block."""

MAX_CACHE_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints one Messages API request may carry."""

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}

# Anthropic's error types and the HTTP status each comes with, so a mid-stream error event becomes
# the same typed (and equally retryable) error as the HTTP answer would have been.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}

# Block types chatclient maps to fields of its own; any other type is kept verbatim.
_PLAIN_BLOCKS = frozenset({"text", "tool_use", "thinking", "redacted_thinking"})
# Server tools of the code execution tool and the portable name chatclient gives them.
_SERVER_TOOL_NAMES = {"bash_code_execution": "code_execution", "text_editor_code_execution": "code_execution"}
HOSTED_API = "anthropic"
"""The hosted-tool table's name for this API (``chatclient.tools.builtin.DECLARATIONS``)."""


# -- request ------------------------------------------------------------------------------------------


def _media_block(media: Media) -> dict[str, Any]:
    kind = "image" if media.mime_type.lower().startswith("image/") else "document"
    if isinstance(media.data, str):
        return {"type": kind, "source": {"type": "url", "url": media.data}}
    data = base64.b64encode(media.data).decode("ascii")
    return {"type": kind, "source": {"type": "base64", "media_type": media.mime_type, "data": data}}


def _reasoning_blocks(reasoning: Sequence[Reasoning]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for r in reasoning:
        if r.provider != PROVIDER:
            continue  # another provider's signature means nothing here (and unsigned text is rejected)
        if r.redacted:
            blocks.append({"type": "redacted_thinking", "data": r.redacted})
        elif r.signature:
            blocks.append({"type": "thinking", "thinking": r.text, "signature": r.signature})
    return blocks


def _stored_content(m: AssistantMessage) -> list[dict[str, Any]] | None:
    """The turn's raw content blocks, if kept and still describing this message."""
    stored = m.metadata.get(CONTENT_KEY)
    if not isinstance(stored, (list, tuple)) or not all(isinstance(b, Mapping) for b in stored):
        return None
    text = "".join(str(b.get("text") or "") for b in stored if b.get("type") == "text")
    ids = [b.get("id") for b in stored if b.get("type") == "tool_use"]
    # An advisor that rewrote the answer or the calls made the stored blocks stale: rebuild instead.
    if text != (m.text or "") or ids != [c.id for c in m.tool_calls]:
        return None
    return [{k: v for k, v in b.items() if v is not None} for b in stored]


def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    """(role, content blocks) of one non-system message."""
    if isinstance(m, UserMessage):
        blocks: list[dict[str, Any]] = [_media_block(media) for media in m.media]
        if m.text or not blocks:
            blocks.append({"type": "text", "text": m.text})
        return "user", blocks
    if isinstance(m, AssistantMessage):
        stored = _stored_content(m)
        if stored is not None:
            return "assistant", stored
        # Thinking first: the API wants a turn's thinking blocks before its text and tool_use blocks.
        blocks = _reasoning_blocks(m.reasoning)
        for h in m.hosted_tool_calls:
            if h.provider == PROVIDER:
                blocks.extend(dict(raw) for raw in h.raw)
        if m.text:
            blocks.append({"type": "text", "text": m.text})
        blocks.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_object(c, partial_ok=True)}
            for c in m.tool_calls
        )
        return "assistant", blocks
    if isinstance(m, ToolResponseMessage):
        results = []
        for r in m.responses:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.id, "content": _result_content(r)}
            if r.is_error:
                block["is_error"] = True
            results.append(block)
        return "user", results
    raise TypeError(f"unsupported message type {type(m).__name__}")  # pragma: no cover


def _result_content(r: ToolResponse) -> str | list[dict[str, Any]]:
    """A tool_result's content: the text, or text and image/document blocks for a tool's media."""
    if not r.media:
        return r.response_data
    blocks: list[dict[str, Any]] = [{"type": "text", "text": r.response_data}] if r.response_data else []
    for media in r.media:
        if media.mime_type.lower().startswith(("audio/", "video/")):
            raise UnsupportedFeatureError(
                f"Anthropic takes images and documents in tool results, not {media.mime_type} (tool {r.name!r}); "
                "return a transcript or a file the model can read instead",
                feature="tool_result_media",
                provider="Anthropic",
            )
        blocks.append(_media_block(media))
    return blocks


def _cache_marker(m: Message) -> dict[str, Any] | None:
    value = m.metadata.get(CACHE_CONTROL_KEY)
    return dict(value) if isinstance(value, Mapping) else None


def _mark_last_cacheable(blocks: list[dict[str, Any]], marker: Any) -> None:
    for n in range(len(blocks) - 1, -1, -1):
        block = blocks[n]
        if block.get("type") in ("thinking", "redacted_thinking") or (
            block.get("type") == "text" and not block.get("text")
        ):
            continue
        blocks[n] = {**block, "cache_control": marker}
        return


def anthropic_messages(
    messages: Sequence[Message], *, reserved_breakpoints: int = 0
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """(system, messages) for chatclient messages.

    System messages are joined into the ``system`` field (a plain string, or one text block with
    ``cache_control`` when a system message is marked for caching). A turn whose content is a
    single unmarked text block is sent as a plain string; consecutive turns of the same role are
    merged into one. Cache markers beyond what the API allows (less ``reserved_breakpoints``, kept
    for the tools) are dropped, oldest first; thinking blocks and empty text blocks cannot carry
    a breakpoint, so it goes on the last block that can.
    """
    system_messages = [m for m in messages if isinstance(m, SystemMessage)]
    system_text = [m.text for m in system_messages if m.text]
    system_marker = next((mk for m in reversed(system_messages) if (mk := _cache_marker(m)) is not None), None)
    budget = MAX_CACHE_BREAKPOINTS - reserved_breakpoints - (1 if system_marker is not None and system_text else 0)
    marked = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage) and _cache_marker(m) is not None]
    keep = set(marked[-budget:]) if budget > 0 else set()
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            continue
        role, blocks = _blocks(m)
        if not blocks:
            continue
        if i in keep:
            _mark_last_cacheable(blocks, _cache_marker(m))
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out = []
    for role, blocks in turns:
        if len(blocks) == 1 and blocks[0]["type"] == "text" and set(blocks[0]) == {"type", "text"}:
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    system: str | list[dict[str, Any]] | None = "\n".join(system_text) if system_text else None
    if system is not None and system_marker is not None:
        system = [{"type": "text", "text": system, "cache_control": system_marker}]
    return system, out


def anthropic_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """Messages API tool definitions."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "input_schema": dict(t.input_schema) or {"type": "object", "properties": {}},
        }
        for t in tools
    ]


def anthropic_tool_choice(choice: str | Mapping[str, Any] | None, parallel: bool | None) -> dict[str, Any] | None:
    """Map the portable tool choice: ``auto``, ``none``, ``required`` (-> ``any``) or a tool name."""
    if choice is None and parallel is None:
        return None
    if isinstance(choice, Mapping):
        result = dict(choice)
    elif choice is None or choice == "auto":
        result = {"type": "auto"}
    elif choice == "required":
        result = {"type": "any"}
    elif choice == "none":
        result = {"type": "none"}
    else:
        result = {"type": "tool", "name": choice}
    if parallel is False and result.get("type") != "none":
        result["disable_parallel_tool_use"] = True
    return result


def build_messages_body(prompt: Prompt, options: ChatOptions, *, stream: bool) -> dict[str, Any]:
    """The Messages API request body.

    ``seed``, ``frequency_penalty`` and ``presence_penalty`` have no Anthropic field and are left out.
    """
    # Tools lead the cached prefix: once anything is marked for caching, the last tool is too.
    marker = next((mk for m in reversed(prompt.messages) if (mk := _cache_marker(m)) is not None), None)
    tool_breakpoint = marker is not None and bool(prompt.tools)
    system, messages = anthropic_messages(prompt.messages, reserved_breakpoints=1 if tool_breakpoint else 0)
    body: dict[str, Any] = {
        "model": options.model,
        "max_tokens": options.max_tokens if options.max_tokens is not None else DEFAULT_MAX_TOKENS,
        "messages": messages,
    }
    if system is not None:
        body["system"] = system
    if stream:
        body["stream"] = True
    for key in ("temperature", "top_p", "top_k"):
        value = getattr(options, key)
        if value is not None:
            body[key] = value
    if options.stop is not None:
        body["stop_sequences"] = list(options.stop)
    if prompt.tools:
        functions, hosted, _ = split_tools(prompt.tools, api=HOSTED_API, provider="Anthropic")
        tools = anthropic_tools(functions) + hosted
        if tool_breakpoint:
            tools[-1]["cache_control"] = marker
        body["tools"] = tools
        choice = anthropic_tool_choice(options.tool_choice, options.parallel_tool_calls)
        if choice is not None:
            body["tool_choice"] = choice
    if options.extra:
        body.update(options.extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def required_betas(prompt: Prompt) -> list[str]:
    """The ``anthropic-beta`` values the prompt's hosted tools need (see ``chatclient.tools.builtin``)."""
    if not prompt.tools:
        return []
    return split_tools(prompt.tools, api=HOSTED_API, provider="Anthropic")[2]


def finish_reason(raw: str | None) -> str | None:
    """Anthropic's ``stop_reason`` in the common vocabulary; unknown reasons pass through."""
    return None if raw is None else _FINISH.get(raw, raw)


def _gen_meta(raw: str | None, stop_sequence: Any = None, stop_details: Any = None) -> GenerationMetadata:
    extra: dict[str, Any] = {}
    if raw is not None:
        extra["raw_finish_reason"] = raw
    if stop_sequence is not None:
        extra["stop_sequence"] = stop_sequence
    if isinstance(stop_details, Mapping):
        extra["stop_details"] = dict(stop_details)
    return GenerationMetadata(finish_reason(raw), MappingProxyType(extra))


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _UsageCounts:
    """Anthropic's raw usage fields, updated event by event (a stream reports them in two places)."""

    __slots__ = ("cache_creation", "cache_read", "input", "output", "thinking")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_creation = self.thinking = 0

    def update(self, payload: Any) -> None:
        if not isinstance(payload, Mapping):
            return
        # message_delta repeats the cumulative counts it has; a missing field keeps the earlier value.
        for attr, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_creation", "cache_creation_input_tokens"),
        ):
            value = _int(payload.get(key))
            if value is not None:
                setattr(self, attr, value)
        details = payload.get("output_tokens_details")
        if isinstance(details, Mapping) and _int(details.get("thinking_tokens")) is not None:
            self.thinking = int(details["thinking_tokens"])

    def usage(self) -> Usage:
        # Library rule: prompt_tokens is the whole input, cached parts included (Anthropic's
        # input_tokens counts only the part after the last cache breakpoint).
        return Usage(
            prompt_tokens=self.input + self.cache_read + self.cache_creation,
            completion_tokens=self.output,
            cached_input_tokens=self.cache_read,
            cache_write_tokens=self.cache_creation,
            reasoning_tokens=self.thinking,
        )


def _usage(payload: Any) -> Usage:
    counts = _UsageCounts()
    counts.update(payload)
    return counts.usage()


def _error_from_event(payload: Any) -> ModelHTTPError | ModelResponseError | None:
    """The typed error for an ``{"type": "error", ...}`` payload, or None for anything else."""
    if not isinstance(payload, Mapping) or payload.get("type") != "error":
        return None
    err = payload.get("error")
    kind = err.get("type", "error") if isinstance(err, Mapping) else "error"
    message = err.get("message", "") if isinstance(err, Mapping) else str(err)
    status = _ERROR_STATUS.get(str(kind))
    if status is None:
        return ModelResponseError(f"Anthropic reported {kind}: {str(message)[:300]}")
    # Same class and status as the HTTP answer (529 overloaded, 429 rate limit, ...), so callers
    # and the retry policy handle a mid-stream error event exactly like the HTTP error.
    error = error_for_status("Anthropic", status, json.dumps(payload), {})
    error.args = (f"Anthropic reported {kind} (HTTP {status} equivalent): {str(message)[:300]}",)
    return error


def _raise_error_event(payload: Any) -> None:
    error = _error_from_event(payload)
    if error is not None:
        raise error


def _refusal(raw: str | None, text: str, stop_details: Any) -> str | None:
    if raw != "refusal":
        return None
    if isinstance(stop_details, Mapping) and isinstance(stop_details.get("explanation"), str):
        return str(stop_details["explanation"])
    return text or "the model declined to answer (stop_reason: refusal)"


def _reasoning_of(block: Mapping[str, Any]) -> Reasoning | None:
    kind = block.get("type")
    if kind == "thinking":
        return Reasoning(str(block.get("thinking") or ""), block.get("signature") or None, provider=PROVIDER)
    if kind == "redacted_thinking":
        return Reasoning(redacted=str(block.get("data") or ""), provider=PROVIDER)
    return None


def _result_output(block: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(portable output, status) of a server tool's result block."""
    content = block.get("content")
    if isinstance(content, list):  # web search: the results
        sources = [
            {k: r[k] for k in ("url", "title", "page_age") if r.get(k) is not None}
            for r in content
            if isinstance(r, Mapping) and r.get("type") == "web_search_result"
        ]
        return {"sources": sources}, "completed"
    if not isinstance(content, Mapping):
        return {}, "completed"
    if "error_code" in content:
        return {"error": content.get("error_code")}, "failed"
    kind = str(content.get("type") or "")
    if kind == "web_fetch_result":
        doc = content.get("content")
        title = doc.get("title") if isinstance(doc, Mapping) else None
        out = {k: content[k] for k in ("url", "retrieved_at") if content.get(k) is not None}
        if title is not None:
            out["title"] = title
        return out, "completed"
    return {k: v for k, v in content.items() if k != "type" and k != "content"}, "completed"


def _citations(block: Mapping[str, Any]) -> list[Citation]:
    out = []
    for c in block.get("citations") or ():
        if isinstance(c, Mapping) and isinstance(c.get("url"), str):
            title = c.get("title")
            cited = c.get("cited_text")
            out.append(
                Citation(c["url"], title if isinstance(title, str) else None, cited if isinstance(cited, str) else None)
            )
    return out


def _hosted_call(use: Mapping[str, Any], result: Mapping[str, Any] | None) -> HostedToolCall:
    name = str(use.get("name") or "")
    output, status = _result_output(result) if result is not None else ({}, "in_progress")
    tool_input = use.get("input")
    raw = (dict(use), dict(result)) if result is not None else (dict(use),)
    return HostedToolCall(
        str(use.get("id") or ""),
        _SERVER_TOOL_NAMES.get(name, name),
        dict(tool_input) if isinstance(tool_input, Mapping) else {},
        output,
        status,
        PROVIDER,
        raw,
    )


def _hosted_calls(blocks: Sequence[Mapping[str, Any]]) -> list[HostedToolCall]:
    results = {
        b.get("tool_use_id"): b
        for b in blocks
        if str(b.get("type") or "").endswith("_tool_result") and b.get("tool_use_id")
    }
    return [_hosted_call(b, results.get(b.get("id"))) for b in blocks if b.get("type") == "server_tool_use"]


def _needs_raw_content(blocks: Sequence[Mapping[str, Any]]) -> bool:
    return any(b.get("type") not in _PLAIN_BLOCKS or b.get("citations") for b in blocks)


def _response_extra(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    extra: dict[str, Any] = {}
    usage = payload.get("usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("server_tool_use"), Mapping):
        extra["server_tool_use"] = dict(usage["server_tool_use"])
    if isinstance(usage, Mapping) and isinstance(usage.get("service_tier"), str):
        extra["service_tier"] = usage["service_tier"]
    return MappingProxyType(extra)


def parse_message(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a Messages API ``message`` object."""
    _raise_error_event(payload)
    blocks = [b for b in payload["content"] if isinstance(b, Mapping)]
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    citations: list[Citation] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
            citations.extend(_citations(block))
        elif kind == "tool_use":
            calls.append(ToolCall(block["id"], block["name"], arguments_text(block.get("input"))))
        elif (r := _reasoning_of(block)) is not None:
            reasoning.append(r)
    raw = payload.get("stop_reason")
    details = payload.get("stop_details")
    text = "".join(texts)
    metadata: dict[str, Any] = {CONTENT_KEY: tuple(dict(b) for b in blocks)} if _needs_raw_content(blocks) else {}
    message = AssistantMessage(
        assistant_text(text, bool(calls)),
        tuple(calls),
        metadata=metadata,
        reasoning=tuple(reasoning),
        refusal=_refusal(raw, text, details),
        hosted_tool_calls=tuple(_hosted_calls(blocks)),
        citations=tuple(citations),
    )
    gen = Generation(message, _gen_meta(raw, payload.get("stop_sequence"), details))
    return ChatResponse(
        (gen,),
        ChatResponseMetadata(
            payload.get("id"), payload.get("model"), _usage(payload.get("usage")), _response_extra(payload)
        ),
    )


def _text_piece(value: Any) -> str:
    """A block's (or a delta's) text; anything but a string fails here, where it arrives (the pieces
    are joined only for the last chunk)."""
    if value is None or type(value) is str:
        return value or ""
    raise ModelResponseError(f"anthropic stream: a text block's text is not a string (got {type(value).__name__})")


class AnthropicStreamParser:
    """Turns Messages API stream events into delta chunks.

    Every content block is tracked by its index, whatever its type. Text and thinking deltas pass
    through as they come (thinking as ``Reasoning`` deltas: ``thinking_delta`` text, then the
    ``signature_delta``; a ``redacted_thinking`` block whole); a tool call is sent whole when its
    block stops (its input arrives as partial JSON fragments, re-serialised so it matches the
    non-streamed form). Server-tool blocks, their results and citations are collected and sent,
    with the turn's whole content, in the last chunk's ``metadata["anthropic_content"]``; unknown
    block and delta types are kept or skipped, never fatal. ``message_stop`` ends the stream; the
    last chunk carries finish reason, stop sequence and usage (from ``message_start`` and
    ``message_delta``).
    """

    def __init__(self) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._id: str | None = None
        self._model: str | None = None
        self._counts = _UsageCounts()
        self._raw_finish: str | None = None
        self._stop_sequence: Any = None
        self._stop_details: Any = None
        self._blocks: dict[int, dict[str, Any]] = {}  # index -> block as built so far
        self._json: dict[int, list[str]] = {}  # index -> input_json_delta fragments
        self._unfinished: list[int] = []  # tool_use blocks whose input is not (yet) valid JSON
        self._text: list[str] = []
        self._saw_text = False
        self._saw_tools = False
        self._service_tier: str | None = None
        self._server_tool_use: dict[str, Any] | None = None
        # Text deltas of each block, joined only for the last chunk's content (not once per delta).
        self._block_text: dict[int, list[str]] = {}
        self._meta = ChatResponseMetadata()  # shared by every delta (frozen); set at message_start

    def _chunk(self, message: AssistantMessage) -> ChatResponse:
        return message_chunk((message_generation(message),), self._meta)

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        sse = self._sse
        data = sse.feed_data(line)
        if data is None:
            return []
        payload = parse_event_json(data)
        if type(payload) is not dict:
            _raise_error_event(payload)
            if not isinstance(payload, Mapping):
                return []
        kind = payload.get("type") or sse.last_event
        if kind == "content_block_delta":  # nearly every event: a piece of text
            return self._delta(int(payload["index"]), payload.get("delta") or {})
        if kind == "error":
            _raise_error_event(payload)
        if kind == "message_start":
            message = payload.get("message") or {}
            self._id, self._model = message.get("id"), message.get("model")
            self._meta = ChatResponseMetadata(self._id, self._model)
            usage = message.get("usage")
            self._counts.update(usage)
            if isinstance(usage, Mapping) and isinstance(usage.get("service_tier"), str):
                self._service_tier = usage["service_tier"]
        elif kind == "content_block_start":
            return self._start(int(payload["index"]), payload.get("content_block") or {})
        elif kind == "content_block_stop":
            return self._stop(int(payload["index"]))
        elif kind == "message_delta":
            delta = payload.get("delta") or {}
            self._raw_finish = delta.get("stop_reason") or self._raw_finish
            if delta.get("stop_sequence") is not None:
                self._stop_sequence = delta["stop_sequence"]
            if delta.get("stop_details") is not None:
                self._stop_details = delta["stop_details"]
            usage = payload.get("usage")
            self._counts.update(usage)
            if isinstance(usage, Mapping) and isinstance(usage.get("server_tool_use"), Mapping):
                self._server_tool_use = dict(usage["server_tool_use"])
        elif kind == "message_stop":
            self.done = True
        else:  # ping and event types added later: passed on only to who asked (raw_provider_events)
            from chatclient.models.raw_events import raw_event_chunks

            return raw_event_chunks("anthropic", kind, payload)
        return []

    def _start(self, index: int, block: Mapping[str, Any]) -> list[ChatResponse]:
        state = dict(block)
        self._blocks[index] = state
        self._block_text.pop(index, None)
        kind = state.get("type")
        if kind == "text":
            text = _text_piece(state.get("text"))
            if text:
                self._saw_text = True
                self._text.append(text)
                return [self._chunk(AssistantMessage(text))]
        elif kind in ("tool_use", "server_tool_use"):
            self._json[index] = []
        elif kind == "thinking":
            out = Reasoning(str(state.get("thinking") or ""), state.get("signature") or None, provider=PROVIDER)
            if out.text or out.signature:
                return [self._chunk(AssistantMessage(None, reasoning=(out,)))]
        elif kind == "redacted_thinking":
            return [
                self._chunk(
                    AssistantMessage(None, reasoning=(Reasoning(redacted=state.get("data") or "", provider=PROVIDER),))
                )
            ]
        elif str(kind or "").endswith("_tool_result"):
            # A server tool's result arrives whole; its call (a server_tool_use block) came before it.
            use = next(
                (
                    b
                    for b in self._blocks.values()
                    if b.get("type") == "server_tool_use" and b.get("id") == state.get("tool_use_id")
                ),
                None,
            )
            if use is not None:
                return [self._chunk(AssistantMessage(None, hosted_tool_calls=(_hosted_call(use, state),)))]
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ChatResponse]:
        # A delta for a block whose start never came is a server bug; tracking it anyway costs less
        # than failing an answer that is otherwise complete.
        state = self._blocks.setdefault(
            index, {"type": "text", "text": ""} if delta.get("type") == "text_delta" else {}
        )
        kind = delta.get("type")
        if kind == "text_delta":
            text = _text_piece(delta.get("text"))
            pieces = self._block_text.get(index)
            if pieces is None:
                pieces = self._block_text[index] = [state.get("text") or ""]
            pieces.append(text)
            if text:
                self._saw_text = True
                self._text.append(text)
                return [text_chunk(text, self._meta)]
        elif kind == "input_json_delta":
            self._json.setdefault(index, []).append(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            text = delta.get("thinking") or ""
            state["thinking"] = (state.get("thinking") or "") + text
            if text:
                return [self._chunk(AssistantMessage(None, reasoning=(Reasoning(text, provider=PROVIDER),)))]
        elif kind == "signature_delta":
            signature = delta.get("signature") or ""
            state["signature"] = (state.get("signature") or "") + signature
            if signature:
                return [
                    self._chunk(AssistantMessage(None, reasoning=(Reasoning(signature=signature, provider=PROVIDER),)))
                ]
        elif kind == "citations_delta" and delta.get("citation") is not None:
            state["citations"] = [*(state.get("citations") or []), delta["citation"]]
            found = _citations({"citations": [delta["citation"]]})
            if found:
                return [self._chunk(AssistantMessage(None, citations=tuple(found)))]
        return []

    def _stop(self, index: int) -> list[ChatResponse]:
        state = self._blocks.get(index)
        if state is None or state.get("type") not in ("tool_use", "server_tool_use"):
            return []
        raw_json = "".join(self._json.get(index, ())).strip()
        try:
            value = jsonsafe.loads(raw_json) if raw_json else (state.get("input") or {})
        except ValueError:
            # Usually max_tokens cut the input short: decided in finish(), once stop_reason is known.
            if state.get("type") == "tool_use":
                self._unfinished.append(index)
            return []
        state["input"] = value
        self._json.pop(index, None)
        if state.get("type") != "tool_use":
            return []
        self._saw_tools = True
        call = ToolCall(str(state.get("id") or ""), str(state.get("name") or ""), arguments_text(value))
        return [self._chunk(AssistantMessage(None, (call,)))]

    def _partial_calls(self) -> list[ToolCall]:
        # Blocks that never stopped (the stream ended at max_tokens) count as unfinished too.
        pending = self._unfinished + [
            i
            for i, s in self._blocks.items()
            if s.get("type") == "tool_use" and i in self._json and i not in self._unfinished
        ]
        if not pending:
            return []
        if self._raw_finish not in ("max_tokens", "model_context_window_exceeded"):
            raise ModelResponseError(
                "Anthropic sent tool input that is not valid JSON "
                f"(stop_reason {self._raw_finish!r}): {''.join(self._json.get(pending[0], ()))[:100]!r}"
            )
        calls = []
        for index in sorted(pending):
            state = self._blocks[index]
            calls.append(
                ToolCall(
                    str(state.get("id") or ""),
                    str(state.get("name") or ""),
                    "".join(self._json.get(index, ())),
                    metadata={"partial": True},
                )
            )
        return calls

    def _content(self) -> tuple[dict[str, Any], ...]:
        out = []
        for index in sorted(self._blocks):
            block = dict(self._blocks[index])
            if index in self._block_text:
                block["text"] = "".join(self._block_text[index])
            if block.get("type") == "thinking" and not block.get("signature"):
                block.pop("signature", None)
            out.append(block)
        return tuple(out)

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage, partial tool calls, server-tool content), once the end marker arrived."""
        partial = self._partial_calls()
        if partial:
            self._saw_tools = True
        text = None if (self._saw_text or self._saw_tools) else ""
        content = self._content()
        metadata: dict[str, Any] = {CONTENT_KEY: content} if _needs_raw_content(content) else {}
        refusal = _refusal(self._raw_finish, "".join(self._text), self._stop_details)
        message = AssistantMessage(text, tuple(partial), metadata=metadata, refusal=refusal)
        gen = Generation(message, _gen_meta(self._raw_finish, self._stop_sequence, self._stop_details))
        extra: dict[str, Any] = {}
        if self._server_tool_use is not None:
            extra["server_tool_use"] = self._server_tool_use
        if self._service_tier:
            extra["service_tier"] = self._service_tier
        md = ChatResponseMetadata(self._id, self._model, self._counts.usage(), MappingProxyType(extra))
        return [ChatResponse((gen,), md)]


# -- paused turns -------------------------------------------------------------------------------------


def _paused(response: ChatResponse) -> bool:
    g = response.result
    return g is not None and g.metadata.extra.get("raw_finish_reason") == "pause_turn"


def _continued(prompt: Prompt, paused: ChatResponse) -> Prompt:
    """The request that lets the model continue a paused turn: the paused content sent back as is."""
    assert paused.result is not None
    return prompt.copy(messages=[*prompt.messages, paused.result.output])


def _content_of(m: AssistantMessage) -> list[dict[str, Any]]:
    return _stored_content(m) or _blocks(m)[1]


def _joined(first: ChatResponse, rest: ChatResponse) -> ChatResponse:
    """One answer from a paused turn and its continuation: contents, parts and usage joined."""
    assert first.result is not None and rest.result is not None
    a, b = first.result.output, rest.result.output
    content = (*_content_of(a), *_content_of(b))
    text = (a.text or "") + (b.text or "")
    calls = (*a.tool_calls, *b.tool_calls)
    message = AssistantMessage(
        assistant_text(text, bool(calls)),
        calls,
        {**a.metadata, **b.metadata, CONTENT_KEY: content},
        (*a.reasoning, *b.reasoning),
        b.refusal,
        (*a.hosted_tool_calls, *b.hosted_tool_calls),
        (*a.citations, *b.citations),
    )
    md = rest.metadata
    return ChatResponse(
        (Generation(message, rest.result.metadata),),
        ChatResponseMetadata(md.id, md.model, first.metadata.usage + md.usage, md.extra),
    )


def _last_chunk(chunk: ChatResponse, whole: ChatResponse, continued: bool) -> ChatResponse:
    """The stream's finishing chunk; after a continuation it carries the joined content and usage."""
    if not continued:
        return chunk
    assert whole.result is not None and chunk.result is not None
    out = chunk.result.output
    metadata = {**out.metadata, CONTENT_KEY: whole.result.output.metadata[CONTENT_KEY]}
    g = Generation(replace(out, metadata=metadata), chunk.result.metadata)
    md = chunk.metadata
    return ChatResponse((g,), ChatResponseMetadata(md.id, md.model, whole.metadata.usage, md.extra))


# -- chat model ---------------------------------------------------------------------------------------


class AnthropicChatModel(HTTPChatModel):
    """Messages API (``POST {base_url}/v1/messages``) on httpx.

    ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``), ``base_url`` to
    ``ANTHROPIC_BASE_URL`` or the public API; ``api_version`` is the ``anthropic-version`` header.
    A request whose hosted tools need a beta (code execution, web fetch) is sent with the
    ``anthropic-beta`` header they need, added to any given in ``headers``.
    """

    provider = "Anthropic"
    chat_path = "/v1/messages"
    pause_continuations: int = 5
    """How many times a turn the API paused (``stop_reason: "pause_turn"``, long server-tool work)
    is sent back to be continued; the answer joins the parts. ``0`` returns the paused part."""
    count_tokens_path = "/v1/messages/count_tokens"

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
        api_version: str = API_VERSION,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        response_limits: ResponseLimits | None = None,
        socket_lane: bool | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        url = env_or(base_url, "ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        # Anthropic's API always needs a key; a compatible proxy or local server may not.
        key, credential = resolve_api_key(
            api_key, "ANTHROPIC_API_KEY", provider="Anthropic", required=url.rstrip("/") == DEFAULT_BASE_URL
        )
        all_headers = {**(headers or {}), "anthropic-version": api_version}
        if key:
            all_headers["x-api-key"] = key
        # What a sibling model with extra beta headers is built from (see _for_betas).
        self._settings: dict[str, Any] = {
            "model": model,
            "api_key": Secret(key) if key else None,  # masked in repr(vars(model)); unwrapped by resolve_api_key
            "base_url": url,
            "options": options,
            "timeout": timeout,
            "max_retries": max_retries,
            "http_client": http_client,
            "async_http_client": async_http_client,
            "capabilities": capabilities,
            "api_version": api_version,
            "backoff_base": backoff_base,
            "backoff_max": backoff_max,
            "response_limits": response_limits,
        }
        self._given_headers = MaskedMapping(headers or {})
        self._betas = frozenset(
            b.strip()
            for name, v in self._given_headers.items()
            if name.lower() == "anthropic-beta"
            for b in v.split(",")
        )
        self._siblings: dict[tuple[str, ...], AnthropicChatModel] = {}
        self._siblings_lock = threading.Lock()
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
            or ModelCapabilities(tools=True, streaming=True, vision=True, structured_output=("tool",)),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            response_limits=response_limits,
            socket_lane=socket_lane,
            keepalive_expiry=keepalive_expiry,
            credential=credential,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_messages_body(prompt, self.options_for(prompt), stream=stream)

    def _for_betas(self, prompt: Prompt) -> AnthropicChatModel | None:
        """A model that sends the beta headers the prompt's hosted tools need, or None when this one does."""
        missing = tuple(b for b in required_betas(prompt) if b not in self._betas)
        if not missing:
            return None
        with self._siblings_lock:
            sibling = self._siblings.get(missing)
            if sibling is None:
                betas = ",".join([*sorted(self._betas), *missing])
                headers = {k: v for k, v in self._given_headers.items() if k.lower() != "anthropic-beta"}
                sibling = AnthropicChatModel(**self._settings, headers={**headers, "anthropic-beta": betas})
                self._siblings[missing] = sibling
            return sibling

    def call(self, prompt: Prompt) -> ChatResponse:
        """Send the prompt and wait for the whole answer (continuing a turn the API paused)."""
        sibling = self._for_betas(prompt)
        if sibling is not None:
            return sibling.call(prompt)
        response = super().call(prompt)
        for _ in range(self.pause_continuations):
            if not _paused(response):
                break
            response = _joined(response, super().call(_continued(prompt, response)))
        return response

    async def acall(self, prompt: Prompt) -> ChatResponse:
        """Async ``call``."""
        sibling = self._for_betas(prompt)
        if sibling is not None:
            return await sibling.acall(prompt)
        response = await super().acall(prompt)
        for _ in range(self.pause_continuations):
            if not _paused(response):
                break
            response = _joined(response, await super().acall(_continued(prompt, response)))
        return response

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as delta chunks (see ``HTTPChatModel.stream``), continuing a paused turn."""
        sibling = self._for_betas(prompt)
        if sibling is not None:
            yield from sibling.stream(prompt)
            return
        earlier: ChatResponse | None = None
        for attempt in range(self.pause_continuations + 1):
            part = ResponseAggregator()
            current = prompt if earlier is None else _continued(prompt, earlier)
            ended = paused = False
            # Each part is read to its end (not left at its finishing chunk), so the stream drains
            # after message_stop and its connection goes back to the pool at once.
            for chunk in super().stream(current):
                if ended:
                    continue
                part.add(chunk)
                if not chunk.has_finish_reason():
                    yield chunk
                    continue
                ended = True
                whole = part.result() if earlier is None else _joined(earlier, part.result())
                if _paused(whole) and attempt < self.pause_continuations:
                    earlier, paused = whole, True
                    continue
                yield _last_chunk(chunk, whole, earlier is not None)
            if not paused:
                return

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Async ``stream``."""
        sibling = self._for_betas(prompt)
        if sibling is not None:
            async for chunk in sibling.astream(prompt):
                yield chunk
            return
        earlier: ChatResponse | None = None
        for attempt in range(self.pause_continuations + 1):
            part = ResponseAggregator()
            current = prompt if earlier is None else _continued(prompt, earlier)
            ended = paused = False
            # Each part is read to its end (not left at its finishing chunk), so the stream drains
            # after message_stop and its connection goes back to the pool at once.
            async for chunk in super().astream(current):
                if ended:
                    continue
                part.add(chunk)
                if not chunk.has_finish_reason():
                    yield chunk
                    continue
                ended = True
                whole = part.result() if earlier is None else _joined(earlier, part.result())
                if _paused(whole) and attempt < self.pause_continuations:
                    earlier, paused = whole, True
                    continue
                yield _last_chunk(chunk, whole, earlier is not None)
            if not paused:
                return

    def close(self) -> None:
        """Release pooled connections (those of the beta-header siblings too)."""
        for sibling in list(self._siblings.values()):
            sibling.close()
        super().close()

    async def aclose(self) -> None:
        """Async ``close``."""
        for sibling in list(self._siblings.values()):
            await sibling.aclose()
        await super().aclose()

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_message(payload)

    def stream_parser(self) -> AnthropicStreamParser:
        """A fresh parser for one streamed answer."""
        return AnthropicStreamParser()

    def _count_body(self, prompt: Prompt) -> dict[str, Any]:
        body = self.build_body(prompt, stream=False)
        return {k: v for k, v in body.items() if k in _COUNT_TOKENS_FIELDS}

    def count_tokens(self, prompt: Prompt) -> int:
        """The input tokens of ``prompt`` as Anthropic counts them (``POST /v1/messages/count_tokens``,
        free of charge, rate-limited separately): system, messages, tools and thinking included."""
        sibling = self._for_betas(prompt)  # hosted tools that need a beta are counted with it
        if sibling is not None:
            return sibling.count_tokens(prompt)
        return _input_tokens(self._http.post(self.count_tokens_path, self._count_body(prompt)))

    async def acount_tokens(self, prompt: Prompt) -> int:
        """Async ``count_tokens``."""
        sibling = self._for_betas(prompt)
        if sibling is not None:
            return await sibling.acount_tokens(prompt)
        return _input_tokens(await self._http.apost(self.count_tokens_path, self._count_body(prompt)))


# The fields the count_tokens endpoint accepts; the rest of a Messages body (max_tokens, sampling, stream) is refused.
_COUNT_TOKENS_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})


def _input_tokens(payload: Any) -> int:
    tokens = payload.get("input_tokens") if isinstance(payload, dict) else None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ModelResponseError("unexpected Anthropic count_tokens answer: no input_tokens count in it")
    return tokens
