"""Text normalisation for matching words the way a reader sees them.

Shared by ``advisors.SafeGuardAdvisor`` and the keyword and prompt-injection guardrails of
``chatclient.guardrails``, so a zero-width space or a fullwidth letter fools none of them.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# Default-ignorable code points outside category Cf (which is removed wholesale): they render as
# nothing, so a word split by them looks whole to a reader. Unicode's Default_Ignorable_Code_Point.
_IGNORABLE_RANGES = (
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x115F, 0x1160),  # Hangul choseong/jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors and vowel separator
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # unassigned specials
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tags and variation selectors supplement
)
# Where Unicode (up to 15.1) puts its format characters: the BMP, plane 1, and the tags block of
# plane 14. Scanning only these keeps the one-time table build to a few milliseconds.
_SCAN_RANGES = ((0, 0x20000), (0xE0000, 0xE1000))


@functools.cache
def _invisible_pattern() -> re.Pattern[str]:
    """One character class of everything a reader cannot see (built once, on first use)."""
    codes = {c for lo, hi in _SCAN_RANGES for c in range(lo, hi) if unicodedata.category(chr(c)) == "Cf"}
    for lo, hi in _IGNORABLE_RANGES:
        codes.update(range(lo, hi + 1))
    # Control characters too (a NUL between letters is as invisible as a zero-width space), but not
    # tab and line breaks, which a reader does see as separators.
    codes.update(c for c in (*range(0x20), *range(0x7F, 0xA0)) if chr(c) not in "\t\n\r")
    ranges: list[str] = []
    start = prev = -2
    for code in sorted(codes):
        if code != prev + 1:
            if start >= 0:
                ranges.append(_span(start, prev))
            start = code
        prev = code
    ranges.append(_span(start, prev))
    return re.compile("[" + "".join(ranges) + "]")


def _span(lo: int, hi: int) -> str:
    return re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"


def _strip_invisible(text: str) -> str:
    return _invisible_pattern().sub("", text)


def normalize_for_matching(text: str) -> str:
    """The form ``SafeGuardAdvisor`` compares: what a reader sees, not how it is encoded.

    Invisible and format characters (Unicode category Cf such as zero-width space/joiner, soft
    hyphen, BOM and bidi controls; other default-ignorable code points; control characters other
    than tab and line breaks) are removed, then the text is NFKC-normalised (fullwidth and other
    compatibility forms become their plain letters) and case-folded.

    >>> normalize_for_matching("\\uff30\\uff21ss\\u200bword")  # fullwidth "PA", a zero-width space
    'password'
    """
    if text.isascii():
        # ASCII has no format characters and no compatibility forms: skip the per-character pass.
        return _strip_invisible(text).casefold() if not text.isprintable() else text.casefold()
    cleaned = unicodedata.normalize("NFKC", _strip_invisible(text))
    # Case folding can produce text that is not NFKC again (and NFKC can expose ignorables): repeat.
    return _strip_invisible(unicodedata.normalize("NFKC", cleaned.casefold()))


__all__ = ["normalize_for_matching"]
