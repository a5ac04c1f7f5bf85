"""Workflow streams: AgentStarted/AgentFinished from every agent, only the last agent's text, the
tool events of every agent, and cancellation."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.agents import AgentFinished, AgentStarted, agent, agent_function, sequence
from chatclient.events import TextDelta, ToolCallFinished, ToolCallStarted
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool


def _pipeline() -> tuple[Any, ScriptedChatModel, ScriptedChatModel]:
    m1 = ScriptedChatModel([["Long ", "story."]])
    m2 = ScriptedChatModel([["Sh", "ort."]])
    writer = agent(ChatClient.create(m1), name="writer", user="{{ topic }}", output_key="story")
    editor = agent(ChatClient.create(m2), name="editor", user="{{ story }}", output_key="story")
    return sequence(writer, editor, name="pipeline"), m1, m2


def _summary(events: list[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for e in events:
        if isinstance(e, AgentStarted):
            out.append(("start", e.name))
        elif isinstance(e, AgentFinished):
            out.append(("end", e.name))
        elif isinstance(e, TextDelta):
            out.append(("text", e.text))
    return out


EXPECTED = [
    ("start", "pipeline"),
    ("start", "writer"),
    ("end", "writer"),
    ("start", "editor"),
    ("text", "Sh"),
    ("text", "ort."),
    ("end", "editor"),
    ("end", "pipeline"),
]


def test_stream_yields_agent_events_and_only_the_last_agents_text() -> None:
    wf, _, _ = _pipeline()
    events = list(wf.stream(topic="otters"))
    assert _summary(events) == EXPECTED
    last = events[-1]
    assert isinstance(last, AgentFinished) and last.output == "Short." and last.duration > 0


def test_astream_yields_the_same() -> None:
    wf, _, _ = _pipeline()

    async def collect() -> list[Any]:
        return [e async for e in wf.astream(topic="otters")]

    assert _summary(asyncio.run(collect())) == EXPECTED


def test_tool_events_of_an_inner_agent_are_passed_on() -> None:
    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return "found"

    m1 = ScriptedChatModel([AssistantMessage(None, (ToolCall("c1", "lookup", '{"q": "x"}'),)), "facts"])
    researcher = agent(ChatClient.create(m1), name="researcher", user="{{ topic }}", tools=[lookup], output_key="facts")
    writer = agent(ChatClient.create(ScriptedChatModel([["done"]])), name="writer", user="{{ facts }}")
    events = list(sequence(researcher, writer).stream(topic="t"))
    kinds = [type(e).__name__ for e in events]
    assert "ToolCallStarted" in kinds and "ToolCallFinished" in kinds
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    assert started.name == "lookup"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["done"]
    assert any(isinstance(e, ToolCallFinished) and e.result == "found" for e in events)


def test_error_of_a_stream_is_raised_after_its_events() -> None:
    @agent_function(name="broken")
    def broken() -> None:
        raise RuntimeError("no")

    events: list[Any] = []
    try:
        for e in sequence(broken, name="wf").stream():
            events.append(e)
    except Exception as exc:
        assert type(exc).__name__ == "AgentExecutionError"
    else:
        raise AssertionError("the stream should fail")
    finished = [e for e in events if isinstance(e, AgentFinished)]
    assert finished[0].name == "broken" and isinstance(finished[0].error, RuntimeError)


def test_closing_a_sync_stream_stops_the_workflow() -> None:
    calls: list[int] = []
    release = threading.Event()

    @agent_function(name="step", output_key="n")
    def step(n: int = 0) -> int:
        calls.append(n)
        release.wait(5)
        return n + 1

    from chatclient.agents import loop

    events = loop(step, max_iterations=50).stream()
    for e in events:
        if isinstance(e, AgentStarted) and e.name == "step":
            break
    threading.Timer(0.2, release.set).start()  # the agent in flight returns after the close began
    events.close()  # type: ignore[attr-defined]
    assert len(calls) == 1  # the agent in flight finished; no further agent started


def test_closing_an_async_stream_cancels_running_agents() -> None:
    cancelled = asyncio.Event()

    @agent_function(name="slow")
    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    async def main() -> None:
        events = sequence(slow).astream()
        async for e in events:
            if isinstance(e, AgentStarted) and e.name == "slow":
                break
        await events.aclose()  # type: ignore[attr-defined]
        assert cancelled.is_set()

    asyncio.run(asyncio.wait_for(main(), 10))
