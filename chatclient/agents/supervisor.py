"""``supervisor``: a planner model picks which agent runs next, until it says it is done
(LangChain4j: ``supervisorBuilder``, ``SupervisorResponseStrategy`` LAST / SUMMARY / SCORED).

Each planner prompt lists every sub-agent (name, description, inputs), the scope's ``request`` and
the results so far; the planner answers a ``PlannerStep`` entity (re-asked by the validation advisor
when malformed). The step's arguments that are the agent's inputs are written into the scope (other
keys are dropped), then the named agent runs. An unknown name, arguments that leave out an agent's
inputs, or an argument that does not fit the type of the input it names (``"three"`` for an ``int``)
is reported to the planner in the next prompt and counts as a step; the plan ends at
``agent_name == "done"`` or after ``max_steps`` steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from chatclient.agents.base import Agent, ErrorHandler, Step, check_agents
from chatclient.agents.choice import Candidate, Chooser
from chatclient.agents.planner import Done, PlannerStep, PlannerTurn, PlannerWorkflow
from chatclient.agents.registry import AgentRegistry
from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgentInputError

if TYPE_CHECKING:
    from chatclient.client import ChatClient
    from chatclient.models.base import Usage

DONE = "done"
CHOICE_QUESTION = "Which agent should work on the request next?"
"""The question of the supervisor's choice by probability (the options are the agents' names)."""
_RESULT_CHARS = 2000

PLANNER_SYSTEM = (
    "You coordinate a team of agents to fulfil the user's request. At each step choose ONE agent to call "
    'next and the arguments to give it (its inputs, by name), or answer with agent_name "done" and '
    'arguments {"response": "<the final answer for the user>"} once the request is fulfilled.'
)


class ResponseScores(BaseModel):
    """How well each candidate answers the request, from 0 to 1 (the ``scored`` strategy)."""

    summary: float = Field(description="Score of the planner's summary, 0 to 1")
    last: float = Field(description="Score of the last agent's answer, 0 to 1")


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " [...]"


class ModelPlanner:
    """The supervisor's planner: a model (through a ChatClient) answers a ``PlannerStep`` entity for
    a prompt listing the agents, the request and the results so far.

    On a model that reports token log-probabilities (automatically on the embedded
    ``LlamaCppChatModel``; ``by_probability=True`` / ``False`` forces it on or off), the next agent is
    chosen by probability instead: a ``DecisionModel`` choice among the agents' names (and ``done``
    once an agent ran), one forward pass and no free text; the chosen agent's inputs missing from
    the scope are then asked for as a typed entity (one text input gets the request).
    """

    def __init__(self, client: ChatClient, *, by_probability: bool | None = None) -> None:
        from chatclient.client import ChatClient

        if not isinstance(client, ChatClient):
            raise TypeError(f"supervisor needs planner=ChatClient, got {type(client).__name__}")
        self.client = client
        self.agents: AgentRegistry = AgentRegistry()
        self.chooser = Chooser(client, by_probability=by_probability)

    def bind(self, agents: AgentRegistry) -> None:
        """Take the workflow's agents (their names, descriptions and inputs go into every prompt)."""
        self.agents = agents

    def prompt_text(self, request: Any, history: Sequence[PlannerTurn]) -> str:
        """The planner prompt: the request, how to call each agent, the results so far."""
        lines = ["Request:", str(request), "", "Agents (how to call each, then what it does):"]
        for a in self.agents:
            arguments = ", ".join(f'"{k}": ...' for k in a.input_names())
            call = f'{{"agent_name": "{a.name}", "arguments": {{{arguments}}}}}'
            lines.append(f"- {call}: {a.description or 'no description'}")
        lines.append('- {"agent_name": "done", "arguments": {"response": "..."}}: the request is fulfilled')
        lines += ["", "Results so far:"]
        if not history:
            lines.append("none yet")
        for i, h in enumerate(history, 1):
            args = json.dumps(h.arguments, ensure_ascii=False, default=str)
            if h.error is not None:
                lines.append(f"{i}. {h.agent_name}({args}) -> ERROR: {h.error}")
            else:
                lines.append(f"{i}. {h.agent_name}({args}) -> {_cut(h.output)}")
        lines += ["", "Which agent next, with which arguments?"]
        return "\n".join(lines)

    def ask(self, text: str, target: type[BaseModel]) -> tuple[Any, Usage | None]:
        """One structured call of the planner model (re-asked by the validation advisor when malformed)."""
        from advisors.validation import StructuredOutputValidationAdvisor

        spec = self.client.prompt().system(PLANNER_SYSTEM).user(text)
        spec.advisors(StructuredOutputValidationAdvisor(target, 2))
        answer = spec.call().response_entity(target)
        return answer.entity, _usage(answer.response)

    async def aask(self, text: str, target: type[BaseModel]) -> tuple[Any, Usage | None]:
        """Async ``ask``."""
        from advisors.validation import StructuredOutputValidationAdvisor

        spec = self.client.prompt().system(PLANNER_SYSTEM).user(text)
        spec.advisors(StructuredOutputValidationAdvisor(target, 2))
        answer = await spec.acall().response_entity(target)
        return answer.entity, _usage(answer.response)

    @staticmethod
    def _as_decision(planned: PlannerStep) -> PlannerStep | Done:
        return Done(planned.arguments.get("response")) if planned.agent_name == DONE else planned

    # -- choosing by probability ------------------------------------------------------------------

    def _candidates(self, history: Sequence[PlannerTurn]) -> list[Candidate]:
        out = [Candidate(a.name, a.description) for a in self.agents]
        if any(turn.error is None for turn in history):
            out.append(Candidate(DONE, "the request is fulfilled by the results so far"))
        return out

    def _choice_text(self, request: Any, history: Sequence[PlannerTurn]) -> str:
        lines = [str(request)]
        done = [turn for turn in history if turn.error is None]
        if done:
            lines.append("\nResults so far:")
            lines += [f"- {turn.agent_name}: {_cut(turn.output)}" for turn in done]
        return "\n".join(lines)

    def _missing_inputs(self, agent: Agent, scope: AgenticScope) -> dict[str, Any]:
        types = agent.input_types()
        return {k: types[k][0] for k in agent._missing(scope) if k in types}

    def _arguments_target(self, agent: Agent, missing: dict[str, Any]) -> type[BaseModel]:
        from pydantic import create_model

        fields: dict[str, Any] = {k: (str if tp is None or tp is Any else tp, ...) for k, tp in missing.items()}
        return create_model(f"{agent.name.title().replace(' ', '')}Arguments", **fields)

    def _arguments_text(self, agent: Agent, request: Any, missing: dict[str, Any]) -> str:
        names = ", ".join(missing)
        return f"Request: {request}\n\nGive the inputs ({names}) for the agent {agent.name!r}: {agent.description}"

    def _step_without_arguments(self, agent: Agent, request: Any, missing: dict[str, Any]) -> PlannerStep | None:
        if not missing:
            return PlannerStep(agent_name=agent.name)
        if len(missing) == 1 and next(iter(missing.values())) in (None, str, Any):
            return PlannerStep(agent_name=agent.name, arguments={next(iter(missing)): str(request)})
        return None

    def _by_probability(
        self, scope: AgenticScope, history: Sequence[PlannerTurn]
    ) -> tuple[PlannerStep | Done, Usage | None]:
        request = scope.read("request")
        candidates = self._candidates(history)
        chosen = self.chooser.choose(self._choice_text(request, history), CHOICE_QUESTION, candidates)
        name = candidates[chosen.index].name
        if name == DONE:
            return Done(), chosen.usage
        agent = self.agents.get(name)
        missing = self._missing_inputs(agent, scope)
        step = self._step_without_arguments(agent, request, missing)
        if step is not None:
            return step, chosen.usage
        arguments, usage = self.ask(
            self._arguments_text(agent, request, missing), self._arguments_target(agent, missing)
        )
        total = usage if chosen.usage is None else chosen.usage if usage is None else chosen.usage + usage
        return PlannerStep(agent_name=name, arguments=arguments.model_dump()), total

    async def _aby_probability(
        self, scope: AgenticScope, history: Sequence[PlannerTurn]
    ) -> tuple[PlannerStep | Done, Usage | None]:
        request = scope.read("request")
        candidates = self._candidates(history)
        chosen = await self.chooser.achoose(self._choice_text(request, history), CHOICE_QUESTION, candidates)
        name = candidates[chosen.index].name
        if name == DONE:
            return Done(), chosen.usage
        agent = self.agents.get(name)
        missing = self._missing_inputs(agent, scope)
        step = self._step_without_arguments(agent, request, missing)
        if step is not None:
            return step, chosen.usage
        target = self._arguments_target(agent, missing)
        arguments, usage = await self.aask(self._arguments_text(agent, request, missing), target)
        total = usage if chosen.usage is None else chosen.usage if usage is None else chosen.usage + usage
        return PlannerStep(agent_name=name, arguments=arguments.model_dump()), total

    # -- deciding --------------------------------------------------------------------------------

    def decide(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> tuple[PlannerStep | Done, Usage | None]:
        """The next step and the usage of the call that chose it."""
        if self.chooser.uses_probability:
            return self._by_probability(scope, history)
        planned, usage = self.ask(self.prompt_text(scope.read("request"), history), PlannerStep)
        return self._as_decision(planned), usage

    async def adecide(
        self, scope: AgenticScope, history: Sequence[PlannerTurn]
    ) -> tuple[PlannerStep | Done, Usage | None]:
        """Async ``decide``."""
        if self.chooser.uses_probability:
            return await self._aby_probability(scope, history)
        planned, usage = await self.aask(self.prompt_text(scope.read("request"), history), PlannerStep)
        return self._as_decision(planned), usage

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """``Planner.next``: the next step (``Done`` when the model answers ``done``)."""
        return self.decide(scope, history)[0]

    async def anext(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        """Async ``next``."""
        return (await self.adecide(scope, history))[0]


class SupervisorWorkflow(PlannerWorkflow):
    """A planner workflow whose planner is a model; see ``supervisor``."""

    planner: ModelPlanner

    def __init__(
        self,
        agents: tuple[Agent, ...],
        *,
        planner: ChatClient,
        max_steps: int,
        response: str,
        by_probability: bool | None = None,
        **kwargs: Any,
    ) -> None:
        if response not in ("last", "summary", "scored"):
            raise ValueError(f"response must be 'last', 'summary' or 'scored', got {response!r}")
        names = [a.name for a in check_agents(agents, "supervisor")]
        if len(set(names)) != len(names) or DONE in names:
            raise ValueError(f"a supervisor's agents need distinct names other than 'done', got {names}")
        model_planner = ModelPlanner(planner, by_probability=by_probability)
        super().__init__(agents, planner=model_planner, max_steps=max_steps, where="supervisor", **kwargs)
        self.response = response

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        return {"request": (str, True)}

    def input_names(self) -> tuple[str, ...]:
        return ("request",)

    def _inputs_of(self, scope: AgenticScope) -> dict[str, Any]:
        return {"request": scope.read("request")} if scope.has("request") else {}

    def _start(self, step: Step) -> None:
        if not step.scope.has("request"):
            raise AgentInputError(self.name, ("request",))

    def _plan(self, step: Step, history: Sequence[PlannerTurn]) -> tuple[PlannerStep | Done, Usage | None]:
        return self.planner.decide(step.scope, history)

    async def _aplan(self, step: Step, history: Sequence[PlannerTurn]) -> tuple[PlannerStep | Done, Usage | None]:
        return await self.planner.adecide(step.scope, history)

    def _summary(self, done: Done | None) -> Any:
        return done.output if done is not None else None

    def _result_of(self, step: Step, done: Done | None, last: Any) -> Any:
        return self._respond(step, step.scope.read("request"), self._summary(done), last, None)

    async def _aresult_of(self, step: Step, done: Done | None, last: Any) -> Any:
        summary = self._summary(done)
        request = step.scope.read("request")
        scores = None
        if self.response == "scored" and summary is not None and last is not None:
            scores = await self._ascores(step, request, summary, last)
        return self._respond(step, request, summary, last, scores)

    def _score_key(self, step: Step) -> str:
        return f"{step.key}/score" if step.key else "score"

    def _respond(self, step: Step, request: Any, summary: Any, last: Any, scores: ResponseScores | None) -> Any:
        if self.response == "last" or summary is None:
            return last
        if self.response == "summary" or last is None:
            return summary
        if scores is None:
            scores = self._scores(step, request, summary, last)
        return summary if scores.summary >= scores.last else last

    def _score_text(self, request: Any, summary: Any, last: Any) -> str:
        return (
            f"Request:\n{request}\n\nCandidate 'summary':\n{_cut(summary)}\n\nCandidate 'last':\n{_cut(last)}\n\n"
            "Score how well each candidate fulfils the request, from 0 to 1."
        )

    def _scores(self, step: Step, request: Any, summary: Any, last: Any) -> ResponseScores:
        key = self._score_key(step)
        entry = step.run.journal_get(key)
        if entry is not None:
            return ResponseScores.model_validate(entry["output"])
        scores, usage = self.planner.ask(self._score_text(request, summary, last), ResponseScores)
        step.run.journal_put(key, scores.model_dump(mode="json"), {})
        if usage is not None:
            step.node.usage = usage if step.node.usage is None else step.node.usage + usage
        return scores  # type: ignore[no-any-return]

    async def _ascores(self, step: Step, request: Any, summary: Any, last: Any) -> ResponseScores:
        key = self._score_key(step)
        entry = step.run.journal_get(key)
        if entry is not None:
            return ResponseScores.model_validate(entry["output"])
        scores, usage = await self.planner.aask(self._score_text(request, summary, last), ResponseScores)
        step.run.journal_put(key, scores.model_dump(mode="json"), {})
        if usage is not None:
            step.node.usage = usage if step.node.usage is None else step.node.usage + usage
        return scores  # type: ignore[no-any-return]


def _usage(response: Any) -> Usage | None:
    return getattr(getattr(response, "metadata", None), "usage", None)


def supervisor(
    *agents: Agent,
    planner: ChatClient,
    max_steps: int = 10,
    response: str = "last",
    name: str = "supervisor",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
    by_probability: bool | None = None,
) -> SupervisorWorkflow:
    """Let ``planner`` (a ChatClient) choose which of ``agents`` to call, with which arguments, until
    it answers ``done`` or ``max_steps`` steps ran. The request is ``scope["request"]``.

    ``response``: ``"last"`` (default) returns the last agent's output, ``"summary"`` the planner's
    ``done`` response, ``"scored"`` asks the planner to score both against the request and returns
    the better one.

    ``by_probability``: choose the next agent from the planner model's token log-probabilities
    (``None``, the default: on the embedded ``LlamaCppChatModel``, which reports them); see
    ``ModelPlanner``.
    """
    if not agents:
        raise ValueError("supervisor needs at least one agent")
    return SupervisorWorkflow(
        agents,
        planner=planner,
        max_steps=max_steps,
        response=response,
        by_probability=by_probability,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["ModelPlanner", "PlannerStep", "ResponseScores", "SupervisorWorkflow", "supervisor"]
