"""ToolCallbackProvider: tools resolved per request and refreshed between the model turns of a tool loop."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from chatclient import ChatClient
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.testing import ScriptedChatModel
from chatclient.tools import FunctionToolCallback, ToolCallback, ToolCallbackProvider, resolve_tools, tool
from chatclient.tools.decorator import resolve_tool_sources
from tests.conftest import MODES, run_spec


class Registry:
    """A provider whose tool list grows when its 'unlock' tool runs (like an MCP server's list_changed)."""

    def __init__(self) -> None:
        self.asked = 0
        self._unlocked = False
        self._unlock = FunctionToolCallback(self._do_unlock, name="unlock", description="Unlock more tools")
        self._secret = FunctionToolCallback(lambda word: f"secret:{word}", name="secret", description="The secret")
        self._callbacks: tuple[ToolCallback, ...] = (self._unlock,)

    def _do_unlock(self) -> str:
        self._unlocked = True
        self._callbacks = (self._unlock, self._secret)
        return "unlocked"

    def tool_callbacks(self) -> Sequence[ToolCallback]:
        self.asked += 1
        return self._callbacks


class Renaming:
    """A provider that renames its tools when a name is already taken."""

    def tool_callbacks(self, reserved: Collection[str] = ()) -> Sequence[ToolCallback]:
        name = "remote_add" if "add" in reserved else "add"
        return (FunctionToolCallback(lambda a, b: a * 100 + b, name=name, description="remote add"),)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def call(name: str, arguments: str = "{}", call_id: str = "c1") -> AssistantMessage:
    return AssistantMessage(None, (ToolCall(call_id, name, arguments),))


def test_a_provider_is_a_tool_source() -> None:
    registry = Registry()
    assert isinstance(registry, ToolCallbackProvider)
    callbacks, sources = resolve_tool_sources([add, registry])
    assert [cb.definition.name for cb in callbacks] == ["add", "unlock"]
    assert sources == ((registry, (registry._unlock,)),)
    assert [cb.definition.name for cb in resolve_tools([registry])] == ["unlock"]


@pytest.mark.parametrize("mode", MODES)
def test_tools_refresh_between_model_turns(mode: str) -> None:
    registry = Registry()
    model = ScriptedChatModel(
        [call("unlock"), call("secret", '{"word": "w"}', "c2"), ["do", "ne"] if "stream" in mode else "done"]
    )
    spec = ChatClient.create(model).prompt("go").tools(registry, add)
    response = run_spec(spec, mode)
    assert [t.name for t in model.prompts[0].tools] == ["add", "unlock"]
    assert [t.name for t in model.prompts[1].tools] == ["add", "unlock", "secret"]
    last = model.prompts[2].messages[-1]
    assert isinstance(last, ToolResponseMessage)
    assert last.responses[0].response_data == "secret:w"
    assert [e.name for e in response.tool_executions] == ["unlock", "secret"]


def test_unchanged_provider_keeps_the_request() -> None:
    registry = Registry()
    model = ScriptedChatModel([call("unlock"), call("unlock", call_id="c2"), "done"])
    ChatClient.create(model).prompt("go").tools(registry).call().content()
    # Once at build time, then once per follow-up turn.
    assert registry.asked == 3
    assert model.prompts[1].tools == model.prompts[2].tools


def test_reserved_names_let_a_provider_rename() -> None:
    callbacks, _ = resolve_tool_sources([Renaming(), add])
    assert [cb.definition.name for cb in callbacks] == ["add", "remote_add"]
    model = ScriptedChatModel([call("remote_add", '{"a": 1, "b": 2}'), "ok"])
    ChatClient.create(model).prompt("x").tools(add, Renaming()).call().content()
    last = model.prompts[1].messages[-1]
    assert isinstance(last, ToolResponseMessage)
    assert last.responses[0].response_data == "102"


def test_clash_without_renaming_is_reported() -> None:
    class Clashing:
        def tool_callbacks(self) -> Sequence[ToolCallback]:
            return resolve_tools([add])

    with pytest.raises(ValueError, match="duplicate tool name"):
        resolve_tools([add, Clashing()])


def test_provider_returning_junk_is_a_type_error() -> None:
    class Junk:
        def tool_callbacks(self) -> Sequence[object]:
            return ["not a tool"]

    with pytest.raises(TypeError, match="not a ToolCallback"):
        resolve_tools([Junk()])


def test_provider_is_accepted_by_default_tools() -> None:
    registry = Registry()
    model = ScriptedChatModel(["hi"])
    client = ChatClient.builder(model).default_tools(registry).build()
    response = client.prompt("x").call().chat_client_response()
    assert [t.name for t in model.prompts[0].tools] == ["unlock"]
    assert response.chat_response is not None
    assert registry.asked == 1
