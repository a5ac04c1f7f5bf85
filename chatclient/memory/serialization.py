"""One JSON form of messages, shared by every persistent repository.

Each message becomes a JSON object carrying a format version ``"v"``, so stores written today stay
readable when the format grows. Media bytes are base64 encoded; a media URL stays a string.
An assistant message keeps its reasoning blocks (text, signature, redacted data, provider), its
refusal and each tool call's provider metadata (e.g. a Gemini ``thought_signature``), because a
provider may require them back in the next request.

Versions: 1 is the original format; 2 adds ``reasoning``, ``refusal`` and tool-call ``metadata``;
3 adds hosted tool calls and citations of an assistant message and the media of tool responses.
A message is written with the lowest version that holds it, so a store stays readable by older
chatclient releases until a message actually needs the new fields (an older release then refuses
that record with advice to upgrade, instead of silently dropping a signature).
Metadata may hold JSON values plus tuples and bytes (tagged so they read back as tuples and
bytes); anything else is rejected with ``ValueError`` rather than stored in a form that would read
back different.

>>> from chatclient.messages import UserMessage
>>> message_from_json(message_to_json(UserMessage("hi"))) == UserMessage("hi")
True
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from chatclient import jsonsafe
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

FORMAT_VERSION = 3
"""The newest format version; readers accept versions up to this one, writers use the lowest that fits."""

_BASE_VERSION = 1


def message_to_dict(message: Message) -> dict[str, Any]:
    """The JSON-ready dict of a message (with ``"v"`` and ``"type"``)."""
    out: dict[str, Any] = {"v": _BASE_VERSION, "type": message.type.value}
    if isinstance(message, (SystemMessage, UserMessage)):
        out["text"] = message.text
    if isinstance(message, UserMessage) and message.media:
        out["media"] = [_media_to_dict(m) for m in message.media]
    if isinstance(message, AssistantMessage):
        out["text"] = message.text
        if message.tool_calls:
            out["tool_calls"] = [_call_to_dict(c, out) for c in message.tool_calls]
        if message.reasoning:
            out["v"] = 2
            out["reasoning"] = [_reasoning_to_dict(r) for r in message.reasoning]
        if message.refusal is not None:
            out["v"] = 2
            out["refusal"] = message.refusal
        if message.hosted_tool_calls:
            out["v"] = 3
            out["hosted_tool_calls"] = [_hosted_to_dict(h) for h in message.hosted_tool_calls]
        if message.citations:
            out["v"] = 3
            out["citations"] = [_citation_to_dict(c) for c in message.citations]
    if isinstance(message, ToolResponseMessage):
        out["responses"] = [_response_to_dict(r, out) for r in message.responses]
    if message.metadata:
        try:
            out["metadata"] = _plain(message.metadata, "metadata")
        except RecursionError:  # checked recursively; refuse what could not be read back
            raise ValueError("metadata nests too deeply to store; flatten it") from None
    return out


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Rebuild a message from :func:`message_to_dict` output; ``ValueError`` when malformed."""
    if not isinstance(data, Mapping):
        raise ValueError(f"a stored message must be a JSON object, got {type(data).__name__}")
    version = data.get("v")
    if not isinstance(version, int) or version < 1 or version > FORMAT_VERSION:
        raise ValueError(
            f"unsupported stored message format version {version!r} (this chatclient reads 1..{FORMAT_VERSION}); "
            "upgrade chatclient to read it"
        )
    kind = data.get("type")
    try:
        metadata = _restore(data.get("metadata") or {})
    except RecursionError:  # the restore walks nested metadata recursively
        raise ValueError("a stored message's metadata nests too deeply to read") from None
    try:
        if kind == "system":
            return SystemMessage(data["text"], metadata=metadata)
        if kind == "user":
            media = tuple(_media_from_dict(m) for m in data.get("media", ()))
            return UserMessage(data["text"], media=media, metadata=metadata)
        if kind == "assistant":
            calls = tuple(
                ToolCall(c["id"], c["name"], c["arguments"], metadata=_restore(c.get("metadata") or {}))
                for c in data.get("tool_calls", ())
            )
            reasoning = tuple(_reasoning_from_dict(r) for r in data.get("reasoning", ()))
            refusal = data.get("refusal")
            if refusal is not None and not isinstance(refusal, str):
                raise TypeError("'refusal' must be a string")
            hosted = tuple(_hosted_from_dict(h) for h in data.get("hosted_tool_calls", ()))
            citations = tuple(_citation_from_dict(c) for c in data.get("citations", ()))
            return AssistantMessage(data.get("text"), calls, metadata, reasoning, refusal, hosted, citations)
        if kind == "tool":
            responses = tuple(
                ToolResponse(
                    r["id"],
                    r["name"],
                    r["response_data"],
                    bool(r.get("is_error", False)),
                    tuple(_media_from_dict(m) for m in r.get("media", ())),
                )
                for r in data["responses"]
            )
            return ToolResponseMessage(responses, metadata=metadata)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"a stored {kind} message is malformed: missing or bad field {exc}") from None
    raise ValueError(f"unknown stored message type {kind!r}")


def message_to_json(message: Message) -> str:
    """A compact JSON text of one message."""
    return json.dumps(message_to_dict(message), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def message_from_json(text: str | bytes) -> Message:
    """Parse :func:`message_to_json` output."""
    try:
        data = jsonsafe.loads(text)
    except jsonsafe.JSONDepthError as exc:
        raise ValueError(f"a stored message is not usable: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"a stored message is not valid JSON: {exc}") from None
    return message_from_dict(data)


def messages_to_json(messages: Sequence[Message]) -> str:
    """A JSON array of messages (one document for stores that keep a conversation whole)."""
    return json.dumps(
        [message_to_dict(m) for m in messages], ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


def messages_from_json(text: str | bytes) -> list[Message]:
    """Parse :func:`messages_to_json` output."""
    try:
        data = jsonsafe.loads(text)
    except jsonsafe.JSONDepthError as exc:
        raise ValueError(f"stored messages are not usable: {exc}") from None
    if not isinstance(data, list):
        raise ValueError("stored messages must be a JSON array")
    return [message_from_dict(d) for d in data]


def _call_to_dict(call: ToolCall, out: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": call.arguments}
    if call.metadata:
        out["v"] = 2
        d["metadata"] = _plain(call.metadata, "tool call metadata")
    return d


def _reasoning_to_dict(r: Reasoning) -> dict[str, Any]:
    # Only the fields that are set, so a record stays small and None never turns into "".
    d: dict[str, Any] = {"text": r.text}
    for key in ("signature", "redacted", "provider"):
        value = getattr(r, key)
        if value is not None:
            d[key] = value
    return d


def _reasoning_from_dict(data: Any) -> Reasoning:
    if not isinstance(data, Mapping):
        raise TypeError("a reasoning entry must be an object")
    values: dict[str, Any] = {"text": data.get("text", "")}
    for key in ("signature", "redacted", "provider"):
        values[key] = data.get(key)
    for key, value in values.items():
        if value is not None and not isinstance(value, str):
            raise TypeError(f"reasoning {key!r} must be a string")
    return Reasoning(values["text"] or "", values["signature"], values["redacted"], values["provider"])


def _response_to_dict(r: ToolResponse, out: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"id": r.id, "name": r.name, "response_data": r.response_data, "is_error": r.is_error}
    if r.media:
        out["v"] = 3
        d["media"] = [_media_to_dict(m) for m in r.media]
    return d


def _hosted_to_dict(h: HostedToolCall) -> dict[str, Any]:
    d: dict[str, Any] = {"id": h.id, "name": h.name}
    if h.input:
        d["input"] = _plain(h.input, "hosted tool input")
    if h.output:
        d["output"] = _plain(h.output, "hosted tool output")
    for key in ("status", "provider"):
        value = getattr(h, key)
        if value is not None:
            d[key] = value
    if h.raw:
        d["raw"] = [_plain(item, "hosted tool raw item") for item in h.raw]
    return d


def _hosted_from_dict(data: Any) -> HostedToolCall:
    if not isinstance(data, Mapping):
        raise TypeError("a hosted tool call must be an object")
    raw = data.get("raw", ())
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise TypeError("a hosted tool call's 'raw' must be a list of objects")
    return HostedToolCall(
        str(data["id"]),
        str(data["name"]),
        _restore(data.get("input") or {}),
        _restore(data.get("output") or {}),
        data.get("status"),
        data.get("provider"),
        tuple(_restore(item) for item in raw),
    )


def _citation_to_dict(c: Citation) -> dict[str, Any]:
    fields = (("url", c.url), ("title", c.title), ("cited_text", c.cited_text), ("start", c.start), ("end", c.end))
    return {k: v for k, v in fields if v is not None}


def _citation_from_dict(data: Any) -> Citation:
    if not isinstance(data, Mapping):
        raise TypeError("a citation must be an object")
    return Citation(str(data["url"]), data.get("title"), data.get("cited_text"), data.get("start"), data.get("end"))


def _media_to_dict(media: Media) -> dict[str, Any]:
    if isinstance(media.data, str):
        return {"mime_type": media.mime_type, "url": media.data}
    return {"mime_type": media.mime_type, "base64": base64.b64encode(bytes(media.data)).decode("ascii")}


def _media_from_dict(data: Mapping[str, Any]) -> Media:
    if "url" in data:
        return Media(data["mime_type"], str(data["url"]))
    return Media(data["mime_type"], base64.b64decode(data["base64"], validate=True))


_TUPLE = "__chatclient_tuple__"
_BYTES = "__chatclient_bytes__"


def _plain(value: Any, where: str) -> Any:
    # JSON would silently change some values (tuples become lists, non-string keys become strings);
    # tag tuples and bytes and reject the rest, so stored metadata reads back equal.
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"{where} holds {value!r}, which JSON cannot store")
        return value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where} has a non-string key {k!r}; stored metadata needs string keys")
            out[k] = _plain(v, f"{where}[{k!r}]")
        return out
    if isinstance(value, list):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple):
        return {_TUPLE: [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, (bytes, bytearray)):
        return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    raise ValueError(
        f"{where} holds a {type(value).__name__}, which cannot be stored as JSON; "
        "use strings, numbers, booleans, None, lists, tuples, bytes and dicts with string keys"
    )


def _restore(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            if _TUPLE in value:
                return tuple(_restore(v) for v in value[_TUPLE])
            if _BYTES in value:
                return base64.b64decode(value[_BYTES])
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value
