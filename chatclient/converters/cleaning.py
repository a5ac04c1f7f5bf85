"""Text cleaning applied to model output before it is parsed as JSON.

Models often wrap an otherwise good JSON answer: leading/trailing whitespace, a reasoning block
(``<think>…</think>``) before the answer, a markdown code fence, or a remark after the value. The
cleaners here remove exactly those wrappers and nothing else: JSON embedded in prose ("Here you go:
{...}") is NOT dug out, because guessing where JSON starts inside prose silently accepts answers
the model was told not to give (the validation advisor re-asks instead).

Every function is cheap on already-clean text (a strip and a couple of ``startswith``), so the
common path stays at the cost of the JSON parser itself.
"""

from __future__ import annotations

import json
import re

from chatclient.jsonsafe import MAX_JSON_DEPTH

# Reasoning blocks some models emit before the answer. Only LEADING blocks are removed: a JSON
# string value that happens to contain "<think>" must survive untouched.
_THINKING = re.compile(
    r"\A\s*(?:<(think|thinking|reasoning)\b[^>]*>.*?</\1\s*>\s*"
    r"|<!--\s*thinking:.*?-->\s*"
    r"|```thinking\b.*?```\s*)+",
    re.IGNORECASE | re.DOTALL,
)

_FENCE = "```"
_TAG_CHARS = "+-._"
_DECODER = json.JSONDecoder()


def strip_thinking(text: str) -> str:
    """Remove leading ``<think>``/``<thinking>``/``<reasoning>`` blocks (and their surrounding space)."""
    stripped = text.lstrip()
    if not stripped.startswith(("<", "`")):
        return stripped
    match = _THINKING.match(stripped)
    return stripped[match.end() :] if match else stripped


def strip_code_fence(text: str) -> str:
    """Remove a markdown code fence around the text, with or without a language tag.

    Only a fence that opens the (stripped) text counts; the closing fence is removed when it ends
    the text. Anything after an inner closing fence is left for ``first_json_value`` to drop.
    """
    if not text.startswith(_FENCE):
        return text
    rest = text[3:]
    end = 0
    while end < len(rest) and (rest[end].isalnum() or rest[end] in _TAG_CHARS):
        end += 1
    # A language tag is a word right after the backticks and followed by whitespace ("```json\n",
    # "```json {"); a word glued to more text ("```true```") is the content itself.
    body = rest[end:] if end == 0 or rest[end : end + 1].isspace() else rest
    body = body.rstrip()
    if body.endswith(_FENCE):
        body = body[:-3]
    return body.strip()


def clean_text(text: str) -> str:
    """Whitespace, leading reasoning blocks and a surrounding code fence removed."""
    cleaned = strip_thinking(text).rstrip()
    if cleaned.startswith(_FENCE):
        cleaned = strip_code_fence(cleaned)
    return cleaned


def first_json_value(text: str) -> str | None:
    """The text of the first complete JSON value at the start of ``text``, or None if there is none.

    Used only after a direct parse failed, to tolerate remarks after the value (``{...}, thanks``).
    """
    if too_deep(text):
        return None  # the stdlib decoder would recurse past the interpreter's limit
    try:
        _, end = _DECODER.raw_decode(text)
    except (ValueError, RecursionError):  # RecursionError: a lower interpreter limit than ours
        return None
    return text[:end]


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when ``text`` opens more than ``limit`` JSON brackets at once (brackets in strings do not count).

    One linear pass, no recursion; used before handing model output to recursive parsers.
    """
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
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
        elif ch == "[" or ch == "{":
            depth += 1
            if depth > limit:
                return True
        elif ch == "]" or ch == "}":
            depth -= 1
    return False


__all__ = ["clean_text", "first_json_value", "strip_code_fence", "strip_thinking", "too_deep"]
