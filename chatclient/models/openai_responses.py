"""OpenAI Responses API (``POST {base_url}/responses``) over the same HTTP layer as the other providers.

    model = OpenAIResponsesModel("gpt-5-mini")            # OPENAI_API_KEY from the environment

chatclient owns the conversation: every request sends the whole history as input items and
``store: false`` (the default; ``store=True`` lets OpenAI keep responses, and
``previous_response_id=True`` then sends only the items after the last answer plus its id).

Messages become input items: system and user messages (media as ``input_image`` / ``input_file``),
an assistant turn as its reasoning items, hosted tool items, its text and its ``function_call``
items, and each tool response a ``function_call_output`` (a tool's media go inside its ``output``
list). What an answer carries and where it lands:

* ``message`` items: ``output_text`` -> text (``url_citation`` annotations -> ``citations``),
  ``refusal`` -> ``AssistantMessage.refusal``.
* ``function_call`` -> ``ToolCall(call_id, name, arguments, {"item_id": id})``.
* ``reasoning`` -> ``Reasoning(summary text, signature=item id, redacted=encrypted_content,
  provider="openai-responses")``; sent back in the next request (with ``store=False`` a reasoning
  model is asked for ``include: ["reasoning.encrypted_content"]`` so it can be).
* hosted tool items (``web_search_call``, ``code_interpreter_call``, any other ``*_call``) ->
  ``HostedToolCall`` parts; items of types chatclient does not know are kept, never dropped.
* When the turn holds anything beyond text, function calls and reasoning, the whole ``output`` is
  kept in ``AssistantMessage.metadata["openai_responses_output"]`` and sent back verbatim while the
  message's text and calls still match it.
* ``status: incomplete`` -> finish reason ``length`` (``max_output_tokens``) or ``content_filter``;
  ``usage`` with cached and reasoning tokens; ``response.failed`` and ``error`` events raise the
  error class of the matching HTTP status.

``entity(T)`` walks the structured-output ladder: ``text.format`` ``json_schema`` (strict when
the schema allows), then ``json_object``, then a forced answer tool, then instructions. ``stop``,
``seed``, ``top_k`` and the penalties have no Responses field and are left out.
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import httpx

from chatclient.errors import ModelResponseError, UnsupportedFeatureError
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
    Usage,
)
from chatclient.models.hosted_tools import split_tools
from chatclient.models.http import (
    DEFAULT_TIMEOUT,
    HTTPChatModel,
    ResponseLimits,
    assistant_text,
    error_for_status,
)
from chatclient.models.http.sse import SSEDecoder, parse_event_json
from chatclient.models.openai import is_strict_schema, openai_endpoint
from chatclient.models.wire import data_url, is_json, reported_total, usage_count
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

__all__ = [
    "OUTPUT_KEY",
    "PROVIDER",
    "RESPONSE_ID_KEY",
    "OpenAIResponsesModel",
    "ResponsesStreamParser",
    "build_responses_body",
    "parse_response",
    "responses_input",
]

DEFAULT_MODEL = "gpt-5-mini"
API = "openai-responses"  # the hosted-tool table's name for this API (chatclient.tools.builtin)

PROVIDER = "openai-responses"
"""``Reasoning.provider`` / ``HostedToolCall.provider`` of what this module makes; only those are sent back."""

OUTPUT_KEY = "openai_responses_output"
"""``AssistantMessage.metadata`` key holding a turn's raw output items when some have no chatclient field."""

RESPONSE_ID_KEY = "response_id"
"""``AssistantMessage.metadata`` key holding the id of the response the message came from."""

_TOOL_CHOICE_KEYWORDS = frozenset({"auto", "none", "required"})
_PLAIN_ITEMS = frozenset({"message", "function_call", "reasoning"})
# Hosted tool item types and the portable names chatclient gives them; other "*_call" items keep
# their own name (file_search, image_generation, mcp ...).
_HOSTED_NAMES = {"web_search_call": "web_search", "code_interpreter_call": "code_execution"}
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5|codex|computer-use)", re.IGNORECASE)
# Error codes of failed responses and error events, as the HTTP status each would have come with.
_ERROR_STATUS = {
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "server_is_overloaded": 503,
    "slow_down": 503,
    "invalid_request_error": 400,
    "invalid_prompt": 400,
    "context_length_exceeded": 400,
    "invalid_api_key": 401,
}


# -- request ------------------------------------------------------------------------------------------


def _filename(media: Media) -> str:
    ext = mimetypes.guess_extension(media.mime_type.split(";", 1)[0].strip()) or ".bin"
    return f"attachment{ext}"


def media_part(media: Media) -> dict[str, Any]:
    """An ``input_image`` (images) or ``input_file`` (documents, audio, anything else) content part."""
    if media.mime_type.lower().startswith("image/"):
        return {"type": "input_image", "image_url": data_url(media), "detail": "auto"}
    if isinstance(media.data, str) and not media.data.startswith("data:"):
        return {"type": "input_file", "file_url": media.data}
    return {"type": "input_file", "filename": _filename(media), "file_data": data_url(media)}


def _tool_output(r: ToolResponse) -> str | list[dict[str, Any]]:
    if not r.media:
        return r.response_data
    parts: list[dict[str, Any]] = [{"type": "input_text", "text": r.response_data}] if r.response_data else []
    for m in r.media:
        if m.mime_type.lower().startswith(("audio/", "video/")):
            raise UnsupportedFeatureError(
                f"the Responses API takes images and files in a tool's output, not {m.mime_type} (tool {r.name!r}); "
                "return a transcript instead, or use OpenAIChatModel, which sends audio to audio models",
                feature="tool_result_media",
                provider="OpenAI Responses",
            )
        parts.append(media_part(m))
    return parts


def _stored_output(m: AssistantMessage) -> list[dict[str, Any]] | None:
    """The turn's raw output items, if kept and still describing this message."""
    stored = m.metadata.get(OUTPUT_KEY)
    if not isinstance(stored, (list, tuple)) or not all(isinstance(i, Mapping) for i in stored):
        return None
    text = "".join(
        str(part.get("text") or "")
        for item in stored
        if item.get("type") == "message"
        for part in (item.get("content") or ())
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    )
    ids = [i.get("call_id") for i in stored if i.get("type") == "function_call"]
    # An advisor that rewrote the answer or the calls made the stored items stale: rebuild instead.
    if text != (m.text or "") or ids != [c.id for c in m.tool_calls]:
        return None
    return [dict(i) for i in stored]


def _reasoning_item(r: Reasoning) -> dict[str, Any]:
    item: dict[str, Any] = {"type": "reasoning", "id": r.signature}
    item["summary"] = [{"type": "summary_text", "text": r.text}] if r.text else []
    if r.redacted:
        item["encrypted_content"] = r.redacted
    return item


def _assistant_items(m: AssistantMessage) -> list[dict[str, Any]]:
    stored = _stored_output(m)
    if stored is not None:
        return stored
    # Reasoning items first: a reasoning item must precede the items it led to.
    items = [_reasoning_item(r) for r in m.reasoning if r.provider == PROVIDER and r.signature]
    for h in m.hosted_tool_calls:
        if h.provider == PROVIDER:
            items.extend(dict(raw) for raw in h.raw)
    if m.text:
        items.append({"role": "assistant", "content": m.text})
    elif m.refusal:
        items.append({"role": "assistant", "content": m.refusal})
    for c in m.tool_calls:
        call: dict[str, Any] = {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        item_id = c.metadata.get("item_id")
        if isinstance(item_id, str) and item_id:
            call["id"] = item_id
        items.append(call)
    return items


def responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Responses input items for chatclient messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": m.text})
        elif isinstance(m, UserMessage):
            if m.media:
                parts: list[dict[str, Any]] = [{"type": "input_text", "text": m.text}] if m.text else []
                parts.extend(media_part(media) for media in m.media)
                out.append({"role": "user", "content": parts})
            else:
                out.append({"role": "user", "content": m.text})
        elif isinstance(m, AssistantMessage):
            out.extend(_assistant_items(m))
        elif isinstance(m, ToolResponseMessage):
            out.extend(
                {"type": "function_call_output", "call_id": r.id, "output": _tool_output(r)} for r in m.responses
            )
        else:  # pragma: no cover - Prompt validates message types
            raise TypeError(f"unsupported message type {type(m).__name__}")
    return out


def _function_tool(t: ToolDefinition) -> dict[str, Any]:
    schema = dict(t.input_schema) or {"type": "object", "properties": {}}
    # Responses makes function tools strict unless told otherwise; strict mode rejects most schemas.
    return {
        "type": "function",
        "name": t.name,
        "description": t.description,
        "parameters": schema,
        "strict": is_strict_schema(schema),
    }


def _tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice if choice in _TOOL_CHOICE_KEYWORDS else {"type": "function", "name": choice}
    return dict(choice)


def text_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``text.format`` for a JSON schema (strict when the schema allows it)."""
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64] if isinstance(title, str) and title else "response"
    return {"type": "json_schema", "name": name, "schema": dict(schema), "strict": is_strict_schema(schema)}


def _anchor(messages: Sequence[Message]) -> tuple[str | None, Sequence[Message]]:
    """(id of the last answer that has one, the messages after it) for ``previous_response_id``."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            rid = m.metadata.get(RESPONSE_ID_KEY)
            if isinstance(rid, str) and rid:
                return rid, messages[i + 1 :]
            break
    return None, messages


def build_responses_body(
    prompt: Prompt,
    options: ChatOptions,
    *,
    stream: bool,
    store: bool = False,
    chain: bool = False,
    reasoning: bool | None = None,
) -> dict[str, Any]:
    """The Responses request body for a prompt and its merged options.

    ``chain`` sends only the items after the last answer with that answer's ``previous_response_id``
    (needs ``store``); ``reasoning`` says whether the model reasons (``None``: guessed from its name,
    or from a ``reasoning`` entry in ``options.extra``), which with ``store=False`` asks for the
    encrypted reasoning content.
    """
    messages: Sequence[Message] = prompt.messages
    previous = None
    if chain:
        previous, messages = _anchor(prompt.messages)
    body: dict[str, Any] = {"model": options.model, "input": responses_input(messages), "store": store}
    if previous is not None:
        body["previous_response_id"] = previous
    if stream:
        body["stream"] = True
    for key in ("temperature", "top_p"):
        value = getattr(options, key)
        if value is not None:
            body[key] = value
    if options.max_tokens is not None:
        body["max_output_tokens"] = options.max_tokens
    if prompt.tools:
        functions, hosted, _ = split_tools(prompt.tools, api=API, provider="OpenAI Responses")
        body["tools"] = [_function_tool(t) for t in functions] + hosted
        if options.tool_choice is not None:
            body["tool_choice"] = _tool_choice(options.tool_choice)
        if options.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = options.parallel_tool_calls
    if options.output_schema is not None:
        body["text"] = {"format": text_format(options.output_schema)}
    extra = dict(options.extra or {})
    reasons = (
        reasoning
        if reasoning is not None
        else bool(extra.get("reasoning")) or bool(_REASONING_MODEL.match(str(options.model or "")))
    )
    if not store and reasons:
        include = list(extra.pop("include", None) or body.get("include") or ())
        if "reasoning.encrypted_content" not in include:
            include.append("reasoning.encrypted_content")
        body["include"] = include
    body.update(extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def _usage(payload: Any) -> Usage:
    """``input_tokens`` (cached included), ``output_tokens`` (reasoning included) with their details."""
    if not isinstance(payload, Mapping):
        return Usage()
    prompt = usage_count(payload.get("input_tokens"))
    completion = usage_count(payload.get("output_tokens"))
    in_details = payload.get("input_tokens_details")
    out_details = payload.get("output_tokens_details")
    cached = usage_count(in_details.get("cached_tokens")) if isinstance(in_details, Mapping) else 0
    reasoning = usage_count(out_details.get("reasoning_tokens")) if isinstance(out_details, Mapping) else 0
    total = payload.get("total_tokens")
    reported = reported_total(total, prompt, completion)
    return Usage(prompt, completion, cached, 0, reasoning, reported)


def _raise_error(error: Any, what: str = "reported an error") -> None:
    """Raise the typed error for a response's ``error`` object or an ``error`` event."""
    if not isinstance(error, Mapping):
        raise ModelResponseError(f"OpenAI Responses {what}: {str(error)[:300]}")
    code = str(error.get("code") or error.get("type") or "")
    status = _ERROR_STATUS.get(code, 500 if "server" in code else 400)
    body = json.dumps({"error": dict(error)}, ensure_ascii=False, default=str)[:2000]
    raise error_for_status("OpenAI", status, body)


def _citation(annotation: Any, offset: int = 0) -> Citation | None:
    if not isinstance(annotation, Mapping) or annotation.get("type") != "url_citation":
        return None
    start, end = annotation.get("start_index"), annotation.get("end_index")
    return Citation(
        str(annotation.get("url") or ""),
        annotation.get("title") if isinstance(annotation.get("title"), str) else None,
        None,
        start + offset if isinstance(start, int) else None,
        end + offset if isinstance(end, int) else None,
    )


def _summary_text(item: Mapping[str, Any]) -> str:
    parts = [str(s.get("text") or "") for s in item.get("summary") or () if isinstance(s, Mapping)]
    if not any(parts):
        # Open-weight models served with the Responses API return their raw reasoning as content.
        parts = [str(c.get("text") or "") for c in item.get("content") or () if isinstance(c, Mapping)]
    return "\n\n".join(p for p in parts if p)


def _reasoning_of(item: Mapping[str, Any]) -> Reasoning:
    encrypted = item.get("encrypted_content")
    return Reasoning(
        _summary_text(item),
        str(item.get("id") or "") or None,
        encrypted if isinstance(encrypted, str) and encrypted else None,
        PROVIDER,
    )


def hosted_call(item: Mapping[str, Any]) -> HostedToolCall | None:
    """The ``HostedToolCall`` of a hosted tool output item (``None`` for other item types)."""
    kind = str(item.get("type") or "")
    if not kind.endswith("_call") or kind in ("function_call", "custom_tool_call"):
        return None
    name = _HOSTED_NAMES.get(kind, kind[: -len("_call")])
    inputs: dict[str, Any] = {}
    output: dict[str, Any] = {}
    if kind == "web_search_call":
        action = item.get("action")
        if isinstance(action, Mapping):
            inputs = {k: v for k, v in action.items() if k != "sources"}
            sources = action.get("sources")
            if isinstance(sources, list):
                output["sources"] = [dict(s) for s in sources if isinstance(s, Mapping)]
    elif kind == "code_interpreter_call":
        inputs = {k: item[k] for k in ("code", "container_id") if item.get(k) is not None}
        outputs = item.get("outputs")
        if isinstance(outputs, list):
            output["outputs"] = [dict(o) for o in outputs if isinstance(o, Mapping)]
            logs = [str(o.get("logs") or "") for o in outputs if isinstance(o, Mapping) and o.get("type") == "logs"]
            if logs:
                output["logs"] = "".join(logs)
    if item.get("error"):
        output["error"] = item["error"]
    status = item.get("status")
    return HostedToolCall(
        str(item.get("id") or ""),
        name,
        inputs,
        output,
        status if isinstance(status, str) else None,
        PROVIDER,
        (dict(item),),
    )


def _finish(status: Any, details: Any, has_calls: bool) -> tuple[str | None, str | None]:
    """(finish reason, raw reason) of a response."""
    if status == "incomplete":
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return ("content_filter" if reason == "content_filter" else "length"), str(reason or status)
    if has_calls:
        return "tool_calls", status if isinstance(status, str) else None
    return "stop", status if isinstance(status, str) else None


def _message_metadata(response_id: Any, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if isinstance(response_id, str) and response_id:
        meta[RESPONSE_ID_KEY] = response_id
    if any(i.get("type") not in _PLAIN_ITEMS for i in items):
        meta[OUTPUT_KEY] = tuple(dict(i) for i in items)
    return meta


def _response_extra(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    extra = {k: payload[k] for k in ("service_tier", "status") if isinstance(payload.get(k), str)}
    return MappingProxyType(extra)


def parse_response(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a Responses API ``response`` object."""
    if not isinstance(payload, Mapping):
        raise ModelResponseError(f"OpenAI Responses answered with a {type(payload).__name__}, not a response object")
    if payload.get("error"):
        _raise_error(payload["error"])
    items = [i for i in payload.get("output") or () if isinstance(i, Mapping)]
    texts: list[str] = []
    refusals: list[str] = []
    citations: list[Citation] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    hosted: list[HostedToolCall] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if not isinstance(part, Mapping):
                    continue
                if part.get("type") == "output_text":
                    offset = sum(len(t) for t in texts)
                    citations.extend(
                        c for c in (_citation(a, offset) for a in part.get("annotations") or ()) if c is not None
                    )
                    texts.append(str(part.get("text") or ""))
                elif part.get("type") == "refusal":
                    refusals.append(str(part.get("refusal") or ""))
        elif kind == "function_call":
            meta = {"item_id": item["id"]} if isinstance(item.get("id"), str) else {}
            calls.append(ToolCall(str(item["call_id"]), str(item["name"]), str(item.get("arguments") or ""), meta))
        elif kind == "reasoning":
            reasoning.append(_reasoning_of(item))
        elif (h := hosted_call(item)) is not None:
            hosted.append(h)
    finish, raw = _finish(payload.get("status"), payload.get("incomplete_details"), bool(calls))
    if finish == "length":
        calls = [
            c if is_json(c.arguments) else ToolCall(c.id, c.name, c.arguments, {**c.metadata, "partial": True})
            for c in calls
        ]
    text = "".join(texts)
    message = AssistantMessage(
        assistant_text(text, bool(calls)) if not refusals or text else None,
        tuple(calls),
        _message_metadata(payload.get("id"), items),
        tuple(reasoning),
        "".join(refusals) if refusals else None,
        tuple(hosted),
        tuple(citations),
    )
    extra = {"raw_finish_reason": raw} if raw else {}
    gen = Generation(message, GenerationMetadata(finish, MappingProxyType(extra)))
    md = ChatResponseMetadata(
        payload.get("id"), payload.get("model"), _usage(payload.get("usage")), _response_extra(payload)
    )
    return ChatResponse((gen,), md)


_NO_ID_META = ChatResponseMetadata()


class ResponsesStreamParser:
    """Turns Responses API stream events into delta chunks.

    Text, refusal and reasoning-summary deltas pass through as they come; a function call starts
    with its id and name (``response.output_item.added``) and grows with its argument deltas; a
    reasoning item is completed by its id and encrypted content when it is done; hosted tool calls
    and citations arrive whole. ``response.completed`` / ``response.incomplete`` end the stream;
    the last chunk carries finish reason, usage and the raw output items when the turn needs them.
    ``response.failed`` and ``error`` events raise the typed error of the matching HTTP status.
    """

    __slots__ = (
        "_calls",
        "_final",
        "_id",
        "_items",
        "_meta",
        "_model",
        "_part",
        "_part_start",
        "_seen",
        "_sse",
        "_summary_parts",
        "_text_len",
        "done",
    )

    def __init__(self) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._id: str | None = None
        self._model: str | None = None
        self._calls: dict[str, list[Any]] = {}  # item id -> [call_id, arguments parts]
        self._items: dict[int, dict[str, Any]] = {}  # output index -> finished item
        self._seen: set[str] = set()  # item ids whose content arrived as deltas
        self._summary_parts: dict[str, int] = {}
        self._part_start: dict[tuple[str, Any], int] = {}  # (item id, content index) -> answer offset
        self._part: Any = None  # the (item id, content index) of the last text delta
        self._text_len = 0
        self._final: Mapping[str, Any] | None = None
        self._meta = _NO_ID_META  # shared by every delta until the id or model changes (frozen)

    def _chunk(self, message: AssistantMessage) -> list[ChatResponse]:
        return [message_chunk((message_generation(message),), self._meta)]

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        sse = self._sse
        data = sse.feed_data(line)
        if data is None:
            return []
        payload = parse_event_json(data)
        if not isinstance(payload, dict):
            return []
        kind = payload.get("type") or sse.last_event
        if kind == "response.output_text.delta":
            delta = payload.get("delta") or ""
            if type(delta) is not str:
                raise ModelResponseError(f"a Responses output_text delta is not a string (got {type(delta).__name__})")
            if not delta:
                return []
            part = (payload.get("item_id"), payload.get("content_index"))
            if part != self._part:  # a new output_text part starts here (the hot path skips this)
                self._part = part
                self._seen.add(str(part[0]))
                self._part_start.setdefault((str(part[0]), part[1]), self._text_len)
            self._text_len += len(delta)
            return [text_chunk(delta, self._meta)]
        if kind == "response.function_call_arguments.delta":
            state = self._calls.get(str(payload.get("item_id")))
            delta = payload.get("delta") or ""
            if state is None or not delta:
                return []
            state[1].append(delta)
            return self._chunk(AssistantMessage(None, (ToolCall(state[0], "", delta),)))
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = payload.get("delta") or ""
            if not delta:
                return []
            item_id = str(payload.get("item_id"))
            self._seen.add(item_id)
            return self._chunk(AssistantMessage(None, reasoning=(Reasoning(delta, provider=PROVIDER),)))
        if kind == "response.reasoning_summary_part.added":
            item_id = str(payload.get("item_id"))
            count = self._summary_parts.get(item_id, 0)
            self._summary_parts[item_id] = count + 1
            if count:  # summary parts are joined by a blank line, as in a whole response
                return self._chunk(AssistantMessage(None, reasoning=(Reasoning("\n\n", provider=PROVIDER),)))
            return []
        if kind == "response.refusal.delta":
            delta = payload.get("delta") or ""
            self._seen.add(str(payload.get("item_id")))
            return self._chunk(AssistantMessage(None, refusal=delta)) if delta else []
        if kind == "response.output_text.annotation.added":
            # Annotation offsets count from the start of their output_text part.
            key = (str(payload.get("item_id")), payload.get("content_index"))
            citation = _citation(payload.get("annotation"), self._part_start.get(key, self._text_len))
            return self._chunk(AssistantMessage(None, citations=(citation,))) if citation is not None else []
        if kind == "response.output_item.added":
            return self._added(payload.get("item"))
        if kind == "response.output_item.done":
            return self._item_done(payload)
        if kind in ("response.created", "response.in_progress"):
            response = payload.get("response")
            if isinstance(response, Mapping):
                self._id = response.get("id") or self._id
                self._model = response.get("model") or self._model
                self._meta = ChatResponseMetadata(self._id, self._model)
            return []
        if kind in ("response.completed", "response.incomplete"):
            response = payload.get("response")
            self._final = response if isinstance(response, Mapping) else {}
            self.done = True
            return []
        if kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            _raise_error(error or {"code": "server_error", "message": "the response failed"}, "failed")
        if kind == "error":
            _raise_error(payload.get("error") if isinstance(payload.get("error"), Mapping) else payload)
        # Events chatclient has no use for (content_part.*, *.done, hosted tool progress): passed on
        # only to who asked (raw_provider_events).
        from chatclient.models.raw_events import raw_event_chunks

        return raw_event_chunks("openai_responses", kind, payload)

    def _added(self, item: Any) -> list[ChatResponse]:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return []
        item_id = str(item.get("id") or item.get("call_id"))
        call_id = str(item.get("call_id") or item_id)
        arguments = str(item.get("arguments") or "")
        self._calls[item_id] = [call_id, [arguments] if arguments else []]
        meta = {"item_id": item["id"]} if isinstance(item.get("id"), str) else {}
        return self._chunk(AssistantMessage(None, (ToolCall(call_id, str(item.get("name") or ""), arguments, meta),)))

    def _item_done(self, payload: Mapping[str, Any]) -> list[ChatResponse]:
        item = payload.get("item")
        if not isinstance(item, Mapping):
            return []
        index = payload.get("output_index")
        self._items[index if isinstance(index, int) else len(self._items)] = dict(item)
        kind = item.get("type")
        item_id = str(item.get("id"))
        if kind == "reasoning":
            r = _reasoning_of(item)
            # The summary streamed already; this completes the block with its id and encrypted content.
            text = "" if item_id in self._seen else r.text
            return self._chunk(AssistantMessage(None, reasoning=(Reasoning(text, r.signature, r.redacted, PROVIDER),)))
        if kind == "function_call":
            state = self._calls.get(item_id)
            if state is None:  # a server that skipped output_item.added: the call arrives whole
                added = self._added(item)
                return added
            if not state[1] and item.get("arguments"):
                state[1].append(str(item["arguments"]))
                return self._chunk(AssistantMessage(None, (ToolCall(state[0], "", str(item["arguments"])),)))
            return []
        if kind == "message" and item_id not in self._seen:
            # A server that sent the message whole, without deltas.
            whole = parse_response({"output": [item], "status": "completed"}).generations[0].output
            if whole.text or whole.refusal is not None:
                self._text_len += len(whole.text or "")
                return self._chunk(
                    AssistantMessage(whole.text or None, refusal=whole.refusal, citations=whole.citations)
                )
            return []
        hosted = hosted_call(item)
        if hosted is not None:
            return self._chunk(AssistantMessage(None, hosted_tool_calls=(hosted,)))
        return []

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reason, usage, raw output items), once the response is complete."""
        final = self._final or {}
        self._id = final.get("id") or self._id
        self._model = final.get("model") or self._model
        output = final.get("output")
        items = (
            [dict(i) for i in output if isinstance(i, Mapping)]
            if isinstance(output, list) and output
            else [self._items[k] for k in sorted(self._items)]
        )
        finish, raw = _finish(final.get("status"), final.get("incomplete_details"), bool(self._calls))
        partial: tuple[ToolCall, ...] = ()
        if finish == "length":
            partial = tuple(
                ToolCall(call_id, "", "", {"partial": True})
                for call_id, parts in self._calls.values()
                if not is_json("".join(parts))
            )
        text = None if (self._text_len or self._calls) else ""
        message = AssistantMessage(text, partial, _message_metadata(self._id, items))
        extra = {"raw_finish_reason": raw} if raw else {}
        gen = Generation(message, GenerationMetadata(finish, MappingProxyType(extra)))
        md = ChatResponseMetadata(self._id, self._model, _usage(final.get("usage")), _response_extra(final))
        return [ChatResponse((gen,), md)]


# -- chat model ---------------------------------------------------------------------------------------


class OpenAIResponsesModel(HTTPChatModel):
    """OpenAI Responses API (``POST {base_url}/responses``) on the shared HTTP layer.

    ``api_key`` defaults to ``OPENAI_API_KEY`` and ``base_url`` to ``OPENAI_BASE_URL`` or the OpenAI
    API. ``store`` (default ``False``) lets OpenAI keep the responses; ``previous_response_id=True``
    (needs ``store=True``) sends only what follows the last answer, with its id, instead of the whole
    history. ``reasoning_model`` says whether the model reasons (``None``: guessed from its name:
    o-series, gpt-5, codex), which decides whether encrypted reasoning is asked for when
    ``store=False``. Reasoning effort and summaries go in ``options.extra``, e.g.
    ``ChatOptions(extra={"reasoning": {"effort": "low", "summary": "auto"}})``.

    >>> OpenAIResponsesModel("gpt-5-mini", api_key="sk-test")
    OpenAIResponsesModel(model='gpt-5-mini', base_url='https://api.openai.com/v1')
    """

    provider = "OpenAI"
    chat_path = "/responses"
    count_tokens_path = "/responses/input_tokens"

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        store: bool = False,
        previous_response_id: bool = False,
        reasoning_model: bool | None = None,
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
    ) -> None:
        if previous_response_id and not store:
            raise ValueError(
                "previous_response_id=True needs store=True: OpenAI can only continue from responses it stored"
            )
        self.store = bool(store)
        self.previous_response_id = bool(previous_response_id)
        self.reasoning_model = reasoning_model
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
            or ModelCapabilities(
                tools=True, streaming=True, vision=True, structured_output=("native", "json_object", "tool")
            ),
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            response_limits=response_limits,
            credential=credential,
        )

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The Responses request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_responses_body(
            prompt,
            self.options_for(prompt),
            stream=stream,
            store=self.store,
            chain=self.previous_response_id,
            reasoning=self.reasoning_model,
        )

    def structured_output_options(self, rung: str, schema: Mapping[str, Any]) -> ChatOptions | None:
        """How a structured-output rung is asked for: ``text.format`` json_schema or json_object."""
        if rung == "json_object":
            return ChatOptions(extra={"text": {"format": {"type": "json_object"}}})
        if rung == "native":
            return ChatOptions(output_schema=schema)
        return None

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a Responses payload."""
        return parse_response(payload)

    def stream_parser(self) -> ResponsesStreamParser:
        """A fresh parser for one streamed answer."""
        return ResponsesStreamParser()

    def _count_body(self, prompt: Prompt) -> dict[str, Any]:
        body = self.build_body(prompt, stream=False)
        return {k: v for k, v in body.items() if k in _COUNT_FIELDS}

    def count_tokens(self, prompt: Prompt) -> int:
        """The input tokens of ``prompt`` as OpenAI counts them (``POST /responses/input_tokens``):
        messages, tools, reasoning items and the output format included; nothing is generated."""
        return _input_tokens(self._http.post(self.count_tokens_path, self._count_body(prompt)))

    async def acount_tokens(self, prompt: Prompt) -> int:
        """Async ``count_tokens``."""
        return _input_tokens(await self._http.apost(self.count_tokens_path, self._count_body(prompt)))


# The request fields the input_tokens endpoint takes (the rest of a create body is refused there).
_COUNT_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "previous_response_id",
        "reasoning",
        "text",
        "truncation",
        "conversation",
    }
)


def _input_tokens(payload: Any) -> int:
    tokens = payload.get("input_tokens") if isinstance(payload, Mapping) else None
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ModelResponseError("unexpected OpenAI input_tokens answer: no input_tokens count in it")
    return tokens
