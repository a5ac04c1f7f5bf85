"""Portable chat options shared by every provider."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass(frozen=True, slots=True)
class ChatOptions:
    """Model settings; ``None`` means "use the provider's default".

    ``extra`` is merged into the provider's request body as is, for settings this class does not
    name. ``output_schema`` asks for native structured output (a JSON schema the model must follow).
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


def merge_options(base: ChatOptions | None, override: ChatOptions | None) -> ChatOptions | None:
    """Merge two optional option sets; ``override`` wins field by field."""
    if base is None:
        return override
    return base.merge(override)
