"""AWS Bedrock's Converse / ConverseStream API over httpx, signed with SigV4 (extra ``bedrock`` for botocore's chain).

    model = BedrockChatModel("anthropic.claude-3-5-haiku-20241022-v1:0", region="us-east-1")

Credentials: ``credentials=(key_id, secret[, session_token])``, else the ``AWS_*`` environment, else
botocore's chain when botocore is installed (``pip install 'chatclient[bedrock]'``: profiles, SSO,
container and instance roles). Every request is signed on its own (``chatclient.models.http.sigv4``),
with the clock of that attempt. Streams arrive as AWS event-stream frames
(``chatclient.models.http.eventstream``), each checked against its CRCs and the response limits.

What goes where:

* system messages -> ``system``; user turns -> ``text`` / ``image`` / ``document`` blocks (bytes, or
  ``s3://`` URIs); assistant turns -> ``text``, ``toolUse`` and ``reasoningContent`` blocks (reasoning
  made by Bedrock is sent back with its signature); tool results -> ``toolResult`` blocks (an object
  answer as ``json``, anything else as ``text``; ``status: error`` for failed tools).
* prompt caching: a message whose ``metadata["cache_control"]`` is set (``PromptCachingAdvisor``) gets a
  ``cachePoint`` block after its content; the tools too once anything is marked; four at most, the
  newest kept.
* ``options.extra`` is merged in depth into the body (``additionalModelRequestFields`` for a
  model's own settings, e.g. Claude's ``thinking``); ``guardrail=`` becomes ``guardrailConfig``.
* finish reasons: ``end_turn``/``stop_sequence`` -> ``stop``, ``tool_use`` -> ``tool_calls``,
  ``max_tokens`` -> ``length``, ``guardrail_intervened``/``content_filtered`` -> ``content_filter``
  (the guardrail's own answer is the text and ``AssistantMessage.refusal``; the guardrail trace is in
  the response metadata ``trace``).
* usage: ``prompt_tokens`` is the whole input (``inputTokens`` + cache reads + cache writes),
  ``cached_input_tokens`` / ``cache_write_tokens`` the cache parts.
* a stream's exception message (``throttlingException``, ``serviceUnavailableException`` ...) raises the
  error of the matching HTTP status, retried like it while nothing has been emitted.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

import httpx

from chatclient import jsonsafe
from chatclient.errors import ModelResponseError, UnsupportedFeatureError
from chatclient.messages import (
    AssistantMessage,
    Media,
    Message,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponse,
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
    HTTPChatModel,
    ResponseLimits,
    assistant_text,
    error_for_status,
)
from chatclient.models.http.eventstream import EventStreamDecoder, EventStreamMessage
from chatclient.models.http.sigv4 import CredentialSource, sign
from chatclient.models.wire import (
    arguments_object,
    arguments_text,
    deep_merge,
    json_object,
    reported_total,
    usage_count,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

__all__ = [
    "CACHE_CONTROL_KEY",
    "CONTENT_KEY",
    "PROVIDER",
    "BedrockChatModel",
    "BedrockStreamParser",
    "build_converse_body",
    "converse_messages",
    "parse_converse",
]

PROVIDER = "bedrock"
"""``Reasoning.provider`` of the blocks this module makes; only such blocks are sent back."""

CONTENT_KEY = "bedrock_content"
"""``AssistantMessage.metadata`` key holding a turn's raw content blocks when some have no chatclient field."""

CACHE_CONTROL_KEY = "cache_control"
"""Message metadata key (set by ``PromptCachingAdvisor``): the message gets a ``cachePoint`` after it."""

MAX_CACHE_POINTS = 4
SERVICE = "bedrock"
_CACHE_POINT = {"cachePoint": {"type": "default"}}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
}
_REFUSALS = frozenset({"guardrail_intervened", "content_filtered"})
_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
# A stream's exception types and the HTTP status each stands for (so retries treat both alike).
_EXCEPTION_STATUS = {
    "throttlingException": 429,
    "internalServerException": 500,
    "serviceUnavailableException": 503,
    "modelStreamErrorException": 424,
    "validationException": 400,
    "modelTimeoutException": 408,
}
_PLAIN_BLOCKS = frozenset({"text", "toolUse", "reasoningContent"})


# -- request ------------------------------------------------------------------------------------------


def _unsupported(what: str) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(what, feature="media", provider="Bedrock")


def _media_block(media: Media, documents: int) -> dict[str, Any]:
    mime = media.mime_type.lower()
    if isinstance(media.data, str):
        if not media.data.startswith("s3://"):
            raise _unsupported(
                f"Bedrock takes media as bytes or s3:// URIs, not {media.data[:40]!r}: pass the bytes (Media.from_path)"
            )
        source: dict[str, Any] = {"s3Location": {"uri": media.data}}
    else:
        source = {"bytes": base64.b64encode(media.data).decode("ascii")}
    if mime in _IMAGE_FORMATS:
        return {"image": {"format": _IMAGE_FORMATS[mime], "source": source}}
    if mime in _DOCUMENT_FORMATS:
        return {"document": {"format": _DOCUMENT_FORMATS[mime], "name": f"document-{documents}", "source": source}}
    raise _unsupported(
        f"Bedrock's Converse API takes images ({', '.join(sorted(set(_IMAGE_FORMATS.values())))}) and documents "
        f"({', '.join(sorted(_DOCUMENT_FORMATS.values()))}), not {media.mime_type}"
    )


def _reasoning_blocks(reasoning: Sequence[Reasoning]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for r in reasoning:
        if r.provider != PROVIDER:
            continue  # another provider's signature means nothing here
        if r.redacted:
            blocks.append({"reasoningContent": {"redactedContent": r.redacted}})
        elif r.signature:
            blocks.append({"reasoningContent": {"reasoningText": {"text": r.text, "signature": r.signature}}})
    return blocks


def _stored_content(m: AssistantMessage) -> list[dict[str, Any]] | None:
    stored = m.metadata.get(CONTENT_KEY)
    if not isinstance(stored, (list, tuple)) or not all(isinstance(b, Mapping) for b in stored):
        return None
    text = "".join(str(b.get("text") or "") for b in stored if "text" in b)
    ids = [b["toolUse"].get("toolUseId") for b in stored if isinstance(b.get("toolUse"), Mapping)]
    if text != (m.text or "") or ids != [c.id for c in m.tool_calls]:
        return None
    return [dict(b) for b in stored]


def _tool_result(r: ToolResponse) -> dict[str, Any]:
    data = r.response_data
    value = json_object(data)
    content: list[dict[str, Any]] = []
    if value is not None:
        content.append({"json": value})
    elif data or not r.media:
        content.append({"text": data or "(empty)"})
    # Images and documents a tool returned go inside its result, as Converse allows.
    content.extend(_media_block(media, n) for n, media in enumerate(r.media, 1))
    result: dict[str, Any] = {"toolUseId": r.id, "content": content}
    if r.is_error:
        result["status"] = "error"
    return {"toolResult": result}


def _blocks(m: Message) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(m, UserMessage):
        blocks: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
        blocks.extend(_media_block(media, n) for n, media in enumerate(m.media, 1))
        return "user", blocks or [{"text": " "}]
    if isinstance(m, AssistantMessage):
        stored = _stored_content(m)
        if stored is not None:
            return "assistant", stored
        blocks = _reasoning_blocks(m.reasoning)
        if m.text:
            blocks.append({"text": m.text})
        blocks.extend(
            {"toolUse": {"toolUseId": c.id, "name": c.name, "input": arguments_object(c, partial_ok=True)}}
            for c in m.tool_calls
        )
        return "assistant", blocks
    if isinstance(m, ToolResponseMessage):
        return "user", [_tool_result(r) for r in m.responses]
    raise TypeError(f"unsupported message type {type(m).__name__}")  # pragma: no cover


def _marked(m: Message) -> bool:
    return isinstance(m.metadata.get(CACHE_CONTROL_KEY), Mapping)


def converse_messages(
    messages: Sequence[Message], *, reserved_points: int = 0
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) for chatclient messages; consecutive turns of one role merge.

    Marked messages (``metadata["cache_control"]``) get a ``cachePoint`` after their content; at most
    ``MAX_CACHE_POINTS`` less ``reserved_points`` (kept for the tools), the newest first.
    """
    systems = [m for m in messages if isinstance(m, SystemMessage)]
    system: list[dict[str, Any]] = (
        [{"text": "\n".join(m.text for m in systems if m.text)}] if any(m.text for m in systems) else []
    )
    budget = MAX_CACHE_POINTS - reserved_points
    if system and any(_marked(m) for m in systems) and budget > 0:
        system.append(dict(_CACHE_POINT))
        budget -= 1
    marked = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage) and _marked(m)]
    keep = set(marked[-budget:]) if budget > 0 else set()
    turns: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            continue
        role, blocks = _blocks(m)
        if not blocks:
            continue
        if i in keep:
            blocks.append(dict(_CACHE_POINT))
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def converse_tool_config(tools: Sequence[ToolDefinition], choice: Any, cache: bool) -> dict[str, Any] | None:
    """``toolConfig``: tool specs (a ``cachePoint`` after them when ``cache``) and the tool choice."""
    specs: list[dict[str, Any]] = [
        {
            "toolSpec": {
                "name": t.name,
                "description": t.description or t.name,
                "inputSchema": {"json": dict(t.input_schema) or {"type": "object", "properties": {}}},
            }
        }
        for t in function_tools(tools, provider="Bedrock")
    ]
    if not specs:
        return None
    if cache:
        specs.append(dict(_CACHE_POINT))
    config: dict[str, Any] = {"tools": specs}
    if isinstance(choice, Mapping):
        config["toolChoice"] = dict(choice)
    elif choice == "required":
        config["toolChoice"] = {"any": {}}
    elif choice == "auto":
        config["toolChoice"] = {"auto": {}}
    elif isinstance(choice, str) and choice != "none":
        config["toolChoice"] = {"tool": {"name": choice}}
    return config


def build_converse_body(
    prompt: Prompt, options: ChatOptions, *, guardrail: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The Converse request body (the model id is in the path).

    ``top_k``, ``seed`` and the penalties have no Converse field and are left out (a model that takes
    them gets them through ``options.extra={"additionalModelRequestFields": {...}}``).
    """
    cache_tools = bool(prompt.tools) and any(_marked(m) for m in prompt.messages)
    system, messages = converse_messages(prompt.messages, reserved_points=1 if cache_tools else 0)
    body: dict[str, Any] = {"messages": messages}
    if system:
        body["system"] = system
    config: dict[str, Any] = {}
    for key, name in (("max_tokens", "maxTokens"), ("temperature", "temperature"), ("top_p", "topP")):
        value = getattr(options, key)
        if value is not None:
            config[name] = value
    if options.stop is not None:
        config["stopSequences"] = list(options.stop)
    if config:
        body["inferenceConfig"] = config
    if prompt.tools:
        tool_config = converse_tool_config(prompt.tools, options.tool_choice, cache_tools)
        if tool_config is not None:
            body["toolConfig"] = tool_config
    if guardrail:
        body["guardrailConfig"] = dict(guardrail)
    if options.extra:
        deep_merge(body, options.extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def finish_reason(raw: str | None) -> str | None:
    """Converse's ``stopReason`` in the common vocabulary; unknown reasons pass through."""
    return None if raw is None else _FINISH.get(raw, raw)


def _usage(payload: Any) -> Usage:
    if not isinstance(payload, Mapping):
        return Usage()
    read = usage_count(payload.get("cacheReadInputTokens"))
    write = usage_count(payload.get("cacheWriteInputTokens"))
    prompt = usage_count(payload.get("inputTokens")) + read + write
    completion = usage_count(payload.get("outputTokens"))
    total = payload.get("totalTokens")
    reported = reported_total(total, prompt, completion)
    return Usage(prompt, completion, read, write, 0, reported)


def _reasoning(block: Mapping[str, Any]) -> Reasoning | None:
    content = block.get("reasoningContent")
    if not isinstance(content, Mapping):
        return None
    if content.get("redactedContent") is not None:
        return Reasoning(redacted=str(content["redactedContent"]), provider=PROVIDER)
    text = content.get("reasoningText")
    if isinstance(text, Mapping):
        sig = text.get("signature")
        return Reasoning(str(text.get("text") or ""), sig if isinstance(sig, str) and sig else None, None, PROVIDER)
    return None


def _response_extra(payload: Mapping[str, Any]) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    for key, name in (
        ("metrics", "metrics"),
        ("trace", "trace"),
        ("additionalModelResponseFields", "additional_model_response_fields"),
        ("performanceConfig", "performance_config"),
    ):
        if payload.get(key) is not None:
            extra[name] = payload[key]
    return extra


def _generation(text: str, calls: Sequence[ToolCall], reasoning: Sequence[Reasoning], raw: str | None,
                metadata: Mapping[str, Any]) -> Generation:  # fmt: skip
    refusal = (text or f"Bedrock stopped the answer ({raw})") if raw in _REFUSALS else None
    message = AssistantMessage(assistant_text(text, bool(calls)), tuple(calls), metadata, tuple(reasoning), refusal)
    extra = MappingProxyType({"raw_finish_reason": raw} if raw is not None else {})
    return Generation(message, GenerationMetadata(finish_reason(raw), extra))


def parse_converse(payload: Any, model_id: str | None = None) -> ChatResponse:
    """A ``ChatResponse`` for a Converse answer."""
    output = payload["output"]
    message = output.get("message") if isinstance(output, Mapping) else None
    if not isinstance(message, Mapping):
        raise ModelResponseError(f"Bedrock answered without an output message: {str(payload)[:200]}")
    blocks = [b for b in message.get("content") or [] if isinstance(b, Mapping)]
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    for block in blocks:
        if "text" in block:
            texts.append(str(block.get("text") or ""))
        elif isinstance(block.get("toolUse"), Mapping):
            use = block["toolUse"]
            calls.append(ToolCall(str(use["toolUseId"]), str(use["name"]), arguments_text(use.get("input"))))
        elif (r := _reasoning(block)) is not None:
            reasoning.append(r)
    keep = any(not (set(b) & _PLAIN_BLOCKS) for b in blocks)
    metadata = {CONTENT_KEY: tuple(dict(b) for b in blocks)} if keep else {}
    raw = payload.get("stopReason")
    gen = _generation("".join(texts), calls, reasoning, raw if isinstance(raw, str) else None, metadata)
    md = ChatResponseMetadata(None, model_id, _usage(payload.get("usage")), MappingProxyType(_response_extra(payload)))
    return ChatResponse((gen,), md)


def _exception(message: EventStreamMessage) -> Exception:
    kind = message.exception_type or "exception"
    try:
        body = jsonsafe.loads(message.payload.decode("utf-8", "replace")) if message.payload else {}
    except ValueError:
        body = {}
    text = str(body.get("message") if isinstance(body, Mapping) else "")[:300]
    status = _EXCEPTION_STATUS.get(kind)
    if status is None:
        return ModelResponseError(f"Bedrock reported {kind} mid-stream: {text}")
    error = error_for_status("Bedrock", status, json.dumps({"error": {"message": text, "type": kind}}), {})
    error.args = (f"Bedrock reported {kind} (HTTP {status} equivalent): {text}",)
    return error


class BedrockStreamParser:
    """Turns ConverseStream event-stream bytes into delta chunks.

    ``raw_bytes`` tells the model to feed body bytes, not text lines. Text and reasoning deltas pass
    through as they come; a tool call is sent whole when its block stops (its input arrives as JSON
    fragments); ``messageStop`` brings the stop reason and ``metadata`` (usage, metrics, guardrail
    trace) ends the stream.
    """

    raw_bytes = True

    def __init__(self, model_id: str | None = None, max_message_bytes: int | None = None) -> None:
        self.done = False
        self._decoder = EventStreamDecoder(max_message_bytes) if max_message_bytes else EventStreamDecoder()
        self._model = model_id
        self._tools: dict[int, list[Any]] = {}  # index -> [id, name, fragments]
        self._text: list[str] = []
        self._calls = 0
        self._raw: str | None = None
        self._usage = Usage()
        self._extra: dict[str, Any] = {}
        self._pending: Exception | None = None

    def _chunk(self, message: AssistantMessage) -> ChatResponse:
        return ChatResponse((Generation(message),), ChatResponseMetadata(None, self._model))

    def feed(self, data: str | bytes) -> list[ChatResponse]:
        """Consume body bytes; return the chunks the completed messages make."""
        if isinstance(data, str):
            raise TypeError("the Bedrock stream parser takes body bytes (raw_bytes = True), not text lines")
        if self._pending is not None:
            raise self._pending
        out: list[ChatResponse] = []
        for message in self._decoder.feed(data):
            if message.message_type != "event":
                if not out:
                    raise _exception(message)
                # Chunks decoded before it in the same read go out first; the error ends the stream.
                self._pending = _exception(message)
                self.done = True
                break
            payload = jsonsafe.loads(message.payload.decode("utf-8")) if message.payload else {}
            if isinstance(payload, Mapping):
                out.extend(self._event(message.event_type, payload))
        return out

    def _event(self, kind: str | None, payload: Mapping[str, Any]) -> list[ChatResponse]:
        if kind == "contentBlockStart":
            start = payload.get("start")
            use = start.get("toolUse") if isinstance(start, Mapping) else None
            if isinstance(use, Mapping):
                self._tools[int(payload.get("contentBlockIndex") or 0)] = [use.get("toolUseId"), use.get("name"), []]
        elif kind == "contentBlockDelta":
            return self._delta(int(payload.get("contentBlockIndex") or 0), payload.get("delta") or {})
        elif kind == "contentBlockStop":
            return self._stop(int(payload.get("contentBlockIndex") or 0))
        elif kind == "messageStop":
            reason = payload.get("stopReason")
            self._raw = reason if isinstance(reason, str) else self._raw
            if payload.get("additionalModelResponseFields") is not None:
                self._extra["additional_model_response_fields"] = payload["additionalModelResponseFields"]
        elif kind == "metadata":
            self._usage = _usage(payload.get("usage"))
            self._extra.update(_response_extra(payload))
            self.done = True
        return []

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[ChatResponse]:
        if isinstance(delta.get("text"), str):
            text = delta["text"]
            if text:
                self._text.append(text)
                return [self._chunk(AssistantMessage(text))]
        elif isinstance(delta.get("toolUse"), Mapping):
            self._tools.setdefault(index, [None, None, []])[2].append(str(delta["toolUse"].get("input") or ""))
        elif isinstance(delta.get("reasoningContent"), Mapping):
            content = delta["reasoningContent"]
            if content.get("redactedContent") is not None:
                r = Reasoning(redacted=str(content["redactedContent"]), provider=PROVIDER)
            elif content.get("signature"):
                r = Reasoning(signature=str(content["signature"]), provider=PROVIDER)
            elif content.get("text"):
                r = Reasoning(str(content["text"]), provider=PROVIDER)
            else:
                return []
            return [self._chunk(AssistantMessage(None, reasoning=(r,)))]
        return []

    def _stop(self, index: int) -> list[ChatResponse]:
        state = self._tools.pop(index, None)
        if state is None:
            return []
        call_id, name, fragments = state
        text = "".join(fragments).strip()
        try:
            value = jsonsafe.loads(text) if text else {}
            arguments, meta = arguments_text(value), {}
        except ValueError:
            arguments, meta = text, {"partial": True}
        self._calls += 1
        call = ToolCall(str(call_id or f"tooluse_{index}"), str(name or ""), arguments, meta)
        return [self._chunk(AssistantMessage(None, (call,)))]

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage, metrics, guardrail trace)."""
        if self._pending is not None:
            raise self._pending
        text = "".join(self._text)
        gen = _generation(text, (), (), self._raw, {})
        message = gen.output
        message = AssistantMessage(None if (text or self._calls) else "", (), message.metadata, (), message.refusal)
        md = ChatResponseMetadata(None, self._model, self._usage, MappingProxyType(dict(self._extra)))
        return [ChatResponse((Generation(message, gen.metadata),), md)]


# -- chat model ---------------------------------------------------------------------------------------


def _region(region: str | None) -> str:
    found = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not found or not found.strip():
        raise ValueError("Bedrock needs a region: pass region='us-east-1' (or set AWS_REGION)")
    return found.strip()


class BedrockChatModel(HTTPChatModel):
    """Bedrock's Converse API (``POST /model/{modelId}/converse`` and ``/converse-stream``) on httpx.

    ``region`` (else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``) picks the endpoint
    ``https://bedrock-runtime.{region}.amazonaws.com`` unless ``base_url`` is given (a VPC endpoint,
    a proxy). ``credentials``: see the module docstring; ``profile`` names a botocore profile.
    ``guardrail`` is the ``guardrailConfig`` (``{"guardrailIdentifier": ..., "guardrailVersion": ...,
    "trace": "enabled"}``).
    """

    provider = "Bedrock"
    vendor_hosts = ("amazonaws.com", "amazonaws.com.cn")
    otel_provider = "aws.bedrock"  # gen_ai.provider.name in OpenTelemetry spans (semantic conventions)

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        credentials: Any = None,
        profile: str | None = None,
        base_url: str | None = None,
        options: ChatOptions | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        capabilities: ModelCapabilities | None = None,
        headers: Mapping[str, str] | None = None,
        guardrail: Mapping[str, Any] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        response_limits: ResponseLimits | None = None,
    ) -> None:
        if not isinstance(model_id, str) or not model_id.strip():
            raise ValueError("model_id must name a Bedrock model or inference profile, e.g. 'amazon.nova-lite-v1:0'")
        self.region = _region(region)
        self.credentials = CredentialSource(credentials, profile=profile)
        self.guardrail = dict(guardrail) if guardrail else None
        fixed = self.credentials.fixed
        super().__init__(
            model=model_id,
            base_url=base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com",
            headers=dict(headers or {}),
            secrets=fixed.secrets() if fixed is not None else [],
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
            credential=self.credentials.source,
            request_headers=self._sign,
        )

    def _sign(self, url: str, content: bytes) -> dict[str, str]:
        """The SigV4 headers of one attempt (fresh clock, current credentials)."""
        headers = {"content-type": "application/json"}
        credentials = self.credentials.get()
        # credentials from botocore's chain appear only now (and renew): the scrubber learns them here
        self._http.add_secrets(credentials.secrets())
        return sign("POST", url, headers, content, credentials, region=self.region, service=SERVICE)

    def request_path(self, prompt: Prompt, *, stream: bool) -> str:
        """``/model/{modelId}/converse`` (or ``converse-stream``), the id percent-encoded whole."""
        model = self.options_for(prompt).model or self.model
        return f"/model/{quote(model, safe='')}/{'converse-stream' if stream else 'converse'}"

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_converse_body(prompt, self.options_for(prompt), guardrail=self.guardrail)

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_converse(payload, self.model)

    def _count_request(self, prompt: Prompt) -> tuple[str, dict[str, Any]]:
        model = self.options_for(prompt).model or self.model
        system, messages = converse_messages(prompt.messages)
        converse: dict[str, Any] = {"messages": messages}
        if system:
            converse["system"] = system
        return f"/model/{quote(model, safe='')}/count-tokens", {"input": {"converse": converse}}

    @staticmethod
    def _input_tokens(payload: Any) -> int:
        count = payload.get("inputTokens") if isinstance(payload, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ModelResponseError(f"Bedrock CountTokens answered without a token count: {str(payload)[:200]}")
        return count

    def count_tokens(self, prompt: Prompt) -> int:
        """The prompt's input tokens as Bedrock counts them (``CountTokens``: messages and system; models
        that support it, such as Anthropic's)."""
        path, body = self._count_request(prompt)
        return self._input_tokens(self._http.post(path, body))

    async def acount_tokens(self, prompt: Prompt) -> int:
        """Async ``count_tokens``."""
        path, body = self._count_request(prompt)
        return self._input_tokens(await self._http.apost(path, body))

    def stream_parser(self) -> BedrockStreamParser:
        """A fresh parser for one streamed answer (frames bounded by ``ResponseLimits.max_event_bytes``)."""
        return BedrockStreamParser(self.model, self._http.limits.max_event_bytes)
