"""A2A (Agent-to-Agent) on the official a2a-sdk, both ends over real HTTP on 127.0.0.1.

A chatclient workflow served with ``serve_a2a`` is called by ``a2a_agent`` inside another workflow;
the client also talks to a server built the way the SDK's own sample builds one (its request handler,
its routes and an ``AgentExecutor`` written with its helpers); hostile servers send oversized or
endless answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import pickle
import re
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="needs the a2a extra: pip install 'chatclient[a2a]'")
uvicorn = pytest.importorskip("uvicorn")

from a2a.helpers import new_text_message, new_text_part  # noqa: E402
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Task, TaskState, TaskStatus  # noqa: E402
from google.protobuf import json_format  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.authentication import AuthCredentials, AuthenticationBackend, SimpleUser  # noqa: E402
from starlette.middleware.authentication import AuthenticationMiddleware  # noqa: E402
from starlette.requests import HTTPConnection, Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from chatclient import ChatClient  # noqa: E402
from chatclient.a2a import a2a_agent, a2a_app, serve_a2a  # noqa: E402
from chatclient.agents import AgenticScope, agent, agent_function, human_input, loop, sequence  # noqa: E402
from chatclient.agents.base import Agent, AgentFinished, AgentStarted, Step  # noqa: E402
from chatclient.errors import A2AError, AgentExecutionError  # noqa: E402
from chatclient.events import TextDelta  # noqa: E402
from chatclient.testing import ScriptedChatModel  # noqa: E402
from tests.support.serving import serving  # noqa: E402

# -- helpers ----------------------------------------------------------------------------------------


@contextmanager
def running(make_app: Callable[[str], Any]) -> Iterator[str]:
    """Serve ``make_app(url)`` with uvicorn on a free 127.0.0.1 port; yields that base URL (ending in /)."""
    with serving(lambda url: make_app(url + "/")) as url:
        yield url + "/"


def run(target: Any, mode: str, **inputs: Any) -> Any:
    if mode == "sync":
        return target.run(**inputs)
    return asyncio.run(target.arun(**inputs))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@agent_function(output_key="answer")
def shout(request: str, turns: int = 0) -> str:
    """Shouts the request back, counting the turns of the conversation."""
    return f"{request.upper()} (turn {turns + 1})"


@agent_function(output_key="turns")
def count(turns: int = 0) -> int:
    return turns + 1


SHOUTER = sequence(shout, count, name="shouter", description="Shouts back", output=lambda s: s.read("answer"))


@pytest.fixture(scope="module")
def shouter() -> Iterator[str]:
    with serve_a2a(SHOUTER) as server:
        yield server.url


# -- the SDK's own sample server code path -----------------------------------------------------------


class SampleExecutor(AgentExecutor):
    """An executor written the way the SDK's samples write one: a direct reply for "hello", task
    updates through ``TaskUpdater`` otherwise."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        if text == "hello":  # the hello-world sample: one Message
            await event_queue.enqueue_event(new_text_message(f"Hello World ({text})", context_id=context.context_id))
            return
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("the tool broke")]))
        elif text == "cancel":
            await updater.cancel()
        elif text == "which city?":
            await updater.requires_input(updater.new_agent_message([new_text_part("Which city?")]))
        elif text.startswith("big"):
            for i in range(int(text.split()[1])):
                await updater.add_artifact([new_text_part("x" * 1000)], artifact_id="a", append=i > 0)
            await updater.complete()
        elif context.current_task is not None:  # the answer to "Which city?"
            await updater.add_artifact([new_text_part(f"Sunny in {text}")], artifact_id="w", name="weather")
            await updater.complete()
        else:
            for i, word in enumerate(["one ", "two ", "three"]):
                await updater.add_artifact([new_text_part(word)], artifact_id="r", name="reply", append=i > 0)
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def sample_app(url: str, binding: str = "JSONRPC") -> Starlette:
    card = AgentCard(
        name="Sample Agent",
        description="The SDK sample's shape",
        version="1.0.0",
        supported_interfaces=[AgentInterface(protocol_binding=binding, url=url, protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="sample", name="Sample", description="answers", tags=["sample"])],
    )
    handler = DefaultRequestHandler(agent_executor=SampleExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    if binding == "HTTP+JSON":
        return Starlette(routes=[*create_agent_card_routes(card), *create_rest_routes(handler)])
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")])


@pytest.fixture(scope="module")
def sample() -> Iterator[str]:
    with running(sample_app) as url:
        yield url


# -- chatclient on both ends --------------------------------------------------------------------------


def test_a_served_workflow_is_called_by_a2a_agent_inside_another_workflow(mode: str) -> None:
    model = ScriptedChatModel(["Otters hold hands while they sleep."])
    writer = agent(ChatClient.create(model), name="writer", user="Write about {{ request }}.", output_key="fact")
    served = sequence(writer, name="fact_writer", description="Writes one fact")

    @agent_function(output_key="request")
    def topic(animal: str) -> str:
        return f"{animal}s"

    @agent_function(output_key="final")
    def frame(remote_fact: str) -> str:
        return f"Did you know? {remote_fact}"

    with serve_a2a(served) as server:
        remote = a2a_agent(server.url, output_key="remote_fact")
        assert (remote.name, remote.description) == ("fact_writer", "Writes one fact")
        result = run(sequence(topic, remote, frame, name="local"), mode, animal="otter")
    assert result.output == "Did you know? Otters hold hands while they sleep."
    assert model.last_prompt.messages[-1].text == "Write about otters."
    assert result.scope.read("fact_writer_context_id")  # the remote conversation's id is kept
    names = [child.name for child in result.invocations[0].children]
    assert names == ["topic", "fact_writer", "frame"]


def test_the_agent_card_names_the_agent_and_its_skills(shouter: str) -> None:
    card = httpx.get(shouter + ".well-known/agent-card.json").json()
    assert card["name"] == "shouter" and card["description"] == "Shouts back"
    assert card["capabilities"]["streaming"] is True
    assert card["supportedInterfaces"][0]["url"] == shouter
    skills = {s["id"]: s["description"] for s in card["skills"]}
    assert skills["shouter"] == "Shouts back"
    assert skills["shout"].startswith("Shouts the request back")  # a described sub-agent is a skill too


def test_multi_turn_goes_on_in_the_same_remote_context(shouter: str, mode: str) -> None:
    remote = a2a_agent(shouter)
    first = run(remote, mode, request="hi")
    assert first.output == "HI (turn 1)"
    context_id = first.scope.read("shouter_context_id")
    second = run(remote, mode, request="again", shouter_context_id=context_id)
    assert second.output == "AGAIN (turn 2)"
    assert second.scope.read("shouter_context_id") == context_id
    fresh = run(remote, mode, request="new")  # no context id: a new conversation
    assert fresh.output == "NEW (turn 1)"
    assert fresh.scope.read("shouter_context_id") != context_id
    # Inside one run, a loop talks to the same remote conversation each iteration.
    looped = run(loop(remote, max_iterations=3, name="thrice"), mode, request="loop")
    assert looped.output == "LOOP (turn 3)"


def test_streaming_yields_the_remote_text_deltas_in_order(mode: str) -> None:
    model = ScriptedChatModel([["Once ", "upon ", "a ", "time."]])
    teller = agent(ChatClient.create(model), name="teller", description="Tells", user="{{ request }}")
    with serve_a2a(teller) as server:
        remote = a2a_agent(server.url, output_key="story")
        if mode == "sync":
            events = list(remote.stream(request="a story"))
        else:

            async def collect() -> list[Any]:
                return [e async for e in remote.astream(request="a story")]

            events = asyncio.run(collect())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Once ", "upon ", "a ", "time."]  # chunk by chunk, through the server's artifact stream
    assert isinstance(events[0], AgentStarted) and isinstance(events[-1], AgentFinished)
    assert events[-1].output == "Once upon a time."


def test_a_remote_failure_is_a_typed_error(mode: str) -> None:
    @agent_function
    def broken(request: str) -> str:
        raise RuntimeError("database password is hunter2")

    with serve_a2a(broken) as quiet, serve_a2a(broken, expose_errors=True) as loud:
        with pytest.raises(A2AError) as caught:
            run(a2a_agent(quiet.url), mode, request="x")
        assert caught.value.reason == "failed" and caught.value.task_id and caught.value.context_id
        assert "RuntimeError" in str(caught.value) and "hunter2" not in str(caught.value)
        with pytest.raises(A2AError, match="hunter2"):
            run(a2a_agent(loud.url), mode, request="x")
        # Inside a workflow: AgentExecutionError naming the remote agent, the A2AError as its cause.
        with pytest.raises(AgentExecutionError) as wrapped:
            run(sequence(a2a_agent(quiet.url), name="outer"), mode, request="x")
        assert wrapped.value.agent_name == "broken" and isinstance(wrapped.value.cause, A2AError)


class Ticker(Agent):
    """Streams one delta, then waits until cancelled (and says so)."""

    def __init__(self, cancelled: threading.Event) -> None:
        self.name, self.description, self.output_key = "ticker", "ticks, then waits", None
        self.cancelled = cancelled

    def input_names(self) -> tuple[str, ...]:
        return ("request",)

    async def _ainvoke(self, step: Step) -> Any:
        if step.run.emit is not None:
            step.run.emit(TextDelta("tick"))
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return "late"


def test_closing_the_local_stream_cancels_the_remote_task() -> None:
    cancelled = threading.Event()
    with serve_a2a(Ticker(cancelled)) as server:
        remote = a2a_agent(server.url)

        async def first_delta_then_close() -> str:
            stream = remote.astream(request="go")
            async for event in stream:
                if isinstance(event, TextDelta):
                    await stream.aclose()  # the remote task's id came before its first delta
                    return event.text
            raise AssertionError("no delta arrived")

        assert asyncio.run(first_delta_then_close()) == "tick"
        assert cancelled.wait(10), "the remote agent was not cancelled"
        # The same from a sync stream, whose run goes on in a worker thread.
        cancelled.clear()
        stream = remote.stream(request="go")
        assert next(e for e in stream if isinstance(e, TextDelta)).text == "tick"
        stream.close()  # returns once the worker stopped: the in-flight call was cancelled, not awaited
        assert cancelled.wait(10), "the remote agent was not cancelled"


def test_a_served_run_is_bounded_by_max_duration() -> None:
    @agent_function
    async def dawdle(request: str) -> str:
        await asyncio.sleep(30)
        return "late"

    with serve_a2a(dawdle, max_duration=0.3) as server, pytest.raises(A2AError) as caught:
        a2a_agent(server.url).run(request="x")
    assert caught.value.reason == "failed" and "DeadlineExceededError" in str(caught.value)


def test_a_remote_human_input_suspends_here_and_resumes_there(mode: str) -> None:
    @agent_function(output_key="booking")
    def book(city: str) -> str:
        return f"booked a table in {city}"

    served = sequence(human_input(question="Which city?", output_key="city"), book, name="booker")
    with serve_a2a(served) as server:
        local = sequence(a2a_agent(server.url, output_key="result"), name="local")
        waiting = run(local, mode, request="book me a table")
        assert waiting.suspended is not None and waiting.suspended.question == "Which city?"
        assert waiting.output is None
        # Resume in "another process": from the scope's JSON.
        text = waiting.scope.to_json()
        done = local.resume(text, "Lisbon") if mode == "sync" else asyncio.run(local.aresume(text, "Lisbon"))
        assert done.suspended is None and done.output == "booked a table in Lisbon"

        answers: list[str] = []

        def responder(question: str, scope: AgenticScope) -> str:
            answers.append(question)
            return "Porto"

        inline = run(a2a_agent(server.url, responder=responder), mode, request="book")
        assert inline.output == "booked a table in Porto" and answers == ["Which city?"]


def test_an_answer_to_a_run_the_server_no_longer_holds_fails_clearly() -> None:
    @agent_function(output_key="booking")
    def book(city: str) -> str:
        return f"booked in {city}"

    served = sequence(human_input(question="Which city?", output_key="city"), book, name="booker")
    with serve_a2a(served, max_contexts=1) as server:
        remote = a2a_agent(server.url)
        first = remote.run(request="one")
        second = remote.run(request="two")  # the server now holds only this waiting run
        assert remote.resume(second.scope, "Rome").output == "booked in Rome"
        with pytest.raises(A2AError, match="no longer holds the run waiting") as caught:
            remote.resume(first.scope, "Oslo")
    assert caught.value.reason == "failed"


def test_agents_built_by_a2a_agent_pickle(shouter: str) -> None:
    remote = a2a_agent(shouter, headers={"Authorization": "Bearer s3cret"})
    assert "s3cret" not in repr(remote)
    copy = pickle.loads(pickle.dumps(remote))
    assert copy._card is None and copy.url == shouter
    assert copy.run(request="pickled").output == "PICKLED (turn 1)"


def test_an_agent_built_from_a_card_needs_no_fetch_and_pickles(shouter: str, mode: str) -> None:
    card = httpx.get(shouter + ".well-known/agent-card.json").json()
    proto = json_format.ParseDict(card, AgentCard(), ignore_unknown_fields=True)
    for source in (card, json.dumps(card), proto):
        remote = a2a_agent(source)  # name, description and URL come from the card itself
        assert (remote.name, remote.description, remote.url) == ("shouter", "Shouts back", shouter)
        copy = pickle.loads(pickle.dumps(remote))
        assert run(copy, mode, request="carded").output == "CARDED (turn 1)"


def test_a2a_app_mounts_in_any_asgi_server() -> None:
    def make_app(url: str) -> Any:
        return a2a_app(SHOUTER, url=url, name="mounted", description="Mounted by hand")

    with running(make_app) as url:
        remote = a2a_agent(url)
        assert (remote.name, remote.description) == ("mounted", "Mounted by hand")
        assert remote.run(request="mounted").output == "MOUNTED (turn 1)"


class HeaderAuth(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        name = conn.headers.get("x-user")
        return (AuthCredentials(["a2a"]), SimpleUser(name)) if name else None


def test_conversations_belong_to_the_authenticated_caller() -> None:
    def make_app(url: str) -> Any:
        return AuthenticationMiddleware(a2a_app(SHOUTER, url=url), backend=HeaderAuth())

    with running(make_app) as url:
        alice = a2a_agent(url, headers={"X-User": "alice"})
        mallory = a2a_agent(url, headers={"X-User": "mallory"})
        first = alice.run(request="hi")
        context_id = first.scope.read("shouter_context_id")
        # Another caller sending alice's context id starts from nothing, not from her conversation.
        assert mallory.run(request="peek", shouter_context_id=context_id).output == "PEEK (turn 1)"
        assert alice.run(request="again", shouter_context_id=context_id).output == "AGAIN (turn 2)"


def test_the_server_refuses_an_oversized_request(shouter: str) -> None:
    with serve_a2a(SHOUTER, max_request_bytes=10_000) as server:
        big = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"pad": "x" * 20_000}}
        answer = httpx.post(server.url, json=big)
        assert answer.status_code == 413
        chunked = httpx.post(server.url, content=iter([b"{" + b" " * 8_000, b" " * 8_000 + b"}"]))
        assert chunked.status_code == 413
        assert a2a_agent(server.url).run(request="small").output == "SMALL (turn 1)"


# -- against the SDK's sample server code path --------------------------------------------------------


def test_client_against_the_sdk_sample_server(sample: str, mode: str) -> None:
    remote = a2a_agent(sample)
    assert remote.name == "Sample Agent" and remote.context_key == "sample_agent_context_id"
    assert run(remote, mode, request="hello").output == "Hello World (hello)"  # a direct Message
    assert run(remote, mode, request="tell me").output == "one two three"  # a streamed, appended artifact
    # The same through message/send (no streaming): the SDK aggregates the task.
    assert run(a2a_agent(sample, streaming=False), mode, request="tell me").output == "one two three"


def test_client_against_an_sdk_server_speaking_http_json(mode: str) -> None:
    with running(lambda url: sample_app(url, "HTTP+JSON")) as url:
        assert run(a2a_agent(url), mode, request="tell me").output == "one two three"
        assert run(a2a_agent(url, streaming=False), mode, request="hello").output == "Hello World (hello)"


def test_sample_server_states_map_to_errors_and_suspension(sample: str, mode: str) -> None:
    remote = a2a_agent(sample)
    with pytest.raises(A2AError, match="the tool broke") as failed:
        run(remote, mode, request="fail")
    assert failed.value.reason == "failed"
    with pytest.raises(A2AError) as canceled:
        run(remote, mode, request="cancel")
    assert canceled.value.reason == "canceled"
    waiting = run(remote, mode, request="which city?")
    assert waiting.suspended is not None and waiting.suspended.question == "Which city?"
    done = (
        remote.resume(waiting.scope, "Rome") if mode == "sync" else asyncio.run(remote.aresume(waiting.scope, "Rome"))
    )
    assert done.output == "Sunny in Rome"


def test_sample_server_streams_into_a_workflow_stream(sample: str) -> None:
    @agent_function(output_key="request")
    def ask() -> str:
        return "tell me"

    events = list(sequence(ask, a2a_agent(sample), name="flow").stream())
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["one ", "two ", "three"]


# -- bounds and hostile servers -------------------------------------------------------------------------


def test_too_many_characters_or_events_are_refused(sample: str, mode: str) -> None:
    with pytest.raises(A2AError) as chars:
        run(a2a_agent(sample, max_answer_chars=5_000), mode, request="big 10")
    assert chars.value.reason == "too-large" and "max_answer_chars" in str(chars.value)
    with pytest.raises(A2AError) as events:
        run(a2a_agent(sample, max_events=5), mode, request="big 10")
    assert events.value.reason == "too-large" and "max_events" in str(events.value)
    assert run(a2a_agent(sample, max_answer_chars=20_000), mode, request="big 10").output == "x" * 10_000


def hostile_app(url: str, mode: str) -> Starlette:
    card = AgentCard(
        name="hostile",
        description="sends too much",
        version="1",
        supported_interfaces=[AgentInterface(protocol_binding="JSONRPC", url=url, protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=mode not in ("json", "echo")),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="hostile", name="hostile", description="sends too much", tags=["hostile"])],
    )

    async def rpc(request: Request) -> Response:
        body = await request.json()
        if mode == "json":  # one enormous JSON-RPC answer
            text = "y" * 5_000_000
            result = {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]}}
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})
        if mode == "endless":  # an SSE stream that never ends

            async def forever() -> Any:
                n = 0
                while not await request.is_disconnected():
                    n += 1
                    event = {
                        "jsonrpc": "2.0",
                        "id": body["id"],
                        "result": {
                            "artifactUpdate": {
                                "taskId": "t",
                                "contextId": "c",
                                "artifact": {"artifactId": f"a{n}", "parts": [{"text": "z" * 10_000}]},
                            }
                        },
                    }
                    yield f"data: {json.dumps(event)}\n\n"

            return StreamingResponse(forever(), media_type="text/event-stream")
        if mode == "slow":

            async def drip() -> Any:
                while True:
                    await asyncio.sleep(0.05)
                    yield ": still here\n\n"

            return StreamingResponse(drip(), media_type="text/event-stream")
        if mode in ("notjson", "notobject"):  # a stream whose event is not JSON, or not a JSON-RPC object

            async def garbage() -> Any:
                yield "data: <html>oops</html>\n\n" if mode == "notjson" else "data: [1, 2]\n\n"

            return StreamingResponse(garbage(), media_type="text/event-stream")
        if mode == "echo":  # a failed task whose reason repeats the caller's credentials
            said = f"bad token {request.headers.get('authorization', '')}"
            status = {
                "state": "TASK_STATE_FAILED",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": said}]},
            }
            result = {"task": {"id": "t1", "contextId": "c1", "status": status}}
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})
        if mode == "auth":
            header = request.headers.get("authorization", "")
            return JSONResponse({"error": f"bad token {header}"}, status_code=401)
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"nonsense": True}})

    return Starlette(routes=[*create_agent_card_routes(card), Route("/", rpc, methods=["POST"])])


def hostile(mode: str) -> Any:
    return running(lambda url: hostile_app(url, mode))


@pytest.mark.parametrize("kind", ["json", "endless"])
def test_an_oversized_remote_answer_is_cut_off(kind: str, mode: str) -> None:
    with hostile(kind) as url:
        remote = a2a_agent(url, max_response_bytes=1_000_000, max_answer_chars=10_000_000, max_events=10**9)
        with pytest.raises(A2AError) as caught:
            run(remote, mode, request="x")
    assert caught.value.reason == "too-large"
    assert "max_response_bytes=1,000,000" in str(caught.value)


def test_a_remote_that_never_finishes_times_out(mode: str) -> None:
    with hostile("slow") as url:
        card = httpx.get(url + ".well-known/agent-card.json").json()
        remote = a2a_agent(card, timeout=0.5)  # the 0.5 s bound only meets the never-ending answer
        with pytest.raises(A2AError) as caught:
            run(remote, mode, request="x")
    assert caught.value.reason == "timeout" and "0.5 s" in str(caught.value)


def test_auth_headers_are_sent_and_never_echoed(mode: str) -> None:
    with hostile("auth") as url:
        remote = a2a_agent(url, headers={"Authorization": "Bearer s3cret-token"})
        with pytest.raises(A2AError) as caught:
            run(remote, mode, request="x")
    assert caught.value.reason == "connection"
    assert "401" in str(caught.value)
    assert "s3cret-token" not in str(caught.value) and "s3cret-token" not in repr(caught.value)


def test_credentials_are_not_repeated_even_when_the_remote_echoes_them(mode: str) -> None:
    with hostile("echo") as url:
        remote = a2a_agent(url, headers={"Authorization": "Bearer s3cret-token"})
        with pytest.raises(A2AError) as caught:
            run(remote, mode, request="x")
    assert caught.value.reason == "failed" and caught.value.task_id == "t1" and caught.value.context_id == "c1"
    assert "bad token" in str(caught.value) and "s3cret-token" not in str(caught.value)
    # A password written in the URL stays out of repr, errors and the error's url.
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    secret_url = f"http://bob:pa55word@127.0.0.1:{port}/"
    offline = a2a_agent(secret_url, name="offline", description="not there")
    assert "pa55word" not in repr(offline)
    with pytest.raises(A2AError) as unreachable:
        run(offline, mode, request="x")
    assert unreachable.value.reason == "connection"
    assert "pa55word" not in str(unreachable.value) and "pa55word" not in str(unreachable.value.url)


def test_a_malformed_answer_is_a_protocol_error(mode: str) -> None:
    with hostile("nonsense") as url, pytest.raises(A2AError) as caught:
        run(a2a_agent(url), mode, request="x")
    assert caught.value.reason == "protocol"


@pytest.mark.parametrize("kind", ["notjson", "notobject"])
def test_a_stream_event_that_is_not_json_rpc_is_a_protocol_error(kind: str, mode: str) -> None:
    """Issue 36 item 9: it was reason="connection", as if the agent could not be reached."""
    with hostile(kind) as url, pytest.raises(A2AError) as caught:
        run(a2a_agent(url), mode, request="x")
    assert caught.value.reason == "protocol"
    assert "could not be read" in str(caught.value)


def test_unreachable_agent_and_bad_arguments() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(A2AError) as caught:
        a2a_agent(f"http://127.0.0.1:{port}/")
    assert caught.value.reason == "connection"
    with pytest.raises(ValueError, match="http"):
        a2a_agent("ftp://example.org/")
    with pytest.raises(ValueError, match="max_answer_chars"):
        a2a_agent("http://127.0.0.1:1/", name="x", description="", max_answer_chars=0)
    with pytest.raises(TypeError, match="AgentCard"):
        a2a_agent(42)
    with pytest.raises(A2AError) as card:
        a2a_agent("{not json")
    assert card.value.reason == "protocol"


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "a2a", None)  # what an environment without the extra looks like
    with pytest.raises(ImportError, match=r"chatclient\[a2a\]"):
        a2a_agent("http://127.0.0.1:1/")
    with pytest.raises(ImportError, match=r"chatclient\[a2a\]"):
        serve_a2a(SHOUTER)


def test_the_guide_snippets_run_and_print_what_the_page_shows() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "a2a.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    shown = "".join(re.findall(r"```text\n(.*?)```", page, flags=re.DOTALL)).splitlines()
    assert len(blocks) >= 6 and len(shown) >= 8
    namespace: dict[str, object] = {"__name__": "a2a_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, "docs/guide/a2a.md", "exec"), namespace)  # our own documentation
    assert out.getvalue().splitlines() == shown


def test_the_served_run_continues_the_callers_trace() -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from chatclient.observability.otel import instrument, uninstrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrument(provider)
    try:
        with serve_a2a(SHOUTER) as server:
            remote = a2a_agent(server.url, name="caller_side", description="the local face")
            assert asyncio.run(remote.arun(request="traced")).output == "TRACED (turn 1)"
    finally:
        uninstrument()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    local, served = spans["invoke_agent caller_side"], spans["invoke_agent shouter"]
    assert served.context.trace_id == local.context.trace_id  # one trace across the HTTP boundary
    assert served.parent is not None and served.parent.span_id == local.context.span_id
    assert spans["invoke_agent shout"].parent.span_id == served.context.span_id  # the served tree below it
