"""AnthropicChatModel over real HTTP against the loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    RateLimitError,
)
from chatclient.messages import SystemMessage, ToolCall, UserMessage
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.base import Usage
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support import MODES, invoke, server_fixtures
from tests.support.loopback import SSE, LoopbackServer, Reply, anthropic_message, anthropic_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/messages"
KEY = "sk-ant-SECRET-abcdef0123456789"
WEATHER = ToolDefinition(
    "get_weather", "Weather by city", {"type": "object", "properties": {"city": {"type": "string"}}}
)


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def make_model(srv: LoopbackServer, **kw: Any) -> AnthropicChatModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return AnthropicChatModel("claude-test", base_url=srv.url, **kw)


def script(srv: LoopbackServer, mode: str, text: str | None, tools: list[tuple[str, str, dict[str, Any]]]) -> None:
    if mode.endswith("stream"):
        fragments = [(i, n, [json.dumps(inp)[:5], json.dumps(inp)[5:]]) for i, n, inp in tools]
        srv.script(PATH, SSE(anthropic_stream([text[:3], text[3:]] if text else [], tool_uses=fragments), done=False))
    else:
        srv.script(PATH, Reply(json=anthropic_message(text, tool_uses=tools)))


def test_text_and_headers_in_every_mode(server: LoopbackServer, mode: str) -> None:
    script(server, mode, "Bonjour!", [])
    prompt = Prompt([SystemMessage("Speak French."), UserMessage("Hello")], ChatOptions(temperature=0.2))
    with make_model(server) as model:
        response, chunks = invoke(model, prompt, mode)
    assert response.text == "Bonjour!"
    assert response.result is not None and response.result.finish_reason == "stop"
    assert response.result.metadata.extra["raw_finish_reason"] == "end_turn"
    assert response.metadata.usage == Usage(9, 4)
    if chunks:
        assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "stop"
    (req,) = server.requests_to(PATH)
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    expected: dict[str, Any] = {
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "Speak French.",
        "messages": [{"role": "user", "content": "Hello"}],
        "temperature": 0.2,
    }
    if mode.endswith("stream"):
        expected["stream"] = True
    assert req.body == expected


def test_tool_use_in_every_mode(server: LoopbackServer, mode: str) -> None:
    script(
        server, mode, "Checking", [("tu_1", "get_weather", {"city": "Lyon"}), ("tu_2", "get_weather", {"city": "Nice"})]
    )
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather?", ChatOptions(tool_choice="required"), tools=[WEATHER]), mode)
    assert response.result is not None
    assert response.text == "Checking"
    assert response.result.output.tool_calls == (
        ToolCall("tu_1", "get_weather", '{"city": "Lyon"}'),
        ToolCall("tu_2", "get_weather", '{"city": "Nice"}'),
    )
    assert response.result.finish_reason == "tool_calls"
    body = server.requests_to(PATH)[0].body
    assert body["tool_choice"] == {"type": "any"}
    assert body["tools"][0]["input_schema"] == {"type": "object", "properties": {"city": {"type": "string"}}}


def test_overloaded_529_is_retried(server: LoopbackServer) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.script(PATH, Reply(529, json=overloaded), Reply(json=anthropic_message("ok")))
    with make_model(server) as model:
        assert model.call(Prompt("x")).text == "ok"
    assert len(server.requests_to(PATH)) == 2


def test_rate_limit_after_retries(server: LoopbackServer) -> None:
    server.set_default(
        PATH, Reply(429, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}})
    )
    with make_model(server, max_retries=1) as model, pytest.raises(RateLimitError):
        model.call(Prompt("x"))
    assert len(server.requests_to(PATH)) == 2


def test_bad_key_never_leaks(server: LoopbackServer, mode: str) -> None:
    server.set_default(
        PATH,
        Reply(
            401,
            json={"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}},
        ),
    )
    model = make_model(server)
    with pytest.raises(AuthenticationError) as info:
        invoke(model, Prompt("x"), mode)
    assert KEY not in str(info.value) and KEY not in (info.value.body or "") and KEY not in repr(model)
    assert "authentication_error" in (info.value.body or "")


def test_stream_without_message_stop_raises(server: LoopbackServer) -> None:
    server.set_default(PATH, SSE(anthropic_stream(stop=False), done=False))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="incomplete"):
        list(model.stream(Prompt("x")))


def test_stream_reset_raises(server: LoopbackServer) -> None:
    server.set_default(PATH, SSE(anthropic_stream(), reset_after=4))
    received = []
    with make_model(server) as model, pytest.raises(ModelConnectionError):
        for chunk in model.stream(Prompt("x")):
            received.append(chunk.text)
    assert received == ["Hel"]
    assert len(server.requests_to(PATH)) == 1


def test_stream_error_event_raises(server: LoopbackServer) -> None:
    error = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.set_default(PATH, SSE([*anthropic_stream()[:3], error], done=False))
    with make_model(server) as model, pytest.raises(ModelHTTPError, match="overloaded_error") as info:
        list(model.stream(Prompt("x")))
    assert info.value.status == 529  # typed like the HTTP 529 it stands for


def test_count_tokens_posts_only_the_fields_the_endpoint_accepts(server: LoopbackServer) -> None:
    import asyncio

    path = "/v1/messages/count_tokens"
    server.script(path, Reply(json={"input_tokens": 42}), Reply(json={"input_tokens": 7}), Reply(json={"tokens": 1}))
    model = make_model(server)
    prompt = Prompt([SystemMessage("Be brief."), UserMessage("Hi")], ChatOptions(temperature=0.2), tools=(WEATHER,))
    assert model.count_tokens(prompt) == 42
    body = server.requests_to(path)[0].body
    assert set(body) == {"model", "messages", "system", "tools"}  # no max_tokens, sampling or stream
    assert body["system"] and body["tools"][0]["name"] == "get_weather"
    assert asyncio.run(model.acount_tokens(prompt)) == 7
    with pytest.raises(ModelResponseError, match="input_tokens"):
        model.count_tokens(prompt)
