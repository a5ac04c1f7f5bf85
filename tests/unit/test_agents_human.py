"""Human in the loop: a responder, suspension and resume (also from JSON), two gates in a row;
journal replay never invokes a completed agent again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.agents import AgenticScope, InMemoryScopeStore, agent, agent_function, human_input, parallel, sequence
from chatclient.errors import AgenticScopeError
from chatclient.testing import ScriptedChatModel

CALLS: list[str] = []


@agent_function(output_key="draft")
def draft(topic: str) -> str:
    CALLS.append("draft")
    return f"draft about {topic}"


@agent_function(output_key="final")
def publish(draft: str, approval: str, budget: str = "none") -> str:
    CALLS.append("publish")
    return f"{draft} ({approval}, budget {budget})"


def test_responder_answers_in_line() -> None:
    asked: list[str] = []

    def responder(question: str, scope: AgenticScope) -> str:
        asked.append(question)
        return "yes"

    gate = human_input(question="Publish {{ draft }}?", output_key="approval", responder=responder)
    result = sequence(draft, gate, publish).run(topic="otters")
    assert result.output == "draft about otters (yes, budget none)"
    assert asked == ["Publish draft about otters?"]


def test_async_responder() -> None:
    async def responder(question: str, scope: AgenticScope) -> str:
        return "async yes"

    gate = human_input(question="ok?", output_key="approval", responder=responder)
    result = asyncio.run(sequence(draft, gate, publish).arun(topic="t"))
    assert "async yes" in result.output


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_suspend_and_resume_from_json_with_two_gates(mode: str) -> None:
    CALLS.clear()
    wf = sequence(
        draft,
        human_input(question="Approve {{ draft }}?", output_key="approval", name="approve"),
        human_input(question="Budget?", output_key="budget", name="budget"),
        publish,
    )

    def go(fn: Any, *args: Any, **kwargs: Any) -> Any:
        result = fn(*args, **kwargs)
        return asyncio.run(result) if mode == "async" else result

    first = go(wf.run if mode == "sync" else wf.arun, topic="otters")
    assert first.output is None and first.suspended is not None
    assert first.suspended.question == "Approve draft about otters?"
    text = first.suspended.scope.to_json()  # e.g. stored, then another process resumes

    second = go(wf.resume if mode == "sync" else wf.aresume, text, "approved")
    assert second.suspended is not None and second.suspended.question == "Budget?"
    third = go(wf.resume if mode == "sync" else wf.aresume, second.suspended.scope.to_json(), "100")
    assert third.suspended is None
    assert third.output == "draft about otters (approved, budget 100)"
    assert CALLS == ["draft", "publish"]  # the draft was never made again
    recovered = [c.recovered for c in third.invocations[0].children]
    assert recovered == [True, True, True, False]  # the answers given to resume come from the journal too


def test_resume_of_a_scope_that_is_not_waiting_is_an_error() -> None:
    with pytest.raises(AgenticScopeError, match="not waiting"):
        sequence(draft).resume(AgenticScope({"topic": "x"}), "yes")
    with pytest.raises(TypeError):
        sequence(draft).resume(42, "yes")  # type: ignore[arg-type]


def test_suspended_in_a_parallel_branch_lets_the_others_finish() -> None:
    CALLS.clear()
    wf = sequence(parallel(draft, human_input(question="Name?", output_key="name")), name="wf")
    first = wf.run(topic="t")
    assert first.suspended is not None and CALLS == ["draft"]
    done = wf.resume(first.suspended.scope, "Ada")
    assert done.scope.read("name") == "Ada" and done.scope.read("draft") == "draft about t"
    assert CALLS == ["draft"]


def test_store_keeps_the_suspended_scope() -> None:
    store = InMemoryScopeStore()
    wf = sequence(draft, human_input(question="ok?", output_key="approval"), publish)
    first = wf.run(topic="t", scope_id="job-1", scope_store=store)
    assert first.suspended is not None and store.ids() == ["job-1"]
    stored = store.load("job-1")
    assert stored is not None
    done = wf.resume(stored, "fine", scope_store=store)
    assert done.output.endswith("(fine, budget none)")
    assert store.load("job-1").read("final") == done.output  # type: ignore[union-attr]


def test_model_agents_are_not_called_again_on_resume() -> None:
    model = ScriptedChatModel(["The draft.", "The summary."])
    writer = agent(ChatClient.create(model), name="writer", user="{{ topic }}", output_key="draft")
    summarizer = agent(ChatClient.create(model), name="summarizer", user="{{ draft }} / {{ note }}")
    wf = sequence(writer, human_input(question="Note?", output_key="note"), summarizer)
    first = wf.run(topic="t")
    done = wf.resume(first.suspended.scope.to_json(), "be brief")  # type: ignore[union-attr]
    assert done.output == "The summary."
    assert len(model.prompts) == 2 and model.prompts[1].user_message.text == "The draft. / be brief"


def test_replayed_json_without_a_store_is_refused_in_this_process() -> None:
    from chatclient.errors import RunClaimedError

    CALLS.clear()
    wf = sequence(draft, human_input(question="Publish {{ draft }}?", output_key="approval"), publish)
    text = wf.run(topic="pay").suspended.scope.to_json()  # type: ignore[union-attr]
    assert wf.resume(text, "yes").output == "draft about pay (yes, budget none)"
    with pytest.raises(RunClaimedError) as info:
        wf.resume(text, "yes")
    with pytest.raises(RunClaimedError):
        asyncio.run(wf.aresume(text, "yes"))
    assert info.value.reason == "resumed"
    assert CALLS == ["draft", "publish"]  # publish ran once


def test_pending_token_in_scope_json_is_checked() -> None:
    wf = sequence(human_input(question="q?", output_key="approval"))
    scope = wf.run().suspended.scope  # type: ignore[union-attr]
    assert isinstance(scope._pending, dict) and len(scope._pending["token"]) == 32
    text = scope.to_json().replace(scope._pending["token"], "x" * 300)
    with pytest.raises(AgenticScopeError, match="pending"):
        AgenticScope.from_json(text)
