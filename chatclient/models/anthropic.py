"""Anthropic Messages API over httpx.

    model = AnthropicChatModel("claude-sonnet-4-5")     # ANTHROPIC_API_KEY from the environment

System messages are lifted into the top-level ``system`` field, tool calls and results become
``tool_use`` / ``tool_result`` blocks, consecutive turns of one role are merged (the API wants
alternating roles) and ``max_tokens`` (required by the API) defaults to 1024. Finish reasons are
mapped to the common vocabulary (``stop``, ``length``, ``tool_calls``); the raw ``stop_reason`` is
kept in the generation metadata as ``raw_finish_reason``. The API has no JSON-schema output mode
that this client uses, so ``capabilities.native_structured_output`` is false and
``options.output_schema`` is ignored here (the client falls back to format instructions).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

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
from chatclient.models.http import DEFAULT_TIMEOUT, HTTPChatModel, assistant_text, env_or
from chatclient.models.sse import SSEDecoder
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

__all__ = [
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

_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


# -- request ------------------------------------------------------------------------------------------


def _media_block(media: Media) -> dict[str, Any]:
    kind = "image" if media.mime_type.lower().startswith("image/") else "document"
    if isinstance(media.data, str):
        return {"type": kind, "source": {"type": "url", "url": media.data}}
    data = base64.b64encode(media.data).decode("ascii")
    return {"type": kind, "source": {"type": "base64", "media_type": media.mime_type, "data": data}}


def _tool_input(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        raise ValueError(f"tool call arguments are not valid JSON: {arguments[:100]!r}") from None


def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    """(role, content blocks) of one non-system message."""
    if isinstance(m, UserMessage):
        blocks: list[dict[str, Any]] = [_media_block(media) for media in m.media]
        if m.text or not blocks:
            blocks.append({"type": "text", "text": m.text})
        return "user", blocks
    if isinstance(m, AssistantMessage):
        blocks = [{"type": "text", "text": m.text}] if m.text else []
        blocks.extend(
            {"type": "tool_use", "id": c.id, "name": c.name, "input": _tool_input(c.arguments)} for c in m.tool_calls
        )
        return "assistant", blocks
    if isinstance(m, ToolResponseMessage):
        results = []
        for r in m.responses:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": r.id, "content": r.response_data}
            if r.is_error:
                block["is_error"] = True
            results.append(block)
        return "user", results
    raise TypeError(f"unsupported message type {type(m).__name__}")  # pragma: no cover


def anthropic_messages(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """(system text, messages) for chatclient messages.

    System messages are joined into the ``system`` field. A turn whose content is a single text
    block is sent as a plain string; consecutive turns of the same role are merged into one.
    """
    system = [m.text for m in messages if isinstance(m, SystemMessage) and m.text]
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        role, blocks = _blocks(m)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    out = []
    for role, blocks in turns:
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            out.append({"role": role, "content": blocks[0]["text"]})
        else:
            out.append({"role": role, "content": blocks})
    return ("\n".join(system) if system else None), out


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
    system, messages = anthropic_messages(prompt.messages)
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
        body["tools"] = anthropic_tools(prompt.tools)
        choice = anthropic_tool_choice(options.tool_choice, options.parallel_tool_calls)
        if choice is not None:
            body["tool_choice"] = choice
    if options.extra:
        body.update(options.extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def finish_reason(raw: str | None) -> str | None:
    """Anthropic's ``stop_reason`` in the common vocabulary; unknown reasons pass through."""
    return None if raw is None else _FINISH.get(raw, raw)


def _arguments(value: Any) -> str:
    # One serialisation for both paths, so a streamed call aggregates to the same text.
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def _gen_meta(raw: str | None) -> GenerationMetadata:
    extra = MappingProxyType({"raw_finish_reason": raw}) if raw is not None else MappingProxyType({})
    return GenerationMetadata(finish_reason(raw), extra)


def _usage(payload: Any, previous: Usage | None = None) -> Usage:
    prev = previous or Usage()
    if not isinstance(payload, Mapping):
        return prev
    inp = payload.get("input_tokens")
    out = payload.get("output_tokens")
    return Usage(
        int(inp) if inp is not None else prev.prompt_tokens, int(out) if out is not None else prev.completion_tokens
    )


def _raise_error_event(payload: Any) -> None:
    if isinstance(payload, Mapping) and payload.get("type") == "error":
        err = payload.get("error") or {}
        kind = err.get("type", "error") if isinstance(err, Mapping) else "error"
        message = err.get("message", "") if isinstance(err, Mapping) else str(err)
        raise ModelResponseError(f"Anthropic reported {kind}: {str(message)[:300]}")


def parse_message(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a Messages API ``message`` object."""
    _raise_error_event(payload)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in payload["content"]:
        if block.get("type") == "text":
            texts.append(block.get("text") or "")
        elif block.get("type") == "tool_use":
            calls.append(ToolCall(block["id"], block["name"], _arguments(block.get("input"))))
    raw = payload.get("stop_reason")
    gen = Generation(AssistantMessage(assistant_text("".join(texts), bool(calls)), tuple(calls)), _gen_meta(raw))
    return ChatResponse(
        (gen,), ChatResponseMetadata(payload.get("id"), payload.get("model"), _usage(payload.get("usage")))
    )


class AnthropicStreamParser:
    """Turns Messages API stream events into delta chunks.

    Text deltas pass through as they come; a tool call is sent whole when its block stops (its
    input arrives as partial JSON fragments, re-serialised so it matches the non-streamed form).
    ``message_stop`` ends the stream; the last chunk carries finish reason and usage.
    """

    def __init__(self) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._raw_finish: str | None = None
        self._tools: dict[int, list[str]] = {}  # block index -> [id, name, partial json...]
        self._saw_text = False
        self._saw_tools = False

    def _chunk(self, message: AssistantMessage) -> ChatResponse:
        return ChatResponse((Generation(message),), ChatResponseMetadata(self._id, self._model))

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        event = self._sse.feed(line)
        if event is None:
            return []
        payload = event.json()
        _raise_error_event(payload)
        kind = payload.get("type") or event.event
        if kind == "message_start":
            message = payload["message"]
            self._id, self._model = message.get("id"), message.get("model")
            self._usage = _usage(message.get("usage"))
        elif kind == "content_block_start":
            block = payload["content_block"]
            if block.get("type") == "tool_use":
                self._tools[int(payload["index"])] = [block["id"], block["name"]]
            elif block.get("type") == "text" and block.get("text"):
                self._saw_text = True
                return [self._chunk(AssistantMessage(block["text"]))]
        elif kind == "content_block_delta":
            delta = payload["delta"]
            if delta.get("type") == "text_delta" and delta.get("text"):
                self._saw_text = True
                return [self._chunk(AssistantMessage(delta["text"]))]
            if delta.get("type") == "input_json_delta":
                self._tools[int(payload["index"])].append(delta.get("partial_json") or "")
        elif kind == "content_block_stop":
            parts = self._tools.pop(int(payload["index"]), None)
            if parts is not None:
                self._saw_tools = True
                raw_json = "".join(parts[2:]).strip()
                value = json.loads(raw_json) if raw_json else {}
                call = ToolCall(parts[0], parts[1], _arguments(value))
                return [self._chunk(AssistantMessage(None, (call,)))]
        elif kind == "message_delta":
            self._raw_finish = (payload.get("delta") or {}).get("stop_reason") or self._raw_finish
            self._usage = _usage(payload.get("usage"), self._usage)
        elif kind == "message_stop":
            self.done = True
        return []

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage), once the end marker has arrived."""
        text = None if (self._saw_text or self._saw_tools) else ""
        gen = Generation(AssistantMessage(text), _gen_meta(self._raw_finish))
        return [ChatResponse((gen,), ChatResponseMetadata(self._id, self._model, self._usage))]


# -- chat model ---------------------------------------------------------------------------------------


class AnthropicChatModel(HTTPChatModel):
    """Messages API (``POST {base_url}/v1/messages``) on httpx.

    ``api_key`` defaults to ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``), ``base_url`` to
    ``ANTHROPIC_BASE_URL`` or the public API; ``api_version`` is the ``anthropic-version`` header.
    """

    provider = "Anthropic"
    chat_path = "/v1/messages"

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
    ) -> None:
        key = env_or(api_key, "ANTHROPIC_API_KEY")
        all_headers = {**(headers or {}), "anthropic-version": api_version}
        if key:
            all_headers["x-api-key"] = key
        super().__init__(
            model=model,
            base_url=env_or(base_url, "ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            headers=all_headers,
            secrets=[key] if key else [],
            options=options,
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            capabilities=capabilities
            or ModelCapabilities(native_structured_output=False, tools=True, streaming=True, vision=True),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_messages_body(prompt, self.options_for(prompt), stream=stream)

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_message(payload)

    def stream_parser(self) -> AnthropicStreamParser:
        """A fresh parser for one streamed answer."""
        return AnthropicStreamParser()
