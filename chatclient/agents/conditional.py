"""``conditional``: run the first branch whose predicate holds (LangChain4j: ``conditionalBuilder``),
or the branch a model routes the request to (``router=``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow, check_agents
from chatclient.agents.choice import Candidate, Chooser, Chosen
from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgentInputError

if TYPE_CHECKING:
    from chatclient.client import ChatClient

Branch = tuple[Callable[[AgenticScope], bool], Agent]


ROUTE_QUESTION = "Which agent should work on the request?"
"""The question a routed ``conditional`` asks its router (the options are the branches' names)."""


class ConditionalWorkflow(Workflow):
    """Tests its branches in order and runs only the first that holds (``otherwise`` when none does);
    with a ``router``, runs the branch the router's model chooses for ``scope[route_on]``."""

    def __init__(
        self,
        branches: Sequence[Any],
        otherwise: Agent | None,
        *,
        router: ChatClient | None = None,
        route_on: str = "request",
        by_probability: bool | None = None,
        **kwargs: Any,
    ) -> None:
        predicates = []
        agents: list[Any] = []
        for branch in branches:
            if router is not None:
                if isinstance(branch, tuple):
                    raise TypeError("a routed conditional takes agents, not (predicate, agent) branches")
                agents.append(branch)
                continue
            if not isinstance(branch, tuple) or len(branch) != 2 or not callable(branch[0]):
                raise TypeError(
                    "conditional takes branches as (predicate(scope) -> bool, agent) tuples "
                    "(or agents with router=ChatClient)"
                )
            predicates.append(branch[0])
            agents.append(branch[1])
        if otherwise is not None:
            agents.append(otherwise)
        super().__init__(agents, where="conditional", **kwargs)
        self.predicates = tuple(predicates)
        self.otherwise = check_agents([otherwise], "conditional")[0] if otherwise is not None else None
        self.route_on = route_on
        self.router: Chooser | None = None
        if router is not None:
            from chatclient.client import ChatClient

            if not isinstance(router, ChatClient):
                raise TypeError(f"conditional needs router=ChatClient, got {type(router).__name__}")
            names = [a.name for a in self.agents]
            if len(set(names)) != len(names):
                raise ValueError(f"a routed conditional's agents need distinct names, got {names}")
            self.router = Chooser(router, by_probability=by_probability)
            self._candidates = [Candidate(a.name, a.description) for a in self.agents]

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        types = super().input_types()
        if self.router is not None:
            types.setdefault(self.route_on, (None, True))
        return types

    def _choice(self, scope: AgenticScope) -> int | None:
        for i, predicate in enumerate(self.predicates):
            if predicate(scope):
                return i
        return len(self.predicates) if self.otherwise is not None else None

    # -- routing (journalled: a recovered run takes the same branch without asking again) ----------

    def _route_key(self, step: Step) -> str:
        return f"{step.key}/route" if step.key else "route"

    def _routed(self, step: Step) -> tuple[int | None, str]:
        if not step.scope.has(self.route_on):
            raise AgentInputError(self.name, (self.route_on,))
        entry = step.run.journal_get(self._route_key(step))
        return (entry["output"] if entry is not None else None), str(step.scope.read(self.route_on))

    def _record(self, step: Step, chosen: Chosen) -> int:
        step.run.journal_put(self._route_key(step), chosen.index, {})
        if chosen.usage is not None:
            step.node.usage = chosen.usage if step.node.usage is None else step.node.usage + chosen.usage
        return chosen.index

    def _invoke(self, step: Step) -> Any:
        if self.router is not None:
            i, text = self._routed(step)
            if i is None:
                i = self._record(step, self.router.choose(text, ROUTE_QUESTION, self._candidates))
        else:
            i = self._choice(step.scope)
        last = None if i is None else self._child(step, self.agents[i], str(i), tail=True)
        return self._final(step, last)

    async def _ainvoke(self, step: Step) -> Any:
        if self.router is not None:
            i, text = self._routed(step)
            if i is None:
                i = self._record(step, await self.router.achoose(text, ROUTE_QUESTION, self._candidates))
        else:
            i = self._choice(step.scope)
        last = None if i is None else await self._achild(step, self.agents[i], str(i), tail=True)
        return self._final(step, last)


def conditional(
    *branches: Branch | Agent,
    otherwise: Agent | None = None,
    router: ChatClient | None = None,
    route_on: str = "request",
    by_probability: bool | None = None,
    name: str = "conditional",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> ConditionalWorkflow:
    """Test ``(predicate(scope), agent)`` branches in order and run the agent of the first that holds,
    or ``otherwise`` when none does (then the result is ``None`` without ``otherwise``).

    With ``router`` (a ChatClient), the branches are agents and the router's model chooses the one
    to run for ``scope[route_on]`` from their names and descriptions (``otherwise`` is one more
    candidate): by probability on a model that reports token log-probabilities (automatically on
    the embedded ``LlamaCppChatModel``; ``by_probability`` forces it on or off), one forward pass and
    no free text; else as a typed answer (one of the names). The choice is journalled.
    """
    if not branches and otherwise is None:
        raise ValueError("conditional needs at least one branch")
    return ConditionalWorkflow(
        branches,
        otherwise,
        router=router,
        route_on=route_on,
        by_probability=by_probability,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["ROUTE_QUESTION", "ConditionalWorkflow", "conditional"]
