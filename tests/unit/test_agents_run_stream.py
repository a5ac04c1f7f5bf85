"""The public streamed run of an agent (``arun_stream`` / ``aresume_stream`` -> ``AgentRunStream``) and
the request context a run hands every model call of its agents (``advisor_params``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.advisor import BaseAdvisor
from chatclient.agents import (
    AgentFinished,
    AgentRunStream,
    InMemoryScopeStore,
    agent,
    agent_function,
    human_input,
    sequence,
)
from chatclient.errors import AgenticScopeError, RunClaimedError
from chatclient.request import ChatClientRequest, ContextKeys
from chatclient.testing import ScriptedChatModel


class Recorder(BaseAdvisor):
    """Records the principal each model call carries."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.seen.append(request.context.get(ContextKeys.PRINCIPAL))
        return request


def _greeter() -> Any:
    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Welcome, {name}."

    return sequence(human_input(question="Who are you?", output_key="name"), greet, output_key="greeting")


def _two_writers(recorder: Recorder) -> Any:
    client = ChatClient.builder(ScriptedChatModel(["draft", "final", "draft 2", "final 2"])).default_advisors(recorder)
    built = client.build()
    writer = agent(built, name="writer", user="{{ topic }}", output_key="story")
    editor = agent(built, name="editor", user="{{ story }}", output_key="story")
    return sequence(writer, editor, output_key="story")


# -- advisor_params ------------------------------------------------------------------------------------


def test_advisor_params_reach_every_model_call_of_the_run() -> None:
    recorder = Recorder()
    flow = _two_writers(recorder)
    assert flow.run(topic="otters", advisor_params={ContextKeys.PRINCIPAL: "ann"}).output == "final"
    assert recorder.seen == ["ann", "ann"]
    asyncio.run(flow.arun(topic="otters", advisor_params={ContextKeys.PRINCIPAL: "bob"}))
    assert recorder.seen[2:] == ["bob", "bob"]


def test_advisor_params_reach_streamed_runs_sync_and_async() -> None:
    recorder = Recorder()
    flow = _two_writers(recorder)
    list(flow.stream(topic="otters", advisor_params={ContextKeys.PRINCIPAL: "ann"}))

    async def consume() -> None:
        async for _ in flow.astream(topic="otters", advisor_params={ContextKeys.PRINCIPAL: "bob"}):
            pass

    asyncio.run(consume())
    assert recorder.seen == ["ann", "ann", "bob", "bob"]


def test_advisor_params_are_not_stored_and_a_resume_brings_its_own() -> None:
    recorder = Recorder()
    client = ChatClient.builder(ScriptedChatModel(["Hi Ada"])).default_advisors(recorder).build()
    flow = sequence(
        human_input(question="Who are you?", output_key="name"),
        agent(client, name="greeter", user="Greet {{ name }}", output_key="greeting"),
        output_key="greeting",
    )
    store = InMemoryScopeStore()
    waiting = flow.run(scope_store=store, scope_id="s1", advisor_params={ContextKeys.PRINCIPAL: "secret-ann"})
    assert waiting.suspended is not None
    assert "secret-ann" not in waiting.scope.to_json()
    done = flow.resume(waiting.scope, "Ada", scope_store=store, advisor_params={ContextKeys.PRINCIPAL: "ann"})
    assert done.output == "Hi Ada" and recorder.seen == ["ann"]


def test_advisor_params_is_a_reserved_name() -> None:
    with pytest.raises(ValueError):
        agent(ChatClient.create(ScriptedChatModel(["x"])), name="w", user="{{ topic }}", output_key="advisor_params")


# -- AgentRunStream ------------------------------------------------------------------------------------


def test_arun_stream_yields_the_events_then_the_result() -> None:
    recorder = Recorder()
    flow = _two_writers(recorder)

    async def main() -> tuple[list[Any], Any]:
        stream = flow.arun_stream(topic="otters")
        assert isinstance(stream, AgentRunStream) and stream.result is None
        events = [event async for event in stream]
        return events, stream.result

    events, result = asyncio.run(main())
    assert result.output == "final" and result.suspended is None
    assert result.scope.read("story") == "final"
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert finished[-1].output == "final"


def test_a_suspension_and_its_streamed_resume() -> None:
    flow = _greeter()
    store = InMemoryScopeStore()

    async def main() -> tuple[Any, Any, list[Any]]:
        first = flow.arun_stream(scope_store=store, scope_id="visit")
        async with first:
            [_ async for _ in first]
        assert first.result is not None
        waiting = store.load("visit")
        assert waiting is not None and waiting.pending_question == "Who are you?"
        second = flow.aresume_stream(waiting, "Ada", scope_store=store)
        events = [event async for event in second]
        return first.result, second.result, events

    suspended, resumed, events = asyncio.run(main())
    assert suspended.suspended is not None and suspended.suspended.question == "Who are you?"
    assert resumed.output == "Welcome, Ada." and resumed.suspended is None
    assert resumed.scope.pending_question is None
    assert [e.name for e in events if isinstance(e, AgentFinished)] == ["human_input", "greet", "sequence"]


def test_a_resume_of_a_spent_suspension_is_refused_when_the_stream_is_made() -> None:
    flow = _greeter()
    store = InMemoryScopeStore()

    async def main() -> None:
        first = flow.arun_stream(scope_store=store, scope_id="visit")
        [_ async for _ in first]
        waiting = store.load("visit")
        assert waiting is not None
        [_ async for _ in flow.aresume_stream(waiting, "Ada", scope_store=store)]
        with pytest.raises((RunClaimedError, AgenticScopeError)):
            flow.aresume_stream(waiting, "Eve", scope_store=store)

    asyncio.run(main())


def test_a_failed_run_raises_from_the_iteration() -> None:
    @agent_function(output_key="x")
    def broken(topic: str) -> str:
        raise RuntimeError("boom")

    async def main() -> AgentRunStream:
        stream = broken.arun_stream(topic="t")
        with pytest.raises(Exception, match="boom"):
            [_ async for _ in stream]
        return stream

    assert asyncio.run(main()).result is None


def test_closing_the_stream_cancels_the_run_in_flight() -> None:
    started = asyncio.Event
    gate: dict[str, Any] = {}

    @agent_function(output_key="x")
    async def slow(topic: str) -> str:
        gate["started"].set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            gate["cancelled"] = True
            raise
        return "never"

    async def main() -> None:
        gate["started"] = started()
        stream = slow.arun_stream(topic="t")
        first = await stream.__anext__()
        assert first.kind == "agent_started"
        await asyncio.wait_for(gate["started"].wait(), 5)
        await asyncio.wait_for(stream.aclose(), 5)
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()

    asyncio.run(main())
    assert gate.get("cancelled") is True


def test_a_stream_closed_before_it_started_gives_its_claim_back() -> None:
    flow = _greeter()
    store = InMemoryScopeStore()

    async def main() -> None:
        unused = flow.arun_stream(scope_store=store, scope_id="visit")
        await unused.aclose()
        again = flow.arun_stream(scope_store=store, scope_id="visit")  # would be RunClaimedError if still held
        [_ async for _ in again]
        assert again.result is not None and again.result.suspended is not None

    asyncio.run(main())


async def test_a_state_mapping_may_hold_names_that_are_run_keywords() -> None:
    """Servers pass a carried-over scope state as one mapping: a key named like a keyword of the run
    (max_duration, scope_id...) is an input like any other, not the keyword."""
    from chatclient.agents import agent_function

    @agent_function(output_key="echo")
    def echo(request: str, max_duration: str, scope_id: str) -> str:
        return f"{request}/{max_duration}/{scope_id}"

    stream = echo.arun_stream({"request": "hi", "max_duration": "long", "scope_id": "s"}, max_duration=30)
    async with stream:
        async for _ in stream:
            pass
    assert stream.result.output == "hi/long/s"
    with pytest.raises(TypeError, match=r"takes its inputs by name, or one mapping of them"):
        echo.arun_stream("hi")  # type: ignore[arg-type]


@pytest.mark.parametrize("with_store", [True, False])
def test_a_bad_max_duration_on_resume_spends_nothing(with_store: bool) -> None:
    # A resume refused for a bad argument must leave the suspension (and the store's claim) as they
    # were: the corrected resume then runs, instead of finding the token spent or the run claimed.
    flow = _greeter()
    store = InMemoryScopeStore()
    first = flow.run(scope_store=store, scope_id="visit")
    assert first.suspended is not None
    waiting = store.load("visit")
    assert waiting is not None
    kwargs: dict[str, Any] = {"scope_store": store} if with_store else {}

    async def main() -> Any:
        with pytest.raises(ValueError, match="max_duration"):
            flow.aresume_stream(waiting, "Ada", max_duration=-1, **kwargs)
        stream = flow.aresume_stream(waiting, "Ada", max_duration=30, **kwargs)
        [_ async for _ in stream]
        return stream.result

    assert asyncio.run(main()).output == "Welcome, Ada."
