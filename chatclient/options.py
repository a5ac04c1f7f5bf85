"""Portable chat options shared by every provider."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Model settings; ``None`` means "use the provider's default".

    ``extra`` is merged into the provider's request body as is, for settings this class does not
    name. ``output_schema`` asks for native structured output (a JSON schema the model must follow).

    Values are checked here: ``temperature >= 0``, ``0 <= top_p <= 1``, ``max_tokens`` and ``top_k``
    positive ints, finite penalties; a wrong type raises ``TypeError``, a value out of range
    ``ValueError`` naming the option. A bare ``stop="END"`` becomes ``("END",)``.
    """

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop: Sequence[str] | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    seed: int | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    output_schema: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        # Checked here, at construction, so a typo fails on the line that made it instead of coming
        # back later as a provider's HTTP 400 (or, worse, being silently accepted by a local model).
        if self.model is not None and (not isinstance(self.model, str) or not self.model.strip()):
            raise ValueError(f"ChatOptions(model=...) must be a non-empty model name, got {self.model!r}")
        _check_number("temperature", self.temperature, low=0.0, hint="use 0 for the most deterministic answers")
        _check_number("top_p", self.top_p, low=0.0, high=1.0, hint="it is a probability mass, e.g. 0.9")
        _check_positive_int("max_tokens", self.max_tokens, hint="the most tokens the answer may have, e.g. 512")
        _check_positive_int("top_k", self.top_k, hint="how many candidate tokens to sample from, e.g. 40")
        _check_number("frequency_penalty", self.frequency_penalty)
        _check_number("presence_penalty", self.presence_penalty)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise TypeError(f"ChatOptions(seed=...) must be an int, got {type(self.seed).__name__}")
        if self.stop is not None:
            if isinstance(self.stop, str):
                # A bare string is one stop sequence; iterating it would make every character a stop.
                object.__setattr__(self, "stop", (self.stop,))
            elif not isinstance(self.stop, Sequence) or not all(isinstance(s, str) and s for s in self.stop):
                raise TypeError(f"ChatOptions(stop=...) must be a list of non-empty strings, got {self.stop!r}")
        if self.tool_choice is not None and not isinstance(self.tool_choice, (str, Mapping)):
            raise TypeError(
                "ChatOptions(tool_choice=...) must be 'auto', 'none', 'required', a tool name or a provider mapping, "
                f"got {type(self.tool_choice).__name__}"
            )
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise TypeError("ChatOptions(parallel_tool_calls=...) must be True or False")
        for name in ("output_schema", "extra"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, Mapping):
                raise TypeError(f"ChatOptions({name}=...) must be a dict, got {type(value).__name__}")

    def merge(self, other: ChatOptions | None) -> ChatOptions:
        """Return a copy where every non-None field of ``other`` wins; ``extra`` dicts merge."""
        if other is None:
            return self
        changes: dict[str, Any] = {}
        for f in fields(other):
            value = getattr(other, f.name)
            if value is None:
                continue
            if f.name == "extra" and self.extra:
                value = {**self.extra, **value}
            changes[f.name] = value
        return replace(self, **changes) if changes else self

    def copy(self, **changes: Any) -> ChatOptions:
        """Return a copy with the given fields replaced."""
        return replace(self, **changes)


def _check_number(
    name: str, value: Any, *, low: float | None = None, high: float | None = None, hint: str = ""
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ChatOptions({name}=...) must be a number, got {type(value).__name__} {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"ChatOptions({name}=...) must be a finite number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"between {low:g} and {high:g}" if low is not None and high is not None else f">= {low:g}"
        raise ValueError(
            f"ChatOptions({name}={value!r}) is out of range: it must be {bounds}" + (f"; {hint}" if hint else "")
        )


def _check_positive_int(name: str, value: Any, *, hint: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"ChatOptions({name}=...) must be an int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(
            f"ChatOptions({name}={value!r}) must be a positive int ({hint}); leave it None for the default"
        )


def merge_options(base: ChatOptions | None, override: ChatOptions | None) -> ChatOptions | None:
    """Merge two optional option sets; ``override`` wins field by field."""
    if base is None:
        return override
    return base.merge(override)
