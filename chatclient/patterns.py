"""Regular expressions that users supply, run on Google's RE2: time linear in the text, whatever it holds.

Python's ``re`` backtracks: ``(a+)+b`` on a long run of ``a`` takes exponential time, and a text
from a model, a document or a user decides how long. Every place that runs a pattern given as a
string (dataset ``regex`` checks and ``RegexEvaluator``, ``KeywordGuardrail(patterns=...)``,
``PromptInjectionGuardrail(patterns=...)``, a retrieval route's ``when``) compiles it here, on RE2
(the ``google-re2`` package: the engine Go's ``regexp`` is modelled on, linear by construction).

The syntax is Python's for everything RE2 has: classes, groups (``(?P<name>...)`` too), greedy and
lazy repeats up to ``{1000}``, anchors ``^ $ \\A \\z \\b \\B``, inline flags ``(?i)(?s)(?m)``.
Backreferences and lookaround have no linear-time algorithm and are refused with a ``ValueError``
that says so. Differences worth knowing: ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII (use
``\\pN``, ``\\pL`` or ``[[:alpha:]]``-style classes for other scripts) and the end of the text is
``\\z`` (Python's ``\\Z``).

>>> LinearPattern(r"\\bord(er)?\\b", re.IGNORECASE).search("Advisors run in ORDER.")
(16, 21)
"""

from __future__ import annotations

import re
from typing import Any

MAX_PATTERN_CHARS = 4_000
"""Longest pattern accepted (a pattern is configuration, not data)."""

IGNORECASE = re.IGNORECASE
DOTALL = re.DOTALL
MULTILINE = re.MULTILINE
_FLAGS = IGNORECASE | DOTALL | MULTILINE | re.UNICODE
_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _re2() -> Any:
    try:
        import re2  # type: ignore[import-not-found, import-untyped, unused-ignore]  # google-re2 ships no hints
    except ImportError:  # pragma: no cover - a core dependency
        raise ImportError("running user-supplied patterns needs google-re2: pip install google-re2") from None
    return re2


def _explain(pattern: str, reason: str) -> str:
    if any(op in reason for op in _LOOKAROUND):
        return (
            f"pattern {pattern!r} uses lookaround ({reason}): it cannot run in linear time, so it is not "
            "supported; match the surrounding text instead"
        )
    if "invalid escape sequence: \\" in reason and reason.rstrip()[-1:].isdigit():
        return (
            f"pattern {pattern!r} uses a backreference ({reason}): it cannot run in linear time, so it is not "
            "supported; repeat the group's pattern instead"
        )
    if reason.endswith("\\Z"):
        return f"pattern {pattern!r}: write \\z for the end of the text (Python's \\Z)"
    return f"pattern {pattern!r} is not a valid regular expression: {reason}"


class LinearPattern:
    """A pattern compiled on RE2, whose ``search`` / ``fullmatch`` take time linear in the text.

    ``flags`` takes ``re.IGNORECASE``, ``re.DOTALL`` and ``re.MULTILINE`` (others raise
    ``ValueError``). Instances pickle (the pattern is compiled again where they are unpickled).
    """

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("pattern must be a non-empty string")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise ValueError(f"pattern is longer than {MAX_PATTERN_CHARS} characters; use a shorter pattern")
        flags = int(flags)
        if flags & ~_FLAGS:
            raise ValueError("LinearPattern takes only the flags re.IGNORECASE, re.DOTALL and re.MULTILINE")
        re2 = _re2()
        options = re2.Options()
        options.log_errors = False  # RE2 would print every refused pattern to stderr
        options.case_sensitive = not flags & re.IGNORECASE
        options.dot_nl = bool(flags & re.DOTALL)
        source = f"(?m){pattern}" if flags & re.MULTILINE else pattern
        try:
            self._compiled = re2.compile(source, options)
        except re2.error as exc:
            reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise ValueError(_explain(pattern, reason)) from None
        self.pattern = pattern
        self.flags = flags

    def search(self, text: str) -> tuple[int, int] | None:
        """The span of the leftmost match (Python's choice among alternatives), or ``None``."""
        found = self._compiled.search(text)
        return None if found is None else (found.start(), found.end())

    def fullmatch(self, text: str) -> bool:
        """True when the whole text matches."""
        return self._compiled.fullmatch(text) is not None

    def __reduce__(self) -> tuple[Any, ...]:
        return (LinearPattern, (self.pattern, self.flags))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinearPattern) and (self.pattern, self.flags) == (other.pattern, other.flags)

    def __hash__(self) -> int:
        return hash((self.pattern, self.flags))

    def __repr__(self) -> str:
        return f"LinearPattern({self.pattern!r}, flags={self.flags})"


__all__ = ["DOTALL", "IGNORECASE", "MAX_PATTERN_CHARS", "MULTILINE", "LinearPattern"]
