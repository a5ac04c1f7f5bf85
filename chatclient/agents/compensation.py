"""Undoing agents: when a workflow fails, the agents that completed are rolled back, last first
(LangChain4j: ``compensateOnError(true)``; the agent-level twin of ``@tool(compensate=...)``).

An agent declares how to undo itself with ``compensate=undo`` (``agent(...)``,
``@agent_function(...)``). The undo function takes the agent's inputs by name (any of them, plus
``output``, or the agent's ``output_key``, for what the agent answered), or one parameter annotated ``AgentInvocation`` (the whole
record of the invocation). ``compensating(workflow)`` runs ``workflow``; when it fails, the undo
functions of the agents that completed in this run are called one at a time, the last completed
first, and the original error is raised. An undo function that fails is logged at WARNING and the
others still run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from chatclient.agents.base import Agent, Step, SuspendRun, Workflow
from chatclient.agents.scope import AgenticScope, AgentInvocation, InvocationNode
from chatclient.errors import RunClaimedError
from chatclient.tools.compensation import acall_undo, call_undo, takes_only

log = logging.getLogger(__name__)

# A run waiting for a person, or taken over by another claimant, has not failed: nothing is undone.
_NOT_FAILURES = (SuspendRun, RunClaimedError)


class AgentCompensator:
    """One agent's undo function and how to call it (by input names, or with the invocation)."""

    __slots__ = ("accepts_all", "agent_name", "fn", "output_key", "parameters", "takes_invocation")

    def __init__(self, fn: Callable[..., Any], agent_name: str, output_key: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"compensate= of agent {agent_name!r} must be a callable, not {fn!r}")
        self.fn = fn
        self.agent_name = agent_name
        self.output_key = output_key
        self.takes_invocation = takes_only(fn, AgentInvocation)
        try:
            params = inspect.signature(fn).parameters.values()
        except (TypeError, ValueError):
            params = ()  # type: ignore[assignment]
        self.accepts_all = any(p.kind is p.VAR_KEYWORD for p in params)
        self.parameters = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    def _arguments(self, invocation: AgentInvocation) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.takes_invocation:
            return (invocation,), {}
        values = {**dict(invocation.inputs)}
        values.setdefault("output", invocation.output)
        if self.output_key is not None:
            values.setdefault(self.output_key, invocation.output)
        if self.accepts_all:
            return (), values
        return (), {k: values[k] for k in self.parameters if k in values}

    def run(self, invocation: AgentInvocation) -> None:
        call_undo(self.fn, *self._arguments(invocation))

    async def arun(self, invocation: AgentInvocation) -> None:
        await acall_undo(self.fn, *self._arguments(invocation))

    def __repr__(self) -> str:
        return f"AgentCompensator({getattr(self.fn, '__qualname__', self.fn)!r} for {self.agent_name!r})"


def compensator_of(agent: Agent) -> AgentCompensator | None:
    """The undo function an agent was built with (``compensate=``), if any."""
    fn = getattr(agent, "compensate", None)
    return None if fn is None else AgentCompensator(fn, agent.name, agent.output_key)


def _tree(root: Agent) -> list[Agent]:
    out: list[Agent] = []
    stack = [root]
    while stack:
        agent = stack.pop()
        out.append(agent)
        stack.extend(reversed(agent.children))
    return out


class CompensatingWorkflow(Workflow):
    """Runs one workflow and rolls back its completed agents when it fails; see ``compensating``."""

    def __init__(self, inner: Agent, **kwargs: Any) -> None:
        super().__init__([inner], where="compensating", **kwargs)
        self.inner = self.agents[0]
        undo: dict[str, AgentCompensator] = {}
        owners: dict[str, Agent] = {}
        for agent in _tree(self.inner):
            compensator = compensator_of(agent)
            if compensator is None:
                continue
            other = owners.get(agent.name)
            if other is not None and other is not agent:
                raise ValueError(
                    f"two agents named {agent.name!r} declare compensate=: give them distinct names, so the "
                    "one to undo is known"
                )
            owners[agent.name] = agent
            undo[agent.name] = compensator
        self._undo = undo

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        return self.inner.input_types()

    def _completed(self, node: InvocationNode) -> list[AgentInvocation]:
        """The leaf invocations below ``node`` that completed, in the order they finished."""
        done: list[AgentInvocation] = []
        for inv in node.freeze().walk():
            leaf_done = not inv.children and inv.error is None and inv.finished is not None and not inv.skipped
            if leaf_done and inv.name in self._undo:
                done.append(inv)
        done.sort(key=lambda inv: inv.finished or 0.0)
        return done

    def _undo_all(self, step: Step) -> None:
        for inv in reversed(self._completed(step.node)):
            try:
                self._undo[inv.name].run(inv)
            except Exception as exc:  # best effort: the other undo functions still run
                log.warning("undoing agent %r failed (the remaining undo functions still run): %r", inv.name, exc)

    async def _aundo_all(self, step: Step) -> None:
        for inv in reversed(self._completed(step.node)):
            try:
                await self._undo[inv.name].arun(inv)
            except Exception as exc:  # best effort: the other undo functions still run
                log.warning("undoing agent %r failed (the remaining undo functions still run): %r", inv.name, exc)

    def _invoke(self, step: Step) -> Any:
        try:
            last = self._child(step, self.inner, "0", tail=True)
        except _NOT_FAILURES:
            raise
        except Exception:
            self._undo_all(step)
            raise
        return self._final(step, last)

    async def _ainvoke(self, step: Step) -> Any:
        try:
            last = await self._achild(step, self.inner, "0", tail=True)
        except _NOT_FAILURES:
            raise
        except Exception:
            await self._aundo_all(step)
            raise
        return self._final(step, last)


def compensating(
    workflow: Agent,
    *,
    name: str | None = None,
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
) -> CompensatingWorkflow:
    """``workflow`` with compensation on: when it fails, the undo functions (``compensate=``) of its
    agents that completed in this run are called, the last completed first, then the error is raised.

    >>> from chatclient.agents import agent_function, sequence
    >>> booked = []
    >>> @agent_function(output_key="flight", compensate=lambda flight: booked.remove(flight))
    ... def book_flight(city: str) -> str:
    ...     booked.append(f"flight to {city}")
    ...     return f"flight to {city}"
    >>> @agent_function(output_key="hotel")
    ... def book_hotel(city: str) -> str:
    ...     raise RuntimeError("no rooms left")
    >>> trip = compensating(sequence(book_flight, book_hotel))
    >>> try:
    ...     trip.run(city="Lisbon")
    ... except Exception as error:
    ...     print(type(error).__name__, booked)
    AgentExecutionError []
    """
    return CompensatingWorkflow(
        workflow,
        name=name or f"compensating({getattr(workflow, 'name', 'workflow')})",
        description=description,
        output_key=output_key,
        output=output,
    )


__all__ = ["AgentCompensator", "CompensatingWorkflow", "compensating", "compensator_of"]
