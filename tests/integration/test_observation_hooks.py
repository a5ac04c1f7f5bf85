"""Tool executions and HTTP attempts reach an installed observer (retries show as separate attempts)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chatclient import AssistantMessage, ChatClient, ToolCall
from chatclient.models.openai import OpenAIChatModel
from chatclient.observation import set_observer
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.conftest import run_spec
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply, openai_completion

loopback_server, server = server_fixtures()


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def start_call(self, mode: str, request: Any, model: Any) -> Any:
        return self._unit("call")

    def start_advisor(self, advisor: Any, mode: str) -> Any:
        return self._unit("advisor")

    def start_tool(self, name: str, call_id: str, arguments: str) -> Any:
        self.events.append(("tool", (name, call_id, arguments)))
        return self._unit("tool")

    def start_http_attempt(self, provider: str, method: str, url: str, attempt: int) -> Any:
        self.events.append(("http", (provider, method, url, attempt)))
        return self._unit("http")

    def _unit(self, kind: str) -> Any:
        log = self.events

        class Unit:
            def finish(self, result: Any = None, error: BaseException | None = None) -> None:
                status = getattr(result, "status_code", None)
                log.append((f"end {kind}", type(error).__name__ if error else status))

        return Unit()


@pytest.fixture
def log() -> Iterator[Log]:
    observer = Log()
    set_observer(observer)
    yield observer
    set_observer(None)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_each_tool_execution_is_observed(log: Log, mode: str) -> None:
    calls = (ToolCall("c1", "add", '{"a": 1, "b": 2}'), ToolCall("c2", "missing", "{}"))
    model = ScriptedChatModel([AssistantMessage(None, calls), ["three"]])
    run_spec(ChatClient.create(model).prompt("1+2?").tools(add), mode)
    tools = sorted(e[1] for e in log.events if e[0] == "tool")
    assert tools == [("add", "c1", '{"a": 1, "b": 2}'), ("missing", "c2", "{}")]
    assert sum(1 for e in log.events if e[0] == "end tool") == 2


def test_each_http_attempt_is_observed(log: Log, server: LoopbackServer) -> None:
    path = "/v1/chat/completions"
    server.script(path, Reply(500, json={"error": {"message": "boom"}}), Reply(json=openai_completion()))
    model = OpenAIChatModel("m", api_key="k", base_url=server.url + "/v1", backoff_base=0.001)
    with model:
        ChatClient.create(model).prompt("hi").call().content()
    http = [e for e in log.events if e[0] in ("http", "end http")]
    assert http == [
        ("http", ("OpenAI", "POST", server.url + path, 1)),
        ("end http", 500),
        ("http", ("OpenAI", "POST", server.url + path, 2)),
        ("end http", 200),
    ]
