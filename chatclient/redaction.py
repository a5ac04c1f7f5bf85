"""Removing secrets from texts: the one scrubber behind every error message, log line and span.

Its own light module (no httpx) so that every part of the library can use it: the HTTP layer for
API keys, the memory stores for connection-string passwords.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
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


__all__ = ["REDACTED", "scrub"]
