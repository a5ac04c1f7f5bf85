"""decision_service: typed decision methods, build-time validation, arguments as a named mapping."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Annotated, Protocol

import pytest
from pydantic import BaseModel, Field

from chatclient.decisions import ChoiceAnswer, DecisionModel, ScaleAnswer, YesNoAnswer, decide, decision_service
from chatclient.errors import AiServiceDefinitionError, InvalidDecisionQuestionError, RefusalError
from chatclient.messages import AssistantMessage
from chatclient.models.base import ChatResponse, Generation, GenerationMetadata
from tests.support.decisions import decision_model


class Team(Enum):
    BILLING = "payments, payouts, invoices"
    SUPPORT = "problems using the product"


class Severity(Enum):
    LOW = "cosmetic"
    HIGH = "broken"
    CRITICAL = "outage"


class Triage(BaseModel):
    team: Annotated[Team, decide("Which team should handle this ticket?")]
    urgent: bool = Field(json_schema_extra=decide("Does this need attention today?"))
    refund: Annotated[YesNoAnswer, decide("Does the customer ask for money back?")]


class Desk(Protocol):
    @decide("Is this message spam?")
    def is_spam(self, message: str) -> bool: ...

    @decide("Is this message spam?")
    def spam_probability(self, message: str) -> YesNoAnswer: ...

    @decide("Which team should handle this ticket?")
    def route(self, ticket: str, plan: str | None = None) -> Team: ...

    @decide("Which team should handle this ticket?")
    def route_with_probabilities(self, ticket: str) -> ChoiceAnswer[Team]: ...

    @decide("How severe is this incident?")
    def severity(self, incident: str) -> ScaleAnswer[Severity]: ...

    def triage(self, ticket: str) -> Triage: ...

    @decide("Is this message spam?")
    async def ais_spam(self, message: str) -> bool: ...


def answers(text: str) -> dict[str, float]:
    if "spam" in text:
        return {"yes": 0.7, "no": 0.3}
    if "team" in text:
        return {"A": 0.8, "B": 0.2}
    if "severe" in text:
        return {"A": 0.1, "B": 0.5, "C": 0.4}
    if "money back" in text:
        return {"yes": 0.9, "no": 0.1}
    return {"yes": 0.2, "no": 0.8}


def make(threshold: float = 0.5):
    model = decision_model(answers)
    return decision_service(Desk, model=model, threshold=threshold), model


def test_bool_uses_the_threshold():
    desk, _ = make()
    assert desk.is_spam("You won a cruise!") is True
    strict, _ = make(threshold=0.8)
    assert strict.is_spam("You won a cruise!") is False


def test_yes_no_answer_enum_choice_and_scale_returns():
    desk, _ = make()
    assert desk.spam_probability("x").probability == pytest.approx(0.7)
    assert desk.route("charged twice") is Team.BILLING
    choice = desk.route_with_probabilities("charged twice")
    assert choice.value is Team.BILLING and choice.probability_of(Team.SUPPORT) == pytest.approx(0.2)
    scale = desk.severity("the site is down")
    assert scale.value is Severity.HIGH and scale.mean() == pytest.approx(0.5 + 0.8)


def test_a_pydantic_result_asks_one_question_per_field():
    desk, model = make()
    triage = desk.triage("I was charged twice and payroll runs today")
    assert triage.team is Team.BILLING and triage.urgent is False and triage.refund.probability == pytest.approx(0.9)
    assert len(model.prompts) == 3


def test_arguments_are_sent_as_a_named_mapping_without_nones():
    desk, model = make()
    desk.route("charged twice")
    desk.route("charged twice", plan="enterprise")
    first, second = (p.user_message.text for p in model.prompts)
    assert json.dumps({"ticket": "charged twice"}) in first
    assert json.dumps({"ticket": "charged twice", "plan": "enterprise"}) in second


def test_all_arguments_none_is_refused():
    desk, model = make()
    with pytest.raises(InvalidDecisionQuestionError, match="every argument is None"):
        desk.route(None)
    assert model.prompts == []


def test_a_non_plain_argument_names_the_parameter():
    desk, _ = make()
    with pytest.raises(InvalidDecisionQuestionError, match=r"input\['ticket'\]"):
        desk.route(object())


def test_async_methods_use_adecide():
    desk, model = make()
    assert asyncio.run(desk.ais_spam("win big")) is True
    assert len(model.prompts) == 1


def test_a_refused_bool_raises_refusal_error():
    refused = ChatResponse((Generation(AssistantMessage(None, refusal="no"), GenerationMetadata("stop")),))
    desk = decision_service(Desk, model=decision_model(lambda _: refused))
    with pytest.raises(RefusalError):
        desk.is_spam("x")


def test_accepts_a_decision_model():
    dm = DecisionModel(decision_model(answers))
    desk = decision_service(Desk, model=dm)
    assert desk.decision_model is dm and desk.is_spam("x")


# -- build-time validation ---------------------------------------------------------------------------


class NoQuestion(Protocol):
    def is_spam(self, message: str) -> bool: ...


class BadReturn(Protocol):
    @decide("Which?")
    def pick(self, text: str) -> str: ...


class BareChoice(Protocol):
    @decide("Which?")
    def pick(self, text: str) -> ChoiceAnswer: ...  # type: ignore[type-arg]


class NonEnumChoice(Protocol):
    @decide("Which?")
    def pick(self, text: str) -> ChoiceAnswer[str]: ...


class NoParams(Protocol):
    @decide("Spam?")
    def check(self) -> bool: ...


class VarArgs(Protocol):
    @decide("Spam?")
    def check(self, *texts: str) -> bool: ...


class Unmarked(BaseModel):
    team: Team


class FieldWithoutQuestion(Protocol):
    def triage(self, ticket: str) -> Unmarked: ...


class MarkedModelMethod(Protocol):
    @decide("Triage it")
    def triage(self, ticket: str) -> Triage: ...


class OneOption(Enum):
    ONLY = "only"


class OneOptionEnum(Protocol):
    @decide("Which?")
    def pick(self, text: str) -> OneOption: ...


class NotAProtocol:
    @decide("Spam?")
    def check(self, text: str) -> bool: ...


@pytest.mark.parametrize(
    ("iface", "needle"),
    [
        (NoQuestion, "@decide"),
        (BadReturn, "declared as str"),
        (BareChoice, r"ChoiceAnswer\[MyEnum\]"),
        (NonEnumChoice, r"ChoiceAnswer\[MyEnum\]"),
        (NoParams, "no parameters"),
        (VarArgs, r"\*args"),
        (FieldWithoutQuestion, "field 'team' of Unmarked has no question"),
        (MarkedModelMethod, "on its fields"),
        (OneOptionEnum, "at least two"),
        (NotAProtocol, "neither a typing.Protocol"),
    ],
)
def test_bad_declarations_fail_when_the_service_is_built(iface, needle):
    model = decision_model(answers)
    with pytest.raises(AiServiceDefinitionError, match=needle):
        decision_service(iface, model=model)
    assert model.prompts == []


def test_threshold_is_checked():
    with pytest.raises(InvalidDecisionQuestionError, match="between 0 and 1"):
        decision_service(Desk, model=decision_model(answers), threshold=1.5)


def test_decide_needs_question_text():
    with pytest.raises(TypeError, match="question text"):
        decide("  ")
