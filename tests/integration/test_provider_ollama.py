"""OllamaChatModel over real HTTP against the loopback server (native /api/chat, NDJSON)."""

from __future__ import annotations

from typing import Any

import pytest

from chatclient.errors import ModelConnectionError, ModelHTTPError, ModelResponseError
from chatclient.messages import ToolCall
from chatclient.models.base import Usage
from chatclient.models.ollama import OllamaChatModel
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support import MODES, invoke, server_fixtures
from tests.support.loopback import NDJSON, LoopbackServer, Reply, ollama_chat, ollama_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/api/chat"
WEATHER = ToolDefinition(
    "get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}
)
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_model(srv: LoopbackServer, **kw: Any) -> OllamaChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OllamaChatModel("llama-test", base_url=srv.url, **kw)


def test_text_in_every_mode(server: LoopbackServer, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    if mode.endswith("stream"):
        server.script(PATH, NDJSON(ollama_stream(['{"answer": ', '"42"}'])))
    else:
        server.script(PATH, Reply(json=ollama_chat('{"answer": "42"}')))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt("Answer?", ChatOptions(output_schema=SCHEMA, max_tokens=20)), mode)
    assert response.text == '{"answer": "42"}'
    assert response.metadata.usage == Usage(11, 5)
    assert response.result is not None and response.result.finish_reason == "stop"
    if chunks:
        assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "stop"
    (req,) = server.requests_to(PATH)
    assert "authorization" not in req.headers
    assert req.body == {
        "model": "llama-test",
        "messages": [{"role": "user", "content": "Answer?"}],
        "stream": mode.endswith("stream"),
        "format": SCHEMA,
        "options": {"num_predict": 20},
    }


def test_tool_calls_in_every_mode(server: LoopbackServer, mode: str) -> None:
    calls = [("get_weather", {"city": "Oslo"})]
    if mode.endswith("stream"):
        server.script(PATH, NDJSON(ollama_stream([], tool_calls=calls)))
    else:
        server.script(PATH, Reply(json=ollama_chat("", tool_calls=calls)))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather?", tools=[WEATHER]), mode)
    assert response.result is not None
    assert response.result.output.tool_calls == (ToolCall("call_0", "get_weather", '{"city": "Oslo"}'),)
    assert response.result.output.text is None
    assert response.result.finish_reason == "tool_calls"
    assert server.requests_to(PATH)[0].body["tools"][0]["function"]["name"] == "get_weather"


def test_model_not_found_is_http_error(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(404, json={"error": "model 'nope' not found"}))
    with make_model(server) as model, pytest.raises(ModelHTTPError, match="model 'nope' not found") as info:
        model.call(Prompt("x"))
    assert info.value.status == 404
    assert len(server.requests_to(PATH)) == 1


def test_stream_without_done_raises(server: LoopbackServer) -> None:
    server.set_default(PATH, NDJSON(ollama_stream(done=False)))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="incomplete"):
        list(model.stream(Prompt("x")))


def test_stream_reset_raises(server: LoopbackServer) -> None:
    server.set_default(PATH, NDJSON(ollama_stream(["a", "b", "c"]), reset_after=2))
    with make_model(server) as model, pytest.raises(ModelConnectionError):
        list(model.stream(Prompt("x")))
    assert len(server.requests_to(PATH)) == 1


def test_500_then_success(server: LoopbackServer) -> None:
    server.script(PATH, Reply(500, json={"error": "busy"}), Reply(json=ollama_chat("fine")))
    with make_model(server) as model:
        assert model.call(Prompt("x")).text == "fine"
    assert len(server.requests_to(PATH)) == 2


def test_base_url_from_ollama_host(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", server.url.removeprefix("http://"))
    server.set_default(PATH, Reply(json=ollama_chat("hi")))
    with OllamaChatModel("m") as model:
        assert model.call(Prompt("x")).text == "hi"
