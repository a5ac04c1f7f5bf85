"""Google Gemini's own API (``generateContent`` / ``streamGenerateContent``) over httpx.

    model = GeminiChatModel("gemini-2.5-flash")     # GEMINI_API_KEY (or GOOGLE_API_KEY) from the environment

Unlike Gemini's OpenAI-compatible endpoint, this keeps everything the API has: parallel function
calls, thought signatures on every part they arrive on, thinking settings, safety ratings and
``countTokens``.

What goes where:

* system messages -> ``systemInstruction``; user turns -> ``user`` contents (media as ``inlineData``,
  URLs as ``fileData``); assistant turns -> ``model`` contents; tool results -> ``functionResponse``
  parts (an object answer is sent as is, anything else as ``{"result": text}`` or ``{"error": text}``).
* a turn's parts come back with thought signatures (on function calls, and on text or thought parts
  of thinking models); the API wants them back on the same parts. The turn's parts are kept, as
  received, in ``AssistantMessage.metadata["gemini_parts"]`` and sent back verbatim while the
  message's text and calls still match them; each call's own signature is also in
  ``ToolCall.metadata["thought_signature"]`` (used when the turn has to be rebuilt).
* ``thought`` parts -> ``AssistantMessage.reasoning`` (``provider="gemini"``).
* JSON schemas (tool parameters, ``options.output_schema``) are turned into the API's OpenAPI
  subset: ``$ref`` inlined, ``anyOf``/type lists with ``null`` made ``nullable``, keys it does not
  know dropped.
* usage: ``completion_tokens = candidatesTokenCount + thoughtsTokenCount`` (``reasoning_tokens`` the
  thoughts), ``cached_input_tokens = cachedContentTokenCount``, the total as reported.
* a turn with function calls finishes ``tool_calls`` (Gemini says ``STOP``); ``MAX_TOKENS`` ->
  ``length``. A prompt blocked by ``promptFeedback.blockReason`` and an answer stopped for safety,
  recitation, blocklists or prohibited content raise ``RefusalError`` (never an empty success);
  ``MALFORMED_FUNCTION_CALL`` and an answer without candidates raise ``ModelResponseError``.
* an invalid API key (Gemini answers HTTP 400 ``API_KEY_INVALID``) raises ``AuthenticationError``.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import quote

import httpx

from chatclient.errors import (
    AuthenticationError,
    ModelHTTPError,
    ModelResponseError,
    RefusalError,
    UnsupportedFeatureError,
)
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
from chatclient.models._chunks import choice_index, message_chunk, message_generation, text_generation
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
    env_or,
    error_for_status,
    resolve_api_key,
)
from chatclient.models.http.sse import SSEDecoder, parse_event_json
from chatclient.models.tool_media import media_note, tool_text
from chatclient.models.wire import arguments_object, arguments_text, deep_merge, json_object, usage_count
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition

__all__ = [
    "PARTS_KEY",
    "PROVIDER",
    "SIGNATURE_KEY",
    "GeminiChatModel",
    "GeminiStreamParser",
    "build_gemini_body",
    "gemini_contents",
    "gemini_schema",
    "parse_generate_content",
]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
DEFAULT_MODEL = "gemini-2.5-flash"
API_VERSION = "v1beta"

PROVIDER = "gemini"
"""``Reasoning.provider`` of the thought blocks this module makes."""

PARTS_KEY = "gemini_parts"
"""``AssistantMessage.metadata`` key holding a turn's parts as received (signatures included)."""

SIGNATURE_KEY = "thought_signature"
"""``ToolCall.metadata`` key holding the thought signature that came with a function call."""

_GENERATED_ID = "generated_id"  # ToolCall.metadata flag: the id was made here, Gemini sent none
_BLOCKED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"})
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length", "FINISH_REASON_UNSPECIFIED": None}
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
_PLAIN_PART_KEYS = frozenset({"text", "functionCall"})
SchemaField = Literal["responseSchema", "responseJsonSchema"]

# The keys of Gemini's Schema object (an OpenAPI 3.0 subset); anything else is dropped.
_SCHEMA_KEYS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems", "properties",
        "required", "minProperties", "maxProperties", "minLength", "maxLength", "pattern", "example", "anyOf",
        "propertyOrdering", "default", "items", "minimum", "maximum",
    }
)  # fmt: skip
_MAX_SCHEMA_DEPTH = 40
_FORMATS = frozenset({"date-time", "enum", "int32", "int64", "float", "double"})  # the ones Gemini accepts


# -- schemas ------------------------------------------------------------------------------------------


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON schema as Gemini's Schema object (the OpenAPI subset ``parameters`` and ``responseSchema`` take).

    ``$ref``\\ s into ``$defs``/``definitions`` are inlined (a recursive schema cannot be, and raises
    ``UnsupportedFeatureError``), ``null`` in a type list or ``anyOf`` becomes ``nullable``, ``const``
    becomes a one-value ``enum``, unknown keys are dropped.

    >>> gemini_schema({"type": ["string", "null"], "title": "Name", "additionalProperties": False})
    {'type': 'string', 'title': 'Name', 'nullable': True}
    """
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, Mapping):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    return _convert(schema, defs, 0)


def _convert(node: Any, defs: Mapping[str, Any], depth: int) -> dict[str, Any]:
    if depth > _MAX_SCHEMA_DEPTH:
        raise UnsupportedFeatureError(
            "Gemini needs schemas without recursion (a $ref cycle or nesting deeper than "
            f"{_MAX_SCHEMA_DEPTH} levels cannot be inlined into its Schema object); simplify the type",
            feature="recursive schema",
            provider="Gemini",
        )
    if not isinstance(node, Mapping):
        return {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref)
        if target is None:
            raise UnsupportedFeatureError(
                f"schema reference {ref!r} points nowhere Gemini can inline", feature="$ref", provider="Gemini"
            )
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _convert(merged, defs, depth + 1)
    out: dict[str, Any] = {}
    nullable = False
    kind = node.get("type")
    if isinstance(kind, list):
        types = [t for t in kind if t != "null"]
        nullable = len(types) < len(kind)
        if len(types) == 1:
            out["type"] = types[0]
        elif types:
            out["anyOf"] = [{"type": t} for t in types]
    elif isinstance(kind, str) and kind != "null":
        out["type"] = kind
    elif kind == "null":
        nullable = True
    if "const" in node:
        out["enum"] = [node["const"]]
    for key in ("anyOf", "oneOf"):
        options = node.get(key)
        if isinstance(options, list):
            branches = [b for b in options if not (isinstance(b, Mapping) and b.get("type") == "null")]
            nullable = nullable or len(branches) < len(options)
            converted = [_convert(b, defs, depth + 1) for b in branches]
            if len(converted) == 1:
                out.update({k: v for k, v in converted[0].items() if k not in out})
            elif converted:
                out["anyOf"] = converted
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        for part in all_of:
            out.update({k: v for k, v in _convert(part, defs, depth + 1).items() if k not in out})
    for key, value in node.items():
        if key not in _SCHEMA_KEYS or key in out or key == "anyOf":
            continue
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _convert(sub, defs, depth + 1) for name, sub in value.items()}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = _convert(value, defs, depth + 1)
        elif key == "type" or (key == "format" and value not in _FORMATS):
            continue
        else:
            out[key] = value
    if "enum" in out:
        out["enum"] = [str(v) for v in out["enum"] if v is not None]
        out.setdefault("type", "string")
        if out["type"] != "string":
            out["type"] = "string"  # Gemini's enums are strings
    if nullable:
        out["nullable"] = True
    return out


# -- request ------------------------------------------------------------------------------------------


def _media_part(media: Media) -> dict[str, Any]:
    data = media.data
    if isinstance(data, str):
        if data.startswith("data:"):
            header, _, payload = data.partition(",")
            mime = header[5:].split(";")[0] or media.mime_type
            return {"inlineData": {"mimeType": mime, "data": payload}}
        return {"fileData": {"mimeType": media.mime_type, "fileUri": data}}
    return {"inlineData": {"mimeType": media.mime_type, "data": base64.b64encode(data).decode("ascii")}}


def _call_part(call: ToolCall) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": call.name, "args": arguments_object(call)}
    if not call.metadata.get(_GENERATED_ID):
        fn["id"] = call.id
    part: dict[str, Any] = {"functionCall": fn}
    signature = call.metadata.get(SIGNATURE_KEY)
    if isinstance(signature, str) and signature:
        part["thoughtSignature"] = signature
    return part


def _stored_parts(m: AssistantMessage) -> list[dict[str, Any]] | None:
    stored = m.metadata.get(PARTS_KEY)
    if not isinstance(stored, (list, tuple)) or not all(isinstance(p, Mapping) for p in stored):
        return None
    text = "".join(str(p.get("text") or "") for p in stored if "text" in p and not p.get("thought"))
    names = [p["functionCall"].get("name") for p in stored if isinstance(p.get("functionCall"), Mapping)]
    # An advisor that rewrote the answer or the calls made the stored parts stale: rebuild instead.
    if text != (m.text or "") or names != [c.name for c in m.tool_calls]:
        return None
    return [dict(p) for p in stored]


def _model_parts(m: AssistantMessage) -> list[dict[str, Any]]:
    stored = _stored_parts(m)
    if stored is not None:
        return stored
    parts: list[dict[str, Any]] = []
    if m.text:
        parts.append({"text": m.text})
    parts.extend(_call_part(c) for c in m.tool_calls)
    return parts


def _response_part(name: str, call_id: str | None, data: str, is_error: bool) -> dict[str, Any]:
    value = json_object(data)
    if value is None:
        value = {"error": data} if is_error else {"result": data}
    fn: dict[str, Any] = {"name": name, "response": value}
    if call_id is not None:
        fn["id"] = call_id
    return {"functionResponse": fn}


def gemini_contents(messages: Sequence[Message]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(``systemInstruction``, ``contents``) for chatclient messages; consecutive turns of a role merge."""
    system = [m.text for m in messages if isinstance(m, SystemMessage) and m.text]
    native_ids: set[str] = set()
    turns: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, UserMessage):
            role, parts = "user", [_media_part(media) for media in m.media]
            if m.text or not parts:
                parts.insert(0, {"text": m.text})
        elif isinstance(m, AssistantMessage):
            role, parts = "model", _model_parts(m)
            native_ids.update(c.id for c in m.tool_calls if not c.metadata.get(_GENERATED_ID))
        elif isinstance(m, ToolResponseMessage):
            role = "user"
            parts = [
                _response_part(r.name, r.id if r.id in native_ids else None, tool_text(r), r.is_error)
                for r in m.responses
            ]
            media = [media for r in m.responses for media in r.media]
            if media:
                # Media a tool returned follow its function responses in the same user turn.
                parts += [{"text": media_note(m.responses)}, *(_media_part(x) for x in media)]
        else:  # pragma: no cover - Prompt validates message types
            raise TypeError(f"unsupported message type {type(m).__name__}")
        if not parts:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    instruction = {"parts": [{"text": "\n".join(system)}]} if system else None
    return instruction, turns


def gemini_tools(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    """One ``functionDeclarations`` tool holding every function."""
    declarations = []
    for t in function_tools(tools, provider="Gemini"):
        declaration: dict[str, Any] = {"name": t.name, "description": t.description}
        if t.input_schema and t.input_schema.get("properties"):
            declaration["parameters"] = gemini_schema(t.input_schema)
        declarations.append(declaration)
    return [{"functionDeclarations": declarations}] if declarations else []


def gemini_tool_config(choice: str | Mapping[str, Any]) -> dict[str, Any]:
    """``auto``/``none``/``required`` (-> ``ANY``) or a function name (``ANY`` restricted to it)."""
    if isinstance(choice, Mapping):
        return dict(choice)
    modes = {"auto": "AUTO", "none": "NONE", "required": "ANY"}
    if choice in modes:
        return {"functionCallingConfig": {"mode": modes[choice]}}
    return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [choice]}}


def build_gemini_body(
    prompt: Prompt,
    options: ChatOptions,
    *,
    thinking: Mapping[str, Any] | None = None,
    safety_settings: Sequence[Mapping[str, Any]] | None = None,
    schema_field: SchemaField = "responseSchema",
) -> dict[str, Any]:
    """The ``generateContent`` body (the model is in the path, not here).

    ``options.extra`` is merged in depth (``{"generationConfig": {"candidateCount": 2}}`` adds one
    field, it does not replace the whole config).
    """
    system, contents = gemini_contents(prompt.messages)
    body: dict[str, Any] = {"contents": contents}
    if system is not None:
        body["systemInstruction"] = system
    config: dict[str, Any] = {}
    for key, field in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("max_tokens", "maxOutputTokens"),
        ("seed", "seed"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ):
        value = getattr(options, key)
        if value is not None:
            config[field] = value
    if options.stop is not None:
        config["stopSequences"] = list(options.stop)
    if options.output_schema is not None:
        config["responseMimeType"] = "application/json"
        schema = options.output_schema
        config[schema_field] = gemini_schema(schema) if schema_field == "responseSchema" else dict(schema)
    if thinking:
        config["thinkingConfig"] = dict(thinking)
    if config:
        body["generationConfig"] = config
    if prompt.tools:
        tools = gemini_tools(prompt.tools)
        if tools:
            body["tools"] = tools
            if options.tool_choice is not None:
                body["toolConfig"] = gemini_tool_config(options.tool_choice)
    if safety_settings:
        body["safetySettings"] = [dict(s) for s in safety_settings]
    if options.extra:
        deep_merge(body, options.extra)
    return body


# -- response -----------------------------------------------------------------------------------------


def _usage(payload: Any) -> Usage:
    if not isinstance(payload, Mapping):
        return Usage()
    prompt = usage_count(payload.get("promptTokenCount"))
    thoughts = usage_count(payload.get("thoughtsTokenCount"))
    completion = usage_count(payload.get("candidatesTokenCount")) + thoughts
    total = payload.get("totalTokenCount")
    reported = total if isinstance(total, int) and total != prompt + completion else None
    return Usage(prompt, completion, usage_count(payload.get("cachedContentTokenCount")), 0, thoughts, reported)


def _ratings(value: Any) -> str:
    if not isinstance(value, list):
        return ""
    shown = [
        f"{str(r.get('category', '?')).removeprefix('HARM_CATEGORY_')} {r.get('probability', '?')}"
        for r in value
        if isinstance(r, Mapping) and (r.get("blocked") or r.get("probability") in ("MEDIUM", "HIGH"))
    ]
    return f" ({', '.join(shown)})" if shown else ""


def _check_prompt_feedback(payload: Mapping[str, Any]) -> None:
    feedback = payload.get("promptFeedback")
    if isinstance(feedback, Mapping) and feedback.get("blockReason"):
        reason = str(feedback["blockReason"])
        text = f"Gemini blocked the prompt: {reason}{_ratings(feedback.get('safetyRatings'))}"
        if feedback.get("blockReasonMessage"):
            text += f" - {str(feedback['blockReasonMessage'])[:200]}"
        raise RefusalError(text, f"{text}; rephrase the request or adjust safety_settings")


def _check_finish(raw: str | None, candidate: Mapping[str, Any]) -> None:
    if raw in _BLOCKED:
        text = f"Gemini stopped the answer: finish reason {raw}{_ratings(candidate.get('safetyRatings'))}"
        raise RefusalError(text, f"{text}; rephrase the request or adjust safety_settings")
    if raw in _MALFORMED:
        detail = str(candidate.get("finishMessage") or "")[:300]
        raise ModelResponseError(f"Gemini produced an unusable function call ({raw}){': ' + detail if detail else ''}")


def finish_reason(raw: str | None, has_calls: bool) -> str | None:
    """Gemini's ``finishReason`` in the common vocabulary (``tool_calls`` when the turn calls functions)."""
    if raw is None:
        return None
    if has_calls and raw == "STOP":
        return "tool_calls"
    return _FINISH.get(raw, raw.lower())


def _new_call(fn: Mapping[str, Any], signature: Any) -> ToolCall:
    meta: dict[str, Any] = {}
    call_id = fn.get("id")
    if not isinstance(call_id, str) or not call_id:
        call_id = f"gemini-call-{uuid.uuid4().hex[:16]}"
        meta[_GENERATED_ID] = True
    if isinstance(signature, str) and signature:
        meta[SIGNATURE_KEY] = signature
    args = fn.get("args")
    return ToolCall(call_id, str(fn.get("name") or ""), arguments_text(args), meta)


def _needs_parts(parts: Sequence[Mapping[str, Any]]) -> bool:
    return any(p.get("thoughtSignature") or p.get("thought") or not (set(p) & _PLAIN_PART_KEYS) for p in parts)


def _gen_extra(candidate: Mapping[str, Any], raw: str | None) -> Mapping[str, Any]:
    extra: dict[str, Any] = {}
    if raw is not None:
        extra["raw_finish_reason"] = raw
    for key, name in (
        ("safetyRatings", "safety_ratings"),
        ("citationMetadata", "citation_metadata"),
        ("groundingMetadata", "grounding_metadata"),
        ("finishMessage", "finish_message"),
    ):
        if candidate.get(key) is not None:
            extra[name] = candidate[key]
    return MappingProxyType(extra)


def _response_extra(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    feedback = payload.get("promptFeedback")
    return MappingProxyType({"prompt_feedback": feedback} if isinstance(feedback, Mapping) else {})


class _Thoughts:
    """Thought parts merged into reasoning blocks: a part with a signature closes its block."""

    def __init__(self) -> None:
        self.blocks: list[list[Any]] = []  # [text, signature]

    def add(self, text: str, signature: Any) -> None:
        sig = signature if isinstance(signature, str) and signature else None
        if self.blocks and self.blocks[-1][1] is None:
            self.blocks[-1][0] += text
            self.blocks[-1][1] = sig
        else:
            self.blocks.append([text, sig])

    def result(self) -> tuple[Reasoning, ...]:
        return tuple(Reasoning(t, s, None, PROVIDER) for t, s in self.blocks)


def _generation(candidate: Mapping[str, Any]) -> Generation:
    raw = candidate.get("finishReason")
    raw = raw if isinstance(raw, str) else None
    _check_finish(raw, candidate)
    content = candidate.get("content")
    parts = [p for p in (content.get("parts") or []) if isinstance(p, Mapping)] if isinstance(content, Mapping) else []
    texts: list[str] = []
    calls: list[ToolCall] = []
    thoughts = _Thoughts()
    for part in parts:
        if part.get("thought"):
            thoughts.add(str(part.get("text") or ""), part.get("thoughtSignature"))
        elif isinstance(part.get("functionCall"), Mapping):
            calls.append(_new_call(part["functionCall"], part.get("thoughtSignature")))
        elif "text" in part:
            texts.append(str(part.get("text") or ""))
    metadata = {PARTS_KEY: tuple(dict(p) for p in parts)} if _needs_parts(parts) else {}
    message = AssistantMessage(assistant_text("".join(texts), bool(calls)), tuple(calls), metadata, thoughts.result())
    return Generation(message, GenerationMetadata(finish_reason(raw, bool(calls)), _gen_extra(candidate, raw)))


def parse_generate_content(payload: Any) -> ChatResponse:
    """A ``ChatResponse`` for a ``GenerateContentResponse``."""
    if not isinstance(payload, Mapping):
        raise ModelResponseError(f"Gemini answered with {type(payload).__name__}, not an object")
    _check_prompt_feedback(payload)
    candidates = [c for c in (payload.get("candidates") or []) if isinstance(c, Mapping)]
    if not candidates:
        raise ModelResponseError("Gemini answered without any candidate (and without saying why)")
    generations = tuple(_generation(c) for c in sorted(candidates, key=lambda c: int(c.get("index") or 0)))
    md = ChatResponseMetadata(
        payload.get("responseId"),
        payload.get("modelVersion"),
        _usage(payload.get("usageMetadata")),
        _response_extra(payload),
    )
    return ChatResponse(generations, md)


def _stream_error(err: Mapping[str, Any]) -> Exception:
    """An ``error`` object sent mid-stream, as the error of its HTTP status (503 and 429 are then
    retried like the HTTP answers while nothing has been emitted)."""
    code = err.get("code")
    message = str(err.get("message") or err)[:300]
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        error = error_for_status("Gemini", code, json.dumps({"error": {"message": message, "type": err.get("status")}}))
        error.args = (
            f"Gemini reported {err.get('status') or 'an error'} mid-stream (HTTP {code} equivalent): {message}",
        )
        return error
    return ModelResponseError(f"Gemini reported an error mid-stream: {message}")


class _CandidateStream:
    __slots__ = ("_tail", "calls", "extra", "parts", "raw_finish", "saw_text")

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self._tail: list[str] = []  # text merged into the last part, joined once (not once per delta)
        self.calls = 0
        self.saw_text = False
        self.raw_finish: str | None = None
        self.extra: Mapping[str, Any] = MappingProxyType({})

    def whole_parts(self) -> list[dict[str, Any]]:
        """The parts kept so far, the last one's merged text joined."""
        if self._tail:
            last = self.parts[-1]
            last["text"] = str(last.get("text") or "") + "".join(self._tail)
            self._tail = []
        return self.parts

    def keep(self, part: Mapping[str, Any]) -> None:
        # Streamed text arrives as many small parts: consecutive ones of the same kind are merged
        # until a part carrying a signature closes one, so the turn goes back as the API sent it.
        last = self.parts[-1] if self.parts else None
        if last is not None and len(part) == 1 and len(last) == 1 and "text" in part and "text" in last:
            self._tail.append(str(part["text"] or ""))  # plain text after plain text
            return
        self.whole_parts()
        text_like = set(part) <= {"text", "thought", "thoughtSignature"} and "text" in part
        if (
            last is not None
            and text_like
            and set(last) <= {"text", "thought"}
            and "text" in last
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            self._tail.append(str(part.get("text") or ""))
            if part.get("thoughtSignature"):
                last["thoughtSignature"] = part["thoughtSignature"]
            return
        self.parts.append(dict(part))


class GeminiStreamParser:
    """Turns ``streamGenerateContent?alt=sse`` events (each a partial ``GenerateContentResponse``) into deltas.

    Text and thought text pass through as they come; function calls arrive whole and pass through
    at once (parallel calls keep their order); signatures are kept with the parts they came on. The
    stream is done when every candidate has a finish reason; the last chunk carries finish reasons,
    usage, safety ratings and the turn's parts.
    """

    def __init__(self) -> None:
        self.done = False
        self._sse = SSEDecoder()
        self._candidates: dict[int, _CandidateStream] = {}
        self._id: str | None = None
        self._model: str | None = None
        self._usage = Usage()
        self._extra: dict[str, Any] = {}
        self._meta = ChatResponseMetadata()  # shared by every delta until the id or model changes (frozen)

    def feed(self, line: str) -> list[ChatResponse]:
        """Consume one line of the stream; return the chunks it completes."""
        data = self._sse.feed_data(line)
        if data is None:
            return []
        payload = parse_event_json(data)
        if not isinstance(payload, Mapping):
            return []
        if isinstance(payload.get("error"), Mapping):
            raise _stream_error(payload["error"])
        if "promptFeedback" in payload:
            _check_prompt_feedback(payload)
        response_id = payload.get("responseId") or self._id
        model = payload.get("modelVersion") or self._model
        if response_id != self._id or model != self._model:
            self._id, self._model = response_id, model
            self._meta = ChatResponseMetadata(response_id, model)
        if payload.get("usageMetadata") is not None:
            self._usage = _usage(payload["usageMetadata"])
        if "promptFeedback" in payload:
            self._extra.update(_response_extra(payload))
        generations: dict[int, Generation] = {}
        for candidate in payload.get("candidates") or []:
            if not isinstance(candidate, Mapping):
                continue
            index = choice_index(candidate.get("index") or 0)
            state = self._candidates.setdefault(index, _CandidateStream())
            delta = self._delta(candidate, state)
            if delta is not None:
                generations[index] = delta
        if self._candidates and all(s.raw_finish is not None for s in self._candidates.values()):
            self.done = True
        if not generations:
            return []
        if len(generations) == 1 and 0 in generations:
            return [message_chunk((generations[0],), self._meta)]
        ordered = tuple(generations.get(i, Generation(AssistantMessage(None))) for i in range(max(generations) + 1))
        return [message_chunk(ordered, self._meta)]

    def _delta(self, candidate: Mapping[str, Any], state: _CandidateStream) -> Generation | None:
        raw = candidate.get("finishReason")
        if isinstance(raw, str):
            _check_finish(raw, candidate)
            state.raw_finish = raw
            state.extra = _gen_extra(candidate, raw)
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, Mapping) else None
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for part in parts or []:
            if not isinstance(part, Mapping):
                continue
            state.keep(part)
            signature = part.get("thoughtSignature")
            if part.get("thought"):
                sig = signature if isinstance(signature, str) and signature else None
                text = str(part.get("text") or "")
                if text or sig:
                    reasoning.append(Reasoning(text, sig, None, PROVIDER))
            elif isinstance(part.get("functionCall"), Mapping):
                calls.append(_new_call(part["functionCall"], signature))
            elif part.get("text"):
                texts.append(str(part["text"]))
        state.calls += len(calls)
        if texts:
            state.saw_text = True
        if not (texts or calls or reasoning):
            return None
        if not (calls or reasoning):
            return text_generation(texts[0] if len(texts) == 1 else "".join(texts))
        return message_generation(AssistantMessage("".join(texts) or None, tuple(calls), reasoning=tuple(reasoning)))

    def finish(self) -> list[ChatResponse]:
        """The last chunk (finish reasons, usage, the turn's parts), once every candidate finished."""
        states = self._candidates or {0: _CandidateStream()}
        generations = []
        for index in range(max(states) + 1):
            state = states.get(index) or _CandidateStream()
            text = None if (state.saw_text or state.calls) else ""
            parts = state.whole_parts()
            metadata = {PARTS_KEY: tuple(parts)} if _needs_parts(parts) else {}
            reason = finish_reason(state.raw_finish, state.calls > 0)
            generations.append(
                Generation(AssistantMessage(text, metadata=metadata), GenerationMetadata(reason, state.extra))
            )
        md = ChatResponseMetadata(self._id, self._model, self._usage, MappingProxyType(dict(self._extra)))
        return [ChatResponse(tuple(generations), md)]


# -- chat model ---------------------------------------------------------------------------------------


def _model_path(model: str) -> str:
    name = model if "/" in model else f"models/{model}"
    return quote(name, safe="/")


class GeminiChatModel(HTTPChatModel):
    """Gemini's ``generateContent`` API on httpx.

    ``api_key`` defaults to ``GEMINI_API_KEY`` (else ``GOOGLE_API_KEY``), sent as ``x-goog-api-key``;
    ``base_url`` to ``GEMINI_BASE_URL`` or Google's endpoint; ``api_version`` is the path prefix
    (``v1beta``). ``thinking`` is sent as ``generationConfig.thinkingConfig`` (e.g.
    ``{"thinkingBudget": 1024, "includeThoughts": True}``), ``safety_settings`` as ``safetySettings``.
    Structured output: ``responseMimeType`` + ``responseSchema`` (the schema converted to Gemini's
    subset; ``schema_field="responseJsonSchema"`` sends the JSON schema as is, for models that take
    it), then JSON mode, then a forced function call.

    >>> GeminiChatModel("gemini-2.5-flash", api_key="test-key")
    GeminiChatModel(model='gemini-2.5-flash', base_url='https://generativelanguage.googleapis.com')
    """

    provider = "Gemini"
    vendor_hosts = ("generativelanguage.googleapis.com",)
    otel_provider = "gcp.gemini"  # gen_ai.provider.name in OpenTelemetry spans (semantic conventions)

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
        thinking: Mapping[str, Any] | None = None,
        safety_settings: Sequence[Mapping[str, Any]] | None = None,
        schema_field: SchemaField = "responseSchema",
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        response_limits: ResponseLimits | None = None,
    ) -> None:
        if schema_field not in ("responseSchema", "responseJsonSchema"):
            raise ValueError("schema_field must be 'responseSchema' or 'responseJsonSchema'")
        url = env_or(base_url, "GEMINI_BASE_URL") or DEFAULT_BASE_URL
        # GEMINI_API_KEY first, GOOGLE_API_KEY when only that one is set (Google's SDKs read both).
        env_var = (
            "GOOGLE_API_KEY"
            if not os.environ.get("GEMINI_API_KEY") and os.environ.get("GOOGLE_API_KEY")
            else "GEMINI_API_KEY"
        )
        key, credential = resolve_api_key(
            api_key,
            env_var,
            provider="Gemini",
            required=url.rstrip("/") == DEFAULT_BASE_URL,
            where=" (GEMINI_API_KEY or GOOGLE_API_KEY)",
        )
        all_headers = dict(headers or {})
        if key:
            all_headers["x-goog-api-key"] = key
        self.api_version = api_version.strip("/")
        self.thinking = dict(thinking) if thinking else None
        self.safety_settings = [dict(s) for s in safety_settings] if safety_settings else None
        self.schema_field: SchemaField = schema_field
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

    # -- provider hooks -----------------------------------------------------------------------------

    def _path(self, prompt: Prompt | None, method: str) -> str:
        options = self.options_for(prompt) if prompt is not None else self.default_options
        model = (options.model if options is not None else None) or self.model
        return f"/{self.api_version}/{_model_path(model)}:{method}"

    def request_path(self, prompt: Prompt, *, stream: bool) -> str:
        """``…/models/{model}:generateContent``, or ``:streamGenerateContent?alt=sse`` for streams."""
        return self._path(prompt, "streamGenerateContent?alt=sse" if stream else "generateContent")

    def build_body(self, prompt: Prompt, *, stream: bool) -> dict[str, Any]:
        """The provider request body for ``prompt`` (constructor options merged under the prompt's)."""
        return build_gemini_body(
            prompt,
            self.options_for(prompt),
            thinking=self.thinking,
            safety_settings=self.safety_settings,
            schema_field=self.schema_field,
        )

    def structured_output_options(self, rung: str, schema: Mapping[str, Any]) -> ChatOptions | None:
        """``native``: ``responseSchema``; ``json_object``: ``responseMimeType`` alone (JSON mode)."""
        if rung == "native":
            return ChatOptions(output_schema=schema)
        if rung == "json_object":
            return ChatOptions(extra={"generationConfig": {"responseMimeType": "application/json"}})
        return None

    def parse_response(self, payload: Any) -> ChatResponse:
        """The ``ChatResponse`` for a provider JSON payload."""
        return parse_generate_content(payload)

    def stream_parser(self) -> GeminiStreamParser:
        """A fresh parser for one streamed answer."""
        return GeminiStreamParser()

    # -- typed errors -------------------------------------------------------------------------------

    @staticmethod
    def _retyped(exc: ModelHTTPError) -> ModelHTTPError:
        # Gemini answers an invalid key with HTTP 400 (reason API_KEY_INVALID), not 401.
        if exc.status == 400 and not isinstance(exc, AuthenticationError) and "API_KEY_INVALID" in (exc.body or ""):
            return AuthenticationError(
                f"{exc} - the Gemini API key was refused; check GEMINI_API_KEY / api_key",
                status=exc.status,
                body=exc.body,
                code=exc.code,
                type=exc.type,
                request_id=exc.request_id,
            )
        return exc

    def call(self, prompt: Prompt) -> ChatResponse:
        """Send the prompt and wait for the whole answer."""
        try:
            return super().call(prompt)
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None

    async def acall(self, prompt: Prompt) -> ChatResponse:
        """Async ``call``."""
        try:
            return await super().acall(prompt)
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        """Stream the answer as delta chunks; the last chunk carries finish reasons and usage."""
        try:
            yield from super().stream(prompt)
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        """Async ``stream``."""
        try:
            async for chunk in super().astream(prompt):
                yield chunk
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None

    # -- countTokens --------------------------------------------------------------------------------

    def _count_body(self, prompt: Prompt) -> dict[str, Any]:
        body = self.build_body(prompt, stream=False)
        options = self.options_for(prompt)
        model = _model_path(options.model or self.model)
        request = {k: v for k, v in body.items() if k != "generationConfig"}
        return {"generateContentRequest": {"model": model, **request}}

    @staticmethod
    def _total(payload: Any) -> int:
        total = payload.get("totalTokens") if isinstance(payload, Mapping) else None
        if not isinstance(total, int) or isinstance(total, bool) or total < 0:
            raise ModelResponseError(f"Gemini countTokens answered without a token count: {str(payload)[:200]}")
        return total

    def count_tokens(self, prompt: Prompt) -> int:
        """The prompt's input tokens as Gemini counts them (``countTokens``: messages, system, tools)."""
        try:
            return self._total(self._http.post(self._path(prompt, "countTokens"), self._count_body(prompt)))
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None

    async def acount_tokens(self, prompt: Prompt) -> int:
        """Async ``count_tokens``."""
        try:
            return self._total(await self._http.apost(self._path(prompt, "countTokens"), self._count_body(prompt)))
        except ModelHTTPError as exc:
            raise self._retyped(exc) from None
