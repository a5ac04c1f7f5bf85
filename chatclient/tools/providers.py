"""Asking tool providers for their tools, with the request they are asked for.

A ``ToolCallbackProvider`` whose ``tool_callbacks`` method accepts a ``request`` keyword receives a
``ToolProviderRequest``: the conversation so far (the user's message, the tool exchange of earlier
turns), the request context and the tool context. It can then offer tools that fit the request —
tools for the user's tenant, tools that appear after a skill was activated (LangChain4j's
``ToolProvider`` / ``ToolProviderRequest``). Providers whose method takes no ``request`` keep working.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from chatclient.messages import Message, UserMessage
from chatclient.request import ContextKeys
from chatclient.tools.callback import ToolCallback, ToolCallbackProvider, is_tool_callback


@dataclass(frozen=True, slots=True)
class ToolProviderRequest:
    """What a request-aware provider is asked with: ``messages`` (the conversation so far, tool
    exchanges of this request included), the request ``context`` and the ``tool_context`` values.

    >>> ToolProviderRequest((UserMessage("hi"),)).user_text
    'hi'
    """

    messages: tuple[Message, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    tool_context: Mapping[str, Any] = field(default_factory=dict)

    @property
    def user_message(self) -> UserMessage | None:
        """The last user message, if any."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                return message
        return None

    @property
    def user_text(self) -> str | None:
        """The text of the last user message, if any."""
        message = self.user_message
        return message.text if message is not None else None

    @property
    def conversation_id(self) -> str | None:
        """The memory's conversation id (LangChain4j's ``memoryId``), when the request has one."""
        value = self.context.get(ContextKeys.CONVERSATION_ID)
        return value if isinstance(value, str) else None


_PARAMETERS: dict[Any, frozenset[str]] = {}  # function -> parameter names (inspect.signature costs ~15 us)
_MAX_CACHED = 1024


def _accepts(method: Any, name: str) -> bool:
    function = getattr(method, "__func__", method)  # a bound method's function is one object per class
    names = _PARAMETERS.get(function)
    if names is None:
        try:
            names = frozenset(inspect.signature(method).parameters)
        except (TypeError, ValueError):
            names = frozenset()
        if len(_PARAMETERS) < _MAX_CACHED:
            _PARAMETERS[function] = names
    return name in names


def is_request_aware(provider: ToolCallbackProvider) -> bool:
    """Whether ``provider.tool_callbacks`` takes a ``request`` keyword."""
    return _accepts(provider.tool_callbacks, "request")


def provider_callbacks(
    provider: ToolCallbackProvider, taken: set[str], request: ToolProviderRequest | None
) -> tuple[ToolCallback, ...]:
    """Ask ``provider`` for its tools, passing ``reserved`` names and the ``request`` when it takes them."""
    method = provider.tool_callbacks
    kwargs: dict[str, Any] = {}
    if _accepts(method, "reserved"):
        kwargs["reserved"] = frozenset(taken)
    if request is not None and _accepts(method, "request"):
        kwargs["request"] = request
    callbacks = method(**kwargs)
    if callbacks is None:
        return ()  # "no tools for this request" (LangChain4j's provider may answer null)
    out = tuple(callbacks)
    for cb in out:
        if not is_tool_callback(cb):
            raise TypeError(f"{type(provider).__name__}.tool_callbacks() returned {cb!r}, which is not a ToolCallback")
    return out
