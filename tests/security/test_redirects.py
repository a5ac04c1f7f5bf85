"""Redirects never carry provider credentials to another origin, whoever configured the client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from chatclient.errors import ModelHTTPError, ModelResponseError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support.loopback import SSE, LoopbackServer, Reply, anthropic_message, openai_completion, openai_stream

KEY = "sk-redirect-SECRET-0123456789"
PATH = "/v1/chat/completions"
CREDENTIAL_HEADERS = ("authorization", "x-api-key", "api-key", "x-custom-token")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[LoopbackServer, LoopbackServer]]:
    with LoopbackServer() as origin, LoopbackServer() as other:
        yield origin, other


@pytest.fixture
def pair(servers: tuple[LoopbackServer, LoopbackServer]) -> tuple[LoopbackServer, LoopbackServer]:
    for srv in servers:
        srv.reset()
    return servers


def other_host_url(srv: LoopbackServer) -> str:
    # Another host name and port for the same machine: a different origin in every respect.
    return f"http://localhost:{srv.port}"


HEADERS = {"api-key": "azure-key-SECRET-42", "x-api-key": "xkey-SECRET-42", "x-custom-token": "tok-SECRET-42"}


def check_hops(origin: LoopbackServer, other: LoopbackServer, count: int) -> None:
    firsts, hops = origin.requests_to(PATH), other.requests_to(PATH)
    assert len(firsts) == len(hops) == count
    for first, hop in zip(firsts, hops, strict=True):
        assert first.headers["authorization"] == f"Bearer {KEY}"  # the origin itself got the credentials
        for name in CREDENTIAL_HEADERS:
            assert name not in hop.headers, f"{name} was forwarded to another origin"
        assert hop.method == "POST" and hop.body == first.body  # the request itself survives the move


@pytest.mark.parametrize("client", ["own", "follow_redirects_client"])
@pytest.mark.parametrize("status", [302, 308])  # 301/307 share their code paths
def test_cross_origin_redirect_strips_every_credential_header(
    pair: tuple[LoopbackServer, LoopbackServer], client: str, status: int
) -> None:
    origin, other = pair
    origin.set_default(PATH, Reply(status, body="", headers={"location": other_host_url(other) + PATH}))
    other.script(PATH, Reply(json=openai_completion("moved")), SSE(openai_stream(["moved"])))
    other.script(PATH, Reply(json=openai_completion("moved")), SSE(openai_stream(["moved"])))
    follow = client != "own"  # the caller's own clients ask httpx to follow; the transport must not let them
    base = origin.url + "/v1"
    sync_client = httpx.Client(follow_redirects=True) if follow else None
    with OpenAIChatModel("m", api_key=KEY, base_url=base, headers=HEADERS, http_client=sync_client) as model:
        assert model.call(Prompt("x")).text == "moved"
        assert "".join(c.text or "" for c in model.stream(Prompt("x"))) == "moved"

    async def async_modes() -> None:
        async_client = httpx.AsyncClient(follow_redirects=True) if follow else None
        async with OpenAIChatModel(
            "m", api_key=KEY, base_url=base, headers=HEADERS, async_http_client=async_client
        ) as amodel:
            assert (await amodel.acall(Prompt("x"))).text == "moved"
            assert "".join([c.text or "" async for c in amodel.astream(Prompt("x"))]) == "moved"
        if async_client is not None:
            await async_client.aclose()

    asyncio.run(async_modes())
    if sync_client is not None:
        sync_client.close()
    check_hops(origin, other, 4)


def test_anthropic_key_header_is_not_forwarded(pair: tuple[LoopbackServer, LoopbackServer]) -> None:
    origin, other = pair
    origin.set_default("/v1/messages", Reply(307, headers={"location": other_host_url(other) + "/v1/messages"}))
    other.set_default("/v1/messages", Reply(json=anthropic_message("hi")))
    with AnthropicChatModel("c", api_key=KEY, base_url=origin.url) as model:
        assert model.call(Prompt("x")).text == "hi"
    assert origin.requests_to("/v1/messages")[0].headers["x-api-key"] == KEY
    assert "x-api-key" not in other.requests_to("/v1/messages")[0].headers


def test_same_origin_redirect_keeps_credentials(pair: tuple[LoopbackServer, LoopbackServer]) -> None:
    origin, _ = pair
    origin.set_default("/old/chat/completions", Reply(308, headers={"location": PATH}))
    origin.set_default(PATH, Reply(json=openai_completion("same")))
    with OpenAIChatModel("m", api_key=KEY, base_url=origin.url + "/old") as model:
        assert model.call(Prompt("x")).text == "same"
    assert origin.requests_to(PATH)[0].headers["authorization"] == f"Bearer {KEY}"


def test_redirect_loops_end_with_a_typed_error(pair: tuple[LoopbackServer, LoopbackServer]) -> None:
    origin, _ = pair
    origin.set_default(PATH, Reply(307, headers={"location": PATH}))
    model = OpenAIChatModel("m", api_key=KEY, base_url=origin.url + "/v1", max_retries=0)
    with model, pytest.raises(ModelResponseError, match="redirected more than 5 times"):
        model.call(Prompt("x"))
    assert len(origin.requests_to(PATH)) == 6


def test_see_other_is_reported_with_the_target(pair: tuple[LoopbackServer, LoopbackServer]) -> None:
    origin, other = pair
    target = other_host_url(other).replace("http://", "http://user:pw-SECRET@") + "/elsewhere"
    origin.set_default(PATH, Reply(303, headers={"location": target}))
    model = OpenAIChatModel("m", api_key=KEY, base_url=origin.url + "/v1", max_retries=0)
    with model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("x"))
    message = str(info.value)
    assert info.value.status == 303 and "base_url" in message and f"localhost:{other.port}/elsewhere" in message
    assert "pw-SECRET" not in message
    assert other.requests_to("/elsewhere") == []
