"""The real JavaScript clients against ag_ui_app and ai_sdk_app on a loopback Uvicorn.

``tests/node`` holds two Node scripts and the npm packages they use (``npm ci --prefix tests/node``):
``ai_sdk_read.mjs`` sends a chat with the AI SDK's ``DefaultChatTransport`` and assembles the answer
with its ``readUIMessageStream`` (the reader ``useChat`` uses); ``ag_ui_run.mjs`` runs
``@ag-ui/client``'s ``HttpAgent``, which checks the event order and applies each event to its
messages and state. The tests assert on what the clients assembled, not on our own parsing.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")
pytest.importorskip("ag_ui.core", reason="needs the serve extra (ag-ui-protocol)")

from chatclient import BaseAdvisor, ChatClient
from chatclient.agents import agent_function, human_input, sequence
from chatclient.events import DocumentsRetrieved
from chatclient.messages import AssistantMessage, Reasoning, ToolCall, ToolResponseMessage
from chatclient.rag import Document
from chatclient.request import ChatClientRequest
from chatclient.serving import ag_ui_app, ai_sdk_app
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support.serving import FailsAfterFirstChunk, running

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed (apt-get install nodejs npm)"),
    pytest.mark.skipif(
        not (NODE_DIR / "node_modules" / "ai").is_dir()
        or not (NODE_DIR / "node_modules" / "@ag-ui" / "client").is_dir(),
        reason="the npm clients are not installed: npm ci --prefix tests/node",
    ),
]


def node(script: str, url: str, plan: dict[str, Any]) -> Any:
    """Run a script of tests/node against ``url`` and return the JSON it printed."""
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(NODE_DIR / script), url, json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=NODE_DIR,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@tool
def weather(city: str) -> dict[str, Any]:
    """The weather in a city."""
    return {"city": city, "sky": "sunny"}


class Finder(BaseAdvisor):
    """Finds one document, the way a retrieval advisor does."""

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        document = Document("Oslo is sunny today.", {"title": "Forecast", "filename": "forecast.md"}, id="forecast")
        request.emit(DocumentsRetrieved((document,), source="finder"))
        return request


def ui_user(text: str) -> dict[str, Any]:
    return {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}


# -- the AI SDK's reader ------------------------------------------------------------------------------


def test_the_ai_sdk_reader_assembles_sources_tools_reasoning_and_text() -> None:
    call = ToolCall("call-1", "weather", '{"city": "Oslo"}')
    model = ScriptedChatModel(
        [AssistantMessage(None, (call,)), AssistantMessage("Sunny in Oslo.", reasoning=(Reasoning("check the tool"),))]
    )
    client = ChatClient.builder(model).default_tools(weather).default_advisors(Finder()).build()
    with running(ai_sdk_app(client)) as url:
        got = node("ai_sdk_read.mjs", url + "/", {"chatId": "c1", "messages": [ui_user("weather in Oslo?")]})
    assert got["failure"] is None and got["errors"] == []
    message = got["message"]
    assert message["role"] == "assistant" and message["id"].startswith("msg-")
    parts = message["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "source-document",
        "tool-weather",
        "step-start",
        "reasoning",
        "text",
    ]
    assert parts[1] == {
        "type": "source-document",
        "sourceId": "forecast",
        "mediaType": "text/plain",
        "title": "Forecast",
        "filename": "forecast.md",
    }
    assert parts[2]["state"] == "output-available" and parts[2]["toolCallId"] == "call-1"
    assert parts[2]["input"] == {"city": "Oslo"} and parts[2]["output"] == {"city": "Oslo", "sky": "sunny"}
    assert parts[4]["text"] == "check the tool" and parts[4]["state"] == "done"
    assert parts[5] == {"type": "text", "text": "Sunny in Oslo.", "state": "done"}


def test_the_ai_sdk_reader_takes_a_provider_executed_tool() -> None:
    from chatclient.messages import HostedToolCall

    search = HostedToolCall("ws_1", "web_search", {"query": "hours"}, {"sources": ["https://library.example"]})
    model = ScriptedChatModel([AssistantMessage("Open 9-19.", hosted_tool_calls=(search,))])
    with running(ai_sdk_app(ChatClient.create(model))) as url:
        got = node("ai_sdk_read.mjs", url + "/", {"chatId": "c4", "messages": [ui_user("hours?")]})
    assert got["failure"] is None and got["errors"] == []
    tool_part = next(p for p in got["message"]["parts"] if p["type"] == "tool-web_search")
    assert tool_part["state"] == "output-available" and tool_part["providerExecuted"] is True
    assert tool_part["input"] == {"query": "hours"} and tool_part["output"] == {"sources": ["https://library.example"]}


def test_the_ai_sdk_reader_sees_an_in_stream_error_and_an_http_error() -> None:
    with running(ai_sdk_app(ChatClient.create(FailsAfterFirstChunk()))) as url:
        got = node("ai_sdk_read.mjs", url + "/", {"chatId": "c2", "messages": [ui_user("hi")]})
    assert got["failure"] is None
    assert [p["text"] for p in got["message"]["parts"] if p["type"] == "text"] == ["partial"]
    assert len(got["errors"]) == 1 and "upstream model failed" in got["errors"][0]
    assert FailsAfterFirstChunk.secret not in json.dumps(got)
    with running(ai_sdk_app(ChatClient.create(ScriptedChatModel(["x"])), auth=lambda request: None)) as url:
        refused = node("ai_sdk_read.mjs", url + "/", {"chatId": "c3", "messages": [ui_user("hi")]})
    assert refused["message"] is None and "unauthorized" in refused["failure"].lower()


# -- @ag-ui/client's HttpAgent ------------------------------------------------------------------------


def test_http_agent_collects_text_and_server_tool_results() -> None:
    call = ToolCall("call-1", "weather", '{"city": "Oslo"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), ["Sunny ", "in Oslo."]])
    client = ChatClient.builder(model).default_tools(weather).build()
    with running(ag_ui_app(client)) as url:
        (run,) = node("ag_ui_run.mjs", url + "/", {"threadId": "t1", "steps": [{"user": "weather?"}]})
    assert run["failure"] is None and run["runError"] is None
    assert run["finished"] == {"outcome": "success", "interrupts": [], "pendingToolCallIds": []}
    assert run["types"][0] == "RUN_STARTED" and run["types"][-1] == "RUN_FINISHED"
    roles = [m["role"] for m in run["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert run["messages"][1]["toolCalls"][0]["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    assert json.loads(run["messages"][2]["content"]) == {"city": "Oslo", "sky": "sunny"}
    assert run["messages"][3]["content"] == "Sunny in Oslo."


def test_http_agent_runs_caller_tools_across_two_runs() -> None:
    call = ToolCall("c1", "pick_color", '{"hint": "warm"}')
    model = ScriptedChatModel([AssistantMessage(None, (call,)), "Red it is."])
    tools = [{"name": "pick_color", "description": "Ask the user for a color", "parameters": {"type": "object"}}]
    with running(ag_ui_app(ChatClient.create(model))) as url:
        first, second = node(
            "ag_ui_run.mjs",
            url + "/",
            {"threadId": "t2", "steps": [{"user": "paint it", "tools": tools}, {"toolResult": "red", "tools": tools}]},
        )
    assert first["finished"]["pendingToolCallIds"] == ["c1"]
    assert first["messages"][-1]["toolCalls"][0]["function"]["name"] == "pick_color"
    assert second["runError"] is None and second["messages"][-1]["content"] == "Red it is."
    results = [m for m in model.last_prompt.messages if isinstance(m, ToolResponseMessage)]
    assert results[0].responses[0].response_data == "red"


@agent_function(output_key="greeting")
def greet(name: str) -> str:
    return f"Hello {name}!"


def test_http_agent_answers_an_interrupt_with_a_resume() -> None:
    flow = sequence(human_input(question="What is your name?", output_key="name"), greet, output_key="greeting")
    with running(ag_ui_app(flow)) as url:
        first, second = node(
            "ag_ui_run.mjs", url + "/", {"threadId": "t3", "steps": [{"user": "start"}, {"resume": "Ann"}]}
        )
    assert first["finished"]["outcome"] == "interrupt"
    (interrupt,) = first["finished"]["interrupts"]
    assert interrupt["reason"] == "human_input" and interrupt["message"] == "What is your name?"
    assert second["failure"] is None and second["finished"]["outcome"] == "success"
    assert "STEP_STARTED" in second["types"]
    assert second["state"]["greeting"] == "Hello Ann!"  # the STATE_SNAPSHOT, applied by the client
    assert second["messages"][-1]["content"] == "Hello Ann!"


def test_http_agent_sees_a_run_error_after_the_first_chunk() -> None:
    with running(ag_ui_app(ChatClient.create(FailsAfterFirstChunk()))) as url:
        (run,) = node("ag_ui_run.mjs", url + "/", {"threadId": "t4", "steps": [{"user": "hi"}]})
    assert run["runError"]["code"] == "upstream_error"
    assert "upstream model failed" in run["runError"]["message"]
    assert run["finished"] is None and run["types"][-1] == "RUN_ERROR"
    assert run["messages"][-1]["content"] == "partial"
    assert FailsAfterFirstChunk.secret not in json.dumps(run)
