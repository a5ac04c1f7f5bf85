"""Durable agent workflows on DBOS (extra ``dbos``): a crashed run continues where it stopped.

``durable(workflow, name=...)`` registers an agents workflow (``chatclient.agents``) as a DBOS
workflow and returns the function to call. Inside it, the run's side effects are DBOS steps, whose
results DBOS records in its database:

* every model call of an ``agent(...)`` or ``service_agent(...)`` (the response is recorded),
* every tool call those agents make (the tool's result is recorded),
* every ``@agent_function`` invocation (its output and the scope values it wrote),
* every decision of a ``ToolApprovalAdvisor(callback=...)`` (the decision is recorded, so a
  recovered run never asks a person twice); retries happen inside a step (the model's own policy),
  so a step records one final answer.

When the process dies (even by ``kill -9``), a new process that constructs ``DBOS`` on the same
database, calls ``durable(...)`` with the same name and then ``DBOS.launch()`` recovers the run:
DBOS runs the workflow again, each completed step answers from its record instead of running, and
the run goes on from the first step that had not completed. Nothing that completed runs twice.

    from dbos import DBOS, SetWorkflowID
    from chatclient.durable.dbos import durable

    DBOS(config={"name": "research_app", "system_database_url": "sqlite:///dbos.sqlite"})
    research = durable(sequence(find_sources, summarize, write_report), name="research")
    DBOS.launch()                                 # recovers runs a crash left behind
    with SetWorkflowID("report-2026-12-03"):
        report = research(topic="durable execution")

The workflow's return value is the run's output. What the engine needs from the code between
steps is determinism: given the same step results, the workflow must make the same steps in the
same order. So ``parallel`` / ``parallel_map`` (whose branches finish in any order) are refused,
and a ``human_input`` that suspends the run ends the DBOS workflow with ``DurableSuspendedError``
(resume it with ``workflow.resume`` outside DBOS). Streaming calls become whole calls (a step
records a whole answer). ``durable()`` prepares the agents of ``workflow`` in place; outside a DBOS
workflow they behave as before.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from chatclient.agents.agent import FunctionAgent, LlmAgent, ServiceAgent
from chatclient.agents.base import Agent, Step
from chatclient.client import ChatClient
from chatclient.errors import DurableSuspendedError
from chatclient.models.base import BaseChatModel, ChatModel, ChatResponse
from chatclient.prompt import Prompt

__all__ = ["DurableSuspendedError", "durable"]


def _dbos() -> Any:
    try:
        import dbos
    except ImportError:
        raise ImportError("chatclient.durable.dbos needs DBOS: pip install 'chatclient[dbos]'") from None
    return dbos.DBOS


def _step(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` as a DBOS step inside a workflow (inline outside one, or inside another step)."""
    return _dbos().run_step({"name": name}, fn, *args)


class _StepModel(BaseChatModel):
    """A model whose every call is a DBOS step (a stream is recorded as one whole answer)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.capabilities = model.capabilities
        self.default_options = getattr(model, "default_options", None)
        self.model_name = getattr(model, "model_name", None) or type(model).__name__

    def __repr__(self) -> str:
        return f"_StepModel({self.model!r})"

    def call(self, prompt: Prompt) -> ChatResponse:
        response: ChatResponse = _step(f"model:{self.model_name}", self.model.call, prompt)
        return response

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return await asyncio.to_thread(self.call, prompt)

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        yield self.call(prompt)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield await self.acall(prompt)


class _StepTool:
    """A tool callback whose every call is a DBOS step (its result is recorded)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.timeout = getattr(inner, "timeout", None)

    def __getattr__(self, name: str) -> Any:
        # Everything else the tool machinery reads (requires_approval, is_async, ...) is the tool's own.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def definition(self) -> Any:
        return self.inner.definition

    @property
    def return_direct(self) -> bool:
        return bool(self.inner.return_direct)

    def call(self, arguments: str, context: Any = None) -> Any:
        return _step(f"tool:{self.inner.definition.name}", self.inner.call, arguments, context)

    async def acall(self, arguments: str, context: Any = None) -> Any:
        return await asyncio.to_thread(self.call, arguments, context)


class _StepApproval:
    """A tool-approval callback whose decision is a DBOS step: a recovered run never asks twice."""

    def __init__(self, callback: Callable[[Any], Any]) -> None:
        self.callback = callback

    def _decide(self, call: Any) -> Any:
        from chatclient.models.base import run_sync

        value = self.callback(call)
        return run_sync(value) if inspect.isawaitable(value) else value

    def __call__(self, call: Any) -> Any:
        return _step(f"approval:{call.name}", self._decide, call)


def _durable_approvals(advisors: Any) -> None:
    from chatclient.tools.approval import ToolApprovalAdvisor

    for advisor in advisors:
        callback = getattr(advisor, "callback", None) if isinstance(advisor, ToolApprovalAdvisor) else None
        if callback is not None and not isinstance(callback, _StepApproval):
            advisor.callback = _StepApproval(callback)


def _durable_client(client: ChatClient) -> ChatClient:
    if isinstance(client.model, _StepModel):
        return client
    defaults = client._defaults.copy()
    _durable_approvals(defaults.advisors)
    if defaults.tools:
        from chatclient.tools.decorator import resolve_tools

        defaults.tools = [_StepTool(cb) for cb in resolve_tools(defaults.tools)]
    return ChatClient(_StepModel(client.model), defaults)


def _durable_function(agent: FunctionAgent) -> None:
    original = agent._invoke

    def invoke(step: Step) -> Any:
        ran = False

        def body() -> tuple[Any, dict[str, Any]]:
            nonlocal ran
            ran = True
            output = original(step)
            return output, dict(step.scope._recording or {})

        output, writes = _step(f"agent:{agent.name}", body)
        if not ran:  # answered from the record: put back what the invocation wrote
            for key, value in writes.items():
                step.scope.write(key, value)
        return output

    agent._invoke = invoke  # type: ignore[method-assign]


def _prepare(agent: Agent, seen: set[int]) -> None:
    if id(agent) in seen:
        return
    seen.add(id(agent))
    from chatclient.agents.parallel import ParallelMapWorkflow, ParallelWorkflow

    if isinstance(agent, (ParallelWorkflow, ParallelMapWorkflow)):
        raise TypeError(
            f"durable(): {agent.name!r} runs its branches in parallel, so its steps would not come back in the same "
            "order after a crash; use sequence(...) inside durable workflows"
        )
    if isinstance(agent, LlmAgent):
        agent.client = _durable_client(agent.client)
        _durable_approvals(agent.advisors)
        if agent.tools:
            from chatclient.tools.decorator import resolve_tools

            agent.tools = tuple(_StepTool(cb) for cb in resolve_tools(agent.tools))
    elif isinstance(agent, ServiceAgent):
        agent.client = _durable_client(agent.client)
    elif isinstance(agent, FunctionAgent):
        _durable_function(agent)
    planner = getattr(agent, "planner", None)
    if isinstance(planner, ChatClient):
        agent.planner = _durable_client(planner)  # type: ignore[attr-defined]
    for child in agent.children:
        _prepare(child, seen)


def durable(workflow: Agent, *, name: str) -> Callable[..., Any]:
    """Register ``workflow`` as the DBOS workflow ``name``; returns the function that runs it.

    Call ``durable`` after constructing ``DBOS(config=...)`` and before ``DBOS.launch()``, in every
    process that may run or recover it. The returned function takes the workflow's inputs as
    keyword arguments and returns its output; ``SetWorkflowID`` names (and deduplicates) a run.
    """
    dbos = _dbos()
    if not isinstance(workflow, Agent):
        raise TypeError(f"durable() takes an agent or workflow from chatclient.agents, got {type(workflow).__name__}")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("durable() needs name=: the DBOS workflow name a restarted process recovers by")
    _prepare(workflow, set())

    def run(**inputs: Any) -> Any:
        result = workflow.run(**inputs)
        if result.suspended is not None:
            raise DurableSuspendedError(result.suspended.question, result.suspended.scope.to_json())
        return result.output

    run.__name__ = run.__qualname__ = f"durable_{name}"
    registered: Callable[..., Any] = dbos.workflow(name=name)(run)
    return registered
