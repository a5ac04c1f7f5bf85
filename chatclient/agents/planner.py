"""Planner-driven workflows: a ``Planner`` picks the next agent until it says it is done
(LangChain4j: ``plannerBuilder()`` with the ``Planner`` SPI).

A planner answers ``next(scope, history)`` with a ``PlannerStep`` (the agent to call and the
arguments to write into the scope first) or ``Done`` (the plan is over). ``planner_workflow`` runs
it: each step's agent runs like any sub-agent of a workflow (events, journal, ``on_error``), and its
turn is added to the history the planner sees next. A step naming no known agent, an argument of the
wrong type or missing inputs is not run: the turn goes back to the planner with the error, and
counts as a step. ``supervisor`` is this workflow with a model as the planner; the recipes in
``chatclient.agents.patterns`` are planners written in code.

Every decision is journalled, so a recovered or resumed run replays the same plan without asking the
planner again (a model planner is not re-asked; a deterministic one would decide the same anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow
from chatclient.agents.registry import AgentRegistry
from chatclient.agents.scope import AgenticScope

if TYPE_CHECKING:
    from chatclient.models.base import Usage


class PlannerStep(BaseModel):
    """One planner decision: the agent to call next (``"done"`` to finish) and its arguments."""

    model_config = ConfigDict(frozen=True)

    agent_name: str = Field(description='The name of the agent to call next, or "done" when finished')
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description='The agent\'s inputs by name; for "done": {"response": "<final answer>"}',
    )


@dataclass(frozen=True)
class Done:
    """The planner's end of the plan; ``output`` (when not ``None``) is the workflow's result instead
    of the last agent's output."""

    output: Any = None


@dataclass(frozen=True)
class PlannerTurn:
    """One step of the plan as the planner sees it afterwards: the agent named, the arguments given,
    and either its ``output`` or the ``error`` that kept it from running (``None`` when it ran)."""

    agent_name: str
    arguments: dict[str, Any]
    output: Any = None
    error: str | None = None


@runtime_checkable
class Planner(Protocol):
    """Decides the next step of a ``planner_workflow``.

    ``next(scope, history)`` returns a ``PlannerStep`` or ``Done``. A planner may also define
    ``bind(agents: AgentRegistry)`` (called once when the workflow is built, with its agents by name)
    and ``async anext(scope, history)`` (used in async runs instead of ``next``). Keep the state of a
    run in the scope and the history, not in the planner: one planner serves every run of its
    workflow, also concurrent ones.
    """

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done: ...


def _decision(value: Any, planner: Any) -> PlannerStep | Done:
    if isinstance(value, (PlannerStep, Done)):
        return value
    raise TypeError(f"{type(planner).__name__}.next() must return a PlannerStep or Done, got {type(value).__name__}")


class PlannerWorkflow(Workflow):
    """Runs the agents its planner chooses; see ``planner_workflow``."""

    def __init__(self, agents: Sequence[Any], *, planner: Any, max_steps: int, where: str, **kwargs: Any) -> None:
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if not callable(getattr(planner, "next", None)):
            raise TypeError(
                f"{where} needs a planner with next(scope, history) -> PlannerStep | Done, got {type(planner).__name__}"
            )
        super().__init__(agents, where=where, **kwargs)
        self.registry = AgentRegistry(self.agents)  # refuses two agents of one name
        self.planner = planner
        self.max_steps = max_steps
        self._adapters: dict[tuple[str, str], TypeAdapter[Any] | None] = {}
        bind = getattr(planner, "bind", None)
        if callable(bind):
            bind(self.registry)

    # -- asking the planner (journalled) ------------------------------------------------------------

    def _journal_key(self, step: Step, n: int) -> str:
        return f"{step.key}/plan{n}" if step.key else f"plan{n}"

    def _replayed_decision(self, step: Step, n: int) -> PlannerStep | Done | None:
        entry = step.run.journal_get(self._journal_key(step, n))
        if entry is None:
            return None
        recorded = entry["output"]
        if isinstance(recorded, dict) and set(recorded) == {"done"}:
            return Done(recorded["done"])
        return PlannerStep.model_validate(recorded)

    def _record(self, step: Step, n: int, decision: PlannerStep | Done, usage: Usage | None) -> None:
        recorded = {"done": decision.output} if isinstance(decision, Done) else decision.model_dump(mode="json")
        step.run.journal_put(self._journal_key(step, n), recorded, {})
        self._add_usage(step, usage)

    @staticmethod
    def _add_usage(step: Step, usage: Usage | None) -> None:
        if usage is not None:
            step.node.usage = usage if step.node.usage is None else step.node.usage + usage

    def _plan(self, step: Step, history: Sequence[PlannerTurn]) -> tuple[PlannerStep | Done, Usage | None]:
        """Ask the planner (sync); subclasses whose planner is a model return the call's usage."""
        return _decision(self.planner.next(step.scope, tuple(history)), self.planner), None

    async def _aplan(self, step: Step, history: Sequence[PlannerTurn]) -> tuple[PlannerStep | Done, Usage | None]:
        anext = getattr(self.planner, "anext", None)
        if callable(anext):
            return _decision(await anext(step.scope, tuple(history)), self.planner), None
        return self._plan(step, history)

    # -- checking a step ----------------------------------------------------------------------------

    def _adapter(self, agent: Agent, key: str, hint: Any) -> TypeAdapter[Any] | None:
        cache_key = (agent.name, key)
        if cache_key not in self._adapters:
            try:
                self._adapters[cache_key] = None if hint is None or hint is Any else TypeAdapter(hint)
            except Exception:  # a hint pydantic cannot check: the agent checks its own inputs
                self._adapters[cache_key] = None
        return self._adapters[cache_key]

    def _wrong_type(self, agent: Agent, arguments: dict[str, Any]) -> str | None:
        """What is wrong with the first argument that does not fit its input's type, or ``None``."""
        types = agent.input_types()
        for key, value in arguments.items():
            hint = types.get(key, (None, False))[0] if isinstance(key, str) else None
            adapter = self._adapter(agent, key, hint) if hint is not None else None
            if adapter is None:
                continue
            try:
                adapter.validate_python(value)
            except ValidationError as exc:
                errors = exc.errors()
                reason = errors[0]["msg"] if errors else "invalid"
                kind = getattr(hint, "__name__", None) or str(hint)
                return f"argument {key!r} must be {kind} ({reason}); give it again with the right type"
        return None

    def _choose(self, step: Step, planned: PlannerStep, history: list[PlannerTurn]) -> Agent | None:
        """The agent to run for ``planned`` with its arguments written, or ``None`` after recording
        why not (the planner's mistake to correct, not a failure of an agent)."""
        agent = self.registry.find(planned.agent_name)
        if agent is None:
            names = ", ".join(self.registry.names())
            error = f"there is no agent named {planned.agent_name!r}; choose one of: {names}, or done"
            history.append(PlannerTurn(planned.agent_name, planned.arguments, error=error))
            return None
        wrong = self._wrong_type(agent, planned.arguments)
        if wrong is not None:
            history.append(PlannerTurn(agent.name, planned.arguments, error=wrong))
            return None
        # Only the chosen agent's inputs are written: a planner is a model reading untrusted text, and
        # an extra argument must not set a scope key another agent or the caller relies on.
        inputs = agent.input_names()
        for k, v in planned.arguments.items():
            if isinstance(k, str) and k in inputs:
                step.scope.write(k, v)
        missing = [] if agent.optional else agent._missing(step.scope)
        if missing:
            error = f"missing arguments {', '.join(map(repr, missing))}; give them in arguments"
            history.append(PlannerTurn(agent.name, planned.arguments, error=error))
            return None
        return agent

    # -- the loop -------------------------------------------------------------------------------------

    def _start(self, step: Step) -> None:
        """Checks before the first step (the supervisor needs its ``request``)."""

    def _invoke(self, step: Step) -> Any:
        self._start(step)
        history: list[PlannerTurn] = []
        last: Any = None
        done: Done | None = None
        for n in range(1, self.max_steps + 1):
            decision = self._replayed_decision(step, n)
            if decision is None:
                decision, usage = self._plan(step, history)
                self._record(step, n, decision, usage)
            if isinstance(decision, Done):
                done = decision
                break
            agent = self._choose(step, decision, history)
            if agent is not None:
                last = self._child(step, agent, f"s{n}")
                history.append(PlannerTurn(agent.name, decision.arguments, last))
        return self._final(step, self._result_of(step, done, last))

    async def _ainvoke(self, step: Step) -> Any:
        self._start(step)
        history: list[PlannerTurn] = []
        last: Any = None
        done: Done | None = None
        for n in range(1, self.max_steps + 1):
            decision = self._replayed_decision(step, n)
            if decision is None:
                decision, usage = await self._aplan(step, history)
                self._record(step, n, decision, usage)
            if isinstance(decision, Done):
                done = decision
                break
            agent = self._choose(step, decision, history)
            if agent is not None:
                last = await self._achild(step, agent, f"s{n}")
                history.append(PlannerTurn(agent.name, decision.arguments, last))
        return self._final(step, await self._aresult_of(step, done, last))

    def _result_of(self, step: Step, done: Done | None, last: Any) -> Any:
        return done.output if done is not None and done.output is not None else last

    async def _aresult_of(self, step: Step, done: Done | None, last: Any) -> Any:
        return self._result_of(step, done, last)


def planner_workflow(
    *agents: Agent,
    planner: Planner,
    max_steps: int = 20,
    name: str = "planner",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> PlannerWorkflow:
    """Run ``agents`` in the order ``planner`` chooses, one step at a time, until it returns ``Done``
    or ``max_steps`` steps ran. The result is ``Done.output`` when given, else the last agent's output
    (``output=`` computes it from the scope instead).

    >>> from chatclient.agents import agent_function
    >>> from chatclient.agents.patterns import GoalOrientedPlanner
    >>> @agent_function(output_key="doubled")
    ... def double(x: int) -> int:
    ...     return 2 * x
    >>> @agent_function(output_key="answer")
    ... def inc(doubled: int) -> int:
    ...     return doubled + 1
    >>> planner_workflow(inc, double, planner=GoalOrientedPlanner("answer")).run(x=20).output
    41
    """
    if not agents:
        raise ValueError("planner_workflow needs at least one agent")
    return PlannerWorkflow(
        agents,
        planner=planner,
        max_steps=max_steps,
        where="planner_workflow",
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["Done", "Planner", "PlannerStep", "PlannerTurn", "PlannerWorkflow", "planner_workflow"]
