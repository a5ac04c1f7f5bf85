"""Planners written in code, for ``planner_workflow`` (the seed's agentic patterns,
LangChain4j ``langchain4j-agentic-patterns``).

- ``GoalOrientedPlanner(goal)``: the shortest chain of agents from what the scope holds to the goal
  key, worked out from the agents' inputs and ``output_key``s (goal-oriented action planning).
- ``PeerToPeerPlanner(max_invocations, exit_condition)``: no coordinator; an agent runs when its
  inputs are in the scope and one of them changed since it last ran, until nothing changes any more,
  the exit condition holds or the invocation limit is reached.
- ``BlackboardPlanner(goal)``: like peer to peer, but one ready agent per step, picked by a conflict
  resolution (declaration order by default), until the goal holds; the limit reached first is an error.
- ``DebatePlanner(max_rounds=3)``: every agent but the last argues, round after round, seeing the
  others' last positions under ``debate_context``; when they agree (``unanimous``) or the rounds run
  out, the last agent judges.

Each keeps the state of a run in the scope and the history only, so one planner serves concurrent
runs, and a recovered run plans the same way. Where the seed runs ready agents in parallel, these
run them one per step, the one that waited longest first.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from chatclient.agents.base import Agent
from chatclient.agents.loop import _arity
from chatclient.agents.planner import Done, PlannerStep, PlannerTurn
from chatclient.agents.registry import AgentRegistry
from chatclient.agents.scope import AgenticScope
from chatclient.errors import PlannerError

DEBATE_CONTEXT_KEY = "debate_context"
"""The scope key under which ``DebatePlanner`` hands the debaters (and the judge) the last round."""


def _required(agent: Agent) -> list[str]:
    return [key for key, (_, required) in agent.input_types().items() if required]


def _ran(history: Sequence[PlannerTurn]) -> list[PlannerTurn]:
    """The turns whose agent actually ran (not the ones sent back to the planner with an error)."""
    return [turn for turn in history if turn.error is None]


class _Bound:
    """A planner that takes its workflow's agents when the workflow is built."""

    agents: AgentRegistry | None = None

    def bind(self, agents: AgentRegistry) -> None:
        """Take the workflow's agents; a planner serves one workflow."""
        if self.agents is not None and self.agents is not agents:
            raise ValueError(f"this {type(self).__name__} already plans another workflow; build one per workflow")
        self.agents = agents
        self._bound(agents)

    def _bound(self, agents: AgentRegistry) -> None:
        """Checks and tables a subclass builds from the agents."""

    def _registry(self) -> AgentRegistry:
        if self.agents is None:
            raise PlannerError(f"{type(self).__name__} is not bound to a workflow: pass it to planner_workflow(...)")
        return self.agents


# -- goal oriented ----------------------------------------------------------------------------------


class _Unreachable(Exception):
    """A key no chain of agents can produce (turned into ``PlannerError`` for the goal)."""


class GoalOrientedPlanner(_Bound):
    """Reaches ``goal`` (a scope key) by the shortest chain of agents: an agent whose ``output_key``
    is the goal, preceded by the agents producing its missing inputs, and so on back to what the
    scope holds. Done (with the goal's value) as soon as the scope holds the goal; ``PlannerError``
    when some needed key is neither in the scope nor any agent's output."""

    def __init__(self, goal: str) -> None:
        if not isinstance(goal, str) or not goal:
            raise ValueError(f"goal must be a scope key (a non-empty string), got {goal!r}")
        self.goal = goal
        self._producers: dict[str, list[Agent]] = {}

    def _bound(self, agents: AgentRegistry) -> None:
        for agent in agents:
            if agent.output_key is not None:
                self._producers.setdefault(agent.output_key, []).append(agent)
        if self.goal not in self._producers:
            raise ValueError(f"no agent writes the goal {self.goal!r} (give one output_key={self.goal!r})")

    def path(self, available: set[str]) -> list[Agent]:
        """The agents to run, in order, to get from the keys in ``available`` to the goal."""
        self._registry()
        try:
            return self._plan_for(self.goal, frozenset(available), ())
        except _Unreachable as exc:
            raise PlannerError(f"no path found for goal {self.goal!r}: {exc}") from None

    def _plan_for(self, key: str, have: frozenset[str], visiting: tuple[str, ...]) -> list[Agent]:
        best: list[Agent] | None = None
        reasons: list[str] = []
        for agent in self._producers.get(key, []):
            if agent.name in visiting:
                reasons.append(f"{agent.name!r} needs its own output")
                continue
            try:
                plan = self._inputs_plan(agent, have, (*visiting, agent.name))
            except _Unreachable as exc:
                reasons.append(f"{agent.name!r} needs {exc}")
                continue
            if best is None or len(plan) + 1 < len(best):
                best = [*plan, agent]
        if best is None:
            why = "; ".join(reasons) if reasons else "it is not in the scope and no agent writes it"
            raise _Unreachable(f"{key!r}, which cannot be produced: {why}")
        return best

    def _inputs_plan(self, agent: Agent, have: frozenset[str], visiting: tuple[str, ...]) -> list[Agent]:
        plan: list[Agent] = []
        for needed in _required(agent):
            if needed in have:
                continue
            for step in self._plan_for(needed, have, visiting):
                if step not in plan:
                    plan.append(step)
                    if step.output_key is not None:
                        have = have | {step.output_key}
        return plan

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """Done when the scope holds the goal, else the first agent of the path to it."""
        if scope.has(self.goal):
            return Done(scope.read(self.goal))
        return PlannerStep(agent_name=self.path(set(scope.state))[0].name)


# -- peer to peer and blackboard --------------------------------------------------------------------


def _ready(agents: AgentRegistry, scope: AgenticScope, history: Sequence[PlannerTurn]) -> list[Agent]:
    """Agents whose required inputs are all in the scope and that never ran or saw one of their inputs
    rewritten by another agent since they last ran; the one that waited longest first."""
    ran = _ran(history)
    last_run: dict[str, int] = {}
    for i, turn in enumerate(ran):
        last_run[turn.agent_name] = i
    ready: list[tuple[int, int, Agent]] = []
    for order, agent in enumerate(agents):
        needed = _required(agent)
        if not all(scope.has(k) for k in needed):
            continue
        since = last_run.get(agent.name)
        if since is not None:
            inputs = set(agent.input_names())
            changed = False
            for turn in ran[since + 1 :]:
                writer = agents.find(turn.agent_name)
                if writer is not None and writer is not agent and writer.output_key in inputs:
                    changed = True
                    break
            if not changed:
                continue
        ready.append((-1 if since is None else since, order, agent))
    return [agent for _, _, agent in sorted(ready, key=lambda entry: (entry[0], entry[1]))]


def _call_exit(condition: Callable[..., bool], scope: AgenticScope, count: int) -> bool:
    return bool(condition(scope, count) if _arity(condition) == 2 else condition(scope))


class PeerToPeerPlanner(_Bound):
    """Agents as equal peers coordinated by the scope: an agent runs when its inputs are present and
    one of them changed since it last ran. Done when nothing is ready (the scope is stable), when
    ``exit_condition(scope)`` (or ``exit_condition(scope, invocations)``) holds, or after
    ``max_invocations`` agent runs. The result is ``scope[output]`` when ``output`` names a key."""

    def __init__(
        self,
        max_invocations: int = 10,
        exit_condition: Callable[..., bool] | None = None,
        *,
        output: str | None = None,
    ) -> None:
        if isinstance(max_invocations, bool) or not isinstance(max_invocations, int) or max_invocations < 1:
            raise ValueError(f"max_invocations must be a positive int, got {max_invocations!r}")
        if exit_condition is not None and not callable(exit_condition):
            raise TypeError("exit_condition must be a callable taking the scope (and the invocation count)")
        self.max_invocations = max_invocations
        self.exit_condition = exit_condition
        self.output = output

    def _done(self, scope: AgenticScope) -> Done:
        return Done(scope.read(self.output) if self.output is not None else None)

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """The ready agent that waited longest, or Done (stable, exit condition, limit)."""
        count = len(_ran(history))
        if self.exit_condition is not None and _call_exit(self.exit_condition, scope, count):
            return self._done(scope)
        if count >= self.max_invocations:
            return self._done(scope)
        ready = _ready(self._registry(), scope, history)
        return PlannerStep(agent_name=ready[0].name) if ready else self._done(scope)


ConflictResolution = Callable[[AgenticScope, Sequence[Agent]], Agent | None]
"""Picks which of the ready agents runs next (``None``: fall back to declaration order)."""


def prefer(*names: str, when: Callable[[AgenticScope], bool] | None = None) -> ConflictResolution:
    """A conflict resolution preferring the agents ``names`` (in that order) when ``when(scope)``
    holds (always without ``when``); otherwise, or when none of them is ready, declaration order."""

    def resolve(scope: AgenticScope, candidates: Sequence[Agent]) -> Agent | None:
        if when is not None and not when(scope):
            return None
        for name in names:
            for agent in candidates:
                if agent.name == name:
                    return agent
        return None

    return resolve


class BlackboardPlanner(_Bound):
    """Agents as knowledge sources posting to the scope (the blackboard); one ready agent per step,
    chosen by ``conflict_resolution`` (declaration order by default). Done (with the goal's value
    when ``goal`` is a key) when the goal holds; Done when nothing is ready (the result is then the
    last agent's output); ``PlannerError`` when ``max_invocations`` agents ran and the goal still
    does not hold.

    ``goal``: a scope key (holds when the scope has it) or a predicate ``goal(scope) -> bool``.
    """

    def __init__(
        self,
        goal: str | Callable[[AgenticScope], bool],
        *,
        conflict_resolution: ConflictResolution | None = None,
        max_invocations: int = 10,
    ) -> None:
        if not (isinstance(goal, str) and goal) and not callable(goal):
            raise TypeError("goal must be a scope key or a predicate taking the scope")
        if conflict_resolution is not None and not callable(conflict_resolution):
            raise TypeError("conflict_resolution must be a callable (scope, ready agents) -> agent | None")
        if isinstance(max_invocations, bool) or not isinstance(max_invocations, int) or max_invocations < 1:
            raise ValueError(f"max_invocations must be a positive int, got {max_invocations!r}")
        self.goal = goal
        self.conflict_resolution = conflict_resolution
        self.max_invocations = max_invocations

    def _reached(self, scope: AgenticScope) -> bool:
        return scope.has(self.goal) if isinstance(self.goal, str) else bool(self.goal(scope))

    def _done(self, scope: AgenticScope) -> Done:
        return Done(scope.read(self.goal) if isinstance(self.goal, str) else None)

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """Done when the goal holds or nothing is ready, else the chosen ready agent."""
        if self._reached(scope):
            return self._done(scope)
        ready = _ready(self._registry(), scope, history)
        if not ready:
            return self._done(scope)  # quiescence: nothing more can be learned
        if len(_ran(history)) >= self.max_invocations:
            raise PlannerError(f"the blackboard's goal was not reached in {self.max_invocations} agent invocations")
        chosen = self.conflict_resolution(scope, tuple(ready)) if self.conflict_resolution is not None else None
        if chosen is not None and chosen not in ready:
            raise PlannerError(f"conflict_resolution chose {chosen.name!r}, which is not ready")
        return PlannerStep(agent_name=(chosen or ready[0]).name)


# -- debate -----------------------------------------------------------------------------------------


def unanimous(positions: Sequence[Any]) -> bool:
    """Every debater's last answer is the same (for label answers such as APPROVE / REJECT)."""
    return len({str(p).strip() for p in positions}) <= 1


def _last_word(position: Any) -> str:
    words = re.findall(r"[A-Za-z0-9_]+", str(position))
    return words[-1].upper() if words else ""


def unanimous_last_word(positions: Sequence[Any]) -> bool:
    """Every debater's last answer ends with the same word, any case (``... AGREE.``)."""
    return len({_last_word(p) for p in positions}) <= 1


class DebatePlanner(_Bound):
    """The agents but the last debate; the last one judges. Each round every debater answers, seeing
    the previous round's positions under ``scope["debate_context"]`` (``Name: "answer"`` lines, empty
    in the first round). After a round, when ``converged(positions)`` holds or ``max_rounds`` rounds
    ran, the judge answers from the debate context and its answer is the result."""

    def __init__(
        self,
        max_rounds: int = 3,
        converged: Callable[[Sequence[Any]], bool] = unanimous,
        *,
        context_key: str = DEBATE_CONTEXT_KEY,
    ) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise ValueError(f"max_rounds must be a positive int, got {max_rounds!r}")
        if not callable(converged):
            raise TypeError("converged must be a callable taking the debaters' positions")
        self.max_rounds = max_rounds
        self.converged = converged
        self.context_key = context_key
        self.debaters: tuple[Agent, ...] = ()
        self.judge: Agent | None = None

    def _bound(self, agents: AgentRegistry) -> None:
        listed = tuple(agents)
        if len(listed) < 3:
            raise ValueError(f"a debate needs at least two debaters and a judge (the last agent), got {len(listed)}")
        self.debaters, self.judge = listed[:-1], listed[-1]

    def context(self, turns: Sequence[PlannerTurn]) -> str:
        """The debate context of a round: one ``Name: "answer"`` line per debater."""
        return "\n".join(f'{t.agent_name}: "{t.output}"' for t in turns)

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """The next debater of the round, the first debater of the next round, the judge, or Done."""
        self._registry()
        assert self.judge is not None
        ran = _ran(history)
        judged = [t for t in ran if t.agent_name == self.judge.name]
        if judged:
            return Done(judged[-1].output)
        names = {d.name for d in self.debaters}
        spoken = [t for t in ran if t.agent_name in names]
        n = len(self.debaters)
        if not spoken:
            return PlannerStep(agent_name=self.debaters[0].name, arguments={self.context_key: ""})
        if len(spoken) % n:
            return PlannerStep(agent_name=self.debaters[len(spoken) % n].name)
        last_round = spoken[-n:]
        context = self.context(last_round)
        if self.converged([t.output for t in last_round]) or len(spoken) // n >= self.max_rounds:
            return PlannerStep(agent_name=self.judge.name, arguments={self.context_key: context})
        return PlannerStep(agent_name=self.debaters[0].name, arguments={self.context_key: context})


__all__ = [
    "DEBATE_CONTEXT_KEY",
    "BlackboardPlanner",
    "ConflictResolution",
    "DebatePlanner",
    "GoalOrientedPlanner",
    "PeerToPeerPlanner",
    "prefer",
    "unanimous",
    "unanimous_last_word",
]
