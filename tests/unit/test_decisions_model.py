"""DecisionModel, questions and answers: probabilities read from top tokens, refusals, bad input."""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import pickle
from enum import Enum

import pytest

from chatclient.decisions import (
    ChoiceAnswer,
    ChoiceQuestion,
    DecisionModel,
    ScaleAnswer,
    ScaleQuestion,
    YesNoAnswer,
    YesNoQuestion,
)
from chatclient.decisions.questions import LABELS, listing
from chatclient.errors import (
    InvalidDecisionQuestionError,
    InvalidDecisionResponseError,
    RefusalError,
    UnsupportedFeatureError,
)
from chatclient.messages import AssistantMessage, Media, SystemMessage, ToolCall, UserMessage
from chatclient.models.base import ChatResponse, Generation, GenerationMetadata
from chatclient.testing import FunctionChatModel, ScriptedChatModel
from tests.support.decisions import LOGPROBS, FixedLogprobModel, decision_model, lp_response


class Team(Enum):
    BILLING = "payments, payouts, invoices"
    SUPPORT = "problems using the product"
    SALES = "pricing and new accounts"


class Level(Enum):
    LOW = "low"
    MID = "mid"
    HIGH = "high"


# -- questions -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: ChoiceQuestion("Which?", ["only"]), "at least two"),
        (lambda: ChoiceQuestion("Which?", []), "at least two"),
        (lambda: ChoiceQuestion("Which?", ["billing", "Billing"]), "twice"),
        (lambda: ChoiceQuestion("Which?", [f"o{i}" for i in range(21)]), "single-token labels"),
        (lambda: ChoiceQuestion("Which?", ["a", 3]), "strings or enum members"),
        (lambda: ChoiceQuestion("Which?", "ab"), "list of strings"),
        (lambda: ChoiceQuestion("  ", ["a", "b"]), "question text"),
        (lambda: ScaleQuestion("How?", ["x"]), "at least two"),
        (lambda: YesNoQuestion(""), "question text"),
        (lambda: YesNoQuestion("Spam?", yes_when=""), "yes_when"),
        (lambda: YesNoQuestion("x" * 5000), "characters long"),
    ],
)
def test_bad_questions_raise_a_typed_error_saying_what_to_change(make, needle):
    with pytest.raises(InvalidDecisionQuestionError, match=needle):
        make()


def test_twenty_options_are_allowed_and_labelled_a_to_t():
    q = ChoiceQuestion("Which?", [f"o{i}" for i in range(20)])
    assert listing(q).splitlines()[-1] == "T: o19"
    assert len(LABELS) == 20


def test_enum_options_are_listed_with_their_descriptions():
    q = ChoiceQuestion("Which team?", Team)
    assert listing(q).splitlines() == [
        "A: BILLING (payments, payouts, invoices)",
        "B: SUPPORT (problems using the product)",
        "C: SALES (pricing and new accounts)",
    ]


def test_an_enum_member_with_a_description_attribute_shows_it():
    class Described(Enum):
        A = 1
        B = 2

        @property
        def description(self) -> str:
            return f"described {self.value}"

    assert listing(ChoiceQuestion("?", Described)).splitlines()[0] == "A: A (described 1)"


# -- reading probabilities -----------------------------------------------------------------------


def test_yes_no_probability_is_renormalised_over_yes_and_no_with_variants_summed():
    model = decision_model(lambda _: {"Yes": 0.5, " yes": 0.1, "no": 0.2, "The": 0.2})
    answer = DecisionModel(model).decide("I won a cruise!", {"spam": YesNoQuestion("Is it spam?")})["spam"]
    assert isinstance(answer, YesNoAnswer)
    assert answer.probability == pytest.approx(0.6 / 0.8)
    assert answer.is_yes() and answer.is_yes(0.7499) and not answer.is_yes(0.7501)


def test_choice_answer_value_probabilities_and_margin():
    model = decision_model(lambda _: {"A": 0.6, "B": 0.25, " c": 0.05, "Hmm": 0.1})
    answer = DecisionModel(model).decide("charged twice", {"team": ChoiceQuestion("Which team?", Team)})["team"]
    assert isinstance(answer, ChoiceAnswer)
    assert answer.value is Team.BILLING
    assert answer.probability_of(Team.SUPPORT) == pytest.approx(0.25 / 0.9)
    assert sum(answer.probabilities.values()) == pytest.approx(1.0)
    assert answer.margin() == pytest.approx((0.6 - 0.25) / 0.9)
    with pytest.raises(InvalidDecisionQuestionError, match="not one of the options"):
        answer.probability_of("marketing")


def test_a_label_missing_from_the_top_tokens_gets_zero():
    model = decision_model(lambda _: {"B": 0.9, "Sure": 0.1})
    answer = DecisionModel(model).decide("x", {"c": ChoiceQuestion("?", ["a", "b", "c"])})["c"]
    assert answer.probabilities == {"a": 0.0, "b": 1.0, "c": 0.0}
    assert answer.margin() == 1.0


def test_scale_mean_and_most_likely_level():
    model = decision_model(lambda _: {"A": 0.1, "B": 0.3, "C": 0.6})
    answer = DecisionModel(model).decide("outage!", {"sev": ScaleQuestion("How severe?", Level)})["sev"]
    assert isinstance(answer, ScaleAnswer)
    assert answer.value is Level.HIGH
    assert answer.mean() == pytest.approx(0.3 + 2 * 0.6)
    assert answer.probability_at_least(Level.MID) == pytest.approx(0.9)
    assert answer.levels == (Level.LOW, Level.MID, Level.HIGH)


def test_no_label_among_the_top_tokens_raises_invalid_decision_response_naming_them():
    model = decision_model(lambda _: {"Sure": 0.7, "Well": 0.3})
    with pytest.raises(InvalidDecisionResponseError, match=r"none of the answer labels.*'Sure'"):
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})


def test_a_response_without_logprobs_raises_invalid_decision_response():
    model = FunctionChatModel(lambda p: "yes", capabilities=LOGPROBS)
    with pytest.raises(InvalidDecisionResponseError, match="no token log-probabilities"):
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})


def test_a_model_without_logprobs_fails_before_any_call():
    model = ScriptedChatModel([])
    with pytest.raises(UnsupportedFeatureError, match="log-probabilities") as info:
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})
    assert info.value.feature == "logprobs"
    assert model.prompts == []


# -- refusals --------------------------------------------------------------------------------------


def _refused(_: str) -> ChatResponse:
    return ChatResponse(
        (Generation(AssistantMessage(None, refusal="I can't help with that."), GenerationMetadata("stop")),)
    )


def test_a_refused_answer_raises_refusal_error_when_read_and_the_others_are_returned():
    def answer(text: str):
        return _refused(text) if "weapon" in text else {"yes": 0.9, "no": 0.1}

    answers = DecisionModel(decision_model(answer)).decide(
        "hello", {"a": YesNoQuestion("About a weapon?"), "b": YesNoQuestion("A greeting?")}
    )
    assert answers["b"].probability == pytest.approx(0.9)
    refused = answers["a"]
    assert refused.is_refused and refused.refusal == "I can't help with that."
    with pytest.raises(RefusalError):
        _ = refused.probability
    with pytest.raises(RefusalError):
        refused.is_yes()


def test_a_refused_choice_raises_on_value_and_margin():
    answer = DecisionModel(decision_model(_refused)).decide("x", {"t": ChoiceQuestion("?", Team)})["t"]
    for read in (lambda: answer.value, lambda: answer.margin(), lambda: answer.probabilities):
        with pytest.raises(RefusalError):
            read()


def test_content_filter_finish_is_a_refusal():
    response = ChatResponse((Generation(AssistantMessage(""), GenerationMetadata("content_filter")),))
    answer = DecisionModel(decision_model(lambda _: response)).decide("x", {"q": YesNoQuestion("?")})["q"]
    assert answer.is_refused


# -- the request -------------------------------------------------------------------------------------


def test_each_question_is_one_single_token_call_with_logprobs():
    model = decision_model(lambda t: {"A": 0.9, "B": 0.1} if "Which" in t else {"yes": 0.8, "no": 0.2})
    DecisionModel(model).decide(
        "ticket text",
        {"team": ChoiceQuestion("Which team?", Team), "urgent": YesNoQuestion("Urgent?", yes_when="outage")},
    )
    assert len(model.prompts) == 2
    for prompt in model.prompts:
        assert prompt.options.max_tokens == 1
        assert prompt.options.extra == {"logprobs": True, "top_logprobs": 20}
        assert isinstance(prompt.messages[0], SystemMessage)
    team, urgent = (p.user_message.text for p in model.prompts)
    assert "ticket text" in team and "A: BILLING (payments, payouts, invoices)" in team and "letter (A, B, C)" in team
    assert "Answer yes when: outage" in urgent and "only yes or no" in urgent


def test_a_mapping_input_is_sent_as_json_with_plain_values():
    model = decision_model(lambda _: {"yes": 1.0})
    DecisionModel(model).decide(
        {"ticket": "late", "plan": "pro", "seats": 3, "tags": ["a"], "x": None}, {"q": YesNoQuestion("?")}
    )
    text = model.prompts[0].user_message.text
    assert json.dumps({"ticket": "late", "plan": "pro", "seats": 3, "tags": ["a"], "x": None}) in text


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"when": datetime.date(2024, 1, 1)}, "input['when']"),
        ({"customer": {"since": object()}}, "input['customer']['since']"),
        ({"items": [1, {1: "a"}]}, "input['items'][1]"),
        ({"score": math.inf}, "input['score']"),
    ],
)
def test_a_mapping_input_that_is_not_plain_data_names_the_field(value, field):
    model = decision_model(lambda _: {"yes": 1.0})
    with pytest.raises(InvalidDecisionQuestionError) as info:
        DecisionModel(model).decide(value, {"q": YesNoQuestion("?")})
    assert field in str(info.value)
    assert model.prompts == []


def test_deep_nesting_is_refused():
    deep: dict = {}
    node = deep
    for _ in range(30):
        node["n"] = {}
        node = node["n"]
    with pytest.raises(InvalidDecisionQuestionError, match="nested more than"):
        DecisionModel(decision_model(lambda _: {"yes": 1.0})).decide(deep, {"q": YesNoQuestion("?")})


def test_messages_input_sends_user_and_assistant_text_only():
    model = decision_model(lambda _: {"no": 1.0})
    DecisionModel(model).decide(
        [
            SystemMessage("secret system"),
            UserMessage("what is the weather", media=[Media("image/png", b"x")]),
            AssistantMessage(None, (ToolCall("1", "weather", "{}"),)),
            AssistantMessage("Sunny."),
        ],
        {"q": YesNoQuestion("?")},
    )
    text = model.prompts[0].user_message.text
    assert "secret system" not in text and text.count('"role"') == 2
    assert '{"role": "user", "text": "what is the weather [attached media]"}' in text
    assert '{"role": "assistant", "text": "Sunny."}' in text


def test_too_long_or_empty_input_and_bad_questions_are_refused_before_a_call():
    model = decision_model(lambda _: {"yes": 1.0})
    dm = DecisionModel(model, max_input_chars=100)
    with pytest.raises(InvalidDecisionQuestionError, match="over the limit of 100"):
        dm.decide("x" * 101, {"q": YesNoQuestion("?")})
    with pytest.raises(InvalidDecisionQuestionError, match="empty"):
        dm.decide("  ", {"q": YesNoQuestion("?")})
    with pytest.raises(InvalidDecisionQuestionError, match="non-empty mapping"):
        dm.decide("x", {})
    with pytest.raises(InvalidDecisionQuestionError, match="YesNoQuestion, ChoiceQuestion"):
        dm.decide("x", {"q": "Is it spam?"})
    with pytest.raises(InvalidDecisionQuestionError, match="a list of messages"):
        dm.decide(42, {"q": YesNoQuestion("?")})
    assert model.prompts == []


def test_question_template_replaces_the_user_message_and_must_use_input_and_question():
    model = decision_model(lambda _: {"yes": 1.0})
    DecisionModel(model, question_template="Q: {{ question }} / I: {{ input }} / {{ instruction }}").decide(
        "hi", {"q": YesNoQuestion("Greeting?")}
    )
    assert model.prompts[0].user_message.text == "Q: Greeting? / I: hi / Answer with only yes or no."
    with pytest.raises(InvalidDecisionQuestionError, match="lacks input"):
        DecisionModel(model, question_template="{{ question }}")


def test_input_is_inserted_as_data_not_rendered():
    model = decision_model(lambda _: {"yes": 1.0})
    DecisionModel(model).decide("{{ 7 * 7 }}", {"q": YesNoQuestion("?")})
    assert "{{ 7 * 7 }}" in model.prompts[0].user_message.text


def test_adecide_answers_like_decide():
    model = decision_model(lambda t: {"yes": 0.3, "no": 0.7} if "spam" in t else {"A": 0.2, "B": 0.8})
    answers = asyncio.run(
        DecisionModel(model).adecide("x", {"spam": YesNoQuestion("Is it spam?"), "t": ChoiceQuestion("Which?", Team)})
    )
    assert list(answers) == ["spam", "t"]
    assert answers["spam"].probability == pytest.approx(0.3)
    assert answers["t"].value is Team.SUPPORT


def test_answers_pickle_and_compare_including_refused_ones():
    yes = YesNoAnswer(0.25)
    choice = ChoiceAnswer(Team.SUPPORT, dict(zip(Team, [0.5, 0.3, 0.2], strict=True)))
    scale = ScaleAnswer(dict(zip(Level, [0.1, 0.2, 0.7], strict=True)))
    refused = YesNoAnswer(0.0, refusal="no")
    for a in (yes, choice, scale, refused):
        assert pickle.loads(pickle.dumps(a)) == a
    assert pickle.loads(pickle.dumps(refused)).is_refused
    with pytest.raises(InvalidDecisionQuestionError):
        YesNoAnswer(1.5)
    with pytest.raises(InvalidDecisionQuestionError):
        yes.is_yes(2)
    assert choice.value is Team.SUPPORT  # as given (a stand-in may choose any option)
    assert scale.value is Level.HIGH and scale.mean() == pytest.approx(1.6)
    with pytest.raises(InvalidDecisionQuestionError, match="not one of the options"):
        ChoiceAnswer("marketing", {"billing": 1.0})


def test_decision_model_pickles_over_a_picklable_chat_model():
    dm = DecisionModel(FixedLogprobModel({"yes": 0.8, "no": 0.2}), max_input_chars=500)
    copy = pickle.loads(pickle.dumps(dm))
    assert copy.max_input_chars == 500
    assert copy.decide("x", {"q": YesNoQuestion("?")})["q"].probability == pytest.approx(0.8)


def test_lp_response_helper_matches_openai_parser_shape():
    # The helper's payload goes through the real OpenAI parser in the integration test; here the
    # unit double must carry the same key the parser fills.
    assert "logprobs" in lp_response({"yes": 1.0}).result.metadata.extra


def test_calibration_divides_out_the_answer_to_a_content_free_input_once_per_question():
    def answer(text: str):
        return {"yes": 0.3, "no": 0.7} if "Input:\nN/A\n" in text else {"yes": 0.45, "no": 0.55}

    model = decision_model(answer)
    dm = DecisionModel(model, calibrate=True)
    p = dm.decide("a message", {"q": YesNoQuestion("Happy?")})["q"].probability
    expected = (0.45 / 0.3) / (0.45 / 0.3 + 0.55 / 0.7)
    assert p == pytest.approx(expected)
    assert DecisionModel(model).decide("a message", {"q": YesNoQuestion("Happy?")})["q"].probability == pytest.approx(
        0.45
    )
    calls = len(model.prompts)
    dm.decide("another message", {"q": YesNoQuestion("Happy?")})
    assert len(model.prompts) == calls + 1  # the baseline of this question is cached
    again = asyncio.run(dm.adecide("a message", {"q": YesNoQuestion("Happy?"), "r": YesNoQuestion("Sad?")}))
    assert again["q"].probability == pytest.approx(expected)
    assert len(model.prompts) == calls + 4  # one new baseline (Sad?) and two answers


def test_calibrated_choice_keeps_a_label_the_model_never_gave_at_zero():
    def answer(text: str):
        return {"A": 0.8, "B": 0.2} if "Input:\nN/A\n" in text else {"A": 0.6, "B": 0.4}

    choice = DecisionModel(decision_model(answer), calibrate=True).decide(
        "x", {"c": ChoiceQuestion("?", ["a", "b", "c"])}
    )["c"]
    assert choice.value == "b"
    assert choice.probabilities["c"] == 0.0
    assert choice.probability_of("b") == pytest.approx((0.4 / 0.2) / (0.4 / 0.2 + 0.6 / 0.8))


# -- hostile log-probabilities ----------------------------------------------------------------------


def _raw_response(first: dict[str, object], tops: list[object]) -> ChatResponse:
    from types import MappingProxyType

    payload = {"content": [{**first, "top_logprobs": tops}]}
    return ChatResponse(
        (Generation(AssistantMessage("x"), GenerationMetadata("length", MappingProxyType({"logprobs": payload}))),)
    )


@pytest.mark.parametrize("bad", [1000, 1e308, 10**400, 0.5], ids=["1000", "1e308", "10**400", "0.5"])
def test_a_log_probability_above_zero_is_a_typed_error(bad: object) -> None:
    entry = {"token": "yes", "logprob": bad}
    model = decision_model(lambda _: _raw_response(entry, [entry, {"token": "no", "logprob": -2.0}]))
    with pytest.raises(InvalidDecisionResponseError, match="above 0"):
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})


def test_rounding_above_zero_nan_and_huge_negative_log_probabilities_are_read_or_skipped() -> None:
    first = {"token": "yes", "logprob": 1e-7}  # a server's rounding of a certain token
    tops = [first, {"token": "no", "logprob": -(10**400)}, {"token": "No", "logprob": math.nan}]
    model = decision_model(lambda _: _raw_response(first, tops))
    answer = DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})["q"]
    assert isinstance(answer, YesNoAnswer) and answer.probability == 1.0


class _CountingList(list):  # type: ignore[type-arg]
    """A top_logprobs list that counts the entries read from it."""

    pulled = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in super().__iter__():
            _CountingList.pulled += 1
            yield item


class _CountingToken(str):
    """A token that counts comparisons with other tokens (a quadratic reader makes n*n of them)."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        _CountingToken.compared += 1
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        _CountingToken.compared += 1
        return str.__ne__(self, other)

    __hash__ = str.__hash__


def test_a_huge_top_logprobs_list_is_read_up_to_the_cap() -> None:
    from chatclient.decisions.model import MAX_TOP_TOKENS_READ

    first = {"token": "maybe", "logprob": -0.1}
    tops = _CountingList({"token": f"t{i}", "logprob": -5.0} for i in range(100_000))
    tops.append({"token": "yes", "logprob": -0.01})  # past the cap: never read
    _CountingList.pulled = 0
    model = decision_model(lambda _: _raw_response(first, tops))
    with pytest.raises(InvalidDecisionResponseError, match="none of the answer labels"):
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})
    assert 0 < _CountingList.pulled <= MAX_TOP_TOKENS_READ


def test_reading_top_tokens_is_linear_in_the_entries() -> None:
    n = 256  # within the cap: every entry is read
    first = {"token": _CountingToken("yes"), "logprob": -0.1}
    tops = [{"token": _CountingToken(f"t{i}"), "logprob": -5.0} for i in range(n - 2)]
    tops += [first, {"token": _CountingToken("no"), "logprob": -3.0}]
    _CountingToken.compared = 0
    model = decision_model(lambda _: _raw_response(first, tops))
    answer = DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})["q"]
    assert isinstance(answer, YesNoAnswer) and answer.probability > 0.9
    assert _CountingToken.compared <= 4 * n  # a pairwise duplicate check makes n * n / 2
