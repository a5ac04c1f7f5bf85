"""The step path of agent runs (issue 40.3): what its shortcuts must keep.

A finished run is freed by reference counting; a result's invocation tree is frozen on first read
and equals the scope's record; a workflow's usage is the field-by-field sum of its agents'; the
call check of a workflow kind with its own ``input_types`` reads those; the leaf shortcuts
(inputs read inline, no ``_missing`` look-up when all are there) keep skipping, errors and writes."""

from __future__ import annotations

import asyncio
import functools
import gc
import operator
import pickle
import weakref
from typing import Any

import pytest

from chatclient import ChatClient, ChatResponse, Prompt
from chatclient.agents import AgenticScope, agent, agent_function, conditional, parallel, sequence
from chatclient.errors import AgentExecutionError, AgentInputError
from chatclient.models.base import BaseChatModel, Usage


class UsageModel(BaseChatModel):
    """Answers "ok" with the next of ``usages`` (a model that reports token counts)."""

    def __init__(self, usages: list[Usage]) -> None:
        self.usages = list(usages)

    def call(self, prompt: Prompt) -> ChatResponse:
        return ChatResponse.of_text("ok", usage=self.usages.pop(0))

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return self.call(prompt)


def run(workflow: Any, mode: str, **inputs: Any) -> Any:
    return workflow.run(**inputs) if mode == "sync" else asyncio.run(workflow.arun(**inputs))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@agent_function(output_key="text")
def dot(text: str) -> str:
    return text + "."


@agent_function(output_key="text")
def bang(text: str) -> str:
    return text + "!"


def test_a_finished_run_is_freed_without_the_cycle_collector(mode: str) -> None:
    # Its scope (journal, records) must not sit in a reference cycle until the next GC pass.
    workflow = sequence(dot, parallel(bang, name="branches"), dot, name="freed")
    gc.collect()
    gc.disable()
    try:
        result = run(workflow, mode, text="x")
        assert result.output == "x.!."
        scope_ref = weakref.ref(result.scope)
        del result
        assert scope_ref() is None
    finally:
        gc.enable()


def test_a_branch_scope_reaches_its_root() -> None:
    scope = AgenticScope({"a": 1})
    inner = scope.branch().branch()
    assert inner._root is scope and inner._lock is scope._lock
    copy = pickle.loads(pickle.dumps(scope))
    assert copy._root is copy and copy.state == {"a": 1}


def test_the_result_tree_read_later_is_the_scope_record(mode: str) -> None:
    result = run(sequence(dot, dot, name="two"), mode, text="x")
    tree = result.invocations[0]
    assert result.invocations is result.invocations  # frozen once, then kept
    assert result.invocations == result.scope.invocations
    assert [c.name for c in tree.children] == ["dot", "dot"] and tree.children[1].inputs == {"text": "x."}
    assert tree.children[1].output == "x.." and tree.output == "x.."
    again = pickle.loads(pickle.dumps(result))
    assert again.invocations == result.invocations and again.output == "x.."
    with pytest.raises(AttributeError, match="no attribute 'invocation'"):
        result.invocation  # noqa: B018 (a misspelt name is still an AttributeError)


def test_a_workflows_usage_is_the_sum_of_its_agents(mode: str) -> None:
    usages = [
        Usage(1, 2, cached_input_tokens=1),
        Usage(3, 4, reasoning_tokens=2, reported_total_tokens=10),
        Usage(5, 6, cache_write_tokens=3),
    ]
    client = ChatClient.create(UsageModel(usages))
    agents = [agent(client, name=f"a{i}", user="go {{ text }}", output_key="text") for i in range(3)]
    result = run(sequence(*agents, name="summed"), mode, text="x")
    assert result.usage == functools.reduce(operator.add, usages)
    assert result.usage.total_tokens == 3 + 10 + 11  # a reported total counts as reported


def test_workflow_kinds_with_their_own_input_types_name_those_inputs() -> None:
    @agent_function(output_key="out")
    def needs_a(a: int) -> int:
        return a

    @agent_function(output_key="out")
    def needs_b(b: int) -> int:
        return b

    for workflow in (
        parallel(needs_a, needs_b, name="both"),
        conditional((lambda scope: True, needs_a), (lambda scope: False, needs_b), name="route"),
        sequence(needs_a, name="one"),
    ):
        assert workflow.input_names() == tuple(workflow.input_types())
        assert "a" in workflow.input_names()


def test_leaf_shortcuts_keep_skips_errors_and_writes(mode: str) -> None:
    @agent_function(output_key="greeting")
    def greet(name: str, punctuation: str = "!") -> str:  # an optional input: always looked up
        return f"hi {name}{punctuation}"

    @agent_function(output_key="never", optional=True)
    def optional_one(missing: str) -> str:
        raise AssertionError("an optional agent without its input must be skipped")

    client = ChatClient.create(UsageModel([Usage()]))
    asks = agent(client, name="asks", user="{{ greeting }} / {{ absent }}", output_key="answer")
    result = run(sequence(greet, optional_one, name="some"), mode, name="ann")
    assert result.output is None and result.scope.read("greeting") == "hi ann!"
    skipped = result.invocations[0].children[1]
    assert skipped.skipped and skipped.name == "optional_one"
    assert result.scope._journal["0"] == {"output": "hi ann!", "writes": {"greeting": "hi ann!"}}
    with pytest.raises(AgentExecutionError, match="absent") as failed:
        run(sequence(greet, asks, name="fails"), mode, name="ann")
    assert isinstance(failed.value.__cause__, AgentInputError)
