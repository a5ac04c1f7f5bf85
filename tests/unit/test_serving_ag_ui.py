"""ag_ui_app on a loopback Uvicorn: AG-UI events for text, reasoning, tools (server and caller), agents
(steps, state, human-in-the-loop interrupt and resume), memory by threadId, and every fault."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")
pytest.importorskip("ag_ui.core", reason="needs the serve extra (ag-ui-protocol)")

import httpx
from ag_ui.core import Event
from pydantic import TypeAdapter

from advisors.budget import Budget, BudgetAdvisor
from advisors.memory import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.advisor import BaseAdvisor
from chatclient.agents import agent_function, human_input, sequence
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import (
    AssistantMessage,
    Reasoning,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from chatclient.request import ChatClientRequest, ContextKeys
from chatclient.serving import ag_ui_app
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support.serving import (
    FailsAfterFirstChunk,
    SlowAfterFirstChunk,
    read_until_then_hang_up,
    running,
    wait_until,
    with_memory,
)

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


def run_input(*messages: dict[str, Any], thread: str = "t1", run: str = "r1", **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": list(messages), **extra}


def user(text: str, id: str = "u1") -> dict[str, Any]:
    return {"id": id, "role": "user", "content": text}


def events_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The SSE events of an AG-UI answer, each checked against the ag-ui-protocol event models."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    out = []
    for frame in response.text.split("\n\n"):
        if frame.strip():
            assert frame.startswith("data: "), frame
            event = json.loads(frame[len("data: ") :])
            EVENTS.validate_python(event)
            out.append(event)
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def post(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(url + "/", json=body, timeout=10, **kwargs)


# -- text, reasoning, runs -------------------------------------------------------------------------


def test_a_text_answer_is_one_message_between_run_started_and_run_finished() -> None:
    model = ScriptedChatModel([["Hel", "lo"]])
    with running(ag_ui_app(ChatClient.create(model))) as url:
        events = events_of(post(url, run_input(user("hi"), thread="th-9", run="run-3")))
    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[0]["threadId"] == "th-9" and events[0]["runId"] == "run-3"
    message_id = events[1]["messageId"]
    assert events[1]["role"] == "assistant"
    assert all(e["messageId"] == message_id for e in events[1:5])
    assert "".join(e["delta"] for e in events[2:4]) == "Hello"
    finished = events[-1]
    assert finished["outcome"] == {"type": "success"}
    assert finished["threadId"] == "th-9" and finished["runId"] == "run-3"
    assert finished["usage"][0]["totalTokens"] > 0
    assert model.last_prompt.messages == (UserMessage("hi"),)


def test_the_whole_conversation_is_sent_without_memory() -> None:
    model = ScriptedChatModel(["fine"])
    body = run_input(
        {"id": "s", "role": "system", "content": "Be brief."},
        user("first", "u1"),
        {"id": "a1", "role": "assistant", "content": "ok"},
        {"id": "u2", "role": "user", "content": [{"type": "text", "text": "second"}]},
        {"id": "x", "role": "reasoning", "content": "skipped"},
    )
    with running(ag_ui_app(ChatClient.create(model))) as url:
        events_of(post(url, body))
    sent = model.last_prompt.messages
    assert [type(m) for m in sent] == [SystemMessage, UserMessage, AssistantMessage, UserMessage]
    assert sent[0].text == "Be brief." and sent[-1].text == "second"


def test_an_image_url_keeps_its_mime_type_when_the_url_has_no_extension() -> None:
    model = ScriptedChatModel(["a cat"])
    image = {"type": "image", "source": {"type": "url", "value": "https://blobs.example.com/8f3a2c", "mimeType": "image/png"}}
    body = run_input({"id": "u1", "role": "user", "content": [{"type": "text", "text": "what?"}, image]})
    with running(ag_ui_app(ChatClient.create(model))) as url:
        events_of(post(url, body))
    (media,) = model.last_prompt.messages[-1].media
    assert (media.mime_type, media.data) == ("image/png", "https://blobs.example.com/8f3a2c")


def test_reasoning_is_a_reasoning_message_before_the_text() -> None:
    model = ScriptedChatModel([AssistantMessage("42", reasoning=(Reasoning("adding up"),))])
    with running(ag_ui_app(ChatClient.create(model))) as url:
        events = events_of(post(url, run_input(user("sum?"))))
    assert types(events) == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[3]["delta"] == "adding up" and events[7]["delta"] == "42"


def test_memory_takes_the_history_by_thread_id() -> None:
    model = ScriptedChatModel(["one", "two"])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    with running(ag_ui_app(client)) as url:
        events_of(post(url, run_input(user("first"), thread="conv-1")))
        # AG-UI clients resend the whole conversation; memory already has it, so only the newest question goes.
        history = [user("first"), {"id": "a", "role": "assistant", "content": "one"}, user("second", "u2")]
        events_of(post(url, run_input(*history, thread="conv-1", run="r2")))
    assert [m.text for m in model.last_prompt.messages] == ["first", "one", "second"]
    assert [m.text for m in memory.get("conv-1")] == ["first", "one", "second", "two"]


# -- tools -----------------------------------------------------------------------------------------


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def test_server_tools_run_here_with_call_and_result_events() -> None:
    call = ToolCall("call-7", "weather", '{"city": "Oslo"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), ["It is ", "sunny."]])
    client = ChatClient.builder(model).default_tools(weather).build()
    with running(ag_ui_app(client)) as url:
        events = events_of(post(url, run_input(user("weather?"))))
    assert types(events) == [
        "RUN_STARTED",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    start, args, _, result = events[1:5]
    assert start["toolCallId"] == "call-7" and start["toolCallName"] == "weather"
    assert json.loads(args["delta"]) == {"city": "Oslo"}
    assert result["toolCallId"] == "call-7" and "sunny in Oslo" in result["content"]
    assert events[-1]["outcome"] == {"type": "success"}  # nothing left for the caller


def test_caller_tools_end_the_run_and_their_results_come_back() -> None:
    call = ToolCall("c1", "pick_color", '{"hint": "warm"}')
    model = ScriptedChatModel([AssistantMessage("Let me ask.", (call,)), "Red it is."])
    tools = [{"name": "pick_color", "description": "Ask the user for a color", "parameters": {"type": "object"}}]
    with running(ag_ui_app(ChatClient.create(model))) as url:
        first = events_of(post(url, run_input(user("paint it"), tools=tools)))
        assert types(first) == [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "RUN_FINISHED",
        ]
        assert first[4]["toolCallName"] == "pick_color" and first[4]["parentMessageId"] == first[1]["messageId"]
        assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c1"]}
        assert model.remaining == 1  # the caller's tool did not run here
        follow_up = run_input(
            user("paint it"),
            {
                "id": "a1",
                "role": "assistant",
                "content": "Let me ask.",
                "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "pick_color", "arguments": "{}"}}],
            },
            {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "red"},
            run="r2",
            tools=tools,
        )
        second = events_of(post(url, follow_up))
    assert second[-1]["outcome"] == {"type": "success"}
    results = [m for m in model.last_prompt.messages if isinstance(m, ToolResponseMessage)]
    assert [(r.id, r.name, r.response_data) for r in results[0].responses] == [("c1", "pick_color", "red")]


# -- agents ----------------------------------------------------------------------------------------


@agent_function(output_key="greeting")
def greet(name: str) -> str:
    return f"Hello {name}!"


def test_an_agent_run_has_steps_and_a_state_snapshot() -> None:
    with running(ag_ui_app(greet)) as url:
        events = events_of(post(url, run_input(user("Ann"))))
    assert types(events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]
    assert events[1]["stepName"] == events[2]["stepName"] == "greet"
    assert events[4]["delta"] == "Hello Ann!"  # the agent streamed no text: its output is the answer
    assert events[6]["snapshot"] == {"name": "Ann", "greeting": "Hello Ann!"}


def test_human_input_interrupts_the_run_and_the_resume_entry_continues_it() -> None:
    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    with running(ag_ui_app(flow)) as url:
        first = events_of(post(url, run_input(user("start"), thread="hitl", forwardedProps={"inputs": {}})))
        finished = first[-1]
        assert finished["type"] == "RUN_FINISHED"
        (interrupt,) = finished["outcome"]["interrupts"]
        assert finished["outcome"]["type"] == "interrupt"
        assert interrupt["reason"] == "human_input" and interrupt["message"] == "What is your name?"
        assert "STATE_SNAPSHOT" in types(first) and "TEXT_MESSAGE_START" not in types(first)

        wrong = post(url, run_input(thread="hitl", run="r2", resume=[{"interruptId": "nope", "status": "resolved"}]))
        assert wrong.status_code == 400 and wrong.json()["code"] == "unknown_interrupt"

        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": "Ann"}]
        second = events_of(post(url, run_input(thread="hitl", run="r3", resume=resume)))
        replayed = post(url, run_input(thread="hitl", run="r4", resume=resume))
    assert replayed.status_code == 400 and replayed.json()["code"] == "unknown_interrupt"  # answered once only
    assert second[-1]["outcome"] == {"type": "success"}
    steps = [e["stepName"] for e in second if e["type"] == "STEP_STARTED"]
    assert "greet" in steps
    snapshot = next(e for e in second if e["type"] == "STATE_SNAPSHOT")["snapshot"]
    assert snapshot["greeting"] == "Hello Ann!"


def test_a_cancelled_interrupt_starts_the_thread_afresh() -> None:
    flow = sequence(human_input(question="Name?", output_key="name"), greet, output_key="greeting")
    with running(ag_ui_app(flow)) as url:
        first = events_of(post(url, run_input(user("start"), thread="c", forwardedProps={"inputs": {}})))
        interrupt_id = first[-1]["outcome"]["interrupts"][0]["id"]
        cancel = [{"interruptId": interrupt_id, "status": "cancelled"}]
        again = events_of(
            post(url, run_input(user("start"), thread="c", run="r2", resume=cancel, forwardedProps={"inputs": {}}))
        )
    # a new run: it asks again instead of taking "start" as the name
    assert again[-1]["outcome"]["type"] == "interrupt"
    assert not any(e["type"] == "STEP_STARTED" and e["stepName"] == "greet" for e in again)


def test_a_second_turn_of_a_conversation_still_answering_is_a_409_and_leaves_the_first_alone() -> None:
    started, release = threading.Event(), threading.Event()

    @agent_function(output_key="answer")
    async def slow(name: str) -> str:
        started.set()
        while not release.is_set():  # waits without blocking the server's event loop
            await asyncio.sleep(0.01)
        return f"done for {name}"

    with running(ag_ui_app(slow)) as url:
        first: list[httpx.Response] = []
        worker = threading.Thread(target=lambda: first.append(post(url, run_input(user("Ann"), thread="busy"))))
        worker.start()
        assert started.wait(5)
        second = post(url, run_input(user("Bob"), thread="busy", run="r2"))
        started.clear()
        others: list[httpx.Response] = []  # another conversation is not held up by the busy one
        elsewhere = threading.Thread(
            target=lambda: others.append(post(url, run_input(user("Cy"), thread="elsewhere", run="r3")))
        )
        elsewhere.start()
        assert started.wait(5)  # running beside the first
        release.set()
        worker.join(10)
        elsewhere.join(10)
        other = events_of(others[0])
        third = events_of(post(url, run_input(user("Dee"), thread="busy", run="r4")))
    assert second.status_code == 409 and second.json()["code"] == "conversation_busy"
    assert int(second.headers["retry-after"]) >= 1
    EVENTS.validate_python(second.json())
    done = events_of(first[0])
    assert done[-1]["outcome"] == {"type": "success"}
    assert next(e for e in done if e["type"] == "STATE_SNAPSHOT")["snapshot"]["answer"] == "done for Ann"
    assert next(e for e in other if e["type"] == "STATE_SNAPSHOT")["snapshot"]["answer"] == "done for Cy"
    assert next(e for e in third if e["type"] == "STATE_SNAPSHOT")["snapshot"]["answer"] == "done for Dee"


def test_named_targets_are_picked_by_path() -> None:
    app = ag_ui_app({"a": ChatClient.create(ScriptedChatModel(["from a"])), "b": greet})
    with running(app) as url:
        a = events_of(httpx.post(url + "/a", json=run_input(user("x")), timeout=10))
        b = events_of(httpx.post(url + "/b", json=run_input(user("Bo")), timeout=10))
        missing = httpx.post(url + "/zzz", json=run_input(user("x")), timeout=10)
    assert [e["delta"] for e in a if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["from a"]
    assert [e["delta"] for e in b if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["Hello Bo!"]
    assert missing.status_code == 404 and missing.json()["type"] == "RUN_ERROR"


# -- faults ----------------------------------------------------------------------------------------


def test_a_model_failing_after_the_first_chunk_is_a_run_error_in_the_stream() -> None:
    with running(ag_ui_app(ChatClient.create(FailsAfterFirstChunk()))) as url:
        response = post(url, run_input(user("hi")))
    events = events_of(response)
    assert types(events)[:3] == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert events[2]["delta"] == "partial"
    assert types(events)[-1] == "RUN_ERROR" and "RUN_FINISHED" not in types(events)
    assert events[-1]["code"] == "upstream_error" and "upstream model failed" in events[-1]["message"]
    assert FailsAfterFirstChunk.secret not in response.text


def test_a_disconnect_cancels_the_model_call_and_memory_keeps_the_question() -> None:
    model = SlowAfterFirstChunk()
    client, memory = with_memory(model)
    with running(ag_ui_app(client)) as url:
        closed_at = read_until_then_hang_up(url + "/", run_input(user("long?"), thread="gone"), "thinking")
        wait_until(lambda: model.cancelled_at is not None)
    assert model.cancelled_at is not None, "the model call was not cancelled"
    assert model.cancelled_at - closed_at < 1.0
    assert [(type(m), m.text) for m in memory.get("gone")] == [(UserMessage, "long?")]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"[1, 2]", "invalid_request"),
        (json.dumps({"threadId": "t", "messages": []}).encode(), "invalid_request"),  # no runId
        (json.dumps(run_input()).encode(), "invalid_messages"),  # nothing to answer
        (json.dumps(run_input({"id": "x", "role": "wizard", "content": "?"})).encode(), "invalid_request"),
        (json.dumps(run_input(user("x"), thread="")).encode(), "invalid_threadId"),
        (
            json.dumps(run_input({"id": "t", "role": "tool", "toolCallId": "nobody", "content": "r"})).encode(),
            "invalid_messages",
        ),
        (json.dumps(run_input(user("x"), tools=[{"name": "bad name!", "description": ""}])).encode(), "invalid_tools"),
        (b"[" * 100 + b"]" * 100, "invalid_json"),
    ],
)
def test_malformed_bodies_are_a_400_run_error(body: bytes, code: str) -> None:
    with running(ag_ui_app(ChatClient.create(ScriptedChatModel(["unused"])))) as url:
        response = httpx.post(url + "/", content=body, headers={"content-type": "application/json"}, timeout=10)
    assert response.status_code == 400
    assert response.json()["type"] == "RUN_ERROR" and response.json()["code"] == code
    EVENTS.validate_python(response.json())


def test_bodies_over_the_cap_are_a_413() -> None:
    with running(ag_ui_app(ChatClient.create(ScriptedChatModel(["x"])), max_body_bytes=2_000)) as url:
        response = post(url, run_input(user("x" * 5_000)))
    assert response.status_code == 413 and response.json()["code"] == "request_too_large"


def test_foreign_host_and_origin_are_refused() -> None:
    with running(ag_ui_app(ChatClient.create(ScriptedChatModel(["x", "y"])))) as url:
        host = post(url, run_input(user("x")), headers={"host": "evil.example"})
        origin = post(url, run_input(user("x")), headers={"origin": "https://evil.example"})
        fine = post(url, run_input(user("x")), headers={"origin": "http://localhost:3000"})
    assert host.status_code == 421 and host.json()["type"] == "RUN_ERROR"
    assert origin.status_code == 403 and origin.json()["type"] == "RUN_ERROR"
    assert fine.status_code == 200


class PrincipalRecorder(BaseAdvisor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.seen.append(request.context.get(ContextKeys.PRINCIPAL))
        return request


def test_auth_gives_401_and_the_principal_reaches_advisors_and_budgets() -> None:
    recorder = PrincipalRecorder()
    budget = Budget(max_tokens=1, period="day", key=lambda request: str(request.context[ContextKeys.PRINCIPAL]))
    model = ScriptedChatModel(["first answer", "never"])
    client = ChatClient.builder(model).default_advisors(recorder, BudgetAdvisor(budget=budget)).build()

    def auth(request: Any) -> str | None:
        return {"Bearer ann-token": "ann"}.get(request.headers.get("authorization", ""))

    with running(ag_ui_app(client, auth=auth)) as url:
        refused = post(url, run_input(user("x")))
        ok = events_of(post(url, run_input(user("x")), headers={"authorization": "Bearer ann-token"}))
        over = post(url, run_input(user("y"), run="r2"), headers={"authorization": "Bearer ann-token"})
    assert refused.status_code == 401 and refused.json()["type"] == "RUN_ERROR"
    assert refused.headers["www-authenticate"] == "Bearer"
    assert types(ok)[-1] == "RUN_FINISHED" and recorder.seen[0] == "ann"
    # refused before the first event: the HTTP status says so (with when to come back), not a 200
    assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
    assert over.json()["type"] == "RUN_ERROR" and over.json()["code"] == "budget_exceeded"
    EVENTS.validate_python(over.json())


def test_a_bare_target_served_with_every_protocol_answers_ag_ui_and_the_ai_sdk() -> None:
    from chatclient.serving.server import all_protocols_app

    client = ChatClient.create(ScriptedChatModel(["over AG-UI", "over the AI SDK"]))
    with running(all_protocols_app(client)) as url:
        ag_ui = events_of(httpx.post(url + "/ag-ui", json=run_input(user("x")), timeout=10))
        chat = {"id": "c", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "x"}]}]}
        ai_sdk = httpx.post(url + "/ai-sdk/", json=chat, timeout=10)
    assert [e["delta"] for e in ag_ui if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["over AG-UI"]
    assert ai_sdk.headers["x-vercel-ai-ui-message-stream"] == "v1" and '"delta":"over the AI SDK"' in ai_sdk.text


def test_a_hosted_tool_the_provider_ran_is_a_tool_call_with_its_result() -> None:
    from chatclient.messages import HostedToolCall

    search = HostedToolCall("ws_1", "web_search", {"query": "library hours"}, {"sources": ["https://library.example"]})
    model = ScriptedChatModel([AssistantMessage("Open 9-19.", hosted_tool_calls=(search,))])
    with running(ag_ui_app(ChatClient.create(model))) as url:
        events = events_of(post(url, run_input(user("hours?"))))
    calls = [e for e in events if e["type"].startswith("TOOL_CALL")]
    assert [e["type"] for e in calls] == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    assert calls[0]["toolCallName"] == "web_search" and json.loads(calls[1]["delta"]) == {"query": "library hours"}
    assert json.loads(calls[3]["content"]) == {"sources": ["https://library.example"]}
    assert events[-1]["outcome"] == {"type": "success"}  # the provider ran it: nothing pending


def test_interrupts_are_bound_to_the_user_like_memory() -> None:
    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")

    def auth(request: Any) -> str | None:
        return {"Bearer ann": "ann", "Bearer bob": "bob"}.get(request.headers.get("authorization", ""))

    ann, bob = {"authorization": "Bearer ann"}, {"authorization": "Bearer bob"}
    start = run_input(user("hi"), thread="shared-id")
    with running(ag_ui_app(flow, auth=auth)) as url:
        interrupt_id = events_of(post(url, start, headers=ann))[-1]["outcome"]["interrupts"][0]["id"]
        resume = [{"interruptId": interrupt_id, "status": "resolved", "payload": "Bob"}]
        stolen = post(url, run_input(thread="shared-id", run="r2", resume=resume), headers=bob)
        bobs_own = events_of(post(url, start, headers=bob))  # the same thread id: a conversation of his own
        resume[0]["payload"] = "Ann"
        anns = events_of(post(url, run_input(thread="shared-id", run="r3", resume=resume), headers=ann))
    assert stolen.status_code == 400 and stolen.json()["code"] == "unknown_interrupt"
    assert bobs_own[-1]["outcome"]["type"] == "interrupt"
    assert next(e for e in anns if e["type"] == "STATE_SNAPSHOT")["snapshot"]["greeting"] == "Hello Ann!"


def test_a_turn_the_target_cannot_take_is_refused_before_the_stream() -> None:
    @agent_function(output_key="sum")
    def add(a: int, b: int) -> int:
        return a + b

    with running(ag_ui_app(add)) as url:
        refused = post(url, run_input(user("1 and 2")))
        summed = events_of(post(url, run_input(user("go"), forwardedProps={"inputs": {"a": 1, "b": 2}})))
    assert refused.status_code == 400 and refused.json()["code"] == "agent_inputs_required"
    assert next(e for e in summed if e["type"] == "STATE_SNAPSHOT")["snapshot"]["sum"] == 3
