"""OpenAIResponsesModel over real HTTP against the loopback server.

Recorded Responses payloads (tests/data/providers/responses/) are replayed whole and cut into
random small network reads, in all four modes; the tool loop, the reasoning round trip, entities
through ``text.format``, ``previous_response_id`` and the stream faults run through the client.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.errors import ModelHTTPError, ModelResponseError, RateLimitError
from chatclient.messages import AssistantMessage, UserMessage
from chatclient.models.openai_responses import OUTPUT_KEY, OpenAIResponsesModel
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.loopback import SSE, LoopbackServer, Reply
from tests.support.responses_replay import check, load, names, recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/responses"
KEY = "sk-test-SECRET-Qz7Xv-0123456789"
GROUP = "responses"


def make_model(srv: LoopbackServer, **kw: Any) -> OpenAIResponsesModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OpenAIResponsesModel(kw.pop("model", "gpt-5-mini"), base_url=srv.url + "/v1", **kw)


CASES = [(n, m, w) for n in names(GROUP, "call") for m in ("call", "acall") for w in (True, False)] + [
    (n, m, w) for n in names(GROUP, "stream") for m in ("stream", "astream") for w in (True, False)
]


def test_the_suite_covers_the_required_shapes() -> None:
    assert len(names(GROUP, "call")) >= 6 and len(names(GROUP, "stream")) >= 3


@pytest.mark.parametrize(
    ("name", "mode", "whole"), CASES, ids=[f"{n}-{m}-{'whole' if w else 'cut'}" for n, m, w in CASES]
)
def test_recorded_response(server: LoopbackServer, name: str, mode: str, whole: bool) -> None:
    fixture = load(GROUP, name)
    server.script(PATH, recorded(fixture, seed=f"{name}-{mode}", whole=whole))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt("hi"), mode)
    check(response, fixture["expect"])
    if chunks:
        assert [c for c in chunks if c.has_finish_reason()] == [chunks[-1]]


def test_stream_aggregates_to_the_same_message_as_the_completed_response(server: LoopbackServer) -> None:
    """The streamed web-search answer equals the answer parsed from its own response.completed payload."""
    fixture = load(GROUP, "responses_web_search_stream")
    final = fixture["events"][-1]["response"]
    server.script(PATH, recorded(fixture, seed="agg"))
    server.script(PATH, Reply(json=final))
    with make_model(server) as model:
        streamed, _ = invoke(model, Prompt("hi"), "stream")
        called = model.call(Prompt("hi"))
    a, b = streamed.generations[0].output, called.generations[0].output
    assert (a.text, a.hosted_tool_calls, a.citations, a.metadata) == (
        b.text,
        b.hosted_tool_calls,
        b.citations,
        b.metadata,
    )
    assert streamed.metadata.usage == called.metadata.usage


def test_request_body_and_headers(server: LoopbackServer) -> None:
    server.script(PATH, recorded(load(GROUP, "responses_text"), seed="body", whole=True))
    with make_model(server, model="gpt-4.1") as model:
        model.call(Prompt([UserMessage("hi")], ChatOptions(max_tokens=50, temperature=0.2, stop=["x"])))
    req = server.requests_to(PATH)[0]
    assert req.headers["authorization"] == f"Bearer {KEY}"
    body = req.body
    assert body["input"] == [{"role": "user", "content": "hi"}]
    assert body["store"] is False and body["max_output_tokens"] == 50 and body["temperature"] == 0.2
    assert "stop" not in body and "include" not in body  # no stop field; gpt-4.1 does not reason


@tool
def get_weather(city: str, unit: str = "c") -> str:
    """Weather of a city."""
    return f"sunny in {city}"


def test_tool_loop_carries_encrypted_reasoning_back(server: LoopbackServer) -> None:
    """A reasoning model's tool turn: the follow-up request sends the reasoning item (with its
    encrypted content) before the function call, then the function_call_output."""
    first = load(GROUP, "responses_reasoning_tool_call")
    server.script(PATH, recorded(first, seed="loop1"), recorded(load(GROUP, "responses_text"), seed="loop2"))
    with make_model(server) as model:
        client = ChatClient.create(model)
        answer = client.prompt("Weather in Paris?").tools(get_weather).call().content()
    assert answer.startswith("On a peaceful moonlit night")
    bodies = [r.body for r in server.requests_to(PATH)]
    assert bodies[0]["include"] == ["reasoning.encrypted_content"]
    assert bodies[0]["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather of a city.",
            "parameters": bodies[0]["tools"][0]["parameters"],
            "strict": False,  # 'unit' is optional: strict mode would reject the schema
        }
    ]
    assert bodies[0]["tools"][0]["parameters"]["required"] == ["city"]
    follow = bodies[1]["input"]
    rs, fc = first["body"]["output"]
    assert follow[0] == {"role": "user", "content": "Weather in Paris?"}
    assert follow[1] == {
        "type": "reasoning",
        "id": rs["id"],
        "summary": rs["summary"],
        "encrypted_content": rs["encrypted_content"],
    }
    assert follow[2] == {
        "type": "function_call",
        "call_id": fc["call_id"],
        "name": "get_weather",
        "arguments": fc["arguments"],
        "id": fc["id"],
    }
    assert follow[3] == {"type": "function_call_output", "call_id": fc["call_id"], "output": "sunny in Paris"}


def test_streamed_tool_loop(server: LoopbackServer) -> None:
    stream = load(GROUP, "responses_reasoning_tool_stream")
    server.script(PATH, recorded(stream, seed="s1"), recorded(load(GROUP, "responses_text_stream"), seed="s2"))
    with make_model(server) as model:
        text = "".join(ChatClient.create(model).prompt("Weather?").tools(get_weather).stream().content())
    assert text == "Hi there! How can I help — today? 😊"
    follow = server.requests_to(PATH)[1].body["input"]
    assert [i.get("type") for i in follow[1:]] == ["reasoning", "function_call", "function_call_output"]
    assert follow[1]["encrypted_content"] == "gAAAAABoStreamEncryptedReasoning0123456789"
    assert follow[3]["output"] == "sunny in Paris"


class City(BaseModel):
    name: str
    country: str


def test_entity_uses_text_format_json_schema(server: LoopbackServer) -> None:
    body = load(GROUP, "responses_text")["body"]
    body = {
        **body,
        "output": [
            {
                **body["output"][0],
                "content": [{"type": "output_text", "text": '{"name":"Paris","country":"FR"}', "annotations": []}],
            }
        ],
    }
    server.script(PATH, Reply(json=body))
    with make_model(server) as model:
        city = ChatClient.create(model).prompt("capital of France").call().entity(City)
    assert city == City(name="Paris", country="FR")
    fmt = server.requests_to(PATH)[0].body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["name"] == "City" and fmt["schema"]["required"] == ["name", "country"]


def test_entity_falls_back_to_json_object_when_the_schema_mode_is_rejected(server: LoopbackServer) -> None:
    body = load(GROUP, "responses_text")["body"]
    body = {
        **body,
        "output": [
            {
                **body["output"][0],
                "content": [{"type": "output_text", "text": '{"name":"Rome","country":"IT"}', "annotations": []}],
            }
        ],
    }
    rejection = {
        "error": {
            "message": "Invalid schema for response_format 'City'",
            "type": "invalid_request_error",
            "param": "text.format.schema",
            "code": "invalid_json_schema",
        }
    }
    server.script(PATH, Reply(400, json=rejection), Reply(json=body))
    with make_model(server) as model:
        city = ChatClient.create(model).prompt("capital of Italy").call().entity(City)
    assert city.name == "Rome"
    second = server.requests_to(PATH)[1].body
    assert second["text"] == {"format": {"type": "json_object"}}


def test_previous_response_id_sends_only_the_new_items(server: LoopbackServer) -> None:
    text = load(GROUP, "responses_text")
    server.script(PATH, recorded(text, seed="p1", whole=True), recorded(text, seed="p2", whole=True))
    with make_model(server, store=True, previous_response_id=True) as model:
        first = model.call(Prompt("Tell a story"))
        history = [UserMessage("Tell a story"), first.generations[0].output, UserMessage("Shorter")]
        model.call(Prompt(history))
    one, two = (r.body for r in server.requests_to(PATH))
    assert one["store"] is True and "previous_response_id" not in one
    assert two["previous_response_id"] == text["body"]["id"]
    assert two["input"] == [{"role": "user", "content": "Shorter"}]


def test_previous_response_id_needs_store() -> None:
    with pytest.raises(ValueError, match="store=True"):
        OpenAIResponsesModel("gpt-5-mini", api_key=KEY, previous_response_id=True)


def test_unknown_output_items_are_sent_back_verbatim(server: LoopbackServer) -> None:
    fixture = load(GROUP, "responses_code_interpreter_unknown_item")
    server.script(PATH, recorded(fixture, seed="u1"), recorded(load(GROUP, "responses_text"), seed="u2"))
    with make_model(server) as model:
        answer = model.call(Prompt("10!?")).generations[0].output
        assert answer.metadata[OUTPUT_KEY][1]["type"] == "compaction_summary"
        model.call(Prompt([UserMessage("10!?"), answer, UserMessage("thanks")]))
    follow = server.requests_to(PATH)[1].body["input"]
    assert follow[1:4] == fixture["body"]["output"]
    assert follow[4] == {"role": "user", "content": "thanks"}


def test_a_rewritten_answer_is_rebuilt_from_its_fields(server: LoopbackServer) -> None:
    """When an advisor changed the text, the stale raw items are not sent; hosted items still are."""
    fixture = load(GROUP, "responses_web_search")
    server.script(PATH, recorded(fixture, seed="r1"), recorded(load(GROUP, "responses_text"), seed="r2"))
    with make_model(server) as model:
        answer = model.call(Prompt("When?")).generations[0].output
        edited = AssistantMessage("Edited.", metadata=answer.metadata, hosted_tool_calls=answer.hosted_tool_calls)
        model.call(Prompt([UserMessage("When?"), edited, UserMessage("ok")]))
    follow = server.requests_to(PATH)[1].body["input"]
    assert follow[1] == fixture["body"]["output"][0]  # the web_search_call item
    assert follow[2] == {"role": "assistant", "content": "Edited."}


@pytest.mark.parametrize("name", names(GROUP, "error"))
def test_recorded_http_error(server: LoopbackServer, name: str) -> None:
    fixture = load(GROUP, name)
    server.script(PATH, recorded(fixture, seed=name))
    with make_model(server, max_retries=0) as model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("hi"))
    assert type(info.value).__name__ == fixture["expect"]["error"]
    assert info.value.status == fixture["expect"]["status"]
    assert KEY not in str(info.value)


def test_failed_response_event_is_a_typed_error(server: LoopbackServer) -> None:
    fixture = load(GROUP, "responses_failed_stream")
    server.script(PATH, recorded(fixture, seed="f"))
    with make_model(server, max_retries=0) as model, pytest.raises(ModelHTTPError) as info:
        list(model.stream(Prompt("hi")))
    assert info.value.status == 500 and "failed to generate" in str(info.value)


def test_failed_event_before_any_chunk_is_retried(server: LoopbackServer) -> None:
    server.script(
        PATH,
        recorded(load(GROUP, "responses_failed_stream"), seed="f1"),
        recorded(load(GROUP, "responses_text_stream"), seed="f2"),
    )
    with make_model(server, max_retries=1) as model:
        response, _ = invoke(model, Prompt("hi"), "stream")
    assert response.text == "Hi there! How can I help — today? 😊"
    assert len(server.requests_to(PATH)) == 2


def test_rate_limit_error_event_mid_stream(server: LoopbackServer) -> None:
    events = load(GROUP, "responses_text_stream")["events"][:6]
    error = {
        "type": "error",
        "sequence_number": 6,
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached",
        "param": None,
    }
    server.script(PATH, SSE([(e["type"], e) for e in events] + [("error", error)], done=False))
    with make_model(server, max_retries=0) as model, pytest.raises(RateLimitError):
        list(model.stream(Prompt("hi")))


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_stream_without_response_completed_is_a_typed_error(server: LoopbackServer, mode: str) -> None:
    events = load(GROUP, "responses_text_stream")["events"][:-1]
    server.script(PATH, SSE([(e["type"], e) for e in events], done=False))
    with make_model(server, max_retries=0) as model, pytest.raises(ModelResponseError, match="incomplete"):
        invoke(model, Prompt("hi"), mode)


def test_malformed_event_is_a_typed_error(server: LoopbackServer) -> None:
    server.script(PATH, SSE([("response.output_text.delta", "{not json")], done=False))
    with make_model(server, max_retries=0) as model, pytest.raises(ModelResponseError):
        list(model.stream(Prompt("hi")))


def test_async_stream_yields_deltas_in_order(server: LoopbackServer) -> None:
    server.script(PATH, recorded(load(GROUP, "responses_text_stream"), seed="a"))

    async def run() -> list[str]:
        async with make_model(server) as model:
            return [c.text async for c in model.astream(Prompt("hi")) if c.text]

    assert "".join(asyncio.run(run())) == "Hi there! How can I help — today? 😊"


@pytest.mark.parametrize("mode", ["call", "stream", "acall", "astream"])
def test_cassette_records_and_replays_the_responses_model(server: LoopbackServer, tmp_path: Any, mode: str) -> None:
    from chatclient.testing import Cassette

    name = "responses_web_search_stream" if mode.endswith("stream") else "responses_web_search"
    server.script(PATH, recorded(load(GROUP, name), seed=mode))
    path = tmp_path / "responses.json"

    def run(cassette: Cassette) -> Any:
        model = make_model(server, http_client=cassette.http_client(), async_http_client=cassette.async_http_client())
        return invoke(model, Prompt("When?"), mode)[0]

    with Cassette(path, mode="record") as cassette:
        first = run(cassette)
    assert KEY not in path.read_text()
    server.script(PATH, Reply(500, json={"error": {"message": "the server must not be asked"}}))
    with Cassette(path) as cassette:
        again = run(cassette)
        assert cassette.played == 1 and cassette.sent == 0
    assert again.generations[0].output == first.generations[0].output
    assert again.generations[0].output.hosted_tool_calls[0].name == "web_search"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_count_tokens_asks_the_input_tokens_endpoint(server: LoopbackServer, mode: str) -> None:
    from chatclient.tools import resolve_tools
    from chatclient.tools.builtin import WebSearch

    server.script(PATH + "/input_tokens", Reply(json={"object": "response.input_tokens", "input_tokens": 412}))
    prompt = Prompt(
        "Weather in Paris?",
        ChatOptions(max_tokens=30),
        tools=tuple(cb.definition for cb in resolve_tools([get_weather, WebSearch()])),
    )
    with make_model(server) as model:
        count = model.count_tokens(prompt) if mode == "sync" else asyncio.run(model.acount_tokens(prompt))
    assert count == 412
    body = server.requests_to(PATH + "/input_tokens")[0].body
    assert set(body) == {"model", "input", "tools"}  # store, include, max_output_tokens are not taken there
    assert body["tools"][1] == {"type": "web_search"}


def test_count_tokens_malformed_answer_is_a_typed_error(server: LoopbackServer) -> None:
    server.script(PATH + "/input_tokens", Reply(json={"object": "response.input_tokens"}))
    with make_model(server) as model, pytest.raises(ModelResponseError, match="input_tokens"):
        model.count_tokens(Prompt("hi"))
