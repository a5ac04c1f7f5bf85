"""Tool-loop guards: stop a model that keeps making the same tool call, and cap calls per tool.

    ToolCallAdvisor(loop_guard=ToolLoopGuard(max_repeats=3, max_calls_per_tool={"search": 5}))

An identical call is the same tool with the same arguments (JSON compared after parsing, so key
order and spacing do not matter). When a call is made for the ``max_repeats``-th time its tool
response gets a hint telling the model it already has this answer; a further identical call
stops the loop with ``ToolLoopRepeatError`` before the tool runs again. A tool asked for more
often than its cap (``max_calls_per_tool``: one number for every tool, or a mapping by name) stops
the loop the same way. Counts are per request (per tool loop), never shared between requests.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from chatclient.errors import ToolLoopRepeatError
from chatclient.messages import ToolResponse, ToolResponseMessage
from chatclient.models.base import ChatResponse
from chatclient.tools.manager import ToolExecutionResult

__all__ = ["ToolLoopGuard"]

_HINT = (
    "\n\n[Note: this is call number {n} of {name} with exactly these arguments in this conversation and the "
    "result will not change. Use the result you have, try different arguments or another tool, or answer "
    "the user. Repeating this call again will end the conversation.]"
)


def _signature(name: str, arguments: str) -> tuple[str, str]:
    try:
        canonical = json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        canonical = arguments.strip()
    return name, canonical


class ToolLoopGuard:
    """Limits for one tool loop: ``max_repeats`` identical calls (``None``: no limit) and
    ``max_calls_per_tool`` (an int for every tool, a mapping of tool name to cap, or ``None``)."""

    def __init__(self, max_repeats: int | None = 3, max_calls_per_tool: int | Mapping[str, int] | None = None) -> None:
        if max_repeats is not None and (not isinstance(max_repeats, int) or max_repeats < 1):
            raise ValueError(f"max_repeats must be an int >= 1 or None, got {max_repeats!r}")
        caps = max_calls_per_tool
        if isinstance(caps, Mapping):
            for key, value in caps.items():
                if not isinstance(value, int) or value < 0:
                    raise ValueError(f"max_calls_per_tool[{key!r}] must be an int >= 0, got {value!r}")
        elif caps is not None and (not isinstance(caps, int) or caps < 0):
            raise ValueError(f"max_calls_per_tool must be an int >= 0, a mapping or None, got {caps!r}")
        self.max_repeats = max_repeats
        self.max_calls_per_tool = caps

    def __repr__(self) -> str:
        return f"ToolLoopGuard(max_repeats={self.max_repeats}, max_calls_per_tool={self.max_calls_per_tool!r})"

    def cap_for(self, name: str) -> int | None:
        """The call cap of tool ``name`` (``None``: unlimited)."""
        caps = self.max_calls_per_tool
        if isinstance(caps, Mapping):
            return caps.get(name)
        return caps

    def start(self) -> ToolLoopGuardState:
        """Fresh counters for one request's loop."""
        return ToolLoopGuardState(self)


class ToolLoopGuardState:
    """The counters of one tool loop (created by ``ToolLoopGuard.start``)."""

    __slots__ = ("_hint_ids", "calls", "guard", "repeats")

    def __init__(self, guard: ToolLoopGuard) -> None:
        self.guard = guard
        self.repeats: Counter[tuple[str, str]] = Counter()
        self.calls: Counter[str] = Counter()
        self._hint_ids: dict[str, int] = {}

    def check(self, response: ChatResponse) -> None:
        """Count the turn's tool calls; raise ``ToolLoopRepeatError`` before a call over a limit runs."""
        generation = next((g for g in response.generations if g.output.tool_calls), None)
        if generation is None:
            return
        self._hint_ids.clear()
        limit = self.guard.max_repeats
        for call in generation.output.tool_calls:
            sig = _signature(call.name, call.arguments)
            self.repeats[sig] += 1
            self.calls[call.name] += 1
            n = self.repeats[sig]
            if limit is not None and n > limit:
                raise ToolLoopRepeatError(
                    f"the model called {call.name} with the same arguments {n} times in one request (limit "
                    f"max_repeats={limit}), even after being told the result will not change; the loop was "
                    "stopped - check the tool's answer or the instructions",
                    call.name,
                    n,
                )
            cap = self.guard.cap_for(call.name)
            if cap is not None and self.calls[call.name] > cap:
                raise ToolLoopRepeatError(
                    f"the model called {call.name} {self.calls[call.name]} times in one request; its cap is "
                    f"{cap} (max_calls_per_tool) - raise the cap or check why the model keeps asking",
                    call.name,
                    self.calls[call.name],
                )
            if limit is not None and n == limit and limit > 1:
                self._hint_ids[call.id] = n

    def annotate(self, result: ToolExecutionResult) -> ToolExecutionResult:
        """The turn's result with the repeat hint added to the responses of calls at the limit."""
        if not self._hint_ids:
            return result
        message = result.tool_response_message
        responses: list[ToolResponse] = []
        for r in message.responses:
            n = self._hint_ids.get(r.id)
            responses.append(
                r if n is None else replace(r, response_data=r.response_data + _HINT.format(n=n, name=r.name))
            )
        executions = tuple(
            e
            if e.id not in self._hint_ids
            else replace(e, result=e.result + _HINT.format(n=self._hint_ids[e.id], name=e.name))
            for e in result.executions
        )
        history = (*result.conversation_history[:-1], ToolResponseMessage(tuple(responses), message.metadata))
        return ToolExecutionResult(
            history, result.return_direct, executions, result.context_updates, result.answer_from
        )
