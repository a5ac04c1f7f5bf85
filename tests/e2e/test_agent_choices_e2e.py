"""The embedded model chooses by probability where it must choose (issue 41.4), on the real SmolLM2.

Checked here is the mechanism, not accuracy (which a 135M model does not reach reliably; the
figures are in benchmarks/agent_choices.py and benchmarks/README.md): the supervisor's next agent
and a routed conditional's branch go through ``DecisionModel`` (one single-token call per choice)
and the answer is always one of the candidates; ``entity(Enum)`` is grammar-constrained in every
structured-output mode, so it always comes back as a member.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.agents import agent_function, conditional, supervisor
from chatclient.decisions import DecisionModel


@agent_function(output_key="forecast", description="Tells the weather forecast for a city.")
def weather(request: str) -> str:
    return "sunny"


@agent_function(output_key="translation", description="Translates text into another language.")
def translator(request: str) -> str:
    return "hola"


@agent_function(output_key="joke", description="Tells a funny joke.")
def comedian(request: str) -> str:
    return "a joke"


class Category(enum.Enum):
    LEGAL = "legal"
    MEDICAL = "medical"
    TECHNICAL = "technical"


@pytest.fixture
def decisions_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    made: list[Any] = []
    original = DecisionModel.decide

    def counting(self: DecisionModel, input: Any, questions: Any) -> Any:
        answers = original(self, input, questions)
        made.append(answers)
        return answers

    monkeypatch.setattr(DecisionModel, "decide", counting)
    return made


def test_supervisor_on_the_embedded_model_chooses_the_next_agent_by_probability(
    default_model: Any, decisions_made: list[Any]
) -> None:
    wf = supervisor(weather, translator, comedian, planner=ChatClient.create(default_model), max_steps=1)
    assert wf.planner.chooser.uses_probability
    result = wf.run(request="Ask the translator to say good morning in Spanish.")
    children = result.invocations[0].children
    assert len(children) == 1 and children[0].name in {"weather", "translator", "comedian"}
    assert len(decisions_made) == 1
    probabilities = list(decisions_made[0]["choice"].probabilities.values())
    print(f"\nsupervisor chose {children[0].name!r}; probabilities {[round(p, 3) for p in probabilities]}")
    assert sum(probabilities) == pytest.approx(1.0)


def test_routed_conditional_on_the_embedded_model_chooses_by_probability(
    default_model: Any, decisions_made: list[Any]
) -> None:
    router = conditional(weather, translator, comedian, router=ChatClient.create(default_model))
    result = router.run(request="Tell me a joke about cats.")
    assert result.output in {"sunny", "hola", "a joke"}
    assert len(decisions_made) == 1 and result.scope._journal["route"]["output"] in (0, 1, 2)


@pytest.mark.parametrize("mode", ["auto", "native", "json_object", "tool", "instructions"])
def test_entity_enum_is_a_member_in_every_mode(default_model: Any, mode: Any) -> None:
    client = ChatClient.create(default_model)
    value = (
        client.prompt("I want to sue my neighbour. Which category is this request?").call().entity(Category, mode=mode)
    )
    print(f"\nentity(Category, mode={mode!r}) -> {value!r}")
    assert isinstance(value, Category)
