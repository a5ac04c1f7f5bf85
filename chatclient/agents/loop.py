"""``loop``: repeat agents until an exit condition holds or ``max_iterations`` ran
(LangChain4j: ``loopBuilder``; ``check="iteration"`` is its ``testExitAtLoopEnd(true)``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow
from chatclient.agents.scope import AgenticScope


def _arity(fn: Callable[..., Any]) -> int:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return 1
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params) or len(positional) >= 2:
        return 2
    return 1


class LoopWorkflow(Workflow):
    """Runs its agents in order, again and again; see ``loop``."""

    _reads = ()  # records no inputs of its own (as Workflow._inputs_of), without the call

    def __init__(
        self,
        agents: tuple[Agent, ...],
        *,
        max_iterations: int,
        exit_condition: Callable[..., bool] | None,
        check: str,
        **kwargs: Any,
    ) -> None:
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int) or max_iterations < 1:
            raise ValueError(f"max_iterations must be a positive int, got {max_iterations!r}")
        if check not in ("each", "iteration"):
            raise ValueError(f"check must be 'each' (after every agent) or 'iteration', got {check!r}")
        if exit_condition is not None and not callable(exit_condition):
            raise TypeError("exit_condition must be a callable taking the scope (and the 1-based iteration)")
        super().__init__(agents, where="loop", **kwargs)
        self.max_iterations = max_iterations
        self.exit_condition = exit_condition
        self.check = check
        self._two = exit_condition is not None and _arity(exit_condition) == 2

    def _exit(self, scope: AgenticScope, iteration: int) -> bool:
        condition = self.exit_condition
        if condition is None:
            return False
        return bool(condition(scope, iteration) if self._two else condition(scope))

    def _invoke(self, step: Step) -> Any:
        last: Any = None
        n = len(self.agents)
        prefix = f"{step.key}/" if step.key else ""
        path = (*step.path, self.name)
        scope = step.scope
        for iteration in range(1, self.max_iterations + 1):
            for i, agent in enumerate(self.agents):
                last = self._step(step, agent, f"{prefix}{iteration}.{i}", path, scope, i == n - 1)
                if self.check == "each" and self._exit(step.scope, iteration):
                    return self._final(step, last)
            if self.check == "iteration" and self._exit(step.scope, iteration):
                break
        return self._final(step, last)

    async def _ainvoke(self, step: Step) -> Any:
        last: Any = None
        n = len(self.agents)
        prefix = f"{step.key}/" if step.key else ""
        path = (*step.path, self.name)
        scope = step.scope
        for iteration in range(1, self.max_iterations + 1):
            for i, agent in enumerate(self.agents):
                last = await self._astep(step, agent, f"{prefix}{iteration}.{i}", path, scope, i == n - 1)
                if self.check == "each" and self._exit(step.scope, iteration):
                    return self._final(step, last)
            if self.check == "iteration" and self._exit(step.scope, iteration):
                break
        return self._final(step, last)


def loop(
    *agents: Agent,
    max_iterations: int = 5,
    exit_condition: Callable[..., bool] | None = None,
    check: str = "each",
    name: str = "loop",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> LoopWorkflow:
    """Run ``agents`` in order up to ``max_iterations`` times.

    ``exit_condition(scope)`` or ``exit_condition(scope, iteration)`` (1-based) is tested after each
    agent (``check="each"``, the default) or once at the end of each iteration
    (``check="iteration"``); when it holds the loop ends. The result is the output of the last agent
    invoked unless ``output=`` is given. Without an exit condition the loop runs ``max_iterations``
    times.
    """
    if not agents:
        raise ValueError("loop needs at least one agent")
    return LoopWorkflow(
        agents,
        max_iterations=max_iterations,
        exit_condition=exit_condition,
        check=check,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["LoopWorkflow", "loop"]
