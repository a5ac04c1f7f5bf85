"""An agent called wrongly says what to do (issue 41.3): positional inputs name the inputs by keyword,
an unknown keyword with a missing input names both, calling a model agent like a function says how
to run it; none of it turns an agent into something tool resolution would run as a function."""

from __future__ import annotations

import asyncio

import pytest

from chatclient import ChatClient
from chatclient.agents import LlmAgent, agent, agent_function, sequence
from chatclient.errors import AgentInputError
from chatclient.testing import ScriptedChatModel


def _writer() -> LlmAgent:
    client = ChatClient.create(ScriptedChatModel(["A story."]))
    return agent(client, name="writer", user="Write about {{ topic }}.", output_key="story")


def test_positional_inputs_name_the_inputs_by_keyword() -> None:
    writer = _writer()
    with pytest.raises(TypeError, match=r"^writer\.run\(\) takes its inputs by name: writer\.run\(topic=\.\.\.\)$"):
        writer.run("otters")
    with pytest.raises(TypeError, match=r"writer\.arun\(\) takes its inputs by name: writer\.arun\(topic=\.\.\.\)"):
        asyncio.run(writer.arun("otters"))
    with pytest.raises(TypeError, match=r"writer\.stream\(\) takes its inputs by name"):
        next(iter(writer.stream("otters")))
    assert writer.run(topic="otters").output == "A story."


def test_an_unknown_keyword_with_a_missing_input_names_both() -> None:
    writer = _writer()
    with pytest.raises(AgentInputError) as caught:
        writer.run(subject="otters")
    assert str(caught.value) == "writer.run() got 'subject'; expected 'topic': writer.run(topic=...)"
    assert caught.value.missing == ("topic",)


def test_workflows_and_function_agents_say_the_same() -> None:
    @agent_function(output_key="total")
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(AgentInputError, match=r"add\.run\(\) got 'c'; expected 'b': add\.run\(a=\.\.\., b=\.\.\.\)"):
        add.run(a=1, c=2)
    flow = sequence(add, name="adder")
    with pytest.raises(TypeError, match=r"adder\.run\(\) takes its inputs by name: adder\.run\(a=\.\.\., b=\.\.\.\)"):
        flow.run(1, 2)
    # Extra keys alone stay allowed (later agents and templates may read them).
    assert add.run(a=1, b=2, note="x").output == 3
    # A function agent stays callable as its function.
    assert add(1, 2) == 3


def test_calling_a_model_agent_like_a_function_says_how_to_run_it() -> None:
    writer = _writer()
    with pytest.raises(TypeError, match=r"writer is an agent, not a function: .*writer\.run\(topic=\.\.\.\)"):
        writer("otters")
    odd = agent(ChatClient.create(ScriptedChatModel(["x"])), name="story writer", user="{{ topic }}")
    with pytest.raises(TypeError, match=r"agent\.run\(topic=\.\.\.\)"):
        odd("otters")


def test_a_callable_agent_is_still_no_tool_function_nor_an_agent_function() -> None:
    from chatclient.tools.decorator import resolve_tools

    writer = _writer()
    with pytest.raises(TypeError, match="is not a tool"):
        resolve_tools([writer])
    assert resolve_tools([writer.as_tool()])[0].definition.name == "writer"
    with pytest.raises(TypeError, match="agent_function takes a function, got LlmAgent"):
        agent_function(writer)
