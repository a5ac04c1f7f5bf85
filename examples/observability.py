"""Observability: OpenTelemetry spans and metrics for calls, advisors and tools (extra ``otel``).

    pip install -e '.[otel]'
    python examples/observability.py

Installs the OpenTelemetry observer with in-memory exporters, runs a request with an advisor and a
tool loop, and prints the span tree and the metrics. In an application you would export to your
tracing backend instead (an OTLP exporter). Runs offline on ``ScriptedChatModel``; set
``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` for a real model (HTTP attempts then appear as spans).
"""

from __future__ import annotations

from _support import make_model
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisors import ReReadingAdvisor
from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.observability.otel import instrument, uninstrument
from chatclient.testing import ScriptedChatModel, ScriptEntry
from chatclient.tools import tool


@tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"It is 14:05 in {city}."


SCRIPT: list[ScriptEntry] = [
    AssistantMessage(None, tool_calls=(ToolCall("call_1", "get_time", '{"city": "Tokyo"}'),)),
    "It is 14:05 in Tokyo.",
]


def print_tree(spans: list[ReadableSpan]) -> None:
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        children.setdefault(span.parent.span_id if span.parent else None, []).append(span)

    def show(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            attrs = span.attributes or {}
            keys = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.tool.name")
            detail = ", ".join(f"{k.rsplit('.', 1)[-1]}={attrs[k]!s}" for k in keys if k in attrs)
            print(f"{'  ' * depth}{span.name}" + (f"  ({detail})" if detail else ""))
            show(span.context.span_id, depth + 1)

    show(None, 0)


def main() -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    instrument(tracer_provider, MeterProvider(metric_readers=[reader]), capture_content=False)
    try:
        client = ChatClient.create(make_model(ScriptedChatModel(SCRIPT)))
        answer = (
            client.prompt("What time is it in Tokyo?").advisors(ReReadingAdvisor()).tools(get_time).call().content()
        )
        print("answer:", answer)
    finally:
        uninstrument()

    print("spans:")
    print_tree(list(exporter.get_finished_spans()))
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    if isinstance(point, HistogramDataPoint):  # both chatclient metrics are histograms
                        kind = (point.attributes or {}).get("gen_ai.token.type", "")
                        print(f"metric {metric.name} {kind}: count={point.count} sum={point.sum:g}".replace("  ", " "))


if __name__ == "__main__":
    main()
