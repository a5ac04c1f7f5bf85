"""Removing secrets from texts: the one scrubber behind every error message, log line and span.

Its own light module (no httpx) so that every part of the library can use it: the HTTP layer for
API keys, the memory stores for connection-string passwords. ``Secret`` is the wrapper an object
keeps a key in, so that its ``repr``, ``str`` and ``vars()`` never show it.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[REDACTED]"
_MIN_SECRET = 4  # shorter values are not treated as secrets: scrubbing them would shred every text
_FRAGMENT = 6  # any run of this many consecutive characters of a secret counts as a leak


def _representations(secret: str) -> set[str]:
    """The ways a secret shows up in texts: raw, escaped by repr/JSON/bytes, URL-encoded."""
    forms = {secret, secret.strip()}
    for form in list(forms):
        forms.add(repr(form)[1:-1])
        forms.add(json.dumps(form)[1:-1])
        forms.add(repr(form.encode("utf-8", "surrogatepass"))[2:-1])
        forms.add(quote(form, safe=""))
        forms.add(quote_plus(form, safe=""))
    return {f for f in forms if len(f) >= _MIN_SECRET}


def _scrub_once(text: str, forms: Sequence[str]) -> str:
    hits: list[tuple[int, int]] = []
    for form in forms:
        width = min(len(form), _FRAGMENT)
        for gram in {form[i : i + width] for i in range(len(form) - width + 1)}:
            at = text.find(gram)
            while at >= 0:
                hits.append((at, at + width))
                at = text.find(gram, at + 1)
    if not hits:
        return text
    hits.sort()
    out: list[str] = []
    pos = 0
    start, stop = hits[0]
    for a, b in hits[1:]:
        if a <= stop:  # overlapping or touching fragments are one redaction
            stop = max(stop, b)
            continue
        out += [text[pos:start], REDACTED]
        pos, start, stop = stop, a, b
    out += [text[pos:start], REDACTED, text[stop:]]
    return "".join(out)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """``text`` with every secret removed, whole or in part, in any usual representation.

    Raw, ``repr``/bytes/JSON-escaped and URL-encoded forms are all found, and so is any run of six
    or more consecutive characters of one (a truncated excerpt or a masked echo of a key).
    Secrets shorter than four characters are ignored.

    >>> scrub("bad key sk-123456", ["sk-123456"])
    'bad key [REDACTED]'
    >>> scrub("excerpt ends with sk-123", ["sk-123456"])
    'excerpt ends with [REDACTED]'
    """
    forms = sorted({f for s in secrets if s for f in _representations(s)}, key=len, reverse=True)
    if not forms:
        return text
    for _ in range(3):  # a redaction could join two halves of a fragment; stop once stable
        scrubbed = _scrub_once(text, forms)
        if scrubbed == text:
            break
        text = scrubbed
    return text


class Secret:
    """A secret (an API key, a token, a credentials tuple) that never shows itself.

    ``repr``, ``str`` and ``format`` give ``Secret('…')``; ``reveal()`` returns the value to the
    code that sends it. It pickles with its value (a pickle of an object built with an explicit
    key carries that key, as documented): keep such pickles where you keep the key. Two secrets
    are equal when their values are (compared in constant time for strings).

    >>> key = Secret("sk-123456")
    >>> print(key, [key], f"{key}")
    Secret('…') [Secret('…')] Secret('…')
    >>> key.reveal()
    'sk-123456'
    """

    __slots__ = ("_value",)

    def __init__(self, value: Any) -> None:
        self._value = value.reveal() if isinstance(value, Secret) else value

    def reveal(self) -> Any:
        """The value itself (for the header that sends it; never for a message)."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('…')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        mine, theirs = self._value, other._value
        if isinstance(mine, str) and isinstance(theirs, str):
            return hmac.compare_digest(mine.encode(), theirs.encode())
        return bool(mine == theirs)

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Secret, (self._value,))


def reveal(value: Any) -> Any:
    """``value`` itself, or what it wraps when it is a ``Secret``."""
    return value.reveal() if isinstance(value, Secret) else value


class MaskedMapping(dict[str, Any]):
    """A mapping (request headers, say) whose ``repr`` and ``str`` show the names but never the values."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: '…'" for k in self) + "}"

    __str__ = __repr__


def masked_copy(value: Any) -> Any:
    """``value`` wrapped so that it prints masked: a mapping's values hidden, anything else a ``Secret``."""
    if isinstance(value, Secret | MaskedMapping) or value is None:
        return value
    if isinstance(value, Mapping):
        return MaskedMapping(value)
    return Secret(value)


__all__ = ["REDACTED", "MaskedMapping", "Secret", "masked_copy", "reveal", "scrub"]
