"""Replay of recorded Ollama ``/api/chat`` responses (tests/data/providers/ollama/) over real HTTP.

Each fixture (a JSON answer or an NDJSON stream) is served by the loopback server split across
irregular network reads and checked field by field against its ``expect`` section.
"""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import errors
from chatclient.messages import AssistantMessage, Message, Reasoning, ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.ollama import OllamaChatModel
from chatclient.prompt import Prompt
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer
from tests.support.openai_replay import check, load, names, recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/api/chat"
GROUP = "ollama"


def make_model(srv: LoopbackServer, **kw: Any) -> OllamaChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    return OllamaChatModel("qwen3:8b", base_url=srv.url, **kw)


CASES = [(n, m) for n in names(GROUP, "call") for m in ("call", "acall")] + [
    (n, m) for n in names(GROUP, "ndjson") for m in ("stream", "astream")
]


@pytest.mark.parametrize(("name", "mode"), CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_recorded_response(server: LoopbackServer, name: str, mode: str) -> None:
    fixture = load(GROUP, name)
    server.script(PATH, recorded(fixture, seed=f"{name}-{mode}"))
    with make_model(server) as model:
        response, chunks = invoke(model, Prompt("hi"), mode)
    check(response, fixture["expect"])
    if chunks:
        # done: true ends the stream with a finish reason even without done_reason, so advisors'
        # after() runs and aggregation sees the end.
        assert chunks[-1].result is not None and chunks[-1].result.finish_reason is not None
        assert all(not c.has_finish_reason() for c in chunks[:-1])


def test_thinking_streams_separately_from_the_answer(server: LoopbackServer) -> None:
    server.script(PATH, recorded(load(GROUP, "chat_think_tags_stream"), seed="sep"))
    with make_model(server) as model:
        chunks = list(model.stream(Prompt("2+2?")))
    texts = "".join(c.result.output.text or "" for c in chunks if c.result)
    thoughts = "".join(r.text for c in chunks if c.result for r in c.result.output.reasoning)
    assert texts == "**4**"
    assert thoughts == "\nOkay, 2+2 is 4.\n"


def test_recorded_error(server: LoopbackServer) -> None:
    fixture = load(GROUP, "error_model_not_found")
    server.script(PATH, recorded(fixture, seed="err"))
    with make_model(server, max_retries=0) as model, pytest.raises(errors.ModelHTTPError) as info:
        model.call(Prompt("hi"))
    assert info.value.status == 404
    assert "not found" in str(info.value)


def test_thinking_goes_back_to_ollama_and_other_reasoning_does_not(server: LoopbackServer) -> None:
    fixture = load(GROUP, "chat_tools")
    server.script(PATH, recorded(load(GROUP, "chat_thinking"), seed="1"), recorded(fixture, seed="2"))
    with make_model(server) as model:
        first = model.call(Prompt("17*23?"))
        assert first.result is not None
        foreign = AssistantMessage("x", reasoning=(Reasoning("not for ollama", signature="s", provider="anthropic"),))
        history: list[Message] = [
            UserMessage("17*23?"),
            first.result.output,
            UserMessage("and the weather?"),
            foreign,
            ToolResponseMessage((ToolResponse("call_0", "get_weather", "sunny"),)),
        ]
        model.call(Prompt(history))
    body = server.requests_to(PATH)[1].body
    assert body["messages"] == [
        {"role": "user", "content": "17*23?"},
        {
            "role": "assistant",
            "content": "17 \u00d7 23 = 391",
            "thinking": "The user asks 17*23. 17*20=340, 17*3=51, total 391.",
        },
        {"role": "user", "content": "and the weather?"},
        {"role": "assistant", "content": "x"},
        {"role": "tool", "content": "sunny", "tool_name": "get_weather"},
    ]
