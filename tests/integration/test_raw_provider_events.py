"""Raw provider events over real HTTP: Anthropic's ping and the Responses API's hosted-tool progress
events reach a handler's on_raw_event / the events stream only when asked for, and change nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.events import RawProviderEvent, TextDelta
from chatclient.listeners import StreamHandler, ahandle_stream, handle_stream, raw_provider_events
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.openai_responses import OpenAIResponsesModel
from chatclient.prompt import Prompt
from tests.support import invoke, server_fixtures
from tests.support.loopback import SSE, LoopbackServer, anthropic_stream
from tests.support.responses_replay import load, recorded

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()


def anthropic(srv: LoopbackServer) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=srv.url, timeout=10.0)


def with_unknown_event() -> list[tuple[str, dict[str, Any]]]:
    events = anthropic_stream(["Hel", "lo"])
    events.insert(3, ("future_event", {"type": "future_event", "detail": {"n": 1}}))
    return events


def test_anthropic_ping_and_unknown_events_reach_on_raw_event(server: LoopbackServer) -> None:
    server.script("/v1/messages", SSE(with_unknown_event(), done=False))
    raw: list[RawProviderEvent] = []
    text: list[str] = []
    with anthropic(server) as model:
        handle_stream(
            ChatClient.create(model).prompt("hi"), StreamHandler(on_partial=text.append, on_raw_event=raw.append)
        )
    assert [(e.provider, e.type) for e in raw] == [("anthropic", "ping"), ("anthropic", "future_event")]
    assert raw[1].data == {"type": "future_event", "detail": {"n": 1}}
    assert text == ["Hel", "lo"]


def test_without_asking_nothing_changes(server: LoopbackServer) -> None:
    server.script("/v1/messages", SSE(with_unknown_event(), done=False))
    server.script("/v1/messages", SSE(with_unknown_event(), done=False))
    with anthropic(server) as model:
        events = list(ChatClient.create(model).prompt("hi").stream().events())
        plain, chunks = invoke(model, Prompt("hi"), "stream")
    assert not any(isinstance(e, RawProviderEvent) for e in events)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hel", "lo"]
    assert plain.text == "Hello" and all(c.generations for c in chunks)


def test_the_aggregate_is_the_same_with_raw_events(server: LoopbackServer) -> None:
    server.script("/v1/messages", SSE(with_unknown_event(), done=False))
    server.script("/v1/messages", SSE(with_unknown_event(), done=False))
    with anthropic(server) as model:
        plain, _ = invoke(model, Prompt("hi"), "stream")
        with raw_provider_events():
            raw, chunks = invoke(model, Prompt("hi"), "stream")
    assert raw == plain
    assert sum(1 for c in chunks if not c.generations) == 2


async def test_responses_hosted_tool_progress_as_raw_events_async(server: LoopbackServer) -> None:
    fixture = load("responses", "responses_web_search_stream")
    server.script("/v1/responses", recorded(fixture, seed="raw"))
    raw: list[str] = []
    done: list[Any] = []
    model = OpenAIResponsesModel("gpt-5-mini", api_key="sk-test", base_url=server.url + "/v1", timeout=10.0)
    await ahandle_stream(
        ChatClient.create(model).prompt("hi"),
        StreamHandler(on_raw_event=lambda e: raw.append(e.type), on_complete=done.append),
    )
    assert "response.web_search_call.searching" in raw and "response.output_item.added" not in raw
    assert done and done[0].text
