"""Provider stream events chatclient does not map, passed on when someone asked for them.

A stream parser meets events that carry nothing chatclient has a field for: Anthropic's ``ping``,
Responses API events for hosted-tool progress, event types added after this version. By default
they are dropped. Inside ``raw_provider_events()`` (which ``chatclient.listeners.handle_stream``
enters for a handler with ``on_raw_event``) the parser hands each one on as a ``RawEventChunk``: a
chunk with no generations, which aggregates to nothing and which the events stream turns into a
``chatclient.events.RawProviderEvent``. The check costs one context-variable read per unmapped
event, none for the events chatclient maps.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from chatclient.models.base import ChatResponse

_WANTED: contextvars.ContextVar[bool] = contextvars.ContextVar("chatclient_raw_provider_events", default=False)


@contextmanager
def raw_provider_events() -> Iterator[None]:
    """Within this block, model streams pass on the provider events chatclient does not map."""
    token = _WANTED.set(True)
    try:
        yield
    finally:
        _WANTED.reset(token)


def raw_events_wanted() -> bool:
    """Whether the running code is inside ``raw_provider_events()``."""
    return _WANTED.get()


@dataclass(frozen=True, slots=True)
class RawEventChunk(ChatResponse):
    """A stream chunk carrying one unmapped provider event (``provider``, its ``type``, its ``data``)."""

    provider: str = ""
    type: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)


def raw_event_chunks(provider: str, kind: Any, data: Any) -> list[ChatResponse]:
    """``[RawEventChunk]`` for an unmapped event when raw events are wanted, else ``[]``."""
    if not _WANTED.get():
        return []
    payload = MappingProxyType(dict(data)) if isinstance(data, Mapping) else MappingProxyType({"data": data})
    return [RawEventChunk(provider=provider, type=str(kind or ""), data=payload)]
