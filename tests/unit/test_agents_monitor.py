"""AgentMonitor trees, the HTML report (escaping), OpenTelemetry invoke_agent spans, as_tool and
service_agent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any, Protocol

import pytest

from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.agents import AgentMonitor, agent, agent_function, parallel, sequence, service_agent
from chatclient.testing import ScriptedChatModel


@agent_function(output_key="n", description="Adds one.")
def inc(n: int = 0) -> int:
    return n + 1


def test_monitor_keeps_the_tree_of_each_scope() -> None:
    monitor = AgentMonitor()
    model = ScriptedChatModel(["answer"])
    asker = agent(ChatClient.create(model), name="asker", user="{{ q }}")
    sequence(inc, asker, name="wf").run(q="why?", scope_id="s1", monitor=monitor)
    sequence(inc, name="other").run(scope_id="s2", monitor=monitor)
    tree = monitor.tree("s1")
    assert tree.name == "wf" and [c.name for c in tree.children] == ["inc", "asker"]
    asked = tree.children[1]
    assert asked.inputs == {"q": "why?"} and asked.output == "answer"
    assert asked.duration is not None and asked.duration >= 0
    assert asked.usage is not None and asked.usage.total_tokens > 0 and tree.usage == asked.usage
    assert monitor.tree("s2").name == "other" and monitor.scope_ids() == ["s1", "s2"]
    with pytest.raises(KeyError):
        monitor.tree("nope")


def test_monitor_keeps_at_most_max_sessions() -> None:
    monitor = AgentMonitor(max_sessions=2)
    for i in range(4):
        inc.run(scope_id=f"s{i}", monitor=monitor)
    assert monitor.scope_ids() == ["s2", "s3"]


def test_html_report_is_self_contained_and_escapes_values(tmp_path: Any) -> None:
    monitor = AgentMonitor()

    @agent_function(output_key="html")
    def evil(payload: str) -> str:
        return payload

    sequence(evil, name="wf<script>").run(payload="<script>alert(1)</script>", scope_id='"><b>', monitor=monitor)
    path = tmp_path / "report.html"
    text = monitor.html(path)
    assert path.read_text(encoding="utf-8") == text
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<svg" in text and "http://" not in text and "https://" not in text
    assert 'data-agent="evil"' in text


# -- OpenTelemetry ------------------------------------------------------------------------------


@pytest.fixture
def spans() -> Iterator[Any]:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from chatclient.observability.otel import OpenTelemetryObserver
    from chatclient.observation import set_observer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = set_observer(OpenTelemetryObserver(tracer_provider=provider))
    try:
        yield exporter
    finally:
        set_observer(previous)


def _parents(exporter: Any) -> dict[str, str | None]:
    finished = exporter.get_finished_spans()
    by_id = {s.context.span_id: s.name for s in finished}
    return {s.name: (by_id.get(s.parent.span_id) if s.parent else None) for s in finished}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_invoke_agent_spans_wrap_the_agents_chat_spans(spans: Any, mode: str) -> None:
    model = ScriptedChatModel(["one", "two"])
    a = agent(ChatClient.create(model), name="alpha", description="first", user="{{ q }}")
    b = agent(ChatClient.create(model), name="beta", user="{{ q }}")
    wf = parallel(a, b, name="team")
    if mode == "sync":
        wf.run(q="x")
    else:
        asyncio.run(wf.arun(q="x"))
    finished = spans.get_finished_spans()
    agent_spans = {s.name: s for s in finished if s.name.startswith("invoke_agent")}
    assert set(agent_spans) == {"invoke_agent team", "invoke_agent alpha", "invoke_agent beta"}
    alpha = agent_spans["invoke_agent alpha"]
    assert alpha.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert alpha.attributes["gen_ai.agent.name"] == "alpha"
    assert alpha.attributes["gen_ai.agent.description"] == "first"
    by_id = {s.context.span_id: s for s in finished}
    for name in ("invoke_agent alpha", "invoke_agent beta"):
        assert by_id[agent_spans[name].parent.span_id].name == "invoke_agent team"
    chats = [s for s in finished if s.name.startswith("chat")]
    assert len(chats) == 2
    assert sorted(by_id[c.parent.span_id].name for c in chats) == ["invoke_agent alpha", "invoke_agent beta"]


def test_failed_agent_span_records_the_error(spans: Any) -> None:
    @agent_function(name="broken")
    def broken() -> None:
        raise RuntimeError("no")

    from chatclient.errors import AgentExecutionError

    with pytest.raises(AgentExecutionError):
        sequence(broken, name="wf").run()
    span = next(s for s in spans.get_finished_spans() if s.name == "invoke_agent broken")
    assert span.attributes["error.type"] == "RuntimeError"


# -- as_tool ----------------------------------------------------------------------------------------


def test_agent_as_tool_of_another_client(mode: str = "sync") -> None:
    writer_model = ScriptedChatModel(["A poem about the sea."])
    poet = agent(
        ChatClient.create(writer_model),
        name="poet",
        description="Writes a poem on a topic.",
        user="Write a poem about {{ topic }}.",
    )
    tool = poet.as_tool()
    assert tool.definition.name == "poet" and tool.definition.description == "Writes a poem on a topic."
    assert tool.definition.input_schema["required"] == ["topic"]
    boss_model = ScriptedChatModel(
        [AssistantMessage(None, (ToolCall("1", "poet", '{"topic": "the sea"}'),)), "Here is your poem."]
    )
    answer = ChatClient.create(boss_model).prompt("A poem please").tools(tool).call().content()
    assert answer == "Here is your poem."
    assert writer_model.prompts[0].user_message.text == "Write a poem about the sea."
    tool_message = boss_model.prompts[1].messages[-1]
    assert "A poem about the sea." in tool_message.text


def test_workflow_as_tool_schema_and_errors() -> None:
    tool = sequence(inc, inc, name="twice").as_tool()
    assert tool.definition.input_schema["properties"]["n"]["type"] == "integer"
    assert tool.definition.input_schema["required"] == []
    assert tool.call('{"n": 1}') == "3"
    assert asyncio.run(tool.acall("{}")) == "2"
    from chatclient.errors import ToolExecutionError

    with pytest.raises(ToolExecutionError, match="JSON"):
        tool.call("{oops")
    with pytest.raises(ToolExecutionError):
        tool.call('{"n": "not a number"}')


# -- service_agent ----------------------------------------------------------------------------------


class Summarizer(Protocol):
    def summarize(self, text: str, words: int = 5) -> str:
        """Summarize in {{ words }} words: {{ text }}"""


def test_service_agent_reads_method_parameters_from_the_scope() -> None:
    model = ScriptedChatModel(["Short.", "Short again."])
    summarizer = service_agent(Summarizer, client=ChatClient.create(model), output_key="summary")
    assert summarizer.name == "summarize" and summarizer.input_names() == ("text", "words")
    result = sequence(inc, summarizer).run(text="A long text.")
    assert result.scope.read("summary") == "Short."
    assert model.prompts[0].user_message.text == "Summarize in 5 words: A long text."
    again = asyncio.run(summarizer.arun(text="B", words=2))
    assert again.output == "Short again." and model.prompts[1].user_message.text == "Summarize in 2 words: B"


def test_service_agent_missing_input_and_bad_interface() -> None:
    from chatclient.errors import AgentInputError

    summarizer = service_agent(Summarizer, client=ChatClient.create(ScriptedChatModel([])), output_key="s")
    with pytest.raises(AgentInputError) as info:
        summarizer.run(words=3)
    assert info.value.missing == ("text",)

    class Two(Protocol):
        def a(self, x: str) -> str: ...

        def b(self, x: str) -> str: ...

    with pytest.raises(TypeError, match="exactly one"):
        service_agent(Two, client=ChatClient.create(ScriptedChatModel([])), output_key="o")


def test_json_output_of_tool() -> None:
    @agent_function(name="pair")
    def pair() -> dict[str, int]:
        return {"a": 1}

    assert json.loads(pair.as_tool().call("{}")) == {"a": 1}
