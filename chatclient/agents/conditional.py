"""``conditional``: run the first branch whose predicate holds (LangChain4j: ``conditionalBuilder``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow, check_agents
from chatclient.agents.scope import AgenticScope

Branch = tuple[Callable[[AgenticScope], bool], Agent]


class ConditionalWorkflow(Workflow):
    """Tests its branches in order and runs only the first that holds (``otherwise`` when none does)."""

    def __init__(self, branches: Sequence[Branch], otherwise: Agent | None, **kwargs: Any) -> None:
        predicates = []
        agents: list[Any] = []
        for branch in branches:
            if not isinstance(branch, tuple) or len(branch) != 2 or not callable(branch[0]):
                raise TypeError("conditional takes branches as (predicate(scope) -> bool, agent) tuples")
            predicates.append(branch[0])
            agents.append(branch[1])
        if otherwise is not None:
            agents.append(otherwise)
        super().__init__(agents, where="conditional", **kwargs)
        self.predicates = tuple(predicates)
        self.otherwise = check_agents([otherwise], "conditional")[0] if otherwise is not None else None

    def _choice(self, scope: AgenticScope) -> int | None:
        for i, predicate in enumerate(self.predicates):
            if predicate(scope):
                return i
        return len(self.predicates) if self.otherwise is not None else None

    def _invoke(self, step: Step) -> Any:
        i = self._choice(step.scope)
        last = None if i is None else self._child(step, self.agents[i], str(i), tail=True)
        return self._final(step, last)

    async def _ainvoke(self, step: Step) -> Any:
        i = self._choice(step.scope)
        last = None if i is None else await self._achild(step, self.agents[i], str(i), tail=True)
        return self._final(step, last)


def conditional(
    *branches: Branch,
    otherwise: Agent | None = None,
    name: str = "conditional",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> ConditionalWorkflow:
    """Test ``(predicate(scope), agent)`` branches in order and run the agent of the first that holds,
    or ``otherwise`` when none does (then the result is ``None`` without ``otherwise``)."""
    if not branches and otherwise is None:
        raise ValueError("conditional needs at least one branch")
    return ConditionalWorkflow(
        branches,
        otherwise,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["ConditionalWorkflow", "conditional"]
