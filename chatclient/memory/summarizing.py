"""``SummarizingChatMemory``: when a conversation outgrows its window, older messages become a summary.

    from chatclient.memory import SummarizingChatMemory
    memory = SummarizingChatMemory(ChatClient.create(cheap_model), max_messages=20, keep_last=6)
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()

Unlike a window, nothing is simply forgotten: the messages that leave the window are folded into
one summary, kept as a system message right after the conversation's own system messages.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chatclient._pickling import PicklesWithoutLocks
from chatclient.memory.base import (
    ChatMemoryRepository,
    apply_update,
    check_conversation_id,
    check_messages,
)
from chatclient.memory.in_memory import InMemoryChatMemoryRepository
from chatclient.memory.window import DEFAULT_MAX_MESSAGES, evict, first_intact_unit, merge_messages, tool_units
from chatclient.messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage

if TYPE_CHECKING:
    from chatclient.models.base import Usage
    from chatclient.rag._llm import PromptingClient, PromptingClientBuilder

log = logging.getLogger(__name__)

SUMMARY_METADATA_KEY = "chatclient_summary"
"""Metadata flag (``True``) that marks the summary message among a conversation's system messages."""

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"

SUMMARY_TEMPLATE = """\
You keep the memory of a conversation between a user and an assistant. Write a concise summary
that preserves every fact, name, number, decision, open question and user preference that later
turns may need. Write it in the third person ("The user asked..."), as plain prose or short bullet
points, and reply with the summary only.
{% if previous_summary %}
Summary so far:
{{ previous_summary }}
{% endif %}
Messages to fold into the summary:
{{ transcript }}"""


@dataclass(frozen=True)
class SummaryEvent:
    """Reported to ``on_summary`` after each summarisation: which conversation, what, at what cost."""

    conversation_id: str
    summary: SystemMessage
    summarized_messages: int
    usage: Usage | None


def is_summary(message: Message) -> bool:
    """Whether ``message`` is a summary written by :class:`SummarizingChatMemory`."""
    return isinstance(message, SystemMessage) and bool(message.metadata.get(SUMMARY_METADATA_KEY))


def _parts(messages: Sequence[Message]) -> tuple[list[Message], SystemMessage | None, list[Message]]:
    """(own system messages, the summary or None, the rest) of a stored conversation."""
    systems: list[Message] = []
    summary: SystemMessage | None = None
    rest: list[Message] = []
    for m in messages:
        if is_summary(m):
            summary = m  # type: ignore[assignment]
        elif isinstance(m, SystemMessage):
            systems.append(m)
        else:
            rest.append(m)
    return systems, summary, rest


def _assemble(systems: Sequence[Message], summary: SystemMessage | None, rest: Sequence[Message]) -> list[Message]:
    return [*systems, *([summary] if summary is not None else []), *rest]


def _drop_broken_start(rest: list[Message]) -> list[Message]:
    """Drop a leading tool response without its call (or a finished call missing responses), as windows do."""
    units = tool_units(rest)
    k = first_intact_unit(rest, units, 0)
    return rest if k == 0 else rest[units[k][0] :] if k < len(units) else []


def _line(m: Message, limit: int) -> str:
    if isinstance(m, AssistantMessage) and m.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments[:200]})" for c in m.tool_calls)
        text = ((m.text or "") + f" [called tools: {calls}]").strip()
    elif isinstance(m, ToolResponseMessage):
        text = "; ".join(f"{r.name} returned {r.response_data[:300]}" for r in m.responses)
    else:
        text = m.text or ""
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[:limit] + "…"
    return f"{m.type.value}: {text}"


class SummarizingChatMemory(PicklesWithoutLocks):
    """A chat memory that summarises old messages instead of dropping them.

    While a conversation has at most ``max_messages`` messages (not counting system messages and
    the summary) it is stored as is. When an ``add`` takes it over, everything but the newest
    ``keep_last`` messages is summarised by ``chat_client`` (together with the previous summary)
    into ONE system message, flagged with metadata ``chatclient_summary``, placed right after
    the conversation's own system messages; the newest messages stay verbatim. An assistant
    tool-call message and its tool responses are never split: the cut moves earlier, keeping the
    whole exchange verbatim.

    The summary is stored with the messages in ``repository`` (any chat memory repository, so
    it survives restarts when the repository does). The summarising call's token usage is added to
    ``usage``, written into the summary's metadata (``summary_usage``) and reported, with the
    summary, to ``on_summary(SummaryEvent)``.

    As in the windows, a tool response whose call is not stored (or a finished tool call missing
    its responses) is dropped when it would start the verbatim messages: providers reject it.

    Use a client without memory advisors for summarising. If the call fails, the messages are
    kept unsummarised (a warning is logged) and the next ``add`` tries again; past
    ``2 * max_messages`` the oldest messages are evicted as in a window so memory stays bounded.
    The input to the model is bounded too: each message is cut to ``max_message_chars`` and the
    transcript to ``max_input_chars`` (newest kept), the summary to ``max_summary_chars``.
    """

    def __init__(
        self,
        chat_client: PromptingClient | PromptingClientBuilder,
        *,
        max_messages: int = DEFAULT_MAX_MESSAGES,
        keep_last: int = 6,
        repository: ChatMemoryRepository | None = None,
        template: str | None = None,
        on_summary: Callable[[SummaryEvent], None] | None = None,
        max_message_chars: int = 2_000,
        max_input_chars: int = 24_000,
        max_summary_chars: int = 8_000,
    ) -> None:
        from chatclient.rag._llm import as_client, check_template

        if chat_client is None:
            raise ValueError("chat_client cannot be None")
        for name, value in (("max_messages", max_messages), ("keep_last", keep_last)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{name} must be an int")
        if max_messages <= 0:
            raise ValueError("max_messages must be greater than 0")
        if not 0 <= keep_last < max_messages:
            raise ValueError("keep_last must be >= 0 and smaller than max_messages")
        if min(max_message_chars, max_input_chars, max_summary_chars) <= 0:
            raise ValueError("max_message_chars, max_input_chars and max_summary_chars must be positive")
        self.chat_client = as_client(chat_client)
        self.max_messages = max_messages
        self.keep_last = keep_last
        self.repository = repository if repository is not None else InMemoryChatMemoryRepository()
        self.template = check_template(template or SUMMARY_TEMPLATE, ("transcript",))
        self.on_summary = on_summary
        self.max_message_chars = max_message_chars
        self.max_input_chars = max_input_chars
        self.max_summary_chars = max_summary_chars
        self.usage: Usage | None = None
        self.summaries = 0
        self._lock = threading.Lock()
        self._busy = threading.local()

    # -- the ChatMemory protocol --------------------------------------------------------------
    def add(self, conversation_id: str, messages: Message | Sequence[Message]) -> None:
        """Add messages; summarise older ones when the conversation outgrows ``max_messages``."""
        check_conversation_id(conversation_id)
        new = check_messages(messages)
        if not new:
            return
        stored = apply_update(self.repository, conversation_id, lambda st: self._merge(st, new))
        if getattr(self._busy, "active", False):
            return  # the summarising client itself remembers through this memory: do not recurse
        self._busy.active = True
        try:
            self._summarize_if_needed(conversation_id, stored)
        finally:
            self._busy.active = False

    def get(self, conversation_id: str) -> list[Message]:
        """The summary (if any) after the system messages, then the recent messages, oldest first."""
        return self.repository.find(check_conversation_id(conversation_id))

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation, summary included."""
        self.repository.delete(check_conversation_id(conversation_id))

    def summary(self, conversation_id: str) -> SystemMessage | None:
        """The current summary message of a conversation, or None."""
        return _parts(self.get(conversation_id))[1]

    # -- internals ----------------------------------------------------------------------------
    @staticmethod
    def _merge(stored: Sequence[Message], new: Sequence[Message]) -> list[Message]:
        systems, summary, rest = _parts(stored)
        merged = merge_messages([*systems, *rest], [m for m in new if not is_summary(m)])
        own = [m for m in merged if isinstance(m, SystemMessage)]
        return _assemble(own, summary, _drop_broken_start([m for m in merged if not isinstance(m, SystemMessage)]))

    def _cut(self, rest: list[Message]) -> int:
        """How many of the oldest messages to summarise (0: none), never inside a tool exchange."""
        if len(rest) <= self.max_messages:
            return 0
        boundary = len(rest) - self.keep_last
        units = tool_units(rest)
        k = 0
        while k < len(units) and units[k][-1] < boundary:
            k += 1
        # units[k] holds the boundary (or starts after it): that whole exchange stays verbatim.
        # A tool response without its call, or a finished call missing responses, must not start
        # the verbatim part (providers reject it): fold such units into the summary too
        k = first_intact_unit(rest, units, k)
        return units[k][0] if k < len(units) else len(rest)

    def _transcript(self, older: list[Message]) -> str:
        lines = [_line(m, self.max_message_chars) for m in older]
        total, kept = 0, []
        for line in reversed(lines):  # the newest lines matter most when the input must be cut
            total += len(line) + 1
            if total > self.max_input_chars:
                break
            kept.append(line)
        return "\n".join(reversed(kept))

    def _summarize_if_needed(self, conversation_id: str, stored: list[Message]) -> None:
        from chatclient.rag._llm import render

        _, summary, rest = _parts(stored)
        cut = self._cut(rest)
        if cut == 0:
            return
        older = rest[:cut]
        previous = summary.text.removeprefix(SUMMARY_PREFIX) if summary is not None else ""
        prompt = render(self.template, {"previous_summary": previous, "transcript": self._transcript(older)})
        try:
            response = self.chat_client.prompt().user(prompt).call().chat_response()
            text = response.result.output.text if response is not None and response.result is not None else None
            if not text or not text.strip():
                raise ValueError("the model returned an empty summary")
        except Exception as exc:
            log.warning(
                "SummarizingChatMemory: summarising conversation %r failed (%s: %s); keeping the messages",
                conversation_id,
                type(exc).__name__,
                exc,
            )
            if len(rest) > 2 * self.max_messages:
                apply_update(self.repository, conversation_id, self._evict)
            return
        usage = response.metadata.usage if response is not None else None
        count = cut + (int(summary.metadata.get("summarized_messages", 0)) if summary is not None else 0)
        metadata: dict[str, Any] = {SUMMARY_METADATA_KEY: True, "summarized_messages": count}
        if usage is not None:
            metadata["summary_usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            }
        new_summary = SystemMessage(SUMMARY_PREFIX + text.strip()[: self.max_summary_chars], metadata=metadata)

        def replace(current: list[Message]) -> Sequence[Message]:
            s, old_summary, r = _parts(current)
            # only when nobody changed the summarised part meanwhile; otherwise the next add retries
            if old_summary != summary or r[:cut] != older:
                return current
            return _assemble(s, new_summary, r[cut:])

        apply_update(self.repository, conversation_id, replace)
        with self._lock:
            self.summaries += 1
            if usage is not None:
                self.usage = usage if self.usage is None else self.usage + usage
        if self.on_summary is not None:
            self.on_summary(SummaryEvent(conversation_id, new_summary, cut, usage))

    def _evict(self, current: list[Message]) -> list[Message]:
        systems, summary, rest = _parts(current)
        return _assemble(systems, summary, evict(rest, lambda _: 1, self.max_messages))

    def __repr__(self) -> str:
        return (
            f"SummarizingChatMemory(max_messages={self.max_messages}, keep_last={self.keep_last}, "
            f"repository={self.repository!r})"
        )
