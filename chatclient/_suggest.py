"""Errors for a mistyped or guessed method name that say which name was meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


def closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to ``name`` (a typo, or a name from another framework), best first."""
    names = sorted({c for c in candidates if not c.startswith("_")})
    lowered = name.lower()
    found = difflib.get_close_matches(lowered, names, n=n, cutoff=0.8)
    if not found:  # "system" on the builder means "default_system"
        found = [c for c in names if c.endswith("_" + lowered) or c.startswith(lowered)]
    if not found:
        found = difflib.get_close_matches(lowered, names, n=n, cutoff=0.6)
    return found[:n]


def no_such_attribute(owner: object, name: str, hints: Mapping[str, str] | None = None) -> AttributeError:
    """An ``AttributeError`` naming the closest public names of ``owner``'s type and, if known, what to do."""
    kind = type(owner).__name__
    hints = hints or {}
    advice = hints.get(name)
    if advice is None and name not in dir(type(owner)):
        typo_of = difflib.get_close_matches(name, list(hints), n=1, cutoff=0.8)
        if typo_of:
            advice = f"did you mean {typo_of[0]!r}? {hints[typo_of[0]]}"
    message = f"{kind} has no attribute {name!r}"
    if advice:
        return AttributeError(f"{message}: {advice}")
    near = closest(name, dir(type(owner)))
    if near:
        listed = ", ".join(f"{n}()" if callable(getattr(type(owner), n, None)) else n for n in near)
        return AttributeError(f"{message}; did you mean {listed}?")
    public = ", ".join(n for n in sorted(dir(type(owner))) if not n.startswith("_"))
    return AttributeError(f"{message}; it has: {public}")


__all__ = ["closest", "no_such_attribute"]
