"""ChoiceQuestion(by_name=True): an option's probability is that of the answer tokens its name
begins with (issue 41.4: small models copy a name far more readily than they map it to a letter)."""

from __future__ import annotations

from enum import Enum

import pytest

from chatclient.decisions import ChoiceQuestion, DecisionModel
from chatclient.decisions.model import name_probabilities
from chatclient.decisions.questions import labels_of, listing
from chatclient.errors import InvalidDecisionResponseError
from tests.support.decisions import decision_model


class Team(Enum):
    BILLING = "payments and invoices"
    SUPPORT = "problems using the product"


def test_a_token_counts_for_the_names_it_begins() -> None:
    tokens = [(" wea", -0.1), ("Trans", -2.0), ("t", -3.0), ("zzz", -0.01)]
    probabilities = name_probabilities(tokens, ["weather", "translator", "tester"])
    assert probabilities is not None and probabilities[0] > 0.8
    assert probabilities[2] > 0.0 and probabilities[1] > probabilities[2]  # "t" split over two names
    assert sum(probabilities) == pytest.approx(1.0)
    assert name_probabilities([("hello", -0.1), (" ", -0.2)], ["weather", "translator"]) is None


def test_by_name_questions_list_names_and_ask_for_a_name() -> None:
    question = ChoiceQuestion("Which team?", Team, by_name=True)
    assert labels_of(question) == ("BILLING", "SUPPORT")
    assert listing(question) == "- BILLING (payments and invoices)\n- SUPPORT (problems using the product)"
    prompt = DecisionModel(decision_model(lambda _: {}), top_logprobs=100).prompt_for("text", question)
    assert "Answer with only the name of one option." in prompt.user_message.text
    assert prompt.options is not None and (prompt.options.extra or {})["top_logprobs"] == 100
    assert ChoiceQuestion("Which?", ["a", "b"]) != ChoiceQuestion("Which?", ["a", "b"], by_name=True)


def test_deciding_by_name_reads_the_names_first_tokens() -> None:
    model = decision_model(lambda text: {"SUP": 0.6, " bill": 0.2, "The": 0.2})
    answer = DecisionModel(model).decide("The app crashes", {"t": ChoiceQuestion("Which team?", Team, by_name=True)})[
        "t"
    ]
    assert answer.value is Team.SUPPORT and answer.probability_of(Team.SUPPORT) == pytest.approx(0.75)
    none = decision_model(lambda text: {"The": 0.9, "A": 0.1})
    with pytest.raises(InvalidDecisionResponseError, match="none of the answer labels"):
        DecisionModel(none).decide("x", {"t": ChoiceQuestion("Which team?", Team, by_name=True)})


@pytest.mark.parametrize("bad", [0, 101, True, "20"])
def test_top_logprobs_is_checked(bad: object) -> None:
    with pytest.raises(ValueError, match="top_logprobs"):
        DecisionModel(decision_model(lambda _: {}), top_logprobs=bad)  # type: ignore[arg-type]
