"""Agents on the real local model (Gemma 3 270M, in-process): a writer and an editor in a sequence,
and a supervisor whose planner (native structured output, so llama.cpp's grammar keeps every
PlannerStep valid JSON) chooses between two function agents."""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.agents import AgentFinished, AgentStarted, agent, agent_function, sequence, supervisor
from chatclient.events import TextDelta

pytestmark = pytest.mark.e2e

CALLS: list[str] = []


@agent_function(output_key="dollars", description="Converts an amount in euros to US dollars.")
def euros_to_dollars(amount: float) -> str:
    CALLS.append("euros_to_dollars")
    return f"{amount} EUR = {round(amount * 1.08, 2)} USD"


@agent_function(output_key="weather", description="Tells the weather forecast of a city.")
def weather_forecast(city: str) -> str:
    CALLS.append("weather_forecast")
    return f"Sunny in {city}"


def _client(model: Any, max_tokens: int, **extra: Any) -> ChatClient:
    builder = ChatClient.builder(model).default_options(ChatOptions(temperature=0.0, seed=42, max_tokens=max_tokens))
    if extra:
        builder.default_advisors(params=extra)
    return builder.build()


def test_writer_then_editor_sequence(local_model: Any) -> None:
    client = _client(local_model, 60)
    writer = agent(
        client,
        name="writer",
        system="You write one sentence.",
        user="Write one sentence about {{ topic }}.",
        output_key="sentence",
    )
    editor = agent(
        client,
        name="editor",
        system="You shorten sentences.",
        user="Rewrite this sentence in at most eight words: {{ sentence }}",
        output_key="short",
    )
    events = list(sequence(writer, editor, name="pipeline").stream(topic="the sea"))
    started = [e.name for e in events if isinstance(e, AgentStarted)]
    assert started == ["pipeline", "writer", "editor"]
    finished = {e.name: e for e in events if isinstance(e, AgentFinished)}
    sentence, short = finished["writer"].output, finished["editor"].output
    assert isinstance(sentence, str) and sentence.strip()
    assert isinstance(short, str) and short.strip()
    # the editor's text was streamed, the writer's was not
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == short
    assert finished["pipeline"].output == short and finished["pipeline"].error is None


def test_supervisor_plans_over_two_function_agents(local_model: Any) -> None:
    """The planner is the real model; every answer it gives must be a valid PlannerStep (the native
    path turns the schema into a llama.cpp grammar), and the supervisor must act on each one: run the
    named function agent with the model's arguments converted to the parameter types, or report a
    wrong name or missing arguments back, and stop at "done" or max_steps.

    Which agent the bundled 270M (or 135M) model picks is not asserted: on this task neither picks
    by the request (measured on 2026-12-03 with both requests and both agent orders: Gemma always
    chose the currency agent, SmolLM2 followed the list order or chose the weather agent for a
    conversion), so a choice assertion would measure chance, not planning. The choice logic itself is
    tested with scripted planners in tests/unit/test_agents_supervisor.py."""
    from chatclient.agents import PlannerStep

    CALLS.clear()
    planner = _client(local_model, 120, **{ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
    # The structured path (the choice by probability, the default on this model, is tested in
    # tests/e2e/test_agent_choices_e2e.py).
    team = supervisor(euros_to_dollars, weather_forecast, planner=planner, max_steps=3, by_probability=False)
    result = team.run(request="Convert 20 euros to US dollars.")
    journal = result.scope._journal
    steps = {
        k: PlannerStep(agent_name="done") if set(v["output"]) == {"done"} else PlannerStep.model_validate(v["output"])
        for k, v in journal.items()
        if k.startswith("plan")
    }
    assert 1 <= len(steps) <= 3
    tree = result.invocations[0]
    assert tree.usage is not None and tree.usage.total_tokens > 0  # the planner's calls are counted
    ran = [child.name for child in tree.children]
    assert CALLS, journal  # the model's steps were acted on: at least one agent ran with its arguments
    assert ran == CALLS  # each agent that ran was invoked once per planner step that named it well
    for n, planned in enumerate(steps.values(), 1):
        if planned.agent_name == "done":
            assert n == len(steps)  # "done" ends the plan
            continue
        entry = journal.get(f"s{n}")
        if entry is not None:
            assert planned.agent_name in ("euros_to_dollars", "weather_forecast")
            if planned.agent_name == "euros_to_dollars":
                amount = float(planned.arguments["amount"])  # converted from whatever JSON the model gave
                assert entry["output"] == f"{amount} EUR = {round(amount * 1.08, 2)} USD"
    assert result.output is None or result.output in [journal[k]["output"] for k in journal if k.startswith("s")]
