"""``ContextWindowAdvisor``: fit the prompt under the model's context window before paying for the call.

    client = (ChatClient.builder(model)
              .default_advisors(MessageChatMemoryAdvisor(memory), ContextWindowAdvisor(counter))
              .build())

Just before the model call (late in the chain, inside the tool loop, so every turn of a tool loop is
checked and documents that RAG added are counted) the advisor counts system + tools + messages.
Over budget, it drops the oldest whole units of history — one message, or an assistant's tool
calls together with all their results, never one without the other — and keeps every newer unit that
fits. System messages and the newest unit (the message being answered, or the running tool
exchange) always stay; when even they do not fit, ``ContextWindowExceededError`` is raised and no
HTTP request is made. With ``strategy="summarize"`` and a ``summarizer`` client, the dropped units
are folded into one summary (the summarizing memory's prompt) placed after the system messages,
when it fits.

Budget: ``max_input_tokens`` when given, else ``context_window - reserve_output``, where the window
is ``context_window=``, else the model's ``capabilities.context_window``, else the dated table in
``chatclient.tokens``. The counter defaults to an estimate (four characters a token); pass a real one
(``chatclient.tokens``) for exact fitting. The response context records what was dropped under
``ContextWindowAdvisor.DROPPED``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from chatclient.advisor import LOWEST_PRECEDENCE, AdvisorChain, BaseAdvisor
from chatclient.errors import ContextWindowExceededError
from chatclient.memory.window import first_intact_unit, tool_units
from chatclient.messages import Message, SystemMessage
from chatclient.request import ChatClientRequest
from chatclient.tokens.counters import EstimatingTokenCounter, TokenCounter, context_window

__all__ = ["CONTEXT_WINDOW_ORDER", "ContextWindowAdvisor"]

log = logging.getLogger(__name__)

CONTEXT_WINDOW_ORDER = LOWEST_PRECEDENCE - 1500
"""After the advisors that add to the prompt (memory, RAG, tools, validation), before the model."""


class ContextWindowAdvisor(BaseAdvisor):
    """Trims (or summarises) the oldest history so the prompt fits the context window; see the module doc."""

    DROPPED = "chatclient.context_window.dropped"
    """Context key: the number of messages left out of the last model call (0 when all fitted)."""

    def __init__(
        self,
        counter: TokenCounter | None = None,
        max_input_tokens: int | None = None,
        reserve_output: int = 1024,
        strategy: Literal["trim", "summarize"] = "trim",
        *,
        context_window: int | None = None,
        summarizer: Any = None,
        order: int = CONTEXT_WINDOW_ORDER,
    ) -> None:
        if counter is not None and not isinstance(counter, TokenCounter):
            raise TypeError("counter must have count(messages, tools=()) -> int (see chatclient.tokens)")
        for label, value in (("max_input_tokens", max_input_tokens), ("context_window", context_window)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{label} must be a positive int or None, got {value!r}")
        if isinstance(reserve_output, bool) or not isinstance(reserve_output, int) or reserve_output < 0:
            raise ValueError(f"reserve_output must be an int >= 0, got {reserve_output!r}")
        if strategy not in ("trim", "summarize"):
            raise ValueError("strategy must be 'trim' or 'summarize'")
        if strategy == "summarize" and summarizer is None:
            raise ValueError("strategy='summarize' needs summarizer=ChatClient.create(a_cheap_model)")
        self.counter: TokenCounter = counter or EstimatingTokenCounter()
        self.max_input_tokens = max_input_tokens
        self.reserve_output = reserve_output
        self.strategy = strategy
        self.context_window = context_window
        self.summarizer = summarizer
        self.order = order

    def budget(self, model: Any = None) -> int:
        """The input tokens a prompt may take for ``model`` (the chain's model when called by the chain)."""
        if self.max_input_tokens is not None:
            return self.max_input_tokens
        window = self.context_window or (context_window(model) if model is not None else None)
        if window is None:
            name = getattr(model, "model", None) or type(model).__name__
            raise ValueError(
                f"ContextWindowAdvisor does not know the context window of {name!r}: pass max_input_tokens=... "
                "or context_window=... (or set the model's capabilities.context_window)"
            )
        budget = window - self.reserve_output
        if budget <= 0:
            raise ValueError(f"reserve_output={self.reserve_output} leaves nothing of the {window}-token window")
        return budget

    def fit(self, messages: Sequence[Message], tools: Sequence[Any], budget: int) -> tuple[list[Message], list[Message]]:
        """``(kept, dropped)``: the messages that fit ``budget`` and the oldest ones left out.

        Raises ``ContextWindowExceededError`` when the system messages and the newest unit alone do not fit.
        """
        count = self.counter.count
        if count(messages, tools) <= budget:
            return list(messages), []
        units = tool_units(messages)
        systems = [i for i, m in enumerate(messages) if isinstance(m, SystemMessage)]

        def keep_from(k: int) -> list[Message]:
            keep = set(systems).union(i for unit in units[k:] for i in unit)
            return [m for i, m in enumerate(messages) if i in keep]

        newest = len(units) - 1 if units else 0
        smallest = keep_from(newest)
        needed = count(smallest, tools)
        if needed > budget:
            raise ContextWindowExceededError(
                f"the prompt needs {needed:,} tokens with only the system messages and the newest message, over "
                f"the budget of {budget:,}: shorten that message (or the retrieved documents, the tools), or use a "
                "model with a larger context window",
                tokens=needed,
                limit=budget,
            )
        # The fewest units to drop: keeping fewer units never costs more, so binary search on the start.
        lo, hi = 0, newest
        while lo < hi:
            mid = (lo + hi) // 2
            if count(keep_from(mid), tools) <= budget:
                hi = mid
            else:
                lo = mid + 1
        # Never start the kept history on tool results or on unanswered tool calls.
        start = min(first_intact_unit(messages, units, lo), newest)
        kept = keep_from(start)
        dropped_idx = {i for unit in units[:start] for i in unit}
        return kept, [m for i, m in enumerate(messages) if i in dropped_idx]

    def _summarize(self, kept: list[Message], dropped: list[Message], tools: Sequence[Any], budget: int) -> list[Message]:
        from chatclient.memory.summarizing import SUMMARY_METADATA_KEY, SUMMARY_PREFIX, SUMMARY_TEMPLATE, _line
        from chatclient.rag._llm import render

        transcript = "\n".join(_line(m, 2000) for m in dropped)
        try:
            text = self.summarizer.prompt().user(render(SUMMARY_TEMPLATE, {"previous_summary": "", "transcript": transcript})).call().content()
        except Exception as exc:  # a failed summary must not fail the answer: fall back to trimming
            log.warning("ContextWindowAdvisor: summarising %d messages failed (%s); trimmed instead", len(dropped), exc)
            return kept
        if not text or not text.strip():
            return kept
        summary = SystemMessage(SUMMARY_PREFIX + text.strip(), {SUMMARY_METADATA_KEY: True})
        at = next((i for i, m in enumerate(kept) if not isinstance(m, SystemMessage)), len(kept))
        candidate = [*kept[:at], summary, *kept[at:]]
        return candidate if self.counter.count(candidate, tools) <= budget else kept

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        terminal = chain.advisors[-1] if chain.advisors else None
        budget = self.budget(getattr(terminal, "model", None))
        prompt = request.prompt
        kept, dropped = self.fit(prompt.messages, prompt.tools, budget)
        if not dropped:
            return request.mutate(context={self.DROPPED: 0})
        if self.strategy == "summarize":
            kept = self._summarize(kept, dropped, prompt.tools, budget)
        return request.mutate(prompt=prompt.copy(messages=kept), context={self.DROPPED: len(dropped)})

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        if self.strategy == "summarize":  # the summary is a blocking model call: keep it off the event loop
            return await asyncio.to_thread(self.before, request, chain)
        return self.before(request, chain)

    def __repr__(self) -> str:
        return (
            f"ContextWindowAdvisor(counter={type(self.counter).__name__}, max_input_tokens={self.max_input_tokens}, "
            f"reserve_output={self.reserve_output}, strategy={self.strategy!r}, order={self.order})"
        )
