"""OpenTelemetry observer: the span tree, GenAI attributes, content capture and metrics.

The SDK's in-memory exporter and metric reader receive what a real backend would; the tree is
rebuilt from parent span ids, so a span parented wrongly (or leaked between calls) fails the test.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from chatclient import BaseAdvisor, ChatClient, ChatClientRequest, ChatClientResponse
from chatclient.advisor import AdvisorChain
from chatclient.observability.otel import OpenTelemetryObserver, instrument, uninstrument
from chatclient.observation import get_observer, set_observer
from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from tests.conftest import run_spec


class Telemetry:
    """An installed observer wired to in-memory span and metric sinks."""

    def __init__(self, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.observer = instrument(self.tracer_provider, self.meter_provider, capture_content=capture_content)
        self.tracer = self.tracer_provider.get_tracer("test")

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans]}"
        return found[0]

    def tree(self) -> list[Any]:
        """The finished spans as nested ``(name, [children])``, children in start order."""
        spans = sorted(self.spans, key=lambda s: s.start_time or 0)
        ids = {s.context.span_id for s in spans}
        children: dict[int | None, list[ReadableSpan]] = {}
        for s in spans:
            parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
            children.setdefault(parent, []).append(s)

        def build(parent: int | None) -> list[Any]:
            return [(s.name, build(s.context.span_id)) for s in children.get(parent, [])]

        return build(None)

    def metric_points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        points: list[Any] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    uninstrument()


@pytest.fixture
def otel_content() -> Iterator[Telemetry]:
    telemetry = Telemetry(capture_content=True)
    yield telemetry
    uninstrument()


def attributes_of(span: ReadableSpan) -> dict[str, Any]:
    """A span's attributes as a plain dict (empty when it has none)."""
    return dict(span.attributes or {})


def seq(value: Any) -> tuple[Any, ...]:
    """A sequence attribute as a tuple (the SDK stores lists as tuples)."""
    return tuple(value)


def leaf(name: str) -> tuple[str, list[Any]]:
    return (name, [])


# -- the tree in every mode ---------------------------------------------------------------------------


def test_call_span_wraps_advisor_spans_which_wrap_the_model_advisor(otel: Telemetry, mode: str) -> None:
    spec = (
        ChatClient.create(ScriptedChatModel([["Hello", " there"]]))
        .prompt("say hello")
        .advisors(RecordingAdvisor("outer", [], order=1), RecordingAdvisor("inner", [], order=2))
    )
    run_spec(spec, mode)
    assert otel.tree() == [
        ("chat scripted", [("advisor outer", [("advisor inner", [leaf("advisor ChatModelAdvisor")])])])
    ]
    call = otel.one("chat scripted")
    attrs = attributes_of(call)
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.request.model"] == "scripted"
    assert attrs["gen_ai.response.model"] == "scripted"
    assert attrs["chatclient.mode"] == mode
    # ScriptedChatModel counts words: "say hello" in, "Hello there" out.
    assert attrs["gen_ai.usage.input_tokens"] == 2
    assert attrs["gen_ai.usage.output_tokens"] == 2
    assert seq(attrs["gen_ai.response.finish_reasons"]) == ("stop",)
    assert call.status.status_code == StatusCode.UNSET
    inner = otel.one("advisor inner").attributes or {}
    assert inner["chatclient.advisor.name"] == "inner"
    assert inner["chatclient.advisor.order"] == 2
    terminal = otel.one("advisor ChatModelAdvisor").attributes or {}
    assert seq(terminal["gen_ai.response.finish_reasons"]) == ("stop",)
    assert all(s.end_time is not None for s in otel.spans)


def test_request_model_and_options_come_from_the_prompt_options(otel: Telemetry) -> None:
    from chatclient import ChatOptions

    options = ChatOptions(model="gpt-x", temperature=0.2, max_tokens=50, stop=["END"])
    ChatClient.create(ScriptedChatModel(["ok"])).prompt("hi").options(options).call().content()
    attrs = otel.one("chat gpt-x").attributes or {}
    assert attrs["gen_ai.request.model"] == "gpt-x"
    assert attrs["gen_ai.request.temperature"] == 0.2
    assert attrs["gen_ai.request.max_tokens"] == 50
    assert seq(attrs["gen_ai.request.stop_sequences"]) == ("END",)


def test_errors_mark_the_spans_failed(otel: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([RuntimeError("model down")])).prompt("q")
    with pytest.raises(RuntimeError):
        run_spec(spec, mode)
    for name in ("chat scripted", "advisor ChatModelAdvisor"):
        span = otel.one(name)
        assert span.status.status_code == StatusCode.ERROR
        assert "model down" in (span.status.description or "")
        assert attributes_of(span)["error.type"] == "RuntimeError"
        assert any(e.name == "exception" for e in span.events)
    duration = otel.metric_points("gen_ai.client.operation.duration")
    assert [p.attributes.get("error.type") for p in duration] == ["RuntimeError"]


def test_user_span_is_the_parent_of_the_call(otel: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([["a", "b"]])).prompt("q")
    with otel.tracer.start_as_current_span("handle request"):
        run_spec(spec, mode)
    assert otel.tree() == [("handle request", [("chat scripted", [leaf("advisor ChatModelAdvisor")])])]


class NestedCallAdvisor(BaseAdvisor):
    """Asks a helper client something before passing the request on (as a query rewriter does)."""

    def __init__(self, helper: ChatClient) -> None:
        self.helper = helper

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        rewritten = self.helper.prompt("rewrite").call().content() or ""
        return request.mutate(prompt=request.prompt.augment_user_message(rewritten))

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        rewritten = await self.helper.prompt("rewrite").acall().content() or ""
        return request.mutate(prompt=request.prompt.augment_user_message(rewritten))


def test_a_call_made_inside_an_advisor_nests_under_that_advisor(otel: Telemetry, mode: str) -> None:
    helper = ChatClient.create(ScriptedChatModel(["better question"], model_name="helper"))
    spec = ChatClient.create(ScriptedChatModel([["x", "y"]])).prompt("q").advisors(NestedCallAdvisor(helper))
    run_spec(spec, mode)
    assert otel.tree() == [
        (
            "chat scripted",
            [
                (
                    "advisor NestedCallAdvisor",
                    [("chat helper", [leaf("advisor ChatModelAdvisor")]), leaf("advisor ChatModelAdvisor")],
                )
            ],
        )
    ]


class UserSpanAdvisor(BaseAdvisor):
    """Opens a span of its own around the rest of the chain."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        with self.telemetry.tracer.start_as_current_span("user work"):
            return chain.next_call(request)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        with self.telemetry.tracer.start_as_current_span("user work"):
            return await chain.next_acall(request)


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_spans_opened_by_user_code_inside_an_advisor_nest_under_it(otel: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel(["ok"])).prompt("q").advisors(UserSpanAdvisor(otel))
    run_spec(spec, mode)
    assert otel.tree() == [
        ("chat scripted", [("advisor UserSpanAdvisor", [("user work", [leaf("advisor ChatModelAdvisor")])])])
    ]


# -- concurrency and stream lifecycles ---------------------------------------------------------------


class YieldingAdvisor(BaseAdvisor):
    """Gives the event loop away in both directions, so concurrent calls interleave."""

    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        await asyncio.sleep(0)
        return request

    async def aafter(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        await asyncio.sleep(0)
        return response


async def test_concurrent_async_calls_get_separate_trees(otel: Telemetry) -> None:
    n = 20
    client = ChatClient.create(ScriptedChatModel([f"answer {i}" for i in range(n)]))

    async def one(i: int) -> str | None:
        return await client.prompt(f"question {i}").advisors(YieldingAdvisor()).acall().content()

    await asyncio.gather(*(one(i) for i in range(n)))
    expected = ("chat scripted", [("advisor YieldingAdvisor", [leaf("advisor ChatModelAdvisor")])])
    assert otel.tree() == [expected] * n
    # One trace per call: nothing leaked from one task into another.
    assert len({s.context.trace_id for s in otel.named("chat scripted")}) == n


async def test_concurrent_async_streams_get_separate_trees(otel: Telemetry) -> None:
    n = 10
    client = ChatClient.create(ScriptedChatModel([["a", "b", "c"] for _ in range(n)]))

    async def one() -> list[str]:
        return [t async for t in client.prompt("q").advisors(YieldingAdvisor()).astream().content()]

    results = await asyncio.gather(*(one() for _ in range(n)))
    assert results == [["a", "b", "c"]] * n
    expected = ("chat scripted", [("advisor YieldingAdvisor", [leaf("advisor ChatModelAdvisor")])])
    assert otel.tree() == [expected] * n


def test_a_stream_closed_early_ends_its_spans_without_error_and_leaks_nothing(otel: Telemetry) -> None:
    client = ChatClient.create(ScriptedChatModel([["a", "b", "c"], "next"]))
    stream = client.prompt("q").advisors(RecordingAdvisor("outer", [])).stream().content()
    assert next(stream) == "a"
    stream.close()  # type: ignore[attr-defined]
    client.prompt("again").call().content()
    spans = otel.named("chat scripted")
    assert len(spans) == 2
    first, second = sorted(spans, key=lambda s: s.start_time or 0)
    assert attributes_of(first)["chatclient.stream.closed_early"] is True
    assert first.status.status_code == StatusCode.UNSET
    assert all(s.end_time is not None for s in otel.spans)
    # The second call is a root span, not a child of the abandoned stream.
    assert second.parent is None
    assert len(otel.tree()) == 2


async def test_an_async_stream_closed_early_leaks_nothing(otel: Telemetry) -> None:
    client = ChatClient.create(ScriptedChatModel([["a", "b", "c"], "next"]))
    stream = client.prompt("q").advisors(RecordingAdvisor("outer", [])).astream().content()
    assert await anext(stream) == "a"
    await stream.aclose()  # type: ignore[attr-defined]
    # Closing the outer generator leaves the inner ones to asyncio's async-generator finaliser,
    # which closes them in tasks of their own on the next turns of the loop.
    for _ in range(5):
        await asyncio.sleep(0)
    assert [s.name for s in otel.spans].count("chat scripted") == 1
    await client.prompt("again").acall().content()
    assert all(s.end_time is not None for s in otel.spans)
    assert [name for name, _ in otel.tree()] == ["chat scripted", "chat scripted"]


# -- content capture ----------------------------------------------------------------------------------


def test_content_is_not_recorded_by_default(otel: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([["secret", " answer"]])).prompt("my secret question")
    run_spec(spec, mode)
    for span in otel.spans:
        values = " ".join(str(v) for v in attributes_of(span).values())
        assert "secret" not in values
        assert not any(k in attributes_of(span) for k in ("gen_ai.input.messages", "gen_ai.output.messages"))


def test_content_is_recorded_when_asked(otel_content: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([["The", " answer"]])).prompt().system("Be brief.").user("What is it?")
    run_spec(spec, mode)
    attrs = otel_content.one("chat scripted").attributes or {}
    sent = json.loads(str(attrs["gen_ai.input.messages"]))
    assert sent == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "What is it?"}]},
    ]
    # Streams are recorded whole: the call span of a stream sees the aggregate of its chunks.
    answer = json.loads(str(attrs["gen_ai.output.messages"]))
    assert answer == [
        {"role": "assistant", "parts": [{"type": "text", "content": "The answer"}], "finish_reason": "stop"}
    ]


# -- metrics ------------------------------------------------------------------------------------------


def test_token_usage_and_duration_metrics(otel: Telemetry, mode: str) -> None:
    spec = ChatClient.create(ScriptedChatModel([["one", " two", " three"]])).prompt("a b c d")
    run_spec(spec, mode)
    usage = {p.attributes["gen_ai.token.type"]: p for p in otel.metric_points("gen_ai.client.token.usage")}
    assert set(usage) == {"input", "output"}
    assert (usage["input"].sum, usage["input"].count) == (4, 1)
    assert (usage["output"].sum, usage["output"].count) == (3, 1)
    assert usage["input"].attributes["gen_ai.request.model"] == "scripted"
    assert usage["input"].attributes["gen_ai.operation.name"] == "chat"
    (duration,) = otel.metric_points("gen_ai.client.operation.duration")
    assert duration.count == 1
    assert duration.sum > 0
    assert "error.type" not in duration.attributes


# -- installation -------------------------------------------------------------------------------------


def test_instrument_and_uninstrument() -> None:
    observer = instrument(TracerProvider(), MeterProvider())
    try:
        assert get_observer() is observer
        assert isinstance(observer, OpenTelemetryObserver)
    finally:
        uninstrument()
    assert get_observer() is None


def test_uninstrument_leaves_another_observer_alone() -> None:
    class Other:
        def start_call(self, *args: Any) -> Any: ...
        def start_advisor(self, *args: Any) -> Any: ...
        def start_tool(self, *args: Any) -> Any: ...
        def start_http_attempt(self, *args: Any) -> Any: ...

    other = Other()
    set_observer(other)
    try:
        uninstrument()
        assert get_observer() is other
    finally:
        set_observer(None)


def test_importing_chatclient_does_not_import_opentelemetry() -> None:
    import subprocess
    import sys

    code = (
        "import sys, chatclient, chatclient.observability, chatclient.observation\n"
        "from chatclient import ChatClient\n"
        "from chatclient.testing import ScriptedChatModel\n"
        "ChatClient.create(ScriptedChatModel(['x'])).prompt('q').call().content()\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- trees of the built-in recursive and stateful advisors -------------------------------------------


def test_memory_advisor_wraps_the_model_call(otel: Telemetry, mode: str) -> None:
    from advisors import MessageChatMemoryAdvisor
    from chatclient import DEFAULT_CHAT_MEMORY_ORDER
    from chatclient.memory import MessageWindowChatMemory

    memory = MessageWindowChatMemory()
    client = ChatClient.builder(ScriptedChatModel([["Hi", " Ada"], ["Your name", " is Ada"]])).build()
    advisor = MessageChatMemoryAdvisor(memory, conversation_id="ada")
    run_spec(client.prompt("I am Ada").advisors(advisor), mode)
    run_spec(client.prompt("Who am I?").advisors(advisor), mode)
    memory_tree = ("chat scripted", [("advisor MessageChatMemoryAdvisor", [leaf("advisor ChatModelAdvisor")])])
    assert otel.tree() == [memory_tree, memory_tree]
    spans = otel.named("advisor MessageChatMemoryAdvisor")
    assert {attributes_of(s)["chatclient.advisor.order"] for s in spans} == {DEFAULT_CHAT_MEMORY_ORDER}
    # The second call sent the remembered turn: its input tokens include the first exchange.
    first, second = sorted(otel.named("chat scripted"), key=lambda s: s.start_time or 0)
    assert attributes_of(second)["gen_ai.usage.input_tokens"] > attributes_of(first)["gen_ai.usage.input_tokens"]


def test_validation_retry_shows_two_passes_of_the_inner_chain(otel: Telemetry, mode: str) -> None:
    from pydantic import BaseModel

    from advisors import StructuredOutputValidationAdvisor
    from chatclient import STRUCTURED_OUTPUT_VALIDATION_ORDER

    class Person(BaseModel):
        name: str
        age: int

    model = ScriptedChatModel([['{"name": "Ada", ', '"age": "old"}'], ['{"name": "Ada", ', '"age": 36}']])
    spec = (
        ChatClient.create(model)
        .prompt("Who?")
        .advisors(
            StructuredOutputValidationAdvisor(Person, max_repeat_attempts=2),
            RecordingAdvisor("inner", [], order=STRUCTURED_OUTPUT_VALIDATION_ORDER + 1),
        )
    )
    run_spec(spec, mode)
    pass_ = ("advisor inner", [leaf("advisor ChatModelAdvisor")])
    assert otel.tree() == [("chat scripted", [("advisor StructuredOutputValidationAdvisor", [pass_, pass_])])]
    # The call span reports the usage of both attempts (the advisor sums them); the scripted model
    # counts whitespace-separated words, four per answer here.
    attrs = otel.one("chat scripted").attributes or {}
    assert attrs["gen_ai.usage.output_tokens"] == 2 * 4


@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_tool_loop_has_one_span_per_model_turn_and_per_tool(otel_content: Telemetry, mode: str) -> None:
    from chatclient import AssistantMessage, ToolCall
    from chatclient.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        if city == "Atlantis":
            raise LookupError("no such city")
        return f"sunny in {city}"

    calls = (ToolCall("c1", "get_weather", '{"city": "Paris"}'), ToolCall("c2", "get_weather", '{"city": "Atlantis"}'))
    model = ScriptedChatModel([AssistantMessage(None, tool_calls=calls), ["Sunny", " in Paris."]])
    run_spec(ChatClient.create(model).prompt("Weather?").tools(get_weather), mode)
    tree = otel_content.tree()
    assert len(tree) == 1
    (name, (loop,)) = tree[0]
    assert name == "chat scripted"
    loop_name, turns = loop
    assert loop_name == "advisor ToolCallAdvisor"
    # The two calls of the turn run concurrently, so their spans may start in either order.
    assert turns[0] == leaf("advisor ChatModelAdvisor")
    assert sorted(turns[1:3]) == [leaf("execute_tool get_weather")] * 2
    assert turns[3] == leaf("advisor ChatModelAdvisor")
    tools = {attributes_of(s)["gen_ai.tool.call.id"]: s for s in otel_content.named("execute_tool get_weather")}
    assert set(tools) == {"c1", "c2"}
    paris, atlantis = tools["c1"], tools["c2"]
    assert attributes_of(paris)["gen_ai.tool.name"] == "get_weather"
    assert attributes_of(paris)["gen_ai.tool.call.arguments"] == '{"city": "Paris"}'
    assert attributes_of(paris)["gen_ai.tool.call.result"] == "sunny in Paris"
    assert paris.status.status_code == StatusCode.UNSET
    # A failing tool answers the model with an error; its span shows the failure.
    assert atlantis.status.status_code == StatusCode.ERROR
    assert "no such city" in str(attributes_of(atlantis)["gen_ai.tool.call.result"])
    turn_reasons = [
        seq(attributes_of(s)["gen_ai.response.finish_reasons"])
        for s in sorted(otel_content.named("advisor ChatModelAdvisor"), key=lambda s: s.start_time or 0)
    ]
    assert turn_reasons == [("tool_calls",), ("stop",)]


def test_spans_opened_inside_a_tool_nest_under_the_tool_span(otel: Telemetry) -> None:
    from chatclient import AssistantMessage, ToolCall
    from chatclient.tools import tool

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        with otel.tracer.start_as_current_span("database query"):
            return key.upper()

    model = ScriptedChatModel([AssistantMessage(None, tool_calls=(ToolCall("c1", "lookup", '{"key": "a"}'),)), "A"])
    ChatClient.create(model).prompt("?").tools(lookup).call().content()
    tool_span = otel.one("execute_tool lookup")
    assert otel.one("database query").parent is not None
    assert otel.one("database query").parent.span_id == tool_span.context.span_id  # type: ignore[union-attr]


# -- HTTP attempts --------------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_each_http_attempt_is_a_span_so_retries_show(otel: Telemetry, mode: str) -> None:
    from chatclient.models.openai import OpenAIChatModel
    from tests.support.loopback import SSE, LoopbackServer, Reply, openai_completion, openai_stream

    with LoopbackServer() as server:
        answer = SSE(openai_stream(["Hel", "lo"])) if mode in ("stream", "astream") else Reply(json=openai_completion())
        server.script("/v1/chat/completions", Reply(503, json={"error": {"message": "overloaded"}}), answer)
        model = OpenAIChatModel("gpt-x", base_url=server.url + "/v1", api_key="sk-test-key", backoff_base=0.0)
        run_spec(ChatClient.create(model).prompt("Hello?"), mode)
        model.close()
    assert otel.tree() == [("chat gpt-x", [("advisor ChatModelAdvisor", [leaf("POST"), leaf("POST")])])]
    first, second = sorted(otel.named("POST"), key=lambda s: s.start_time or 0)
    a1, a2 = attributes_of(first), attributes_of(second)
    assert (a1["chatclient.http.attempt"], a2["chatclient.http.attempt"]) == (1, 2)
    assert "http.request.resend_count" not in a1
    assert a2["http.request.resend_count"] == 1
    assert (a1["http.response.status_code"], a2["http.response.status_code"]) == (503, 200)
    assert first.status.status_code == StatusCode.ERROR and second.status.status_code == StatusCode.UNSET
    assert a1["url.full"] == server.url + "/v1/chat/completions"
    assert a1["server.address"] == "127.0.0.1"
    call = otel.one("chat gpt-x").attributes or {}
    assert call["gen_ai.provider.name"] == "openai"
    assert call["gen_ai.response.model"] == "gpt-test"
    assert (call["gen_ai.usage.input_tokens"], call["gen_ai.usage.output_tokens"]) == (7, 3)
    assert seq(call["gen_ai.response.finish_reasons"]) == ("stop",)


def test_usage_details_are_recorded_as_gen_ai_usage_attributes(otel: Telemetry) -> None:
    from chatclient.models.base import ChatResponse, Usage

    detailed = ChatResponse.of_text("ok", usage=Usage(120, 30, 100, 15, 12, reported_total_tokens=160))
    ChatClient.create(ScriptedChatModel([detailed, "plain"])).prompt("q").call().content()
    attrs = attributes_of(otel.one("chat scripted"))
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (120, 30)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attrs["gen_ai.usage.cache_creation.input_tokens"] == 15
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 12
    assert attrs["chatclient.usage.total_tokens"] == 160
    otel.exporter.clear()
    # Details nobody reported are left out rather than recorded as 0.
    ChatClient.create(ScriptedChatModel(["plain"])).prompt("q").call().content()
    plain = attributes_of(otel.one("chat scripted"))
    assert plain["gen_ai.usage.input_tokens"] == 1
    assert not [k for k in plain if "cache" in k or "reasoning" in k or k == "chatclient.usage.total_tokens"]


def test_structured_output_rung_is_recorded_on_the_spans(otel: Telemetry) -> None:
    from pydantic import BaseModel

    class Person(BaseModel):
        name: str

    person = ChatClient.create(ScriptedChatModel(['{"name": "Ana"}'])).prompt("q").call().entity(Person)
    assert person.name == "Ana"
    # A scripted model has no native path: the ladder's last rung, format instructions.
    assert attributes_of(otel.one("chat scripted"))["chatclient.structured_output.mode"] == "instructions"
    terminal = attributes_of(otel.one("advisor ChatModelAdvisor"))
    assert terminal["chatclient.structured_output.mode"] == "instructions"
    otel.exporter.clear()
    ChatClient.create(ScriptedChatModel(["plain"])).prompt("q").call().content()
    assert "chatclient.structured_output.mode" not in attributes_of(otel.one("chat scripted"))
