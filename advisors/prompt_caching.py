"""PromptCachingAdvisor: ask the provider to cache the stable prefix of every prompt.

    client = ChatClient.builder(AnthropicChatModel()).default_advisors(PromptCachingAdvisor()).build()

Anthropic caches a prompt prefix only where the request places a ``cache_control`` breakpoint (at
most four per request). This advisor marks, on each model call, the messages that end the stable
parts of the prompt; the Anthropic model turns each mark into a breakpoint on the message's last
content block, and adds one on the last tool definition:

1. the last tool (tools lead the cached prefix and rarely change);
2. the system prompt;
3. the end of the history: the last message before the latest user turn (what the previous
   request cached, read back even when the latest turn added more blocks than the API looks back);
4. the latest message, so that the next request - this prompt plus the answer plus a new turn -
   reads everything up to here from the cache.

The marks move with the conversation: every call (each pass of a tool loop included, since the
advisor runs inside it by default) places them on that call's prompt. The effect shows in the
response usage: ``cache_write_tokens`` on the first call, ``cached_input_tokens`` on later ones.
Providers without explicit breakpoints ignore the marks (they are message metadata, never sent).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from chatclient.advisor import LOWEST_PRECEDENCE, AdvisorChain, BaseAdvisor
from chatclient.messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage, UserMessage
from chatclient.request import ChatClientRequest

__all__ = ["CACHE_CONTROL_KEY", "DEFAULT_PROMPT_CACHING_ORDER", "PromptCachingAdvisor"]

CACHE_CONTROL_KEY = "cache_control"
"""Message metadata key the mark is written under (read by ``chatclient.models.anthropic``)."""

DEFAULT_PROMPT_CACHING_ORDER = LOWEST_PRECEDENCE - 1000
"""Runs after memory, RAG and the tool loop have built the prompt, just before the model."""

_TTLS = ("5m", "1h")


class PromptCachingAdvisor(BaseAdvisor):
    """Marks the stable prefix of each prompt for the provider's prompt cache (Anthropic ``cache_control``).

    ``ttl`` is the cache lifetime Anthropic offers: ``None`` (its default, 5 minutes), ``"5m"`` or
    ``"1h"`` (written to the cache at a higher price). Marks the user placed on messages
    themselves are kept; the model sends at most four breakpoints, dropping the oldest marks.
    """

    def __init__(self, *, ttl: str | None = None, order: int = DEFAULT_PROMPT_CACHING_ORDER) -> None:
        if ttl is not None and ttl not in _TTLS:
            raise ValueError(f"ttl must be one of {_TTLS} (or None for the provider default), got {ttl!r}")
        marker: dict[str, Any] = {"type": "ephemeral"}
        if ttl is not None:
            marker["ttl"] = ttl
        self.marker: Mapping[str, Any] = MappingProxyType(marker)
        self.ttl = ttl
        self.order = order

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "marker": dict(self.marker)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, marker=MappingProxyType(state["marker"]))

    def __repr__(self) -> str:
        return f"PromptCachingAdvisor(ttl={self.ttl!r}, order={self.order})"

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        messages = list(request.prompt.messages)
        targets = breakpoint_positions(messages)
        if not targets:
            return request
        for i in targets:
            messages[i] = _with_marker(messages[i], self.marker)
        return request.mutate(prompt=request.prompt.copy(messages=messages))


def breakpoint_positions(messages: list[Message]) -> list[int]:
    """Indexes of the messages that end the stable parts: last system, end of history, last message."""
    positions: list[int] = []
    systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage) and m.text]
    if systems:
        positions.append(systems[-1])
    conversation = [i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)]
    if not conversation:
        return positions
    last = conversation[-1]
    # The latest user turn is the run of user / tool-result messages at the end; the history ends
    # with the message just before it (normally the previous answer).
    k = len(conversation) - 1
    while k >= 0 and isinstance(messages[conversation[k]], (UserMessage, ToolResponseMessage)):
        k -= 1
    if k >= 0 and isinstance(messages[conversation[k]], AssistantMessage):
        positions.append(conversation[k])
    positions.append(last)
    return sorted(set(positions))


def _with_marker(message: Message, marker: Mapping[str, Any]) -> Message:
    if CACHE_CONTROL_KEY in message.metadata:
        return message  # a mark the user placed wins
    metadata = {**message.metadata, CACHE_CONTROL_KEY: dict(marker)}
    if isinstance(message, SystemMessage):
        return SystemMessage(message.text, metadata=metadata)
    if isinstance(message, UserMessage):
        return UserMessage(message.text, media=message.media, metadata=metadata)
    if isinstance(message, ToolResponseMessage):
        return ToolResponseMessage(message.responses, metadata=metadata)
    return AssistantMessage(
        message.text, message.tool_calls, metadata=metadata, reasoning=message.reasoning, refusal=message.refusal
    )
