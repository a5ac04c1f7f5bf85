"""What the Azure, Bedrock and Gemini models share: their GenAI semantic-convention names in OpenTelemetry spans, and hosted tools refused before any request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chatclient import ChatClient
from chatclient.models.azure import AzureOpenAIChatModel
from chatclient.models.base import ChatModel
from chatclient.models.bedrock import BedrockChatModel
from chatclient.models.gemini import GeminiChatModel
from chatclient.observability.otel import instrument, uninstrument
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
DATA = Path(__file__).resolve().parent.parent / "data" / "providers"


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    instrument(tracer_provider, MeterProvider())
    yield spans
    uninstrument()


def _gemini(srv: LoopbackServer) -> tuple[ChatModel, str, str]:
    model = GeminiChatModel("gemini-2.5-flash", api_key="AIzaSyTest-0123456789abcdef", base_url=srv.url)
    return model, "/v1beta/models/gemini-2.5-flash:generateContent", "gemini/text.json"


def _bedrock(srv: LoopbackServer) -> tuple[ChatModel, str, str]:
    model = BedrockChatModel("amazon.nova-lite-v1:0", region="us-east-1", credentials=("AKIDTEST0000", "secret-0000000"),
                             base_url=srv.url)  # fmt: skip
    return model, "/model/amazon.nova-lite-v1%3A0/converse", "bedrock/text.json"


def _azure(srv: LoopbackServer) -> tuple[ChatModel, str, str]:
    model = AzureOpenAIChatModel("gpt-4o-mini", endpoint=srv.url, api_key="azure-key-0123456789abcdef")
    return model, "/openai/v1/chat/completions", "azure/chat.json"


@pytest.mark.parametrize(
    ("build", "name"), [(_gemini, "gcp.gemini"), (_bedrock, "aws.bedrock"), (_azure, "azure.ai.openai")]
)
def test_provider_name_in_the_call_span(server: LoopbackServer, exporter: InMemorySpanExporter, build: object,
                                        name: str) -> None:  # fmt: skip
    model, path, fixture = build(server)  # type: ignore[operator]
    server.script(path, Reply(body=(DATA / fixture).read_bytes()))
    assert ChatClient.create(model).prompt("hi").call().content()
    chat_spans = [
        s for s in exporter.get_finished_spans() if (s.attributes or {}).get("gen_ai.operation.name") == "chat"
    ]
    assert chat_spans and {s.attributes["gen_ai.provider.name"] for s in chat_spans if s.attributes} == {name}


@pytest.mark.parametrize("build", [_gemini, _bedrock, _azure])
def test_a_hosted_tool_is_refused_before_any_request(server: LoopbackServer, build: object) -> None:
    from chatclient.errors import UnsupportedFeatureError
    from chatclient.tools.builtin import WebSearch

    model, path, _ = build(server)  # type: ignore[operator]
    with pytest.raises(UnsupportedFeatureError, match="web_search"):
        ChatClient.create(model).prompt("news?").tools(WebSearch()).call().content()
    assert server.requests_to(path) == []
