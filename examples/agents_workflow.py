"""Agents: a small trip-planning team built from workflows.

Two function agents look up facts at the same time (``parallel``), a writer agent drafts a plan from
them, then a critic and a reviser take turns (``loop``) until the critic's typed ``Review`` scores the
plan at 0.8 or more. The whole ``sequence`` runs once with a monitor (its invocation tree and a
self-contained HTML report), then again as a stream of agent events.

Run: .venv/bin/python examples/agents_workflow.py   (offline by default; see examples/_support.py)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _support import make_model

from chatclient import ChatClient, ChatOptions, Prompt
from chatclient.agents import AgentFinished, AgentMonitor, AgentStarted, agent, agent_function, loop, parallel, sequence
from chatclient.events import TextDelta
from chatclient.testing import FunctionChatModel


class Review(BaseModel):
    score: float
    feedback: str


def offline_answer(prompt: Prompt) -> str:
    """Deterministic answers for the offline run: what a good model would say."""
    text = prompt.user_message.text
    if text.startswith("Write a one-paragraph travel plan"):
        return "Day 1: walk the old town in the sun. Day 2: the jazz night at the harbour."
    if text.startswith("Rate this plan"):
        if "museum" in text:
            return '{"score": 0.9, "feedback": "Balanced and complete."}'
        return '{"score": 0.4, "feedback": "Add an indoor visit in case of rain."}'
    if text.startswith("Improve this plan"):
        plan = text.split("PLAN: ", 1)[1]
        return plan + " Day 3: the maritime museum if it rains."
    return "I do not know."


@agent_function(output_key="weather", description="Looks up the weather forecast of a city.")
def weather(city: str) -> str:
    return f"sunny in {city} for two days"


@agent_function(output_key="events", description="Lists events in a city.")
def events(city: str) -> str:
    return f"a jazz night at the {city} harbour"


def build_team(client: ChatClient) -> object:
    writer = agent(
        client,
        name="writer",
        user="Write a one-paragraph travel plan for {{ city }}. Facts: {{ weather }}; {{ events }}.",
        output_key="plan",
    )
    critic = agent(
        client,
        name="critic",
        user="Rate this plan from 0 to 1 and give one line of feedback: {{ plan }}",
        output_type=Review,
        output_key="review",
    )
    reviser = agent(
        client,
        name="reviser",
        user="Improve this plan following the feedback '{{ review.feedback }}'. PLAN: {{ plan }}",
        output_key="plan",
    )
    polish = loop(critic, reviser, max_iterations=3, exit_condition=lambda s: s.read("review").score >= 0.8)
    research = parallel(weather, events, name="research")
    return sequence(research, writer, polish, name="trip", output=lambda s: s.read("plan"), output_key="final")


def main() -> None:
    model = make_model(FunctionChatModel(offline_answer))
    client = ChatClient.builder(model).default_options(ChatOptions(temperature=0.0, max_tokens=200)).build()
    team = build_team(client)

    monitor = AgentMonitor()
    result = team.run(city="Lisbon", scope_id="trip-1", monitor=monitor)  # type: ignore[attr-defined]
    print("plan:", result.output)
    print("final score:", result.scope.read("review").score)
    tree = monitor.tree("trip-1")

    def show(inv: object, depth: int = 0) -> None:
        print("  " * depth + f"- {inv.name} ({inv.duration * 1000:.1f} ms)")  # type: ignore[attr-defined]
        for child in inv.children:  # type: ignore[attr-defined]
            show(child, depth + 1)

    print("invocation tree:")
    show(tree)
    print("tokens used:", result.usage.total_tokens)
    with tempfile.TemporaryDirectory() as tmp:
        html = monitor.html(Path(tmp) / "trip.html")
    nodes = html.count('class="node"')
    print(f"HTML report: {len(html)} characters, {nodes} agent nodes")

    print("stream of the same team:")
    for event in team.stream(city="Porto"):  # type: ignore[attr-defined]
        if isinstance(event, AgentStarted):
            print("  started", event.name)
        elif isinstance(event, AgentFinished) and event.name == "trip":
            print("  finished", event.name)
        elif isinstance(event, TextDelta):
            pass  # the last agent's text arrives here piece by piece


if __name__ == "__main__":
    main()
