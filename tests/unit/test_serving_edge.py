"""The shared edge of chatclient.serving: error mapping, targets, options, agent runs, caller tools, serve()."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import warnings
from typing import Any

import pytest

pytest.importorskip("starlette", reason="needs the serve extra: pip install 'chatclient[serve]'")

from chatclient import ChatClient
from chatclient.agents import agent_function, human_input, sequence
from chatclient.agents.base import AgentFinished, AgentStarted
from chatclient.errors import (
    AgentExecutionError,
    BudgetExceededError,
    CircuitOpenError,
    DeadlineExceededError,
    ModelConnectionError,
    ModelHTTPError,
    RateLimitError,
)
from chatclient.events import Finished, StreamEvent, TextDelta
from chatclient.messages import AssistantMessage, ToolCall, UserMessage
from chatclient.prompt import ToolDefinition
from chatclient.serving._edge import (
    BUDGET_RETRY_AFTER,
    ChatTurn,
    Edge,
    EdgeError,
    RunSuspended,
    ScopeSnapshot,
    ToolCallsReturned,
    check_target,
    error_for,
    resolve_target,
)
from chatclient.testing import ScriptedChatModel


def test_importing_the_face_imports_no_web_stack() -> None:
    code = (
        "import sys, chatclient.serving\n"
        "bad = [m for m in ('starlette', 'uvicorn', 'ag_ui', 'fastapi') if m in sys.modules]\n"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (RateLimitError("slow down", retry_after=2.2), 429, "rate_limit_exceeded"),
        (BudgetExceededError("spent"), 429, "budget_exceeded"),
        (DeadlineExceededError(5), 504, "timeout"),
        (CircuitOpenError("open"), 502, "upstream_unavailable"),
        (
            ModelHTTPError("key sk-secret-value-123 refused", status=500, body="sk-secret-value-123"),
            502,
            "upstream_error",
        ),
        (ModelConnectionError("reset"), 502, "upstream_error"),
        (KeyError("/etc/passwd"), 500, "internal_error"),
    ],
)
def test_error_for_maps_each_failure(exc: BaseException, status: int, code: str) -> None:
    error = error_for(exc)
    assert (error.status, error.code) == (status, code)
    assert "secret" not in error.message and "passwd" not in error.message
    assert ("retry-after" in error.headers()) == (status == 429)


def test_error_for_looks_through_wrapping_errors() -> None:
    try:
        try:
            raise RateLimitError("inner", retry_after=7)
        except RateLimitError as inner:
            raise AgentExecutionError("writer", inner) from inner
    except AgentExecutionError as outer:
        error = error_for(outer)
    assert error.status == 429 and error.headers() == {"retry-after": "7"}


def test_a_budget_refusal_retries_when_its_period_ends() -> None:
    assert error_for(BudgetExceededError("spent", retry_after=3599.2)).headers() == {"retry-after": "3600"}
    # A limit that waiting does not lift (no period, a per-request limit) keeps the default hint.
    assert error_for(BudgetExceededError("spent")).headers() == {"retry-after": str(BUDGET_RETRY_AFTER)}


def test_retry_after_rounds_up_to_whole_seconds() -> None:
    assert EdgeError(429, "x", retry_after=0.2).headers() == {"retry-after": "1"}
    assert EdgeError(429, "x", retry_after=2.5).headers() == {"retry-after": "3"}


def test_targets_are_checked_and_resolved() -> None:
    client = ChatClient.create(ScriptedChatModel())
    with pytest.raises(TypeError, match="ChatClient or an agent"):
        check_target("not a client")
    with pytest.raises(TypeError, match="names are non-empty strings"):
        check_target({"": client})
    with pytest.raises(ValueError, match="at least one target"):
        check_target({})
    single = check_target(client)
    assert resolve_target(single, "chatclient") is client
    assert resolve_target(single, None) is client
    with pytest.raises(EdgeError) as caught:
        resolve_target(single, "gpt-4o")
    assert caught.value.status == 404 and caught.value.code == "model_not_found"


def test_edge_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_body_bytes"):
        Edge(max_body_bytes=0)
    with pytest.raises(ValueError, match="max_duration"):
        Edge(max_duration=-1)
    with pytest.raises(TypeError, match="auth takes a function"):
        Edge(auth="secret")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="list of strings"):
        Edge(allowed_hosts="api.example.com")


def collect(events: Any) -> list[StreamEvent]:
    async def main() -> list[StreamEvent]:
        return [event async for event in events]

    return asyncio.run(main())


def test_run_events_returns_caller_tool_calls_without_running_them() -> None:
    call = ToolCall("c1", "lookup", '{"q": "x"}')
    model = ScriptedChatModel([AssistantMessage("Let me look.", (call,))])
    turn = ChatTurn(
        (UserMessage("find x"),),
        caller_tools=(
            ToolDefinition("lookup", "Look up", {"type": "object", "properties": {"q": {"type": "string"}}}),
        ),
    )
    events = collect(Edge().run_events(ChatClient.create(model), turn, principal="ann"))
    returned = [e for e in events if isinstance(e, ToolCallsReturned)]
    assert returned == [ToolCallsReturned((call,), "Let me look.")]
    assert isinstance(events[-1], Finished)
    assert model.remaining == 0  # one model call: the turn ended at the caller's tool


def test_agent_runs_suspend_and_resume_on_the_same_conversation() -> None:
    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Hello {name}, you said {name}"

    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    edge = Edge()
    first = collect(edge.run_events(flow, ChatTurn((UserMessage("start"),), conversation_id="t1", agent_inputs={})))
    assert [e for e in first if isinstance(e, RunSuspended)] == [RunSuspended("What is your name?")]
    assert isinstance(first[-1], ScopeSnapshot)
    assert edge.scope_store.ids() == ["t1"]
    second = collect(edge.run_events(flow, ChatTurn((UserMessage("Ann"),), conversation_id="t1")))
    assert not any(isinstance(e, RunSuspended) for e in second)
    snapshot = second[-1]
    assert isinstance(snapshot, ScopeSnapshot) and snapshot.state["greeting"] == "Hello Ann, you said Ann"
    assert any(isinstance(e, AgentStarted) and e.name == "greet" for e in second)
    assert any(isinstance(e, AgentFinished) for e in second)
    assert edge.scope_store.ids() == []  # a finished run keeps no scope


def test_agent_with_several_inputs_needs_them_named() -> None:
    @agent_function(output_key="sum")
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(EdgeError, match="several inputs"):
        collect(Edge().run_events(add, ChatTurn((UserMessage("1 2"),))))
    events = collect(Edge().run_events(add, ChatTurn((UserMessage("go"),), agent_inputs={"a": 1, "b": 2})))
    assert isinstance(events[-1], ScopeSnapshot) and events[-1].state["sum"] == 3


def test_text_streams_from_a_client_target() -> None:
    model = ScriptedChatModel([["a", "b"]])
    events = collect(Edge().run_events(ChatClient.create(model), ChatTurn((UserMessage("hi"),))))
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["a", "b"]


def test_serve_warns_on_a_public_bind_without_auth(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from chatclient.serving import openai_app, serve

    started: list[tuple[Any, str]] = []
    # uvicorn.run would block this test; what is checked is what serve() hands it and the warning.
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port, **kw: started.append((app, host)))
    client = ChatClient.create(ScriptedChatModel())
    with pytest.warns(UserWarning, match="non-loopback"):
        serve(openai_app(client), host="0.0.0.0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        serve(openai_app(client, auth=lambda request: "ann"), host="0.0.0.0")
        serve(openai_app(client), host="127.0.0.1", port=9)
    assert [host for _, host in started] == ["0.0.0.0", "0.0.0.0", "127.0.0.1"]
    serve(client)  # a bare target: all three protocols in one app
    assert callable(started[-1][0]) and started[-1][0] is not client
    with pytest.raises(TypeError, match="ASGI app or a ChatClient"):
        serve(42)


def call_asgi(
    app: Any, headers: list[tuple[bytes, bytes]], messages: list[dict[str, Any]], *, path: str = "/v1/chat/completions"
) -> list[dict[str, Any]]:
    """One request straight into an ASGI app (what no HTTP server would let through: bad headers)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def test_a_malformed_content_length_and_a_client_gone_while_sending_the_body() -> None:
    from chatclient.serving import openai_app

    model = ScriptedChatModel()
    app = openai_app(ChatClient.create(model))
    sent = call_asgi(app, [(b"content-length", b"12abc")], [{"type": "http.request", "body": b"{}"}])
    assert sent[0]["status"] == 400
    # Latin-1 digits that str.isdigit() accepts and int() refuses ("\xb2" is a superscript two).
    sent = call_asgi(app, [(b"content-length", b"\xb2")], [{"type": "http.request", "body": b"{}"}])
    assert sent[0]["status"] == 400
    part = {"type": "http.request", "body": b'{"model": "chat', "more_body": True}
    sent = call_asgi(app, [], [part])  # then the client disconnects
    assert sent[0]["status"] == 499
    assert model.prompts == []


class _Receiver:
    """An ASGI receive whose client leaves after ``gone_after`` seconds (counting its calls)."""

    def __init__(self, gone_after: float) -> None:
        self.gone_after = gone_after
        self.calls = 0

    async def receive(self) -> dict[str, Any]:
        self.calls += 1
        await asyncio.sleep(self.gone_after)
        return {"type": "http.disconnect"}


def test_until_disconnect_cancels_work_that_waits_when_the_client_leaves() -> None:
    cancelled: list[bool] = []

    async def slow_work() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    async def main() -> None:
        receiver = _Receiver(0.05)
        with pytest.raises(EdgeError) as caught:
            await asyncio.wait_for(Edge.until_disconnect(receiver, slow_work()), 5)
        assert caught.value.status == 499
        assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]  # the 499 is no cancel

    asyncio.run(main())
    assert cancelled == [True]


def test_until_disconnect_returns_what_the_work_returns_and_passes_its_errors() -> None:
    async def waits_then_answers() -> str:
        await asyncio.sleep(0.01)
        return "answer"

    async def fails_after_waiting() -> str:
        await asyncio.sleep(0)
        raise ValueError("the work's own error")

    async def instant() -> str:
        return "at once"

    async def main() -> None:
        receiver = _Receiver(30)
        assert await Edge.until_disconnect(receiver, waits_then_answers()) == "answer"
        assert receiver.calls == 1  # it waited, so the client was watched
        with pytest.raises(ValueError, match="own error"):
            await Edge.until_disconnect(receiver, fails_after_waiting())
        quiet = _Receiver(30)
        assert await Edge.until_disconnect(quiet, instant()) == "at once"
        assert quiet.calls == 0  # work that never waits needs no watch
        await asyncio.sleep(0)  # the watches cancelled above end here without a warning

    asyncio.run(main())


def test_until_disconnect_leaves_a_cancellation_from_elsewhere_a_cancellation() -> None:
    async def main() -> None:
        task = asyncio.ensure_future(Edge.until_disconnect(_Receiver(30), asyncio.sleep(30)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_an_agent_run_that_fails_or_is_left_keeps_no_scope() -> None:
    @agent_function(output_key="answer")
    def explode(message: str) -> str:
        raise RuntimeError("boom")

    @agent_function(output_key="answer")
    def echo(message: str) -> str:
        return message

    edge = Edge()
    for n in range(3):  # fresh conversation ids, as turns without one get
        with pytest.raises(RuntimeError, match="boom"):
            collect(edge.run_events(explode, ChatTurn((UserMessage(f"go {n}"),))))
    assert edge.scope_store.ids() == []  # a failed run's scope is not kept for ever

    async def leave_early() -> None:
        events = edge.run_events(echo, ChatTurn((UserMessage("hi"),), conversation_id="c1"))
        await anext(events)  # the client goes away after the first event
        await events.aclose()  # type: ignore[attr-defined]

    asyncio.run(leave_early())
    assert edge.scope_store.ids() == []


def test_a_run_suspended_under_a_fresh_id_keeps_no_scope() -> None:
    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Hello {name}"

    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    edge = Edge()
    for _ in range(3):  # no conversation id: a random one no later turn can name to answer
        events = collect(edge.run_events(flow, ChatTurn((UserMessage("start"),), agent_inputs={})))
        assert [e for e in events if isinstance(e, RunSuspended)] == [RunSuspended("What is your name?")]
    assert edge.scope_store.ids() == []


def test_suspended_runs_kept_are_bounded_oldest_dropped_first(monkeypatch: pytest.MonkeyPatch) -> None:
    import chatclient.serving._edge as edge_module

    monkeypatch.setattr(edge_module, "MAX_SUSPENDED_RUNS", 3, raising=False)

    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Hello {name}"

    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    edge = Edge()
    for n in range(5):  # callers choose conversation ids: each new one would hold a scope for ever
        collect(edge.run_events(flow, ChatTurn((UserMessage("start"),), conversation_id=f"t{n}", agent_inputs={})))
    assert edge.scope_store.ids() == ["t2", "t3", "t4"]
    answered = collect(edge.run_events(flow, ChatTurn((UserMessage("Ann"),), conversation_id="t4")))
    assert answered[-1].state["greeting"] == "Hello Ann"  # type: ignore[attr-defined]
    assert edge.scope_store.ids() == ["t2", "t3"]


def test_caller_inputs_named_like_run_settings_stay_inputs() -> None:
    @agent_function(output_key="answer")
    def echo(message: str, monitor: str = "none") -> str:
        return f"{message}/{monitor}"

    # Before: "monitor" became the run's monitor (AttributeError mid-run), "max_duration" a TypeError.
    for inputs, answer in (
        ({"message": "hi", "monitor": "watch"}, "hi/watch"),
        ({"message": "hi", "max_duration": 5}, "hi/none"),
    ):
        events = collect(Edge().run_events(echo, ChatTurn((UserMessage("x"),), agent_inputs=inputs)))
        snapshot = events[-1]
        assert isinstance(snapshot, ScopeSnapshot) and snapshot.state["answer"] == answer


def test_a_failure_while_starting_a_turn_is_a_500_in_each_protocols_shape() -> None:
    import json

    from chatclient.serving import ag_ui_app, ai_sdk_app, openai_app

    def namespace(principal: Any) -> str:
        raise RuntimeError("the user directory is down")

    client = ChatClient.create(ScriptedChatModel(["unused"]))
    options: dict[str, Any] = {"auth": lambda request: "ann", "conversation_namespace": namespace}
    bodies = [
        (
            openai_app(client, **options),
            "/v1/chat/completions",
            {"model": "chatclient", "messages": [{"role": "user", "content": "hi"}]},
            [(b"x-conversation-id", b"c1")],
        ),
        (
            ai_sdk_app(client, **options),
            "/",
            {"id": "c1", "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]},
            [],
        ),
        (
            ag_ui_app(client, **options),
            "/",
            {
                "threadId": "c1",
                "runId": "r1",
                "state": {},
                "messages": [{"id": "m1", "role": "user", "content": "hi"}],
                "tools": [],
                "context": [],
                "forwardedProps": {},
            },
            [],
        ),
    ]
    for app, path, body, headers in bodies:
        sent = call_asgi(app, headers, [{"type": "http.request", "body": json.dumps(body).encode()}], path=path)
        assert sent[0]["status"] == 500
        answer = json.loads(sent[1]["body"])  # the protocol's own error shape, not a bare text page
        assert "directory" not in json.dumps(answer)


def test_a_body_that_trickles_in_past_the_read_limit_is_answered_408(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client sending its body a byte at a time cannot hold the connection for ever (slowloris)."""
    from chatclient.serving import _edge, openai_app

    monkeypatch.setattr(_edge, "BODY_READ_SECONDS", 0.2)
    model = ScriptedChatModel()
    app = openai_app(ChatClient.create(model))
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "root_path": "", "query_string": b"",
        "headers": [(b"host", b"127.0.0.1:8000")], "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(0.05)  # one byte every 50 ms, never the end
        return {"type": "http.request", "body": b" ", "more_body": True}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 408
    assert b"did not arrive within 0.2 seconds" in b"".join(m.get("body", b"") for m in sent)
    assert model.prompts == []


def test_an_internal_error_is_logged_for_the_operator_and_hidden_from_the_caller(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("ERROR", logger="chatclient.serving"):
        error = error_for(ZeroDivisionError("division by zero in my advisor"))
    assert (error.status, error.message) == (500, "Internal error.")
    assert "unexpected ZeroDivisionError" in caplog.text and "division by zero in my advisor" in caplog.text
    caplog.clear()
    with caplog.at_level("ERROR", logger="chatclient.serving"):
        error_for(RateLimitError("slow down", retry_after=2.0))
    assert caplog.text == ""  # refusals and model failures are answers, not server errors
