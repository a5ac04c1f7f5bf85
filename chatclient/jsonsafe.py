"""JSON parsing that cannot be driven into a ``RecursionError`` by hostile input.

CPython's ``json`` module recurses once per nesting level, so ``"[" * 100_000`` raises a bare
``RecursionError``. Everything that parses text from outside (model output, HTTP bodies, SSE events,
tool arguments, stored memory records) goes through :func:`loads`, which turns that into
:class:`JSONDepthError` (a ``ValueError``, like ``json.JSONDecodeError``) so each caller can map it to
its own typed error.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "JSONDepthError", "loads"]

MAX_JSON_DEPTH = 512
"""Nesting levels accepted by :func:`loads`; real payloads stay far below this."""


class JSONDepthError(ValueError):
    """The JSON text nests deeper than the parser accepts."""


def _max_depth(text: str | bytes, limit: int) -> bool:
    """True if ``text`` opens more than ``limit`` brackets at once (strings are skipped)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    # Cheap pre-check: a text with fewer brackets than the limit cannot nest deeper than it.
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = False
    escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def loads(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` with a nesting bound: deeper input raises :class:`JSONDepthError`."""
    if _max_depth(text, max_depth):
        raise JSONDepthError(f"JSON nests deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except RecursionError:  # a lower interpreter limit than ours; still the caller's typed error
        raise JSONDepthError(f"JSON nests too deeply to parse (limit {max_depth})") from None
