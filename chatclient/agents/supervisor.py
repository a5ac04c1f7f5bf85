"""``supervisor``: a planner model picks which agent runs next, until it says it is done
(LangChain4j: ``supervisorBuilder``, ``SupervisorResponseStrategy`` LAST / SUMMARY / SCORED).

Each planner prompt lists every sub-agent (name, description, inputs), the scope's ``request`` and
the results so far; the planner answers a ``PlannerStep`` entity (re-asked by the validation
advisor when malformed). The step's arguments are written into the scope, then the named agent
runs. An unknown name, arguments that leave out an agent's inputs, or an argument that does not fit
the type of the input it names (``"three"`` for an ``int``) is reported to the planner in the next
prompt and counts as a step; the plan ends at ``agent_name == "done"`` or after ``max_steps`` steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow
from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgentInputError

if TYPE_CHECKING:
    from chatclient.client import ChatClient
    from chatclient.models.base import Usage

DONE = "done"
_RESULT_CHARS = 2000

PLANNER_SYSTEM = (
    "You coordinate a team of agents to fulfil the user's request. At each step choose ONE agent to call "
    'next and the arguments to give it (its inputs, by name), or answer with agent_name "done" and '
    'arguments {"response": "<the final answer for the user>"} once the request is fulfilled.'
)


class PlannerStep(BaseModel):
    """One planner decision: the agent to call next (``"done"`` to finish) and its arguments."""

    model_config = ConfigDict(frozen=True)

    agent_name: str = Field(description='The name of the agent to call next, or "done" when finished')
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description='The agent\'s inputs by name; for "done": {"response": "<final answer>"}',
    )


class ResponseScores(BaseModel):
    """How well each candidate answers the request, from 0 to 1 (the ``scored`` strategy)."""

    summary: float = Field(description="Score of the planner's summary, 0 to 1")
    last: float = Field(description="Score of the last agent's answer, 0 to 1")


def _cut(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + " [...]"


class SupervisorWorkflow(Workflow):
    """Lets a planner model choose the agents; see ``supervisor``."""

    def __init__(
        self, agents: tuple[Agent, ...], *, planner: ChatClient, max_steps: int, response: str, **kwargs: Any
    ) -> None:
        from chatclient.client import ChatClient

        if not isinstance(planner, ChatClient):
            raise TypeError(f"supervisor needs planner=ChatClient, got {type(planner).__name__}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be a positive int, got {max_steps!r}")
        if response not in ("last", "summary", "scored"):
            raise ValueError(f"response must be 'last', 'summary' or 'scored', got {response!r}")
        super().__init__(agents, where="supervisor", **kwargs)
        names = [a.name for a in self.agents]
        if len(set(names)) != len(names) or DONE in names:
            raise ValueError(f"a supervisor's agents need distinct names other than 'done', got {names}")
        self.planner = planner
        self.max_steps = max_steps
        self.response = response
        self._by_name = {a.name: a for a in self.agents}
        self._adapters: dict[tuple[str, str], TypeAdapter[Any] | None] = {}

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        return {"request": (str, True)}

    def input_names(self) -> tuple[str, ...]:
        return ("request",)

    def _inputs_of(self, scope: AgenticScope) -> dict[str, Any]:
        return {"request": scope.read("request")} if scope.has("request") else {}

    # -- prompts ----------------------------------------------------------------------------------

    def _prompt(self, request: Any, history: list[dict[str, Any]]) -> str:
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
            args = json.dumps(h["arguments"], ensure_ascii=False, default=str)
            if "error" in h:
                lines.append(f"{i}. {h['agent']}({args}) -> ERROR: {h['error']}")
            else:
                lines.append(f"{i}. {h['agent']}({args}) -> {_cut(h['output'])}")
        lines += ["", "Which agent next, with which arguments?"]
        return "\n".join(lines)

    def _ask(self, text: str, target: type[BaseModel]) -> tuple[Any, Usage | None]:
        from advisors.validation import StructuredOutputValidationAdvisor

        spec = self.planner.prompt().system(PLANNER_SYSTEM).user(text)
        spec.advisors(StructuredOutputValidationAdvisor(target, 2))
        answer = spec.call().response_entity(target)
        return answer.entity, _usage(answer.response)

    async def _aask(self, text: str, target: type[BaseModel]) -> tuple[Any, Usage | None]:
        from advisors.validation import StructuredOutputValidationAdvisor

        spec = self.planner.prompt().system(PLANNER_SYSTEM).user(text)
        spec.advisors(StructuredOutputValidationAdvisor(target, 2))
        answer = await spec.acall().response_entity(target)
        return answer.entity, _usage(answer.response)

    # -- one step, shared by both modes -----------------------------------------------------------

    def _planned(self, step: Step, n: int) -> tuple[str, PlannerStep | None]:
        key = f"{step.key}/plan{n}" if step.key else f"plan{n}"
        entry = step.run.journal_get(key)
        if entry is None:
            return key, None
        return key, PlannerStep.model_validate(entry["output"])

    def _record(self, step: Step, key: str, planned: PlannerStep, usage: Usage | None) -> None:
        step.run.journal_put(key, planned.model_dump(mode="json"), {})
        if usage is not None:
            step.node.usage = usage if step.node.usage is None else step.node.usage + usage

    def _check(self, step: Step) -> Any:
        if not step.scope.has("request"):
            raise AgentInputError(self.name, ("request",))
        return step.scope.read("request")

    def _choose(self, step: Step, planned: PlannerStep, history: list[dict[str, Any]]) -> Agent | None:
        agent = self._by_name.get(planned.agent_name)
        if agent is None:
            names = ", ".join(self._by_name)
            history.append(
                {
                    "agent": planned.agent_name,
                    "arguments": planned.arguments,
                    "error": f"there is no agent named {planned.agent_name!r}; choose one of: {names}, or done",
                }
            )
            return None
        wrong = self._wrong_type(agent, planned.arguments)
        if wrong is not None:
            # A wrongly typed argument is the planner's mistake too: it goes back to the planner.
            history.append({"agent": agent.name, "arguments": planned.arguments, "error": wrong})
            return None
        for k, v in planned.arguments.items():
            if isinstance(k, str) and k:
                step.scope.write(k, v)
        missing = [] if agent.optional else agent._missing(step.scope)
        if missing:
            # The planner left out inputs: its mistake to correct, not a failure of the agent.
            history.append(
                {
                    "agent": agent.name,
                    "arguments": planned.arguments,
                    "error": f"missing arguments {', '.join(map(repr, missing))}; give them in arguments",
                }
            )
            return None
        return agent

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

    def _score_key(self, step: Step) -> str:
        return f"{step.key}/score" if step.key else "score"

    def _invoke(self, step: Step) -> Any:
        request = self._check(step)
        history: list[dict[str, Any]] = []
        last: Any = None
        summary: Any = None
        for n in range(1, self.max_steps + 1):
            key, planned = self._planned(step, n)
            if planned is None:
                planned, usage = self._ask(self._prompt(request, history), PlannerStep)
                self._record(step, key, planned, usage)
            if planned.agent_name == DONE:
                summary = planned.arguments.get("response")
                break
            agent = self._choose(step, planned, history)
            if agent is not None:
                last = self._child(step, agent, f"s{n}")
                history.append({"agent": agent.name, "arguments": planned.arguments, "output": last})
        return self._final(step, self._respond(step, request, summary, last, None))

    async def _ainvoke(self, step: Step) -> Any:
        request = self._check(step)
        history: list[dict[str, Any]] = []
        last: Any = None
        summary: Any = None
        for n in range(1, self.max_steps + 1):
            key, planned = self._planned(step, n)
            if planned is None:
                planned, usage = await self._aask(self._prompt(request, history), PlannerStep)
                self._record(step, key, planned, usage)
            if planned.agent_name == DONE:
                summary = planned.arguments.get("response")
                break
            agent = self._choose(step, planned, history)
            if agent is not None:
                last = await self._achild(step, agent, f"s{n}")
                history.append({"agent": agent.name, "arguments": planned.arguments, "output": last})
        scores = None
        if self.response == "scored" and summary is not None and last is not None:
            scores = await self._ascores(step, request, summary, last)
        return self._final(step, self._respond(step, request, summary, last, scores))

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
        scores, usage = self._ask(self._score_text(request, summary, last), ResponseScores)
        step.run.journal_put(key, scores.model_dump(mode="json"), {})
        if usage is not None:
            step.node.usage = usage if step.node.usage is None else step.node.usage + usage
        return scores  # type: ignore[no-any-return]

    async def _ascores(self, step: Step, request: Any, summary: Any, last: Any) -> ResponseScores:
        key = self._score_key(step)
        entry = step.run.journal_get(key)
        if entry is not None:
            return ResponseScores.model_validate(entry["output"])
        scores, usage = await self._aask(self._score_text(request, summary, last), ResponseScores)
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
) -> SupervisorWorkflow:
    """Let ``planner`` (a ChatClient) choose which of ``agents`` to call, with which arguments, until
    it answers ``done`` or ``max_steps`` steps ran. The request is ``scope["request"]``.

    ``response``: ``"last"`` (default) returns the last agent's output, ``"summary"`` the planner's
    ``done`` response, ``"scored"`` asks the planner to score both against the request and returns
    the better one.
    """
    if not agents:
        raise ValueError("supervisor needs at least one agent")
    return SupervisorWorkflow(
        agents,
        planner=planner,
        max_steps=max_steps,
        response=response,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["PlannerStep", "ResponseScores", "SupervisorWorkflow", "supervisor"]
