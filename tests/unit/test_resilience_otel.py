"""The answering model (fallback, routing) and the request's cost reach the OpenTelemetry spans."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisors import BudgetAdvisor
from chatclient import ChatClient
from chatclient.errors import ModelHTTPError
from chatclient.observability.otel import instrument, uninstrument
from chatclient.resilience import FallbackChatModel, RoutingChatModel
from chatclient.testing import ScriptedChatModel
from tests.conftest import run_spec


def test_fallback_model_routed_model_and_cost_are_span_attributes(mode: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        down = ScriptedChatModel([ModelHTTPError("down", status=503)], model_name="down")
        up = ScriptedChatModel([["fine ", "thanks"]], model_name="gpt-4o-mini")
        model = RoutingChatModel(lambda p: FallbackChatModel(down, up))
        client = ChatClient.builder(model).default_advisors(BudgetAdvisor(max_cost=1.0)).build()
        run_spec(client.prompt("how are you"), mode)
    finally:
        uninstrument()
    attrs: dict[str, object] = {}
    for span in exporter.get_finished_spans():
        attrs.update(span.attributes or {})
    assert attrs["chatclient.fallback.model"] == "gpt-4o-mini"
    assert attrs["chatclient.routing.model"] == "FallbackChatModel"
    assert isinstance(attrs["chatclient.cost"], float) and attrs["chatclient.cost"] > 0
