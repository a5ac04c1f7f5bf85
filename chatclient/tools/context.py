"""``ToolContext``: values the application hands to tools, never shown to the model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from chatclient.messages import Message


class ToolContext(Mapping[str, Any]):
    """A read-only mapping of application values (tenant id, user, session...) passed to tools.

    Declare a parameter annotated ``ToolContext`` on a tool to receive it; such parameters are left
    out of the input schema, so the model never sees nor fills them. ``tool_call_history`` holds
    the conversation up to and including the assistant message that asked for the call.

    The writable part: ``ctx.set(key, value)`` records an update of the request context (for
    example a tool that learns the user's locale). The tool loop merges the updates of a turn into
    the request context and the tool context, so later tool calls, the advisors of later turns and
    the final response's context see them.

    >>> ctx = ToolContext({"tenant": "acme"})
    >>> ctx["tenant"], ctx.get("missing")
    ('acme', None)
    """

    __slots__ = ("_data", "_history", "_updates")

    def __init__(self, context: Mapping[str, Any] | None = None, tool_call_history: tuple[Message, ...] = ()) -> None:
        self._data: Mapping[str, Any] = MappingProxyType(dict(context or {}))
        self._history = tuple(tool_call_history)
        self._updates: dict[str, Any] = {}

    @property
    def context(self) -> Mapping[str, Any]:
        """The values as a read-only mapping (Spring's ``getContext()``)."""
        return self._data

    @property
    def tool_call_history(self) -> tuple[Message, ...]:
        """Messages sent to the model so far, plus the assistant message holding the tool calls."""
        return self._history

    def set(self, key: str, value: Any) -> None:
        """Update the request context with ``key = value`` (seen after this tool turn; see the class docs)."""
        if not isinstance(key, str) or not key:
            raise ValueError(f"context keys must be non-empty strings, got {key!r}")
        if key.startswith("chatclient."):
            raise ValueError(f"{key!r} is reserved for chatclient's own context keys; choose another name")
        self._updates[key] = value

    @property
    def updates(self) -> Mapping[str, Any]:
        """The updates tools made through ``set`` (a read-only view)."""
        return MappingProxyType(self._updates)

    def __getitem__(self, key: str) -> Any:
        if key in self._updates:
            return self._updates[key]
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter({**self._data, **self._updates})

    def __len__(self) -> int:
        return len({**self._data, **self._updates})

    def __repr__(self) -> str:
        return f"ToolContext({dict(self._data)!r})"
