"""An incremental JSON parser for streamed answers: each character is read once.

``stream().entity(T)`` used to re-parse the whole text after every delta (quadratic: ~35 s of CPU
for a 100 KB answer). ``IncrementalJSON`` keeps its state between deltas instead: a stack of the
containers still open, the values already complete inside them, and the token being read. Its
``view()`` is the same value pydantic-core's tolerant parser gives for the text so far
(``from_json(text, allow_partial="trailing-strings")``) for every prefix of valid JSON:

- an unfinished string counts as far as it goes (an escape still arriving is left out);
- an unfinished key, a key without its value, an unfinished literal (``tru``) are left out;
- anything after a complete top-level value is ignored.

The parser only understands prefixes of valid JSON. On anything else (a syntax error, ``NaN``, a
lone surrogate, nesting deeper than ``MAX_DEPTH``) it stops and reports ``failed``: the caller then
falls back to the re-parsing path, which reproduces the tolerant parser's answers for invalid text
too. Valid answers, the common case, stay linear.

``build(tp, node)`` shapes the view into a target type like ``build_partial`` does, but caches the
shaped form of every value that is complete, so each delta costs only the open path (the
containers from the root to the token being read), not the whole object. Partial states therefore
share their completed parts with the states before them: treat them as read-only.
"""

from __future__ import annotations

import re
from typing import Any

# Nesting beyond this falls back to the re-parsing path (which bounds depth itself).
MAX_DEPTH = 200

_WS = " \t\n\r"
# The plain run of a JSON string: anything but a quote, a backslash or a control character. A single
# character class repeated once, so matching is linear in the run.
_STRING_RUN = re.compile(r'[^"\\\x00-\x1f]*')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_LITERALS = {"t": ("true", True), "f": ("false", False), "n": ("null", None)}
_NUMBER_START = frozenset("-0123456789")
_NUMBER_CHARS = frozenset("0123456789.eE+-")
_HEX = frozenset("0123456789abcdefABCDEF")

# Frame states
_VALUE = 0  # expecting a value (list item, dict value, the root)
_KEY = 1  # expecting a key after ","
_KEY_FIRST = 5  # just after "{": a key or "}"
_COLON = 2  # a key is complete, expecting ":"
_COMMA = 3  # a value is complete, expecting "," or the closing bracket
_FIRST = 4  # just after "[": a value or "]"


class Failed(Exception):
    """The text is not a prefix of valid JSON (or uses something this parser leaves to the fallback)."""


class PartialString:
    """A string still arriving: its decoded text so far."""

    __slots__ = ("parts", "pending")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.pending = ""  # an escape sequence not complete yet ("\\", "\\u00", a high surrogate)

    @property
    def text(self) -> str:
        if len(self.parts) > 1:
            self.parts[:] = ["".join(self.parts)]
        return self.parts[0] if self.parts else ""


class Frame:
    """An open container: the complete children so far, and the child being read."""

    __slots__ = ("cache", "child", "container", "is_dict", "key", "state")

    def __init__(self, is_dict: bool) -> None:
        self.is_dict = is_dict
        self.container: Any = {} if is_dict else []
        self.state = _KEY_FIRST if is_dict else _FIRST
        self.key: str | None = None  # dict: the complete key whose value is being read
        self.child: Frame | PartialString | None = None  # the open child (container or string)
        # target type -> the shaped complete children (a list, or the reader's record of an object's
        # members); emptied when a repeated key replaces a value
        self.cache: dict[Any, Any] = {}


class IncrementalJSON:
    """Feed text in pieces with ``feed``; ``view_node()`` is the value so far (see the module docstring)."""

    def __init__(self) -> None:
        self.stack: list[Frame] = []
        self.root: Any = _NONE
        self.root_node: Frame | PartialString | None = None
        self.done = False  # the top-level value is complete: the rest is ignored
        self.failed = False
        self._string: PartialString | None = None
        self._string_is_key = False
        self._token = ""  # a number or literal being read
        self._token_kind = ""  # "number" | "literal" | ""
        # Counts the changes of the view: a reader that saw the same count before has nothing new
        # to shape (a delta inside a key, whitespace, an escape still arriving).
        self.changes = 0

    # -- reading --------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        if self.failed or self.done:
            return
        try:
            self._feed(text)
        except Failed:
            self.failed = True
        except (ValueError, OverflowError):  # int()/float() on an odd number token
            self.failed = True

    def _feed(self, text: str) -> None:
        i = 0
        n = len(text)
        while i < n and not self.done:
            if self._string is not None:
                i = self._read_string(text, i)
                continue
            ch = text[i]
            if self._token_kind:
                if self._token_kind == "number" and ch in _NUMBER_CHARS:
                    self._token += ch
                    i += 1
                    continue
                if self._token_kind == "literal":
                    word, value = _LITERALS[self._token[0]]
                    if len(self._token) < len(word):
                        if ch != word[len(self._token)]:
                            raise Failed
                        self._token += ch
                        i += 1
                        if self._token == word:
                            self._token_kind = ""
                            self._token = ""
                            self._complete(value)
                        continue
                self._finish_number()
                continue  # re-read ch as a structural character
            i += 1
            if ch in _WS:
                continue
            self._structural(ch)

    def _structural(self, ch: str) -> None:
        frame = self.stack[-1] if self.stack else None
        state = frame.state if frame is not None else _VALUE  # the root: once complete, nothing more is read
        if state in (_VALUE, _FIRST):
            if state == _FIRST and ch == "]":
                self._close()
                return
            self._start_value(ch)
            return
        assert frame is not None
        if state in (_KEY, _KEY_FIRST):
            if ch == '"':
                self._string = PartialString()
                self._string_is_key = True
                return
            if ch == "}" and state == _KEY_FIRST:
                self._close()
                return
            raise Failed  # a trailing comma, or a key that is not a string
        if state == _COLON:
            if ch != ":":
                raise Failed
            frame.state = _VALUE
            return
        # _COMMA
        if ch == ",":
            frame.state = _KEY if frame.is_dict else _VALUE
            return
        if (ch == "}" and frame.is_dict) or (ch == "]" and not frame.is_dict):
            self._close()
            return
        raise Failed

    def _start_value(self, ch: str) -> None:
        if ch == "{" or ch == "[":
            if len(self.stack) >= MAX_DEPTH:
                raise Failed
            child = Frame(ch == "{")
            self._attach(child)
            self.stack.append(child)
        elif ch == '"':
            self._string = PartialString()
            self._string_is_key = False
            self._attach(self._string)
        elif ch in _NUMBER_START:
            self._token_kind = "number"
            self._token = ch
        elif ch in _LITERALS:
            self._token_kind = "literal"
            self._token = ch
        else:
            raise Failed  # NaN, Infinity, a stray character: the fallback knows what to do

    def _attach(self, node: Frame | PartialString) -> None:
        self.changes += 1
        if self.stack:
            self.stack[-1].child = node
        else:
            self.root_node = node

    def _read_string(self, text: str, i: int) -> int:
        s = self._string
        assert s is not None
        n = len(text)
        while i < n:
            if s.pending:
                i = self._read_escape(s, text, i)
                if s.pending:
                    return i
                continue
            end = _STRING_RUN.match(text, i).end()  # type: ignore[union-attr]
            if end > i:
                s.parts.append(text[i:end])
                if not self._string_is_key:
                    self.changes += 1
                i = end
            if i >= n:
                return i
            ch = text[i]
            i += 1
            if ch == '"':
                self._end_string()
                return i
            if ch == "\\":
                s.pending = "\\"
                continue
            raise Failed  # a control character inside a string
        return i

    def _read_escape(self, s: PartialString, text: str, i: int) -> int:
        n = len(text)
        while i < n and s.pending:
            ch = text[i]
            p = s.pending
            if p == "\\":
                i += 1
                if ch == "u":
                    s.pending = "\\u"
                elif ch in _ESCAPES:
                    s.parts.append(_ESCAPES[ch])
                    s.pending = ""
                    self.changes += 1
                else:
                    raise Failed
                continue
            # inside \uXXXX, possibly after a high surrogate "\\uD83D" waiting for its pair
            if len(p) < 6 or (len(p) >= 8 and len(p) < 12):
                if ch not in _HEX:
                    raise Failed
                s.pending = p + ch
                i += 1
                if len(s.pending) == 6:
                    code = int(s.pending[2:], 16)
                    if 0xD800 <= code <= 0xDBFF:
                        continue  # wait for the low surrogate
                    if 0xDC00 <= code <= 0xDFFF:
                        raise Failed  # a lone low surrogate
                    s.parts.append(chr(code))
                    s.pending = ""
                    self.changes += 1
                elif len(s.pending) == 12:
                    high = int(s.pending[2:6], 16)
                    low = int(s.pending[8:], 16)
                    if not 0xDC00 <= low <= 0xDFFF:
                        raise Failed
                    s.parts.append(chr(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)))
                    s.pending = ""
                    self.changes += 1
                continue
            # after a high surrogate: the next escape must be "\\u"
            expected = "\\u"[len(p) - 6]
            if ch != expected:
                raise Failed
            s.pending = p + ch
            i += 1
        return i

    def _end_string(self) -> None:
        s = self._string
        assert s is not None
        self._string = None
        value = s.text
        if self._string_is_key:
            frame = self.stack[-1]
            frame.key = value
            frame.state = _COLON
            return
        self._complete(value)

    def _finish_number(self) -> None:
        token = self._token
        self._token = ""
        self._token_kind = ""
        if _is_int(token):
            self._complete(int(token))
        else:
            if not _is_float(token):
                raise Failed
            self._complete(float(token))

    def _close(self) -> None:
        frame = self.stack.pop()
        self._complete(frame.container)

    def _complete(self, value: Any) -> None:
        """A value is complete: store it in its container (or as the root)."""
        self.changes += 1
        if not self.stack:
            self.root = value
            self.root_node = None
            self.done = True
            return
        frame = self.stack[-1]
        frame.child = None
        if frame.is_dict:
            key = frame.key
            assert key is not None
            container = frame.container
            if key in container:  # a repeated key replaces a value a reader may have shaped already
                frame.cache.clear()
            container[key] = value
            frame.key = None
        else:
            frame.container.append(value)
        frame.state = _COMMA

    # -- the value so far -----------------------------------------------------------------------

    def ends_in_token(self) -> bool:
        """True while a number or literal is being read (the view leaves it out or is not ready)."""
        return bool(self._token_kind)

    def view_node(self) -> Any:
        """The root as a node: a complete value, an open ``Frame``, a ``PartialString``, or ``_NONE``."""
        if self.done:
            return self.root
        if self.root_node is not None:
            return self.root_node
        return _NONE


_NONE: Any = object()


def _is_int(token: str) -> bool:
    body = token[1:] if token.startswith("-") else token
    if not body.isdigit() or not body.isascii():
        return False
    return body == "0" or not body.startswith("0")


def _is_float(token: str) -> bool:
    body = token[1:] if token.startswith("-") else token
    mantissa, _, exponent = body.replace("E", "e").partition("e")
    whole, dot, fraction = mantissa.partition(".")
    if not whole.isdigit() or not whole.isascii() or (len(whole) > 1 and whole.startswith("0")):
        return False
    if dot and (not fraction.isdigit() or not fraction.isascii()):
        return False
    if "e" in body.replace("E", "e"):
        digits = exponent[1:] if exponent[:1] in ("+", "-") else exponent
        if not digits.isdigit() or not digits.isascii():
            return False
    return True
