"""openai_app under a real Uvicorn on loopback, called by the real ``openai`` SDK (and raw httpx for faults)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openai", reason="needs the dev extra (the openai SDK is the test client)")
pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")

import httpx
import openai
from pydantic import BaseModel

from advisors.budget import Budget, BudgetAdvisor
from advisors.memory import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.advisor import BaseAdvisor
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import AssistantMessage, SystemMessage, ToolCall, ToolResponseMessage, UserMessage
from chatclient.prompt import Prompt
from chatclient.request import ChatClientRequest, ContextKeys
from chatclient.serving import openai_app
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support.serving import (
    FailsAfterFirstChunk,
    SlowAfterFirstChunk,
    SlowWholeAnswer,
    read_until_then_hang_up,
    running,
    wait_until,
    with_memory,
)

USER: Any = [{"role": "user", "content": "hi"}]


def sdk(url: str, **kwargs: Any) -> Any:  # Any: the tests send plain dicts, as callers do
    return openai.OpenAI(base_url=url + "/v1", api_key=kwargs.pop("api_key", "unused"), max_retries=0, **kwargs)


@pytest.fixture
def served() -> Iterator[tuple[ScriptedChatModel, str]]:
    model = ScriptedChatModel()
    with running(openai_app(ChatClient.create(model))) as url:
        yield model, url


# -- the happy paths, with the SDK -------------------------------------------------------------------


def test_models_list_names_the_single_target(served: tuple[ScriptedChatModel, str]) -> None:
    _, url = served
    client = sdk(url)
    assert [m.id for m in client.models.list()] == ["chatclient"]
    assert client.models.retrieve("chatclient").id == "chatclient"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-nothing")


def test_sync_completion(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add("Hello there")
    answer = sdk(url).chat.completions.create(
        model="chatclient",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
    )
    assert answer.choices[0].message.content == "Hello there"
    assert answer.choices[0].message.role == "assistant"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.total_tokens > 0
    # Without a conversation id the body is the whole conversation, its system message the system text.
    sent = model.last_prompt.messages
    assert [type(m) for m in sent] == [SystemMessage, UserMessage, AssistantMessage, UserMessage]
    assert sent[0].text == "Be brief." and sent[-1].text == "second"


def test_streaming_with_usage(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add(["Hel", "lo", "!"])
    chunks = list(
        sdk(url).chat.completions.create(
            model="chatclient", messages=USER, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello!"
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finals] == ["stop"]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert len({c.id for c in chunks}) == 1


def test_streaming_without_usage_has_no_usage_chunk(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add(["a", "b"])
    chunks = list(sdk(url).chat.completions.create(model="chatclient", messages=USER, stream=True))
    assert all(c.choices for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_async_client_whole_and_streamed(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add("whole", ["str", "eamed"])

    async def main() -> tuple[str | None, str]:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        whole = await client.chat.completions.create(model="chatclient", messages=USER)
        stream = await client.chat.completions.create(model="chatclient", messages=USER, stream=True)
        parts = [c.choices[0].delta.content or "" async for c in stream if c.choices]
        await client.close()
        return whole.choices[0].message.content, "".join(parts)

    assert asyncio.run(main()) == ("whole", "streamed")


def test_named_targets_are_picked_by_model() -> None:
    first, second = ScriptedChatModel(["from a"]), ScriptedChatModel(["from b"])
    app = openai_app({"a": ChatClient.create(first), "b": ChatClient.create(second)})
    with running(app) as url:
        client = sdk(url)
        assert sorted(m.id for m in client.models.list()) == ["a", "b"]
        assert client.chat.completions.create(model="b", messages=USER).choices[0].message.content == "from b"
        with pytest.raises(openai.NotFoundError) as caught:
            client.chat.completions.create(model="chatclient", messages=USER)
        assert caught.value.code == "model_not_found"
    assert first.remaining == 1


def test_agent_target_answers_with_its_output() -> None:
    from chatclient.agents import agent_function

    @agent_function(output_key="answer")
    def shout(message: str) -> str:
        return message.upper() + "!"

    with running(openai_app(shout)) as url:
        client = sdk(url)
        assert client.chat.completions.create(model="chatclient", messages=USER).choices[0].message.content == "HI!"
        chunks = list(client.chat.completions.create(model="chatclient", messages=USER, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "HI!"


# -- conversations ---------------------------------------------------------------------------------


def test_conversation_id_takes_history_from_memory() -> None:
    model = ScriptedChatModel(["Hi Ann", "Your name is Ann"])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    with running(openai_app(client)) as url:
        oa = sdk(url)
        headers = {"X-Conversation-Id": "conv-1"}
        oa.chat.completions.create(
            model="chatclient", messages=[{"role": "user", "content": "I am Ann"}], extra_headers=headers
        )
        body = [
            {"role": "user", "content": "an old message the client kept"},
            {"role": "assistant", "content": "an old answer"},
            {"role": "user", "content": "What is my name?"},
        ]
        raw = oa.chat.completions.with_raw_response.create(model="chatclient", messages=body, extra_headers=headers)
    assert raw.headers["x-conversation-id"] == "conv-1"
    texts = [m.text for m in model.last_prompt.messages]
    assert texts == ["I am Ann", "Hi Ann", "What is my name?"]  # history from memory, newest user message from the body
    assert [m.text for m in memory.get("conv-1")][-1] == "Your name is Ann"


def test_conversation_id_is_validated(served: tuple[ScriptedChatModel, str]) -> None:
    _, url = served
    with pytest.raises(openai.BadRequestError):
        sdk(url).chat.completions.create(
            model="chatclient", messages=USER, extra_headers={"X-Conversation-Id": "x" * 300}
        )


# -- tools -----------------------------------------------------------------------------------------

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.mark.parametrize("stream", [False, True])
def test_caller_tools_are_returned_then_results_come_back(served: tuple[ScriptedChatModel, str], stream: bool) -> None:
    model, url = served
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    model.add(AssistantMessage(None, (call,)), "It is sunny in Paris.")
    oa = sdk(url)
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        chunks = list(
            oa.chat.completions.create(model="chatclient", messages=messages, tools=[WEATHER_TOOL], stream=True)
        )
        calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
        assert [(tc.id, tc.function.name, tc.function.arguments) for tc in calls] == [
            ("call_1", "get_weather", '{"city": "Paris"}')
        ]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
    else:
        first = oa.chat.completions.create(model="chatclient", messages=messages, tools=[WEATHER_TOOL])
        assert first.choices[0].finish_reason == "tool_calls"
        returned = first.choices[0].message.tool_calls
        assert returned is not None and [(c.id, c.function.name) for c in returned] == [("call_1", "get_weather")]
    # The model was offered the caller's tool.
    assert [t.name for t in model.last_prompt.tools] == ["get_weather"]
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"},
    ]
    second = oa.chat.completions.create(model="chatclient", messages=messages, tools=[WEATHER_TOOL])
    assert second.choices[0].message.content == "It is sunny in Paris."
    results = [m for m in model.last_prompt.messages if isinstance(m, ToolResponseMessage)]
    assert [(r.id, r.name, r.response_data) for r in results[0].responses] == [("call_1", "get_weather", "sunny, 24 C")]


@pytest.mark.parametrize("stream", [False, True])
def test_caller_tools_in_a_remembered_conversation(stream: bool) -> None:
    call = ToolCall("call_7", "get_weather", '{"city": "Rome"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), "Rome is sunny."])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    headers = {"X-Conversation-Id": "trip"}
    question = {"role": "user", "content": "Weather in Rome?"}
    with running(openai_app(client)) as url:
        oa = sdk(url)
        first = oa.chat.completions.create(
            model="chatclient", messages=[question], tools=[WEATHER_TOOL], extra_headers=headers, stream=stream
        )
        if stream:
            assert [c.choices[0].finish_reason for c in first if c.choices][-1] == "tool_calls"  # type: ignore[union-attr]
        calls = [
            {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}}
        ]
        follow_up = [
            question,
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "call_7", "content": "sunny"},
        ]
        answer = oa.chat.completions.create(
            model="chatclient", messages=follow_up, tools=[WEATHER_TOOL], extra_headers=headers
        )
    assert answer.choices[0].message.content == "Rome is sunny."
    # History from memory (question, the returned calls), the tool results from the body: each once.
    assert [type(m).__name__ for m in model.last_prompt.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
    ]
    assert [type(m).__name__ for m in memory.get("trip")] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]


def test_server_tools_run_on_the_server() -> None:
    ran: list[str] = []

    @tool
    def city_time(city: str) -> str:
        """Local time of a city."""
        ran.append(city)
        return "10:00"

    model = ScriptedChatModel(
        [AssistantMessage(None, (ToolCall("t1", "city_time", '{"city": "Oslo"}'),)), "It is 10:00."]
    )
    client = ChatClient.builder(model).default_tools(city_time).build()
    with running(openai_app(client)) as url:
        answer = sdk(url).chat.completions.create(model="chatclient", messages=USER)
    assert answer.choices[0].message.content == "It is 10:00."
    assert answer.choices[0].finish_reason == "stop"
    assert ran == ["Oslo"]


# -- structured output -------------------------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


def test_json_schema_response_format_with_sdk_parse(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add('```json\n{"name": "Oslo", "population": 700000}\n```')
    parsed = sdk(url).chat.completions.parse(model="chatclient", messages=USER, response_format=City)
    assert parsed.choices[0].message.parsed == City(name="Oslo", population=700000)
    # The client's structured-output machinery asked the model for the schema.
    # (The scripted model has no native mode: the schema travels as instructions in the user message.)
    assert '"population"' in model.last_prompt.user_message.text


def test_json_schema_violation_is_a_502(served: tuple[ScriptedChatModel, str]) -> None:
    model, url = served
    model.add('{"name": "Oslo"}', ['{"name": ', '"Oslo"}'])
    with pytest.raises(openai.APIStatusError) as caught:
        sdk(url).chat.completions.parse(model="chatclient", messages=USER, response_format=City)
    assert caught.value.status_code == 502
    # Streamed, the content is gone already: the error comes in the stream.
    fmt = {"type": "json_schema", "json_schema": {"name": "City", "schema": City.model_json_schema()}}
    with pytest.raises(openai.APIError, match="not valid JSON of the requested schema"):
        list(sdk(url).chat.completions.create(model="chatclient", messages=USER, stream=True, response_format=fmt))  # type: ignore[call-overload]


# -- faults ----------------------------------------------------------------------------------------


def test_client_disconnect_cancels_the_model_call_and_memory_keeps_the_question() -> None:
    model = SlowAfterFirstChunk()
    client, memory = with_memory(model)
    with running(openai_app(client)) as url:
        body = {"model": "chatclient", "messages": [{"role": "user", "content": "a long question"}], "stream": True}
        headers = {"X-Conversation-Id": "c9"}
        closed_at = read_until_then_hang_up(url + "/v1/chat/completions", body, "thinking", headers)
        wait_until(lambda: model.cancelled_at is not None)
    assert model.cancelled_at is not None, "the model call was not cancelled"
    assert model.cancelled_at - closed_at < 1.0
    stored = memory.get("c9")
    assert [(type(m), m.text) for m in stored] == [(UserMessage, "a long question")]


def test_client_disconnect_cancels_a_whole_answer_too() -> None:
    model = SlowWholeAnswer()
    client, memory = with_memory(model)
    with running(openai_app(client)) as url:
        body = {"model": "chatclient", "messages": [{"role": "user", "content": "a long question"}]}
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url + "/v1/chat/completions", json=body, headers={"X-Conversation-Id": "w1"}, timeout=0.5)
        closed_at = time.monotonic()
        wait_until(lambda: model.cancelled_at is not None)
    assert model.cancelled_at is not None, "the model call was not cancelled"
    assert model.cancelled_at - closed_at < 1.0
    wait_until(lambda: memory.get("w1"))  # the question is written as the cancellation unwinds
    assert memory.get("w1") == [UserMessage("a long question")]  # the question, never an answer


def test_model_failing_after_the_first_chunk_reports_in_stream() -> None:
    with running(openai_app(ChatClient.create(FailsAfterFirstChunk()))) as url:
        got: list[str] = []
        with pytest.raises(openai.APIError) as caught:
            for chunk in sdk(url).chat.completions.create(model="chatclient", messages=USER, stream=True):
                got.extend(c.delta.content or "" for c in chunk.choices)
        assert "partial" in got
        assert "upstream model failed" in str(caught.value)
        assert FailsAfterFirstChunk.secret not in str(caught.value)
        # Before streaming began: an HTTP 502 in the OpenAI shape, scrubbed.
        raw = httpx.post(url + "/v1/chat/completions", json={"model": "chatclient", "messages": USER})
        assert raw.status_code == 502
        assert raw.json()["error"]["type"] == "upstream_error"
        assert FailsAfterFirstChunk.secret not in raw.text


def test_unexpected_errors_are_500_without_internals() -> None:
    def boom(prompt: Prompt) -> str:
        raise KeyError("internal detail /etc/secret")

    from chatclient.testing import FunctionChatModel

    with running(openai_app(ChatClient.create(FunctionChatModel(boom)))) as url:
        raw = httpx.post(url + "/v1/chat/completions", json={"model": "chatclient", "messages": USER})
    assert raw.status_code == 500
    assert raw.json() == {
        "error": {"message": "Internal error.", "type": "server_error", "param": None, "code": "internal_error"}
    }


class PrincipalRecorder(BaseAdvisor):
    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.order = 0

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.seen.append(request.context.get(ContextKeys.PRINCIPAL))
        return request


def _bearer_auth(request: Any) -> str | None:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return {"key-alice": "alice", "key-bob": "bob"}.get(token)


def test_auth_principal_reaches_advisors_and_budget_per_principal_is_429() -> None:
    recorder = PrincipalRecorder()
    budget = Budget(max_tokens=1, period=None, key=lambda req: str(req.context[ContextKeys.PRINCIPAL]))
    model = ScriptedChatModel(["one", "two", "three"])
    client = ChatClient.builder(model).default_advisors(recorder, BudgetAdvisor(budget=budget)).build()
    with running(openai_app(client, auth=_bearer_auth)) as url:
        with pytest.raises(openai.AuthenticationError):
            sdk(url, api_key="wrong").chat.completions.create(model="chatclient", messages=USER)
        alice, bob = sdk(url, api_key="key-alice"), sdk(url, api_key="key-bob")
        assert alice.chat.completions.create(model="chatclient", messages=USER).choices[0].message.content == "one"
        with pytest.raises(openai.RateLimitError) as caught:
            alice.chat.completions.create(model="chatclient", messages=USER)
        assert int(caught.value.response.headers["retry-after"]) >= 1
        assert caught.value.code == "budget_exceeded"
        assert bob.chat.completions.create(model="chatclient", messages=USER).choices[0].message.content == "two"
    assert recorder.seen == ["alice", "alice", "bob"]


def test_a_budget_with_a_period_answers_retry_after_with_the_time_left_in_it() -> None:
    # The hourly window [3600, 7200) of this fixed clock has 2600 s left.
    budget = Budget(max_tokens=1, period=3600.0, clock=lambda: 4600.0)
    model = ScriptedChatModel(["one", "never"])
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(budget=budget)).build()
    with running(openai_app(client)) as url:
        sdk(url).chat.completions.create(model="chatclient", messages=USER)
        refused = httpx.post(url + "/v1/chat/completions", json={"model": "chatclient", "messages": USER}, timeout=10)
        streamed = httpx.post(
            url + "/v1/chat/completions", json={"model": "chatclient", "messages": USER, "stream": True}, timeout=10
        )
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2600"
    assert refused.json()["error"]["code"] == "budget_exceeded"
    # a stream refused before its first chunk is refused as the whole answer is: 429, no 200
    assert streamed.status_code == 429 and streamed.headers["retry-after"] == "2600"
    assert streamed.json()["error"]["code"] == "budget_exceeded"


def test_refusals_use_the_openai_error_shape() -> None:
    model = ScriptedChatModel()
    with running(openai_app(ChatClient.create(model), max_body_bytes=1000)) as url:
        endpoint = url + "/v1/chat/completions"
        big = {"model": "chatclient", "messages": [{"role": "user", "content": "x" * 2000}]}
        over = httpx.post(endpoint, json=big)
        assert over.status_code == 413 and over.json()["error"]["code"] == "request_too_large"

        def chunked() -> Iterator[bytes]:
            yield b'{"model": "chatclient", "messages": ['
            for _ in range(100):
                yield b'{"role": "user", "content": "padding"},'

        over_chunked = httpx.post(endpoint, content=chunked())
        assert over_chunked.status_code == 413

        malformed = httpx.post(
            endpoint, content=b'{"model": "chatclient", "messages": [', headers={"content-type": "application/json"}
        )
        assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "invalid_json"

        deep = httpx.post(endpoint, content=b"[" * 200 + b"]" * 200)
        assert deep.status_code == 400

        for body in (
            {"messages": USER},
            {"model": "chatclient"},
            {"model": "chatclient", "messages": [{"role": "robot"}]},
            {"model": "chatclient", "messages": USER, "temperature": -1},
            ["not", "an", "object"],
        ):
            bad = httpx.post(endpoint, json=body)
            assert bad.status_code == 400, body
            assert set(bad.json()["error"]) == {"message", "type", "param", "code"}

        foreign_host = httpx.post(
            endpoint, json={"model": "chatclient", "messages": USER}, headers={"host": "evil.example"}
        )
        assert foreign_host.status_code == 421 and "error" in foreign_host.json()
        foreign_origin = httpx.post(
            endpoint, json={"model": "chatclient", "messages": USER}, headers={"origin": "https://evil.example"}
        )
        assert foreign_origin.status_code == 403 and "error" in foreign_origin.json()
    assert model.prompts == []  # nothing refused reached the model


def test_cors_answers_allowed_origins_only() -> None:
    app = openai_app(ChatClient.create(ScriptedChatModel()), allowed_origins=["https://app.example.com"])
    with running(app) as url:
        preflight = {"access-control-request-method": "POST", "access-control-request-headers": "content-type"}
        ok = httpx.options(url + "/v1/chat/completions", headers={"origin": "https://app.example.com", **preflight})
        assert ok.status_code == 200
        assert ok.headers["access-control-allow-origin"] == "https://app.example.com"
        local = httpx.options(url + "/v1/chat/completions", headers={"origin": "http://localhost:3000", **preflight})
        assert local.headers.get("access-control-allow-origin") == "http://localhost:3000"
        evil = httpx.options(url + "/v1/chat/completions", headers={"origin": "https://evil.example", **preflight})
        assert "access-control-allow-origin" not in evil.headers


def test_max_duration_is_a_504() -> None:
    model = SlowAfterFirstChunk()
    with running(openai_app(ChatClient.create(model), max_duration=0.3)) as url:
        raw = httpx.post(url + "/v1/chat/completions", json={"model": "chatclient", "messages": USER, "stream": True})
    last = [line for line in raw.text.splitlines() if line.startswith("data: ")][-1]
    assert json.loads(last[6:])["error"]["code"] == "timeout"


def test_mounts_into_fastapi() -> None:
    pytest.importorskip("fastapi", reason="needs the dev extra")
    from fastapi import FastAPI

    api = FastAPI()

    @api.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    model = ScriptedChatModel(["mounted"])
    api.mount("/openai", openai_app(ChatClient.create(model)))
    with running(api) as url:
        assert httpx.get(url + "/health").json() == {"status": "ok"}
        client = openai.OpenAI(base_url=url + "/openai/v1", api_key="unused", max_retries=0)
        assert client.chat.completions.create(model="chatclient", messages=USER).choices[0].message.content == "mounted"


def test_a_bare_target_is_served_with_all_three_protocols() -> None:
    from chatclient.serving.server import all_protocols_app

    model = ScriptedChatModel(["over openai", "over ag-ui", "over ai-sdk", "ag-ui with a slash"])
    with running(all_protocols_app(ChatClient.create(model))) as url:
        assert (
            sdk(url).chat.completions.create(model="chatclient", messages=USER).choices[0].message.content
            == "over openai"
        )
        run_input = {
            "threadId": "t1",
            "runId": "r1",
            "state": {},
            "messages": [{"id": "m1", "role": "user", "content": "hi"}],
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        ag_ui = httpx.post(url + "/ag-ui", json=run_input, headers={"accept": "text/event-stream"})
        assert ag_ui.status_code == 200 and "over ag-ui" in ag_ui.text
        ui_messages = {
            "id": "c1",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }
        ai_sdk = httpx.post(url + "/ai-sdk", json=ui_messages)
        assert ai_sdk.status_code == 200 and "over ai-sdk" in ai_sdk.text
        assert ai_sdk.headers["x-vercel-ai-ui-message-stream"] == "v1"
        slash = httpx.post(url + "/ag-ui/", json={**run_input, "runId": "r2", "threadId": "t2"})
        assert slash.status_code == 200 and "ag-ui with a slash" in slash.text
        assert httpx.post(url + "/ag-uix", json=run_input).status_code == 404


def test_a_caller_tool_named_like_a_server_tool_is_a_400() -> None:
    @tool
    def get_weather(city: str) -> str:
        """The server's own weather tool."""
        return "rain"

    model = ScriptedChatModel(["unused"])
    with running(openai_app(ChatClient.builder(model).default_tools(get_weather).build())) as url:
        for stream in (False, True):
            with pytest.raises(openai.BadRequestError) as caught:
                sdk(url).chat.completions.create(model="chatclient", messages=USER, tools=[WEATHER_TOOL], stream=stream)
            assert caught.value.code == "invalid_tools"
    assert model.prompts == []


def test_an_agent_asking_a_human_is_answered_by_the_next_request_of_the_conversation() -> None:
    from chatclient.agents import agent_function, human_input, sequence

    @agent_function(output_key="greeting")
    def greet(name: str) -> str:
        return f"Welcome, {name}."

    flow = sequence(human_input(question="Who are you?", output_key="name"), greet, output_key="greeting")
    headers = {"X-Conversation-Id": "visit-1"}
    with running(openai_app({"greeter": flow})) as url:
        oa = sdk(url)
        ask = oa.chat.completions.create(
            model="greeter", messages=[{"role": "user", "content": "hello"}], extra_headers=headers
        )
        assert ask.choices[0].message.content == "Who are you?"
        done = oa.chat.completions.create(
            model="greeter", messages=[{"role": "user", "content": "Ada"}], extra_headers=headers
        )
        assert done.choices[0].message.content == "Welcome, Ada."


def test_an_image_url_whose_type_cannot_be_told_is_a_400_in_the_openai_shape() -> None:
    model = ScriptedChatModel(["unused"])
    image = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/pic"}},
    ]
    with running(openai_app(ChatClient.create(model))) as url:
        with pytest.raises(openai.BadRequestError) as caught:
            sdk(url).chat.completions.create(model="chatclient", messages=[{"role": "user", "content": image}])
        assert caught.value.code == "invalid_messages"
    assert model.prompts == []
