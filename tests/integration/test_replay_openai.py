"""Replay of recorded OpenAI Chat Completions responses (tests/data/providers/openai/) over real HTTP.

Every fixture is served by the loopback server split across irregular network reads and checked
field by field against its ``expect`` section (see tests/support/openai_replay.py). Follow-up
request bodies (a refusal turn, a tool loop) are compared with golden bodies.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import ChatClient, errors
from chatclient.messages import ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.openai import OpenAIChatModel
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer
from tests.support.openai_replay import check, load, names, recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
GROUP = "openai"


def make_model(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OpenAIChatModel("gpt-4o", api_key="sk-test-0123456789abcdef", base_url=srv.url + "/v1", **kw)


def replay(srv: LoopbackServer, group: str, name: str, mode: str, prompt: Prompt | None = None) -> Any:
    srv.script(PATH, recorded(load(group, name), seed=f"{name}-{mode}"))
    with make_model(srv) as model:
        return invoke(model, prompt or Prompt("hi"), mode)


CASES = [(n, m) for n in names(GROUP, "call") for m in ("call", "acall")] + [
    (n, m) for n in names(GROUP, "stream") for m in ("stream", "astream")
]


def test_the_suite_covers_the_required_shapes() -> None:
    assert len(names(GROUP, "call", "stream", "error")) >= 17
    assert {"chat_refusal_stream", "chat_n2_stream", "chat_tool_cut_by_length_stream"} <= set(names(GROUP, "stream"))


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_recorded_response(server: LoopbackServer, name: str, mode: str) -> None:
    fixture = load(GROUP, name)
    response, chunks = replay(server, GROUP, name, mode)
    check(response, fixture["expect"])
    if chunks:
        # Streams end with exactly one chunk that carries the finish reasons.
        finished = [c for c in chunks if c.has_finish_reason()]
        assert finished == [chunks[-1]]


@pytest.mark.parametrize("name", names(GROUP, "error"))
def test_recorded_error(server: LoopbackServer, name: str) -> None:
    fixture = load(GROUP, name)
    expect = fixture["expect"]
    server.script(PATH, recorded(fixture, seed=name))
    with make_model(server, max_retries=0) as model, pytest.raises(errors.ModelHTTPError) as info:
        model.call(Prompt("hi"))
    err = info.value
    assert type(err).__name__ == expect["error"]
    assert err.status == expect["status"]
    for key in ("code", "type", "request_id", "retry_after"):
        if key in expect:
            assert getattr(err, key) == expect[key], key
    assert "sk-test-0123456789abcdef" not in str(err)


def test_stream_deltas_are_separate_per_choice_and_kind(server: LoopbackServer) -> None:
    """n=2: generation i of a chunk belongs to choice i; refusal text streams as refusal, not text."""
    _, chunks = replay(server, GROUP, "chat_n2_stream", "stream")
    blue = [c for c in chunks if len(c.generations) == 2 and c.generations[1].output.text == "Blue"]
    assert len(blue) == 1 and blue[0].generations[0].output.text is None
    _, chunks = replay(server, GROUP, "chat_refusal_stream", "stream")
    assert (
        "".join(c.result.output.refusal or "" for c in chunks if c.result)
        == "I'm sorry, I can't assist with that request."
    )
    assert all(not (c.result and c.result.output.text) for c in chunks)


def test_refusal_turn_follow_up_golden_body(server: LoopbackServer) -> None:
    refused, _ = replay(server, GROUP, "chat_refusal", "call")
    assert refused.result is not None
    history = [UserMessage("How do I pick a lock?"), refused.result.output, UserMessage("OK, how do locks work?")]
    server.reset()
    server.script(PATH, recorded(load(GROUP, "chat_text_cached_usage"), seed="follow"))
    with make_model(server) as model:
        model.call(Prompt(history))
    (req,) = server.requests_to(PATH)
    assert req.body["messages"] == [
        {"role": "user", "content": "How do I pick a lock?"},
        {"role": "assistant", "content": "", "refusal": "I'm sorry, I can't assist with that request."},
        {"role": "user", "content": "OK, how do locks work?"},
    ]


def test_tool_loop_follow_up_golden_body_and_prompt_cache_key(server: LoopbackServer) -> None:
    first, _ = replay(server, GROUP, "chat_parallel_tools", "call")
    assert first.result is not None
    calls = first.result.output
    results = ToolResponseMessage(
        tuple(ToolResponse(c.id, c.name, f"sunny in {i}") for i, c in enumerate(calls.tool_calls))
    )
    server.reset()
    server.script(PATH, recorded(load(GROUP, "chat_text_cached_usage"), seed="loop"))
    options = ChatOptions(extra={"prompt_cache_key": "weather-bot-v1"})
    with make_model(server) as model:
        model.call(Prompt([UserMessage("Weather in Paris and São Paulo?"), calls, results], options))
    (req,) = server.requests_to(PATH)
    assert req.body["prompt_cache_key"] == "weather-bot-v1"
    assert req.body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_abc123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location":"Paris, France"}'},
                },
                {
                    "id": "call_def456",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"location":"São Paulo, Brazil"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc123", "content": "sunny in 0"},
        {"role": "tool", "tool_call_id": "call_def456", "content": "sunny in 1"},
    ]


def test_partial_tool_call_is_flagged_not_dropped(server: LoopbackServer) -> None:
    response, _ = replay(server, GROUP, "chat_tool_cut_by_length_stream", "stream")
    assert response.result is not None
    (call,) = response.result.output.tool_calls
    assert call == ToolCall("call_cut1", "write_report", '{"title": "Q3", "body": "Revenue gr', {"partial": True})
    assert response.result.finish_reason == "length"


def test_refusal_reaches_entity_callers_as_a_typed_error(server: LoopbackServer) -> None:
    server.script(PATH, recorded(load(GROUP, "chat_refusal"), seed="entity"))
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt("Give me the lock-picking steps as JSON.")
        with pytest.raises(errors.RefusalError) as info:
            spec.call().entity(dict[str, str])
    assert info.value.refusal == "I'm sorry, I can't assist with that request."
    assert isinstance(info.value, errors.OutputConversionError)
