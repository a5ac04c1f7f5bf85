"""``parallel`` and ``parallel_map``: agents at the same time on one scope
(LangChain4j: ``parallelBuilder`` and ``parallelMapperBuilder``).

Concurrency is real: threads in sync runs, tasks in async runs, at most ``max_concurrency`` at once.
Each branch runs on its own view of the scope (reads see the scope as it was when the block began,
plus the branch's own writes); when every branch has finished, ``parallel`` writes the branches'
values into the scope in declaration order, so the result never depends on which branch finished
first. A failing branch does not stop the others; the first failure in declaration order is raised
once all have finished. After a crash, only the branches that had not completed run again.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from chatclient.agents.base import Agent, ErrorHandler, Step, Workflow, check_agents, check_key
from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgentInputError


def _check_concurrency(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_concurrency must be a positive int or None, got {value!r}")
    return value


def _run_threads(jobs: Sequence[Callable[[], Any]], limit: int | None) -> list[tuple[bool, Any]]:
    """Run ``jobs`` on threads (each in a copy of the caller's context); ``(ok, value_or_error)`` in order."""

    def guarded(job: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            return True, job()
        except BaseException as exc:
            return False, exc

    if len(jobs) == 1:
        return [guarded(jobs[0])]
    workers = min(limit or len(jobs), len(jobs))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="agent-parallel") as pool:
        futures = [pool.submit(contextvars.copy_context().run, guarded, job) for job in jobs]
        return [f.result() for f in futures]


async def _run_tasks(jobs: Sequence[Callable[[], Any]], limit: int | None) -> list[tuple[bool, Any]]:
    semaphore = asyncio.Semaphore(limit) if limit is not None else None

    async def guarded(job: Callable[[], Any]) -> tuple[bool, Any]:
        try:
            if semaphore is None:
                return True, await job()
            async with semaphore:
                return True, await job()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            return False, exc

    return list(await asyncio.gather(*(guarded(job) for job in jobs)))


def _outcome(results: list[tuple[bool, Any]]) -> list[Any]:
    for ok, value in results:
        if not ok:
            raise value
    return [value for _, value in results]


class ParallelWorkflow(Workflow):
    """Runs its agents concurrently; see ``parallel``."""

    def __init__(self, agents: Sequence[Agent], *, max_concurrency: int | None, **kwargs: Any) -> None:
        super().__init__(agents, where="parallel", **kwargs)
        self.max_concurrency = _check_concurrency(max_concurrency)

    def _jobs(self, step: Step, branches: list[AgenticScope], run_async: bool) -> list[Callable[[], Any]]:
        n = len(self.agents)
        child = self._achild if run_async else self._child

        def job(i: int) -> Callable[[], Any]:
            return lambda: child(step, self.agents[i], str(i), scope=branches[i], tail=i == n - 1)

        return [job(i) for i in range(n)]

    def _merge(self, step: Step, branches: list[AgenticScope], outputs: list[Any]) -> Any:
        for branch in branches:
            step.scope.merge(branch)
        return self._final(step, outputs[-1])

    def _invoke(self, step: Step) -> Any:
        branches = [step.scope.branch() for _ in self.agents]
        outputs = _outcome(_run_threads(self._jobs(step, branches, False), self.max_concurrency))
        return self._merge(step, branches, outputs)

    async def _ainvoke(self, step: Step) -> Any:
        branches = [step.scope.branch() for _ in self.agents]
        outputs = _outcome(await _run_tasks(self._jobs(step, branches, True), self.max_concurrency))
        return self._merge(step, branches, outputs)


def parallel(
    *agents: Agent,
    max_concurrency: int | None = None,
    name: str = "parallel",
    description: str = "",
    output_key: str | None = None,
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> ParallelWorkflow:
    """Run ``agents`` concurrently (threads in ``run``, tasks in ``arun``), at most
    ``max_concurrency`` at once; their writes reach the scope after all finished, in declaration
    order. The result is the last declared agent's output unless ``output=`` is given."""
    if not agents:
        raise ValueError("parallel needs at least one agent")
    return ParallelWorkflow(
        agents,
        max_concurrency=max_concurrency,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


class ParallelMapWorkflow(Workflow):
    """Runs one agent per item of a list in the scope; see ``parallel_map``."""

    def __init__(
        self, agent: Agent, *, items_key: str, item_key: str, max_concurrency: int | None, **kwargs: Any
    ) -> None:
        super().__init__(check_agents([agent], "parallel_map"), where="parallel_map", **kwargs)
        self.items_key = check_key(items_key, "items_key") or ""
        self.item_key = check_key(item_key, "item_key") or ""
        if not self.items_key or not self.item_key:
            raise ValueError("parallel_map needs items_key and item_key")
        self.max_concurrency = _check_concurrency(max_concurrency)

    def input_types(self) -> dict[str, tuple[Any, bool]]:
        inner = {k: v for k, v in self.agents[0].input_types().items() if k != self.item_key}
        return {self.items_key: (list, True), **inner}

    def input_names(self) -> tuple[str, ...]:
        return tuple(self.input_types())

    def _items(self, step: Step) -> list[Any]:
        scope = step.scope
        if not scope.has(self.items_key):
            raise AgentInputError(self.name, (self.items_key,))
        items = scope.read(self.items_key)
        if not isinstance(items, (list, tuple)):
            raise AgentInputError(
                self.name,
                (self.items_key,),
                f"parallel_map {self.name!r}: scope[{self.items_key!r}] must be a list, got {type(items).__name__}",
            )
        return list(items)

    def _branches(self, step: Step, items: list[Any]) -> list[AgenticScope]:
        branches = []
        for item in items:
            branch = step.scope.branch()
            branch.write(self.item_key, item)
            branches.append(branch)
        return branches

    def _jobs(self, step: Step, branches: list[AgenticScope], run_async: bool) -> list[Callable[[], Any]]:
        agent = self.agents[0]
        child = self._achild if run_async else self._child

        def job(i: int) -> Callable[[], Any]:
            return lambda: child(step, agent, str(i), scope=branches[i])

        return [job(i) for i in range(len(branches))]

    def _invoke(self, step: Step) -> Any:
        branches = self._branches(step, self._items(step))
        outputs = _outcome(_run_threads(self._jobs(step, branches, False), self.max_concurrency)) if branches else []
        return self._final(step, outputs)

    async def _ainvoke(self, step: Step) -> Any:
        branches = self._branches(step, self._items(step))
        outputs = _outcome(await _run_tasks(self._jobs(step, branches, True), self.max_concurrency)) if branches else []
        return self._final(step, outputs)


def parallel_map(
    agent: Agent,
    *,
    items_key: str,
    item_key: str = "item",
    output_key: str | None,
    max_concurrency: int | None = None,
    name: str = "parallel_map",
    description: str = "",
    output: Callable[[AgenticScope], Any] | None = None,
    on_error: ErrorHandler | None = None,
) -> ParallelMapWorkflow:
    """Run ``agent`` once per item of the list ``scope[items_key]``, concurrently (at most
    ``max_concurrency`` at once); each run sees its item as ``scope[item_key]``. The result (written
    to ``output_key``) is the list of outputs in item order; the item runs' other writes stay in
    their branches."""
    return ParallelMapWorkflow(
        agent,
        items_key=items_key,
        item_key=item_key,
        max_concurrency=max_concurrency,
        name=name,
        description=description,
        output_key=output_key,
        output=output,
        on_error=on_error,
    )


__all__ = ["ParallelMapWorkflow", "ParallelWorkflow", "parallel", "parallel_map"]
