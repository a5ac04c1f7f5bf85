"""``human_input``: a step that asks a person (LangChain4j: ``humanInTheLoopBuilder``).

With a ``responder`` the question is answered in-line (a console prompt, a UI callback). Without
one the run suspends: ``run`` returns an ``AgentResult`` whose ``suspended`` holds the question and
the scope, and ``workflow.resume(scope_or_json, answer)`` continues from there, in this process or
another one (the scope's JSON carries everything needed). Completed agents are not invoked again.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from chatclient.agents.base import Agent, Step, SuspendRun, check_key, check_name
from chatclient.agents.scope import AgenticScope


class HumanInputAgent(Agent):
    """Asks ``question`` (a jinja template over the scope) and writes the answer to ``output_key``."""

    def __init__(
        self,
        *,
        question: str,
        output_key: str,
        responder: Callable[[str, AgenticScope], Any] | None = None,
        name: str = "human_input",
        description: str = "",
    ) -> None:
        from chatclient.templates import default_renderer

        if not isinstance(question, str) or not question.strip():
            raise ValueError("human_input needs a question (a template string)")
        key = check_key(output_key)
        if key is None:
            raise ValueError("human_input needs output_key: where the answer goes")
        if responder is not None and not callable(responder):
            raise TypeError("responder must be a callable taking (question, scope)")
        self.question = question
        self.output_key = key
        self.responder = responder
        self.name = check_name(name)
        self.description = description or "Asks a person and waits for the answer."
        self._inputs = tuple(sorted(default_renderer().variables(question)))

    def input_names(self) -> tuple[str, ...]:
        return self._inputs

    def _missing(self, scope: AgenticScope) -> list[str]:
        return [k for k in self._inputs if not scope.has(k)]

    def _ask(self, step: Step) -> str:
        from chatclient.templates import default_renderer

        return default_renderer().render(self.question, dict(step.scope.state))

    def _invoke(self, step: Step) -> Any:
        question = self._ask(step)
        if self.responder is None:
            raise SuspendRun(question, step.key, self.output_key)
        answer = self.responder(question, step.scope)
        if inspect.isawaitable(answer):
            from chatclient.models.base import run_sync

            answer = run_sync(answer)
        return answer

    async def _ainvoke(self, step: Step) -> Any:
        question = self._ask(step)
        if self.responder is None:
            raise SuspendRun(question, step.key, self.output_key)
        if inspect.iscoroutinefunction(self.responder):
            return await self.responder(question, step.scope)
        answer = await asyncio.to_thread(self.responder, question, step.scope)
        if inspect.isawaitable(answer):
            answer = await answer
        return answer


def human_input(
    *,
    question: str,
    output_key: str,
    responder: Callable[[str, AgenticScope], Any] | None = None,
    name: str = "human_input",
    description: str = "",
) -> HumanInputAgent:
    """A step that asks a person ``question`` (jinja over the scope) and writes the answer to
    ``output_key``: through ``responder(question, scope)``, or by suspending the run until
    ``resume(scope_or_json, answer)``."""
    return HumanInputAgent(
        question=question, output_key=output_key, responder=responder, name=name, description=description
    )


__all__ = ["HumanInputAgent", "human_input"]
