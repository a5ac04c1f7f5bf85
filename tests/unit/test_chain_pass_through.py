"""Advisors with nothing to do on the way out share one stream layer: same order, same laziness, same results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chatclient import AdvisorChain, BaseAdvisor, ChatClient, ChatClientRequest, ChatClientResponse
from chatclient.testing import ScriptedChatModel


class Before(BaseAdvisor):
    """Changes the request on the way in, nothing on the way out."""

    def __init__(self, name: str, log: list[str], order: int) -> None:
        self._name, self.log, self.order = name, log, order

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        self.log.append(f"{self._name}:before")
        seen = request.context.get("seen", ())
        return request.mutate(context={"seen": (*seen, self._name)})


class AsyncBefore(Before):
    async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        await asyncio.sleep(0)
        return self.before(request, chain)


class After(Before):
    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        self.log.append(f"{self._name}:after:{response.context.get('seen')}")
        return response


def _client(log: list[str]) -> ChatClient:
    advisors = [
        Before("a", log, 1),
        AsyncBefore("b", log, 2),
        Before("c", log, 3),
        After("d", log, 4),
        Before("e", log, 5),
    ]
    return ChatClient.builder(ScriptedChatModel([["he", "llo", "!"]])).default_advisors(*advisors).build()


@pytest.mark.parametrize("use_async", [False, True])
def test_every_before_runs_in_order_and_the_after_still_sees_the_finish(use_async: bool) -> None:
    log: list[str] = []
    client = _client(log)

    async def collect() -> list[Any]:
        spec = client.prompt("hi").astream().chat_response()
        assert log == []  # nothing runs before the stream is read
        return [c async for c in spec]

    if use_async:
        chunks = asyncio.run(collect())
    else:
        spec = client.prompt("hi").stream().chat_response()
        assert log == []
        chunks = list(spec)
    assert "".join(c.text or "" for c in chunks) == "hello!"
    assert log == ["a:before", "b:before", "c:before", "d:before", "e:before", "d:after:('a', 'b', 'c', 'd', 'e')"]


def test_an_async_stream_closed_early_closes_the_model_stream() -> None:
    log: list[str] = []
    client = _client(log)

    async def first_only() -> str | None:
        stream = client.prompt("hi").astream().content()
        first = await anext(aiter(stream))
        await stream.aclose()  # type: ignore[attr-defined]
        return first

    assert asyncio.run(first_only()) == "he"
    assert "d:after" not in " ".join(log)
