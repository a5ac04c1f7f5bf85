"""AiohttpTransport under OpenAIChatModel: same answers, retries, errors and stream closing as httpx's own."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from chatclient.errors import ModelConnectionError, ModelHTTPError, ModelTimeoutError
from chatclient.models.http.aiohttp_transport import AiohttpTransport
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import SSE, Close, LoopbackServer, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
KEY = "sk-test-SECRET-0123456789abcdef"


TRANSPORTS: dict[int, AiohttpTransport] = {}


def make_model(srv: LoopbackServer, base: str = "/v1", **kw: Any) -> OpenAIChatModel:
    transport = AiohttpTransport()
    client = httpx.AsyncClient(transport=transport)
    model = OpenAIChatModel(
        "gpt-test", base_url=srv.url + base, api_key=KEY, backoff_base=0.001, async_http_client=client, **kw
    )
    TRANSPORTS[id(model)] = transport
    return model


def run(model: OpenAIChatModel, coro: Any) -> Any:
    """Run ``coro`` on a fresh loop, then close the transport's aiohttp session of that loop.

    (Closing the ``httpx.AsyncClient`` itself would end it for good; the transport keeps one session
    per loop, so the same client serves the next ``asyncio.run``.)
    """

    async def main() -> Any:
        try:
            return await coro
        finally:
            await TRANSPORTS[id(model)].aclose()

    return asyncio.run(main())


def test_call_and_stream_give_the_same_answer(server: LoopbackServer) -> None:
    server.script(PATH, Reply(json=openai_completion("Hello there")))
    server.script(PATH, SSE(openai_stream(["Hel", "lo ", "there"]), split=(1, 3, 7)))
    model = make_model(server)

    async def run_both() -> tuple[str | None, str]:
        answer = await model.acall(Prompt("hi"))
        chunks = [c.result.output.text or "" async for c in model.astream(Prompt("hi"))]
        return answer.result.output.text, "".join(chunks)

    called, streamed = run(model, run_both())
    assert called == streamed == "Hello there"
    sent = server.requests_to(PATH)[0]
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["messages"][0]["content"] == "hi"
    # aiohttp adds none of its own headers: what goes out is what chatclient sets
    assert "user-agent" in sent.headers and sent.headers["user-agent"] == "chatclient"


def test_429_is_retried_and_500s_end_in_a_typed_error(server: LoopbackServer) -> None:
    server.script(PATH, Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0"}))
    server.script(PATH, Reply(json=openai_completion("ok")))
    model = make_model(server)

    async def first() -> str | None:
        return (await model.acall(Prompt("hi"))).result.output.text

    assert run(model, first()) == "ok"
    assert len(server.requests_to(PATH)) == 2

    server.reset()
    for _ in range(5):
        server.script(PATH, Reply(status=500, json={"error": {"message": "boom"}}))

    async def second() -> None:
        await model.acall(Prompt("hi"))

    with pytest.raises(ModelHTTPError) as info:
        run(model, second())
    assert info.value.status == 500
    assert KEY not in str(info.value)


def test_reset_connection_and_timeout_are_typed(server: LoopbackServer) -> None:
    for _ in range(5):
        server.script(PATH, Close())
    model = make_model(server, max_retries=1)
    with pytest.raises(ModelConnectionError):
        run(model, model.acall(Prompt("hi")))

    server.reset()
    for _ in range(3):
        server.script(PATH, Reply(json=openai_completion("late"), delay=2.0))
    slow = make_model(server, timeout=0.3, max_retries=0)
    with pytest.raises(ModelTimeoutError):
        run(slow, slow.acall(Prompt("hi")))


def test_redirects_are_left_to_chatclient(server: LoopbackServer) -> None:
    server.script("/v1/old/chat/completions", Reply(status=307, headers={"location": PATH}))
    server.script(PATH, Reply(json=openai_completion("moved")))
    model = make_model(server, base="/v1/old")
    assert run(model, model.acall(Prompt("hi"))).result.output.text == "moved"
    assert len(server.requests_to(PATH)) == 1  # followed once, by chatclient's own redirect rule


def test_one_client_serves_several_event_loops(server: LoopbackServer) -> None:
    model = make_model(server)
    for n in range(3):
        server.script(PATH, Reply(json=openai_completion(f"answer {n}")))
        assert run(model, model.acall(Prompt("hi"))).result.output.text == f"answer {n}"


def test_leaving_a_stream_early_closes_its_connection(server: LoopbackServer) -> None:
    # The server notices a closed connection when its next write fails (after the stall): a
    # connection put back in the pool instead would take the rest and stay open for the next call.
    server.script(PATH, SSE(openai_stream(["a"] * 50), stall_after=2, stall=0.5))
    model = make_model(server)

    async def leave_early() -> None:
        stream = model.astream(Prompt("hi"))
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]

    run(model, leave_early())
    assert server.wait_for_open_connections(0, timeout=5.0)


def test_concurrent_calls_all_answer(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion("same")))
    model = make_model(server)

    async def many() -> list[str | None]:
        answers = await asyncio.gather(*(model.acall(Prompt(f"q{i}")) for i in range(200)))
        return [a.result.output.text for a in answers]

    assert run(model, many()) == ["same"] * 200


def test_bad_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="limit"):
        AiohttpTransport(limit=-1)
