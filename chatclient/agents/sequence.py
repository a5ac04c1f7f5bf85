"""``sequence``: agents one after the other on one scope (LangChain4j: ``sequenceBuilder``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chatclient.agents.base import _PASS_THROUGH, Agent, ErrorHandler, Step, Workflow, aexecute, execute
from chatclient.agents.scope import AgenticScope


class SequenceWorkflow(Workflow):
    """Runs its agents in order; the result is the last agent's output unless ``output=`` is given."""

    _reads = ()  # records no inputs of its own (as Workflow._inputs_of), without the call

    def _invoke(self, step: Step) -> Any:
        # The children's keys share one prefix and their path is this workflow's: made once here;
        # each child is ``self._step`` inlined (the error policy runs only when one fails).
        last: Any = None
        run, scope, node = step.run, step.scope, step
        prefix = f"{step.key}/" if step.key else ""
        path = (*step.path, self.name)
        final = len(self.agents) - 1
        for i, agent in enumerate(self.agents):
            key = prefix + str(i)
            try:
                last = execute(agent, run, scope, key, path, node, i == final and step.tail)
            except _PASS_THROUGH:
                raise
            except Exception as exc:
                last = self._recover(step, agent, key, path, scope, i == final, exc)
        return self._final(step, last)

    async def _ainvoke(self, step: Step) -> Any:
        last: Any = None
        run, scope, node = step.run, step.scope, step
        prefix = f"{step.key}/" if step.key else ""
        path = (*step.path, self.name)
        final = len(self.agents) - 1
        for i, agent in enumerate(self.agents):
            key = prefix + str(i)
            try:
                last = await aexecute(agent, run, scope, key, path, node, i == final and step.tail)
            except _PASS_THROUGH:
                raise
            except Exception as exc:
                last = await self._arecover(step, agent, key, path, scope, i == final, exc)
        return self._final(step, last)


def sequence(
    *agents: Agent,
    name: str = "sequence",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> SequenceWorkflow:
    """Run ``agents`` in order on one scope; each reads what the earlier ones wrote.

    >>> from chatclient.agents import agent_function
    >>> @agent_function(output_key="doubled")
    ... def double(x: int) -> int:
    ...     return 2 * x
    >>> @agent_function(output_key="plus_one")
    ... def inc(doubled: int) -> int:
    ...     return doubled + 1
    >>> sequence(double, inc).run(x=20).output
    41
    """
    if not agents:
        raise ValueError("sequence needs at least one agent")
    return SequenceWorkflow(
        agents,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
        where="sequence",
    )


__all__ = ["SequenceWorkflow", "sequence"]
