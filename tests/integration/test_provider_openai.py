"""OpenAIChatModel over real HTTP against the loopback server: all four modes, tools, and faults."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from typing import Any

import httpx
import pytest

from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.messages import ToolCall
from chatclient.models.base import Usage, aggregate
from chatclient.models.openai import OpenAIChatModel
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from tests.support import MODES, invoke, server_fixtures
from tests.support.loopback import SSE, Close, LoopbackServer, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
KEY = "sk-test-SECRET-0123456789abcdef"
WEATHER = ToolDefinition(
    "get_weather",
    "Weather by city",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def make_model(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OpenAIChatModel("gpt-test", base_url=srv.url + "/v1", **kw)


def script_answer(srv: LoopbackServer, mode: str, **kw: Any) -> None:
    """Script the same answer as a completion or as a stream, depending on the mode."""
    if mode.endswith("stream"):
        text = kw.pop("text", "Hello!")
        tool_calls = [(i, n, [a[:3], a[3:]]) for i, n, a in kw.pop("tool_calls", ())]
        pieces = [text[:2], text[2:]] if text else []
        srv.script(PATH, SSE(openai_stream(pieces, tool_calls=tool_calls, **kw)))
    else:
        srv.script(PATH, Reply(json=openai_completion(kw.pop("text", "Hello!"), **kw)))


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=("stream", "astream"))
def stream_mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# -- happy paths ----------------------------------------------------------------------------------------


def test_text_in_every_mode(server: LoopbackServer, mode: str) -> None:
    script_answer(server, mode, text="Hello there", usage=(12, 4))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt("Hi"), mode)
    assert response.text == "Hello there"
    assert response.result is not None and response.result.finish_reason == "stop"
    assert response.metadata.usage == Usage(12, 4)
    assert response.metadata.id == "chatcmpl-1" and response.metadata.model == "gpt-test"
    if chunks:  # the last chunk carries the finish reason and the usage
        assert len(chunks) > 2
        assert chunks[-1].result is not None and chunks[-1].result.finish_reason == "stop"
        assert all(c.result is None or c.result.finish_reason is None for c in chunks[:-1])
    (req,) = server.requests_to(PATH)
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.headers["content-type"] == "application/json"
    expected: dict[str, Any] = {"model": "gpt-test", "messages": [{"role": "user", "content": "Hi"}]}
    if mode.endswith("stream"):
        expected |= {"stream": True, "stream_options": {"include_usage": True}}
    assert req.body == expected


def test_tool_calls_in_every_mode(server: LoopbackServer, mode: str) -> None:
    calls = [("call_a", "get_weather", '{"city": "Paris"}'), ("call_b", "get_weather", '{"city": "Rome"}')]
    script_answer(server, mode, text=None, tool_calls=calls)
    options = ChatOptions(tool_choice="get_weather", parallel_tool_calls=True, temperature=0.0)
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather?", options, tools=[WEATHER]), mode)
    assert response.result is not None
    assert response.result.output.tool_calls == tuple(ToolCall(*c) for c in calls)
    assert response.result.output.text is None
    assert response.result.finish_reason == "tool_calls"
    body = server.requests_to(PATH)[0].body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is True
    assert body["temperature"] == 0.0
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather by city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            },
        }
    ]


def test_stream_aggregate_equals_call(server: LoopbackServer) -> None:
    calls = [("c1", "get_weather", '{"city": "Oslo"}')]
    server.script(PATH, Reply(json=openai_completion("Let me check.", tool_calls=calls)))
    server.script(
        PATH, SSE(openai_stream(["Let me", " check."], tool_calls=[("c1", "get_weather", ['{"ci', 'ty": "Oslo"}'])]))
    )
    with make_model(server) as model:
        called = model.call(Prompt("x", tools=[WEATHER]))
        streamed = aggregate(model.stream(Prompt("x", tools=[WEATHER])))
    assert streamed == called


def test_options_merge_prompt_wins(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion()))
    defaults = ChatOptions(temperature=0.5, max_tokens=10, seed=1)
    with make_model(server, options=defaults) as model:
        model.call(Prompt("x", ChatOptions(model="other-model", temperature=0.9)))
    body = server.requests_to(PATH)[0].body
    assert (body["model"], body["temperature"], body["max_tokens"], body["seed"]) == ("other-model", 0.9, 10, 1)


def test_connections_are_pooled_across_calls(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion()))
    with make_model(server) as model:
        for _ in range(3):
            model.call(Prompt("x"))

        async def three() -> None:
            for _ in range(3):
                await model.acall(Prompt("x"))

        asyncio.run(three())
    ports = [r.client_port for r in server.requests_to(PATH)]
    assert len(set(ports[:3])) == 1, ports  # one sync connection reused
    assert len(set(ports[3:])) == 1, ports  # one async connection reused


def test_injected_clients_are_used_and_left_open(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion()))
    seen: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda r: seen.append(str(r.url))]})

    async def hook(r: httpx.Request) -> None:
        seen.append("async " + str(r.url))

    aclient = httpx.AsyncClient(event_hooks={"request": [hook]})
    model = make_model(server, http_client=client, async_http_client=aclient)
    model.call(Prompt("x"))

    async def go() -> None:
        await model.acall(Prompt("x"))
        await model.aclose()
        assert not aclient.is_closed
        await aclient.aclose()

    asyncio.run(go())
    model.close()
    assert not client.is_closed
    client.close()
    assert seen == [server.url + PATH, "async " + server.url + PATH]


def test_closed_model_refuses_calls(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion()))
    with make_model(server) as model:
        model.call(Prompt("x"))
    with pytest.raises(RuntimeError, match="closed"):
        model.call(Prompt("x"))


def test_early_break_from_stream_releases_connection(server: LoopbackServer) -> None:
    server.script(PATH, SSE(openai_stream(["a", "b", "c", "d"])), Reply(json=openai_completion("next")))
    with make_model(server, timeout=5.0) as model:
        for chunk in model.stream(Prompt("x")):
            assert chunk.text == "a"
            break
        assert model.call(Prompt("y")).text == "next"


def test_no_key_no_authorization_header(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server.set_default(PATH, Reply(json=openai_completion()))
    with make_model(server, api_key=None) as model:
        model.call(Prompt("x"))
    assert "authorization" not in server.requests_to(PATH)[0].headers


def test_key_and_base_url_from_environment(server: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env-123456")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.set_default(PATH, Reply(json=openai_completion()))
    with OpenAIChatModel("m") as model:
        model.call(Prompt("x"))
    assert server.requests_to(PATH)[0].headers["authorization"] == "Bearer sk-from-env-123456"


# -- faults -------------------------------------------------------------------------------------------------


def test_500_then_success_is_retried(server: LoopbackServer, mode: str) -> None:
    server.script(PATH, Reply(500, json={"error": {"message": "boom"}}), Reply(503, body="unavailable"))
    script_answer(server, mode, text="recovered")
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("x"), mode)
    assert response.text == "recovered"
    assert len(server.requests_to(PATH)) == 3


def test_429_honours_retry_after(server: LoopbackServer) -> None:
    server.script(PATH, Reply(429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0.4"}))
    server.script(PATH, Reply(json=openai_completion("ok")))
    with make_model(server, backoff_base=0.0) as model:
        started = time.monotonic()
        assert model.call(Prompt("x")).text == "ok"
        elapsed = time.monotonic() - started
    assert elapsed >= 0.4  # waited as told, although the backoff itself is zero
    assert len(server.requests_to(PATH)) == 2


def test_429_exhausted_raises_rate_limit_error(server: LoopbackServer, mode: str) -> None:
    server.set_default(PATH, Reply(429, json={"error": {"message": "rate limited"}}, headers={"retry-after-ms": "5"}))
    with make_model(server, max_retries=2) as model, pytest.raises(RateLimitError) as info:
        invoke(model, Prompt("x"), mode)
    assert info.value.status == 429
    assert info.value.retry_after == pytest.approx(0.005)
    assert "rate limited" in str(info.value) and "rate limited" in (info.value.body or "")
    assert len(server.requests_to(PATH)) == 3


def test_retry_after_too_long_gives_up_at_once(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(429, json={"error": {"message": "later"}}, headers={"retry-after": "3600"}))
    with make_model(server) as model, pytest.raises(RateLimitError) as info:
        model.call(Prompt("x"))
    assert info.value.retry_after == 3600
    assert len(server.requests_to(PATH)) == 1


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_4xx_are_not_retried(server: LoopbackServer, status: int) -> None:
    server.set_default(PATH, Reply(status, json={"error": {"message": "bad request field"}}))
    with make_model(server) as model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("x"))
    assert type(info.value) is ModelHTTPError
    assert info.value.status == status and "bad request field" in (info.value.body or "")
    assert len(server.requests_to(PATH)) == 1


@pytest.mark.parametrize("status", [408, 409])
def test_408_409_are_retried(server: LoopbackServer, status: int) -> None:
    server.script(PATH, Reply(status), Reply(json=openai_completion("ok")))
    with make_model(server) as model:
        assert model.call(Prompt("x")).text == "ok"
    assert len(server.requests_to(PATH)) == 2


def test_x_should_retry_false_is_respected(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(500, headers={"x-should-retry": "false"}))
    with make_model(server) as model, pytest.raises(ModelHTTPError):
        model.call(Prompt("x"))
    assert len(server.requests_to(PATH)) == 1


@pytest.mark.parametrize("status", [401, 403])
def test_auth_errors_never_leak_the_key(
    server: LoopbackServer, status: int, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A server that echoes the key back (OpenAI does, partly) must not get it into our errors.
    server.set_default(PATH, Reply(status, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    model = make_model(server)
    with pytest.raises(AuthenticationError) as info:
        invoke(model, Prompt("x"), mode)
    model.close()
    err = info.value
    assert err.status == status
    texts = [str(err), repr(err), err.body or "", "".join(traceback.format_exception(err)), repr(model), caplog.text]
    for text in texts:
        assert KEY not in text
    assert "[REDACTED]" in str(err)
    assert len(server.requests_to(PATH)) == 1


def test_retry_logs_do_not_leak_the_key(server: LoopbackServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.script(PATH, Reply(500, json={"error": {"message": f"oops {KEY}"}}), Reply(json=openai_completion()))
    with make_model(server) as model:
        model.call(Prompt("x"))
    assert "retrying OpenAI request" in caplog.text
    assert KEY not in caplog.text


def test_slow_server_times_out(server: LoopbackServer, mode: str) -> None:
    server.set_default(PATH, Reply(json=openai_completion(), delay=3.0))
    with make_model(server, timeout=0.3, max_retries=1) as model, pytest.raises(ModelTimeoutError):
        invoke(model, Prompt("x"), mode)
    assert len(server.requests_to(PATH)) == 2  # timeouts are retried like connection errors


def test_stream_stalling_mid_body_times_out(server: LoopbackServer, stream_mode: str) -> None:
    # Headers and two chunks come at once, then the server stalls: the read timeout applies between
    # chunks, and the stream is not retried because part of it was delivered.
    server.set_default(PATH, SSE(openai_stream(["a", "b", "c"]), stall_after=2, stall=3.0))
    with make_model(server, timeout=0.3) as model, pytest.raises(ModelTimeoutError):
        invoke(model, Prompt("x"), stream_mode)
    assert len(server.requests_to(PATH)) == 1


def test_reset_mid_stream_raises_and_is_not_retried(server: LoopbackServer, stream_mode: str) -> None:
    mode = stream_mode
    server.set_default(PATH, SSE(openai_stream(["one", "two", "three"]), reset_after=3))
    received: list[str | None] = []
    model = make_model(server)
    with pytest.raises(ModelConnectionError):
        if mode == "stream":
            for chunk in model.stream(Prompt("x")):
                received.append(chunk.text)
        else:

            async def consume() -> None:
                async for chunk in model.astream(Prompt("x")):
                    received.append(chunk.text)

            asyncio.run(consume())
    model.close()
    assert received == ["one", "two"]  # what arrived was delivered, then the break raised
    assert len(server.requests_to(PATH)) == 1  # part of the answer was out: no silent retry


def test_stream_without_done_raises(server: LoopbackServer, stream_mode: str) -> None:
    server.set_default(PATH, SSE(openai_stream(["complete", "-looking"]), done=False))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="incomplete"):
        invoke(model, Prompt("x"), stream_mode)


def test_connection_closed_before_answer_is_retried(server: LoopbackServer, mode: str) -> None:
    server.script(PATH, Close())
    script_answer(server, mode, text="second try")
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("x"), mode)
    assert response.text == "second try"
    assert len(server.requests_to(PATH)) == 2


def test_connection_refused_raises_connection_error(mode: str) -> None:
    with LoopbackServer() as srv:
        url = srv.url
    model = OpenAIChatModel("m", api_key=KEY, base_url=url + "/v1", backoff_base=0.001, max_retries=1)
    with pytest.raises(ModelConnectionError) as info:
        invoke(model, Prompt("x"), mode)
    assert KEY not in str(info.value)


def test_malformed_json_raises_response_error(server: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        server.set_default(PATH, SSE(["{not json"]))
    else:
        server.set_default(PATH, Reply(body='{"id": "x", "choices": [trunc'))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="malformed JSON"):
        invoke(model, Prompt("x"), mode)
    assert len(server.requests_to(PATH)) == 1


def test_unexpected_shape_raises_response_error(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json={"id": "x", "object": "chat.completion"}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="unexpected OpenAI response shape"):
        model.call(Prompt("x"))


def test_many_concurrent_async_calls_share_one_model(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion("ok")))

    async def many() -> list[str | None]:
        async with make_model(server) as model:
            results = await asyncio.gather(*(model.acall(Prompt(f"q{i}")) for i in range(40)))
        return [r.text for r in results]

    assert asyncio.run(many()) == ["ok"] * 40
    assert sorted(r.body["messages"][0]["content"] for r in server.requests_to(PATH)) == sorted(
        f"q{i}" for i in range(40)
    )


def test_chat_client_tool_loop_over_http(server: LoopbackServer, mode: str) -> None:
    """The whole stack: ChatClient runs a tool round trip through OpenAIChatModel over real HTTP."""
    from chatclient import ChatClient
    from chatclient.tools import tool

    @tool
    def get_weather(city: str) -> str:
        """Weather by city."""
        return f"sunny in {city}"

    script_answer(server, mode, text=None, tool_calls=[("call_1", "get_weather", '{"city": "Rome"}')])
    script_answer(server, mode, text="It is sunny.")
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt("Weather in Rome?").tools(get_weather)
        if mode == "call":
            text = spec.call().content()
        elif mode == "stream":
            text = "".join(spec.stream().content())
        elif mode == "acall":
            text = asyncio.run(spec.acall().content())
        else:

            async def collect() -> str:
                return "".join([t async for t in spec.astream().content()])

            text = asyncio.run(collect())
    assert text == "It is sunny."
    first, second = server.requests_to(PATH)
    assert first.body["tools"][0]["function"]["name"] == "get_weather"
    assert second.body["messages"] == [
        {"role": "user", "content": "Weather in Rome?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Rome"},
    ]


def test_one_model_across_event_loops(server: LoopbackServer) -> None:
    # Pooled async connections belong to their loop; a model reused from another asyncio.run()
    # must open a fresh pool rather than touch the dead loop's connections.
    server.set_default(PATH, Reply(json=openai_completion("ok")))
    model = make_model(server)
    assert asyncio.run(model.acall(Prompt("one"))).text == "ok"
    assert asyncio.run(model.acall(Prompt("two"))).text == "ok"
    assert model.call(Prompt("three")).text == "ok"
    model.close()
    assert len(server.requests_to(PATH)) == 3


def test_finished_streams_reuse_their_connection(server: LoopbackServer, stream_mode: str) -> None:
    server.script(PATH, SSE(openai_stream(["a"])), SSE(openai_stream(["b"])))
    with make_model(server) as model:
        if stream_mode == "stream":
            texts = [aggregate(model.stream(Prompt("x"))).text for _ in range(2)]
        else:

            async def twice() -> list[str | None]:
                out = []
                for _ in range(2):
                    out.append(aggregate([c async for c in model.astream(Prompt("x"))]).text)
                return out

            texts = asyncio.run(twice())
    assert texts == ["a", "b"]
    first, second = server.requests_to(PATH)
    assert first.client_port == second.client_port  # drained after [DONE], so back in the pool


def test_break_after_done_marker_keeps_the_complete_answer(server: LoopbackServer) -> None:
    events = [*openai_stream(["complete"]), "[DONE]"]
    server.set_default(PATH, SSE(events, done=False, reset_after=len(events)))  # reset after [DONE]
    with make_model(server) as model:
        response = aggregate(model.stream(Prompt("x")))
    assert response.text == "complete"
    assert response.result is not None and response.result.finish_reason == "stop"


def test_error_payload_with_status_200_is_scrubbed(server: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        server.set_default(PATH, SSE([{"error": {"message": f"server echoed {KEY}"}}]))
    else:
        server.set_default(PATH, Reply(json={"error": {"message": f"server echoed {KEY}"}}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="server echoed") as info:
        invoke(model, Prompt("x"), mode)
    assert KEY not in str(info.value)
