"""Small helpers for the JSON the providers send and receive, shared by their mapping code.

Each provider module maps chatclient types to its own wire format; the few steps they all take
the same way live here: reading usage counts, merging ``ChatOptions.extra`` into a body, media as
a ``data:`` URL, telling whether streamed tool arguments arrived whole, turning tool arguments and
results into the JSON objects an API wants and a call's input object back into arguments text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from chatclient import jsonsafe
from chatclient.messages import Media, ToolCall

__all__ = [
    "arguments_object",
    "arguments_text",
    "data_url",
    "deep_merge",
    "is_json",
    "json_object",
    "reported_total",
    "usage_count",
]


def usage_count(value: Any) -> int:
    """A token count from a usage object: ``value`` when it is a positive int (not a bool), else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def reported_total(total: Any, prompt: int, completion: int) -> int | None:
    """The provider's total token count when it is an int that differs from ``prompt + completion``,
    else None (``Usage`` then adds the two up)."""
    return total if isinstance(total, int) and not isinstance(total, bool) and total != prompt + completion else None


def data_url(media: Media) -> str:
    """``media`` as a URL: its own when it is a URL, else a base64 ``data:`` URL of its bytes."""
    if isinstance(media.data, str):
        return media.data
    return f"data:{media.mime_type};base64,{base64.b64encode(media.data).decode('ascii')}"


def deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``extra`` into ``base`` in place, nested objects key by key; returns ``base``."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def is_json(text: str) -> bool:
    """Whether ``text`` parses as JSON (an empty text counts as ``{}``): tool arguments that arrived whole."""
    try:
        jsonsafe.loads(text or "{}")
    except ValueError:
        return False
    return True


def arguments_object(call: ToolCall, *, partial_ok: bool = False) -> Any:
    """A tool call's arguments parsed for an API that wants them as JSON (blank -> ``{}``).

    Arguments that are not JSON raise ``ValueError``. With ``partial_ok``, a call flagged
    ``metadata["partial"]`` (cut off by the token limit, so its input never became JSON) gets ``{}``
    instead: the API needs an object, and the tool's error result explains the rest.
    """
    arguments = call.arguments
    if not arguments.strip():
        return {}
    try:
        return jsonsafe.loads(arguments)
    except ValueError:
        if partial_ok and call.metadata.get("partial"):
            return {}
        raise ValueError(f"tool call arguments are not valid JSON: {arguments[:100]!r}") from None


def arguments_text(value: Any) -> str:
    """A tool call's input object as ``ToolCall.arguments`` text (``None`` -> ``"{}"``).

    One serialisation for whole answers and streams, so a streamed call aggregates to the same text.
    """
    return json.dumps(value if value is not None else {}, ensure_ascii=False)


def json_object(data: str) -> dict[str, Any] | None:
    """``data`` parsed when it is a JSON object (a tool result an API takes as structured JSON), else None."""
    try:
        value = jsonsafe.loads(data) if data.strip().startswith("{") else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
