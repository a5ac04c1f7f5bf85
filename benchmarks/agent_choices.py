"""The embedded model choosing where it must choose (issue 41.4), measured on SmolLM2-135M.

    .venv/bin/python benchmarks/agent_choices.py [--model smollm2-135m] [--parts choices,structured,yesno,entity]

Three measurements on the same in-process model (greedy, seed 42, prefix cache off):

1. The supervisor's next agent: 10 requests that each name the agent to use, among 5 agents; the
   supervisor's ``ModelPlanner`` chooses by probability (a ``DecisionModel`` choice over the agents'
   names, calibrated); right = the named agent. Also printed: the same 10 through the routed
   ``conditional`` (same mechanism, its own question), and the supervisor's structured path
   (``PlannerStep`` entity under a grammar) for comparison.
2. 10 obvious yes/no questions through ``DecisionModel.decide`` (raw and ``calibrate=True``);
   right = the answer on the right side of 0.5.
3. ``entity(Enum)`` in auto mode (now grammar-constrained on the embedded model) on the 10 requests:
   how many answers are a member at all, and how many the named one.

The machine may be shared, so the load average and the wall time are printed too.
"""

from __future__ import annotations

import argparse
import enum
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatclient import ChatClient
from chatclient.agents import AgenticScope, agent_function, conditional, supervisor
from chatclient.agents.conditional import ROUTE_QUESTION
from chatclient.agents.supervisor import PlannerStep
from chatclient.decisions import DecisionModel, YesNoQuestion
from chatclient.errors import ChatClientError
from chatclient.models.llamacpp import LlamaCppChatModel
from chatclient.models.model_files import bundled_model_path


@agent_function(output_key="forecast", description="Tells the weather forecast for a city.")
def weather(request: str) -> str:
    return "sunny"


@agent_function(output_key="translation", description="Translates text into another language.")
def translator(request: str) -> str:
    return "hola"


@agent_function(output_key="result", description="Does arithmetic with numbers.")
def calculator(request: str) -> str:
    return "42"


@agent_function(output_key="joke", description="Tells a funny joke.")
def comedian(request: str) -> str:
    return "a joke"


@agent_function(output_key="summary", description="Summarises a long text in a few words.")
def summarizer(request: str) -> str:
    return "short"


AGENTS = (weather, translator, calculator, comedian, summarizer)

# (request naming an agent, the agent named)
REQUESTS: list[tuple[str, str]] = [
    ("Use the weather agent: will it rain in Paris tomorrow?", "weather"),
    ("Ask the translator to say good morning in Spanish.", "translator"),
    ("Calculator: what is 17 times 23?", "calculator"),
    ("I want the comedian to tell me something funny about cats.", "comedian"),
    ("Summarizer, please shorten this paragraph about the history of Rome.", "summarizer"),
    ("Have the translator put 'thank you' into German.", "translator"),
    ("Weather for Oslo this weekend, please, from the weather agent.", "weather"),
    ("Let the calculator add 250 and 375.", "calculator"),
    ("Get the summarizer to give me the gist of this long report.", "summarizer"),
    ("Comedian, a joke about programmers!", "comedian"),
]

YES_NO: list[tuple[str, str, bool]] = [
    ("I love this product, it works perfectly!", "Is the customer happy?", True),
    ("This is terrible. It broke after one day and I want my money back.", "Is the customer happy?", False),
    ("Paris is the capital of France.", "Is Paris the capital of France?", True),
    ("A cat is a small furry animal that says meow.", "Is a cat a plant?", False),
    ("My order never arrived. Please refund me.", "Does the customer ask for a refund?", True),
    ("What time does the store open tomorrow?", "Does the customer ask for a refund?", False),
    ("BUY CHEAP PILLS NOW!!! Click here to WIN $1,000,000 FREE!!!", "Is this message spam?", True),
    ("Hi Anna, are we still meeting for lunch at noon tomorrow?", "Is this message spam?", False),
    ("The meeting is on Monday at 10 am.", "Is the meeting on Monday?", True),
    ("Water freezes at 0 degrees Celsius.", "Does water freeze at 50 degrees Celsius?", False),
]


class Agent(enum.Enum):
    WEATHER = "weather"
    TRANSLATOR = "translator"
    CALCULATOR = "calculator"
    COMEDIAN = "comedian"
    SUMMARIZER = "summarizer"


def _supervisor_by_probability(client: ChatClient) -> tuple[int, list[str]]:
    wf = supervisor(*AGENTS, planner=client)
    assert wf.planner.chooser.uses_probability, "the embedded model should choose by probability"
    right, picks = 0, []
    for request, expected in REQUESTS:
        step, _ = wf.planner.decide(AgenticScope({"request": request}), ())
        name = step.agent_name if isinstance(step, PlannerStep) else "done"
        picks.append(name)
        right += name == expected
    return right, picks


def _supervisor_structured(client: ChatClient) -> tuple[int, list[str]]:
    wf = supervisor(*AGENTS, planner=client, by_probability=False)
    right, picks = 0, []
    for request, expected in REQUESTS:
        try:
            step, _ = wf.planner.decide(AgenticScope({"request": request}), ())
            name = step.agent_name if isinstance(step, PlannerStep) else "done"
        except ChatClientError as exc:
            name = f"error: {type(exc).__name__}"
        picks.append(name)
        right += name == expected
    return right, picks


def _routed(client: ChatClient) -> tuple[int, list[str]]:
    router = conditional(*AGENTS, router=client)
    assert router.router is not None
    right, picks = 0, []
    for request, expected in REQUESTS:
        chosen = router.router.choose(request, ROUTE_QUESTION, router._candidates)
        name = AGENTS[chosen.index].name
        picks.append(name)
        right += name == expected
    return right, picks


def _yes_no(model: LlamaCppChatModel, calibrate: bool) -> tuple[int, list[float]]:
    decisions = DecisionModel(model, calibrate=calibrate)
    answers = [decisions.decide(text, {"q": YesNoQuestion(q)})["q"] for text, q, _ in YES_NO]
    right = sum(a.is_yes() == expected for a, (_, _, expected) in zip(answers, YES_NO, strict=True))
    return right, [round(a.probability, 2) for a in answers]


def _entity_enum(client: ChatClient) -> tuple[int, int]:
    members = right = 0
    for request, expected in REQUESTS:
        try:
            value = client.prompt(f"Which agent does this request name? {request}").call().entity(Agent)
        except ChatClientError:
            continue
        members += isinstance(value, Agent)
        right += isinstance(value, Agent) and value.value == expected
    return members, right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--parts", default="choices,structured,yesno,entity", help="which measurements to run")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    model = LlamaCppChatModel(str(bundled_model_path(args.model)), n_ctx=2048, seed=42, prefix_cache=False)
    client = ChatClient.create(model)
    print(f"model {args.model}, load average {os.getloadavg()[0]:.1f}")

    for part, label, run in (
        ("choices", "supervisor, by probability", _supervisor_by_probability),
        ("choices", "routed conditional, by probability", _routed),
        ("structured", "supervisor, structured PlannerStep", _supervisor_structured),
    ):
        if part not in parts:
            continue
        started = time.perf_counter()
        right, picks = run(client)
        print(f"{label}: {right}/10 named agent chosen ({time.perf_counter() - started:.1f} s)  {picks}")

    for calibrate in (False, True) if "yesno" in parts else ():
        started = time.perf_counter()
        right, probabilities = _yes_no(model, calibrate)
        label = "yes/no, calibrated" if calibrate else "yes/no"
        print(f"{label}: {right}/10 right ({time.perf_counter() - started:.1f} s)  P(yes)={probabilities}")

    if "entity" not in parts:
        return
    started = time.perf_counter()
    members, right = _entity_enum(client)
    print(
        f"entity(Enum), auto mode: {members}/10 members, {right}/10 the named one ({time.perf_counter() - started:.1f} s)"
    )


if __name__ == "__main__":
    main()
