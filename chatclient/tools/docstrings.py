"""Just enough docstring parsing to describe a tool: a summary and per-parameter descriptions.

Understands Google style (``Args:`` with ``name (type): text``), NumPy style (``Parameters`` over a
dashed rule, ``name : type`` then indented text) and reST fields (``:param name: text``).
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

_GOOGLE_PARAM_HEADERS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_GOOGLE_OTHER_HEADERS = {
    "returns",
    "return",
    "yields",
    "raises",
    "examples",
    "example",
    "notes",
    "note",
    "see also",
    "references",
    "attributes",
    "todo",
    "warning",
    "warnings",
}
# ``\s*+`` is possessive: with a plain ``\s*`` the two whitespace runs around the optional
# "(type)" split a long run of spaces every possible way (quadratic on hostile input).
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*+(?:\([^)]*\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?::.*)?$")
_REST_FIELD = re.compile(r"^:\w+")


@dataclass(frozen=True, slots=True)
class ParsedDocstring:
    """A docstring split into its description and parameter descriptions."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_rule(line: str | None) -> bool:
    return line is not None and len(line.strip()) >= 3 and set(line.strip()) == {"-"}


def _join(parts: list[str]) -> str:
    return " ".join(p.strip() for p in parts if p.strip())


def parse_docstring(doc: str | None) -> ParsedDocstring:
    """Parse ``doc``; unknown layouts give the whole text as the description and no parameters."""
    if not doc or not doc.strip():
        return ParsedDocstring()
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    i = 0
    in_description = True
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        if _indent(line) == 0 and _is_numpy_rule(nxt) and stripped:
            # NumPy section: "Parameters" underlined by dashes.
            in_description = False
            i += 2
            body_end = i
            while body_end < len(lines) and not (
                _indent(lines[body_end]) == 0
                and lines[body_end].strip()
                and body_end + 1 < len(lines)
                and _is_numpy_rule(lines[body_end + 1])
            ):
                body_end += 1
            if header in {"parameters", "other parameters", "params"}:
                _numpy_params(lines[i:body_end], params)
            i = body_end
            continue
        if _indent(line) == 0 and stripped.endswith(":") and header in _GOOGLE_PARAM_HEADERS | _GOOGLE_OTHER_HEADERS:
            in_description = False
            i += 1
            body_end = i
            while body_end < len(lines) and (not lines[body_end].strip() or _indent(lines[body_end]) > 0):
                body_end += 1
            if header in _GOOGLE_PARAM_HEADERS:
                _google_params(lines[i:body_end], params)
            i = body_end
            continue
        if _REST_FIELD.match(stripped):
            in_description = False
            m = _rest_param(stripped)
            i += 1
            cont: list[str] = []
            while i < len(lines) and lines[i].strip() and not _REST_FIELD.match(lines[i].strip()):
                cont.append(lines[i])
                i += 1
            if m:
                params[m[0]] = _join([m[1], *cont])
            continue
        if in_description:
            description.append(line)
        i += 1
    paragraphs = "\n".join(description).strip().split("\n\n")
    text = "\n\n".join(_join(p.splitlines()) for p in paragraphs if p.strip())
    return ParsedDocstring(text, params)


def _rest_param(line: str) -> tuple[str, str] | None:
    r"""``(name, description)`` of ``:param [type] name: description``, or None.

    Plain code instead of a regex: the pattern ``:param\s+(?:[^:]*\s)?(\w+)\s*:`` backtracks
    cubically on a long run of spaces. The name is the last word before the first colon, preceded
    by whitespace.
    """
    if not line.startswith(":param") or len(line) < 7 or not line[6].isspace():
        return None
    head, colon, description = line[7:].partition(":")
    if not colon:
        return None
    head = head.rstrip()
    start = len(head)
    while start > 0 and (head[start - 1].isalnum() or head[start - 1] == "_"):
        start -= 1
    if start == len(head) or (start > 0 and not head[start - 1].isspace()):
        return None
    return head[start:], description.lstrip()


def _google_params(body: list[str], out: dict[str, str]) -> None:
    base = min((_indent(b) for b in body if b.strip()), default=0)
    name: str | None = None
    parts: list[str] = []
    for line in body:
        if line.strip() and _indent(line) == base:
            if name:
                out[name] = _join(parts)
            m = _GOOGLE_ENTRY.match(line.strip())
            name, parts = (m.group(1), [m.group(2)]) if m else (None, [])
        elif name:
            parts.append(line)
    if name:
        out[name] = _join(parts)


def _numpy_params(body: list[str], out: dict[str, str]) -> None:
    name: str | None = None
    parts: list[str] = []
    for line in body:
        if line.strip() and _indent(line) == 0:
            if name:
                out[name] = _join(parts)
            # "x, y : int" documents two parameters at once.
            head = line.split(":", 1)[0]
            names = [n.strip().lstrip("*") for n in head.split(",") if n.strip()]
            name = ",".join(names) if names and all(_NUMPY_ENTRY.match(n) for n in names) else None
            parts = []
        elif name:
            parts.append(line)
    if name:
        out[name] = _join(parts)
    for key in [k for k in out if "," in k]:
        text = out.pop(key)
        for n in key.split(","):
            out[n] = text
