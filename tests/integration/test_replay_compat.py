"""Replay of recorded responses of OpenAI-compatible servers (tests/data/providers/compat/).

vLLM (``reasoning_content``), Ollama's /v1 (``reasoning``), OpenRouter (``reasoning`` +
``reasoning_details`` with signatures and encrypted items), Gemini's OpenAI endpoint (tool-call
``extra_content.google.thought_signature``), Cerebras (``time_info``), DeepSeek cache usage and
llama.cpp's ``<think>`` content, all through ``OpenAIChatModel`` over real HTTP, split across
irregular network reads and checked field by field. Follow-up requests are compared with golden
bodies: what each server requires back is sent back exactly, and nothing a server did not send is.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.memory.serialization import messages_from_json, messages_to_json
from chatclient.messages import ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer
from tests.support.openai_replay import DATA, check, load, names, recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
GROUP = "compat"


def make_model(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OpenAIChatModel("served-model", base_url=srv.url + "/v1", **kw)


def golden(name: str) -> Any:
    return json.loads((DATA / GROUP / f"{name}.json").read_text(encoding="utf-8"))["messages"]


CASES = [(n, m) for n in names(GROUP, "call") for m in ("call", "acall")] + [
    (n, m) for n in names(GROUP, "stream") for m in ("stream", "astream")
]


def test_the_suite_covers_every_compatible_server() -> None:
    found = names(GROUP, "call", "stream")
    for server_name in ("vllm", "ollama_v1", "openrouter", "gemini", "cerebras"):
        assert sum(n.startswith(server_name) for n in found) >= 2, server_name


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_recorded_response(server: LoopbackServer, name: str, mode: str) -> None:
    fixture = load(GROUP, name)
    server.script(PATH, recorded(fixture, seed=f"{name}-{mode}"))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt("hi"), mode)
    check(response, fixture["expect"])
    if chunks:
        # Reasoning streams as reasoning deltas, never inside the answer text.
        streamed_text = "".join(c.result.output.text or "" for c in chunks if c.result)
        assert response.result is not None
        assert streamed_text == (response.result.output.text or "")
        if response.result.output.reasoning_text:
            assert response.result.output.reasoning_text not in streamed_text


@tool
def get_weather(location: str) -> str:
    """Current weather for a location."""
    return f"18C and sunny in {location}"


@pytest.mark.parametrize("mode", ("call", "stream"))
def test_gemini_tool_loop_sends_the_thought_signature_back(server: LoopbackServer, mode: str) -> None:
    first = "gemini_thought_signature_tools" if mode == "call" else "gemini_thought_signature_stream"
    final = "cerebras_time_info" if mode == "call" else "cerebras_stream_time_info"
    server.script(PATH, recorded(load(GROUP, first), seed="g1"), recorded(load(GROUP, final), seed="g2"))
    with make_model(server) as model:
        spec = ChatClient.create(model).prompt().user("Weather in Paris and London?").tools(get_weather)
        text = spec.call().content() if mode == "call" else "".join(spec.stream().content())
    assert text in ("Hello! How can I assist you today?", "Fast inference.")
    bodies = [r.body for r in server.requests_to(PATH)]
    assert len(bodies) == 2
    expected = golden("golden_gemini_tool_followup")
    if mode == "stream":  # the streamed turn made a single call, with a different id
        expected = [
            expected[0],
            {**expected[1], "tool_calls": [{**expected[1]["tool_calls"][0], "id": "function-call-9071"}]},
            {**expected[2], "tool_call_id": "function-call-9071"},
        ]
    assert bodies[1]["messages"] == expected


@pytest.mark.parametrize("name", ["openrouter_reasoning_details_tools", "openrouter_reasoning_stream"])
def test_openrouter_reasoning_details_go_back_exactly(server: LoopbackServer, name: str) -> None:
    fixture = load(GROUP, name)
    mode = "call" if fixture["kind"] == "call" else "stream"
    server.script(PATH, recorded(fixture, seed="o1"), recorded(load(GROUP, "cerebras_time_info"), seed="o2"))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("Weather in Paris?"), mode)
        assert response.result is not None
        answer = response.result.output
        # The conversation goes through a memory store and back before the follow-up.
        history = messages_from_json(messages_to_json([UserMessage("Weather in Paris?"), answer]))
        if answer.tool_calls:
            history.append(ToolResponseMessage((ToolResponse(answer.tool_calls[0].id, "get_weather", "sunny"),)))
        else:
            history.append(UserMessage("Thanks!"))
        model.call(Prompt(history))
    sent = server.requests_to(PATH)[1].body["messages"][1]
    assert sent == golden(f"golden_{name}_followup")[1]
    assert sent["reasoning_details"] == fixture["expect"]["generations"][0]["metadata"]["reasoning_details"]


def test_reasoning_without_a_send_back_field_is_not_sent(server: LoopbackServer) -> None:
    """vLLM/DeepSeek/Ollama /v1 reasoning and <think> blocks stay local: strict servers reject unknown fields."""
    server.script(
        PATH,
        recorded(load(GROUP, "vllm_reasoning_content"), seed="v1"),
        recorded(load(GROUP, "llamacpp_think_tags"), seed="v2"),
    )
    with make_model(server) as model:
        first = model.call(Prompt("9.11 or 9.8?"))
        assert first.result is not None and first.result.output.reasoning
        model.call(Prompt([UserMessage("9.11 or 9.8?"), first.result.output, UserMessage("Why?")]))
    assert server.requests_to(PATH)[1].body["messages"] == [
        {"role": "user", "content": "9.11 or 9.8?"},
        {"role": "assistant", "content": "9.8 is greater than 9.11."},
        {"role": "user", "content": "Why?"},
    ]


def test_think_splitting_can_be_switched_off(server: LoopbackServer) -> None:
    server.script(PATH, recorded(load(GROUP, "llamacpp_think_tags"), seed="off"))
    with make_model(server) as model:
        model.think_tags = None
        response = model.call(Prompt("hi"))
    assert response.result is not None
    assert response.result.output.text == "<think>\nThe user says hi; greet back.\n</think>\n\nHi there!"
    assert response.result.output.reasoning == ()
