"""Parser for the filter language (Spring AI's grammar).

    genre == 'drama' && year >= 2020
    country IN ['UK', 'NL'] OR NOT (isActive == false)
    author IS NOT NULL

Precedence is ``NOT`` > ``AND``/``&&`` > ``OR``/``||``; ``AND`` and ``OR`` are left-associative.
Keywords are case-insensitive. Strings use single or double quotes with backslash escapes; numbers
may carry a sign, a fraction, an exponent and a Java-style ``L`` suffix. A leading ``WHERE`` is
allowed. Errors raise :class:`FilterExpressionError` with the 0-based position of the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from chatclient.errors import FilterExpressionError
from chatclient.rag.filters.ast import MAX_FILTER_DEPTH, Expression, Key, Op, Scalar, Value


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "op", "punct", "str", "num", "word", "eof"
    text: str
    pos: int
    value: Scalar | None = None


_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[lL]?")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_OPS = ("==", "!=", ">=", "<=", "&&", "||", ">", "<")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", "'": "'", '"': '"', "/": "/"}


def _read_string(text: str, start: int) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\":
            if i + 1 >= len(text):
                break
            e = text[i + 1]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                i += 2
                continue
            if e == "u" and _is_hex4(text[i + 2 : i + 6]):
                code = int(text[i + 2 : i + 6], 16)
                i += 6
                if 0xD800 <= code <= 0xDBFF and text[i : i + 2] == "\\u" and _is_hex4(text[i + 2 : i + 6]):
                    low = int(text[i + 2 : i + 6], 16)
                    if 0xDC00 <= low <= 0xDFFF:  # a UTF-16 surrogate pair ("\\ud83d\\ude00") is one character
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        i += 6
                if 0xD800 <= code <= 0xDFFF:
                    # a lone surrogate is no text: SQL drivers and JSON encoders would fail on it later
                    raise FilterExpressionError("A \\u escape names a lone UTF-16 surrogate", i - 6)
                out.append(chr(code))
                continue
            raise FilterExpressionError(f"Invalid escape sequence '\\{e}' in string", i)
        out.append(c)
        i += 1
    raise FilterExpressionError("Unterminated string literal", start)


def _is_hex4(s: str) -> bool:
    return len(s) == 4 and all(c in "0123456789abcdefABCDEF" for c in s)


def _tokenize(text: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(text)
    while i < n:
        m = _SPACE.match(text, i)
        if m:
            i = m.end()
            continue
        c = text[i]
        if c in "'\"":
            s, end = _read_string(text, i)
            toks.append(_Tok("str", text[i:end], i, s))
            i = end
            continue
        op = next((o for o in _OPS if text.startswith(o, i)), None)
        if op is not None:
            toks.append(_Tok("op", op, i))
            i += len(op)
            continue
        if c in "()[],":
            toks.append(_Tok("punct", c, i))
            i += 1
            continue
        m = _NUMBER.match(text, i)
        if m and (c not in "+-" or not toks or toks[-1].kind in ("op", "punct")):
            raw = m.group()
            body = raw.rstrip("lL")
            is_float = any(ch in body for ch in ".eE")
            if raw[-1] in "lL" and is_float:
                raise FilterExpressionError(f"Invalid number {raw!r}", i)
            toks.append(_Tok("num", raw, i, float(body) if is_float else int(body)))
            i = m.end()
            continue
        m = _WORD.match(text, i)
        if m:
            toks.append(_Tok("word", m.group(), i))
            i = m.end()
            continue
        raise FilterExpressionError(f"Unexpected character {c!r}", i)
    toks.append(_Tok("eof", "", n))
    return toks


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokenize(text)
        self.i = 0
        self.nesting = 0  # open parentheses and NOTs: the parser recurses once per level

    # -- token helpers ---------------------------------------------------------------------------
    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def _is_word(self, *words: str) -> bool:
        t = self.tok
        return t.kind == "word" and t.text.lower() in words

    def _peek_word(self, offset: int, word: str) -> bool:
        j = self.i + offset
        return j < len(self.toks) and self.toks[j].kind == "word" and self.toks[j].text.lower() == word

    def _advance(self) -> _Tok:
        t = self.tok
        self.i += 1
        return t

    def _expect_punct(self, p: str, what: str) -> _Tok:
        if self.tok.kind != "punct" or self.tok.text != p:
            raise self._error(f"Expected {what}")
        return self._advance()

    def _error(self, message: str) -> FilterExpressionError:
        t = self.tok
        found = "end of input" if t.kind == "eof" else repr(t.text)
        return FilterExpressionError(f"{message}, found {found}", t.pos)

    # -- grammar ---------------------------------------------------------------------------------
    def parse(self) -> Expression:
        if self._is_word("where"):
            self._advance()
        if self.tok.kind == "eof":
            raise self._error("Expected a filter expression")
        expr = self._or()
        if self.tok.kind != "eof":
            raise self._error("Expected AND, OR or the end of the expression")
        return expr

    def _or(self) -> Expression:
        left = self._and()
        while self._is_word("or") or (self.tok.kind == "op" and self.tok.text == "||"):
            self._advance()
            left = Expression(Op.OR, left, self._and())
        return left

    def _and(self) -> Expression:
        left = self._unary()
        while self._is_word("and") or (self.tok.kind == "op" and self.tok.text == "&&"):
            self._advance()
            left = Expression(Op.AND, left, self._unary())
        return left

    def _unary(self) -> Expression:
        if self._is_word("not") or (self.tok.kind == "punct" and self.tok.text == "("):
            if self.nesting >= MAX_FILTER_DEPTH:
                raise self._error(f"The filter nests deeper than {MAX_FILTER_DEPTH} levels")
            self.nesting += 1
            try:
                if self._is_word("not"):
                    self._advance()
                    return Expression(Op.NOT, self._unary())
                self._advance()
                inner = self._or()
                self._expect_punct(")", "')'")
                return inner
            finally:
                self.nesting -= 1
        return self._comparison()

    def _key(self) -> Key:
        t = self.tok
        if t.kind == "str":
            self._advance()
            assert isinstance(t.value, str)
            if not t.value:
                raise FilterExpressionError("A key cannot be empty", t.pos)
            return Key(t.value)
        if t.kind == "word" and t.text.lower() not in ("and", "or", "not", "in", "nin", "is"):
            self._advance()
            return Key(t.text)
        raise self._error("Expected a metadata key, '(' or NOT")

    def _comparison(self) -> Expression:
        key = self._key()
        t = self.tok
        if t.kind == "op" and t.text in ("==", "!=", ">", ">=", "<", "<="):
            self._advance()
            return Expression(Op(t.text), key, Value(self._constant()))
        if self._is_word("in"):
            self._advance()
            return Expression(Op.IN, key, Value(self._list()))
        if self._is_word("nin"):
            self._advance()
            return Expression(Op.NIN, key, Value(self._list()))
        if self._is_word("not") and self._peek_word(1, "in"):
            self.i += 2
            return Expression(Op.NIN, key, Value(self._list()))
        if self._is_word("is"):
            self._advance()
            negate = self._is_word("not")
            if negate:
                self._advance()
            if not self._is_word("null"):
                raise self._error("Expected NULL")
            self._advance()
            return Expression(Op.IS_NOT_NULL if negate else Op.IS_NULL, key)
        raise self._error("Expected a comparison (==, !=, >, >=, <, <=, IN, NIN, NOT IN, IS NULL, IS NOT NULL)")

    def _constant(self) -> Scalar:
        t = self.tok
        if t.kind in ("str", "num"):
            self._advance()
            assert t.value is not None
            return t.value
        if self._is_word("true", "false"):
            self._advance()
            return t.text.lower() == "true"
        raise self._error("Expected a value (a quoted string, a number, true or false)")

    def _list(self) -> tuple[Scalar, ...]:
        self._expect_punct("[", "'[' to start a list")
        items: list[Scalar] = []
        if self.tok.kind == "punct" and self.tok.text == "]":
            self._advance()
            return ()
        while True:
            items.append(self._constant())
            if self.tok.kind == "punct" and self.tok.text == ",":
                self._advance()
                continue
            self._expect_punct("]", "',' or ']'")
            return tuple(items)


@lru_cache(maxsize=512)
def _parse_cached(text: str) -> Expression:
    return _Parser(text).parse()


def parse(text: str) -> Expression:
    """Parse filter text into an :class:`Expression`; malformed text raises ``FilterExpressionError``.

    >>> from chatclient.rag.filters import F
    >>> parse("genre == 'drama' && year >= 2020") == F.and_(F.eq("genre", "drama"), F.gte("year", 2020))
    True
    """
    if not isinstance(text, str):
        raise TypeError(f"filter text must be a str, got {type(text).__name__}")
    # expressions are immutable, so repeated per-request filters can share one parse
    return _parse_cached(text)


def as_expression(value: Any) -> Expression | None:
    """``None``/blank -> ``None``; text -> parsed; an ``Expression`` -> itself."""
    if value is None:
        return None
    if isinstance(value, Expression):
        return value
    if isinstance(value, str):
        return parse(value) if value.strip() else None
    raise TypeError(f"a filter must be an Expression or filter text, got {type(value).__name__}")
