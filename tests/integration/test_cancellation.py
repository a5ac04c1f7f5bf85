"""Closing a stream early stops the work: the HTTP response, async tools in flight, every advisor.

A real OpenAI-wire server on 127.0.0.1 (tests/support/loopback.py) streams a few chunks and then
keeps the response open with SSE keep-alive comments; it counts the connections it still serves
(a handler ends once the client has closed the socket and the next write fails), which proves
no connection stays open. Memory rule under test (advisors/memory.py): a cancelled or abandoned
turn stores the user's question only, never a partial answer; checked with every repository.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from advisors import MessageChatMemoryAdvisor, StructuredOutputValidationAdvisor
from chatclient import ChatClient
from chatclient.events import AdvisorEvent, TextDelta, ToolCallStarted
from chatclient.memory import MessageWindowChatMemory
from chatclient.messages import AssistantMessage, UserMessage
from chatclient.models.openai import OpenAIChatModel
from chatclient.tools import tool
from tests.integration.test_memory_repositories import KINDS, Store
from tests.support.loopback import SSE, LoopbackServer, RawStream, openai_stream

pytestmark = pytest.mark.integration

PATH = "/v1/chat/completions"
QUESTION = "Tell me a long story"


@pytest.fixture(scope="module")
def loopback() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        yield srv


@pytest.fixture
def server(loopback: LoopbackServer) -> LoopbackServer:
    loopback.reset()
    assert loopback.wait_for_active_responses(0), "a response of an earlier test is still being written"
    return loopback


def model(srv: LoopbackServer) -> OpenAIChatModel:
    return OpenAIChatModel("gpt-test", base_url=srv.url + "/v1", api_key="sk-test-0123456789", timeout=10.0)


def endless(pieces: tuple[str, ...] = ("Once", " upon")) -> RawStream:
    """A stream that sends ``pieces`` and then only keep-alive comments, without ever finishing."""
    events = openai_stream(pieces, usage=None)[: len(pieces) + 1]  # the role chunk, then the pieces
    return RawStream([f"data: {json.dumps(e)}\n\n".encode() for e in events], keepalive=0.05, hold=20)


def tool_call_stream(name: str, arguments: str) -> SSE:
    return SSE(openai_stream((), tool_calls=[("call-1", name, [arguments])], finish_reason="tool_calls"))


def closed(srv: LoopbackServer) -> bool:
    """No response is being written any more: the client closed the streaming connection.

    Keep-alives go out every 50 ms, so a closed client is noticed within about two of them.
    (Idle pooled connections of completed requests may stay open; they carry no response.)
    """
    return srv.wait_for_active_responses(0, timeout=2.0)


def disconnected(srv: LoopbackServer) -> bool:
    """No connection is open at all (for tests whose only request was the cancelled stream)."""
    return srv.wait_for_open_connections(0, timeout=2.0)


def no_other_tasks() -> bool:
    return {t for t in asyncio.all_tasks() if not t.done()} == {asyncio.current_task()}


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# -- the HTTP response ----------------------------------------------------------------------------


def test_break_in_a_sync_events_loop_closes_the_response(server: LoopbackServer) -> None:
    server.set_default(PATH, endless())
    received = []
    for event in ChatClient.create(model(server)).prompt(QUESTION).stream().events():
        received.append(event)
        if isinstance(event, TextDelta):
            assert server.active_responses == 1
            break
    assert closed(server) and disconnected(server)
    assert [e.text for e in received if isinstance(e, TextDelta)] == ["Once"]


def test_close_of_a_sync_content_stream_closes_the_response(server: LoopbackServer) -> None:
    server.set_default(PATH, endless())
    stream = ChatClient.create(model(server)).prompt(QUESTION).stream().content()
    assert next(stream) == "Once"
    stream.close()  # type: ignore[attr-defined]
    assert closed(server) and disconnected(server)


def test_aclose_closes_the_response(server: LoopbackServer) -> None:
    server.set_default(PATH, endless())

    async def go() -> None:
        events = ChatClient.create(model(server)).prompt(QUESTION).astream().events()
        async for event in events:
            if isinstance(event, TextDelta):
                break
        await events.aclose()  # type: ignore[attr-defined]
        await settle()
        assert await asyncio.to_thread(closed, server)
        assert await asyncio.to_thread(disconnected, server)
        assert no_other_tasks()

    asyncio.run(go())


@pytest.mark.parametrize("before_first_chunk", [False, True])
def test_cancelling_the_consumer_task_closes_the_response(server: LoopbackServer, before_first_chunk: bool) -> None:
    server.set_default(PATH, endless(() if before_first_chunk else ("Once", " upon")))
    seen: list[str] = []

    async def consume() -> None:
        async for event in ChatClient.create(model(server)).prompt(QUESTION).astream().events():
            if isinstance(event, TextDelta):
                seen.append(event.text)

    async def go() -> None:
        task = asyncio.create_task(consume())
        assert await asyncio.to_thread(server.wait_for_active_responses, 1)
        await asyncio.sleep(0.15)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert await asyncio.to_thread(closed, server)
        assert no_other_tasks()

    asyncio.run(go())
    assert seen == ([] if before_first_chunk else ["Once", " upon"])


# -- tools in flight ------------------------------------------------------------------------------


class SlowTools:
    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False
        self.finished = False

    @tool
    async def research(self, topic: str) -> str:
        """Research a topic (slowly)."""
        self.started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return "done"


def test_cancelling_mid_tool_cancels_the_async_tool_and_stores_the_question_only(server: LoopbackServer) -> None:
    server.script(PATH, tool_call_stream("research", '{"topic": "owls"}'))
    server.set_default(PATH, endless())
    memory = MessageWindowChatMemory()
    tools = SlowTools()
    client = ChatClient.builder(model(server)).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    seen: list[Any] = []

    async def consume() -> None:
        async for event in client.prompt(QUESTION).tools(tools).astream().events():
            seen.append(event)

    async def go() -> None:
        task = asyncio.create_task(consume())
        await asyncio.wait_for(tools.started.wait(), 5)
        await settle()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert no_other_tasks()

    asyncio.run(go())
    assert tools.cancelled and not tools.finished
    # the memory load, then the tool call: it reached the consumer while the tool ran
    assert [type(e) for e in seen] == [AdvisorEvent, ToolCallStarted]
    assert memory.get("default") == [UserMessage(QUESTION)]
    assert closed(server)


def test_cancelling_mid_sync_tool_stops_waiting_and_abandons_the_thread(server: LoopbackServer) -> None:
    server.script(PATH, tool_call_stream("slow_sync", '{"topic": "owls"}'))
    server.set_default(PATH, endless())
    started = threading.Event()
    finished = threading.Event()

    @tool
    def slow_sync(topic: str) -> str:
        """Research a topic in blocking code."""
        started.set()
        time.sleep(0.6)
        finished.set()
        return "done"

    memory = MessageWindowChatMemory()
    client = ChatClient.builder(model(server)).default_advisors(MessageChatMemoryAdvisor(memory)).build()

    async def consume() -> None:
        async for _event in client.prompt(QUESTION).tools(slow_sync).astream().events():
            pass

    async def go() -> float:
        task = asyncio.create_task(consume())
        assert await asyncio.to_thread(started.wait, 5)
        begin = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        waited = time.monotonic() - begin
        # The request did not wait for the thread (Python cannot interrupt it)...
        assert waited < 0.3 and not finished.is_set()
        return waited

    asyncio.run(go())
    # ...which ends on its own later; its result is discarded: no further model request, and
    # memory holds the question only.
    assert finished.wait(5)
    assert len(server.requests_to(PATH)) == 1
    assert memory.get("default") == [UserMessage(QUESTION)]


def test_cancelling_during_a_validation_re_ask_closes_the_second_request(server: LoopbackServer) -> None:
    from pydantic import BaseModel

    class Story(BaseModel):
        title: str

    server.script(PATH, SSE(openai_stream(['{"nope": 1}'])))
    server.set_default(PATH, endless(('{"title": ',)))
    memory = MessageWindowChatMemory()
    client = ChatClient.builder(model(server)).default_advisors(MessageChatMemoryAdvisor(memory)).build()

    async def consume() -> None:
        advisor = StructuredOutputValidationAdvisor(Story, max_repeat_attempts=2)
        async for _event in client.prompt(QUESTION).advisors(advisor).astream().events():
            pass

    async def go() -> None:
        task = asyncio.create_task(consume())
        for _ in range(100):
            if len(server.requests_to(PATH)) == 2 and server.active_responses == 1:
                break
            await asyncio.sleep(0.02)
        assert len(server.requests_to(PATH)) == 2
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle()
        assert no_other_tasks()

    asyncio.run(go())
    assert closed(server)
    assert memory.get("default") == [UserMessage(QUESTION)]


# -- memory stays consistent, with every repository ----------------------------------------------


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Store]:
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        s.cleanup()


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_cancelled_turn_stores_the_question_only(server: LoopbackServer, store: Store, mode: str) -> None:
    server.set_default(PATH, endless())
    memory = MessageWindowChatMemory(store.make())
    client = ChatClient.builder(model(server)).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    cid = f"cancel-{store.token}"
    spec = client.prompt(QUESTION).advisors(params={"chat_memory_conversation_id": cid})
    if mode == "stream":
        events = spec.stream().events()
        assert any(isinstance(e, TextDelta) for e in _until_text(events))
        events.close()  # type: ignore[attr-defined]
    else:

        async def go() -> None:
            events = spec.astream().events()
            async for event in events:
                if isinstance(event, TextDelta):
                    break
            await events.aclose()  # type: ignore[attr-defined]
            await settle()

        asyncio.run(go())
    assert closed(server)
    # A fresh repository over the same storage sees what was written: the question, no partial answer.
    assert MessageWindowChatMemory(store.make()).get(cid) == [UserMessage(QUESTION)]
    # The conversation goes on normally afterwards.
    server.set_default(PATH, SSE(openai_stream(["Fine."])))
    assert (
        "".join(
            client.prompt("Short one then").advisors(params={"chat_memory_conversation_id": cid}).stream().content()
        )
        == "Fine."
    )
    history = MessageWindowChatMemory(store.make()).get(cid)
    assert history == [UserMessage(QUESTION), UserMessage("Short one then"), AssistantMessage("Fine.")]


def _until_text(events: Iterator[Any]) -> Iterator[Any]:
    for event in events:
        yield event
        if isinstance(event, TextDelta):
            return
