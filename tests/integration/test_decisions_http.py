"""DecisionModel over real HTTP: an OpenAI-compatible loopback server answering with real ``logprobs`` payloads."""

from __future__ import annotations

import asyncio
import math
from enum import Enum
from typing import Any, Protocol

import pytest

from chatclient.decisions import (
    ChoiceQuestion,
    DecisionInputGuardrail,
    DecisionModel,
    ScaleQuestion,
    YesNoQuestion,
    decide,
    decision_service,
)
from chatclient.errors import InvalidDecisionResponseError, RefusalError, UnsupportedFeatureError
from chatclient.models.base import ModelCapabilities
from chatclient.models.openai import OpenAIChatModel
from chatclient.usage_meter import metering
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Recorded, Reply, openai_completion

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"


class Team(Enum):
    BILLING = "payments, payouts, invoices"
    SUPPORT = "problems using the product"
    SALES = "pricing and new accounts"


def completion(top: dict[str, float], *, refusal: str | None = None) -> dict[str, Any]:
    """A chat.completion whose one token came with these top-token probabilities (OpenAI's shape)."""
    payload = openai_completion(
        None if refusal else max(top, key=top.__getitem__), finish_reason="length", usage=(40, 1)
    )
    choice = payload["choices"][0]
    if refusal is not None:
        choice["message"]["refusal"] = refusal
        choice["finish_reason"] = "stop"
        choice["logprobs"] = {
            "content": None,
            "refusal": [{"token": "I", "logprob": -0.01, "bytes": [73], "top_logprobs": []}],
        }
        return payload
    tops = [
        {"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
        for t, p in sorted(top.items(), key=lambda kv: -kv[1])
    ]
    choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}], "refusal": None}
    return payload


def question_of(rec: Recorded) -> str:
    return str(rec.body["messages"][-1]["content"])


def make_model(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-test", base_url=srv.url + "/v1", api_key="sk-test", backoff_base=0.001, timeout=10.0, **kw
    )


def test_request_asks_for_one_token_with_top_logprobs_and_probabilities_are_renormalised(server):
    server.script(PATH, Reply(json=completion({"Yes": 0.55, " yes": 0.05, "No": 0.3, "Maybe": 0.1})))
    answer = DecisionModel(make_model(server)).decide("I won a cruise!", {"spam": YesNoQuestion("Is it spam?")})["spam"]
    body = server.requests_to(PATH)[0].body
    assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert body["temperature"] == 0.0
    assert "I won a cruise!" in body["messages"][-1]["content"]
    assert answer.probability == pytest.approx(0.6 / 0.9)
    assert answer.is_yes(0.66) and not answer.is_yes(0.67)


def test_choice_and_scale_over_http(server):
    def respond(rec: Recorded) -> Reply:
        text = question_of(rec)
        if "Which team" in text:
            return Reply(json=completion({"A": 0.5, "B": 0.4, "C": 0.05, "The": 0.05}))
        return Reply(json=completion({"A": 0.2, "B": 0.2, "C": 0.6}))

    server.set_default(PATH, respond)
    answers = DecisionModel(make_model(server)).decide(
        {"ticket": "charged twice", "plan": "pro"},
        {
            "team": ChoiceQuestion("Which team should handle it?", Team),
            "sev": ScaleQuestion("How bad?", ["low", "mid", "high"]),
        },
    )
    team, sev = answers["team"], answers["sev"]
    assert team.value is Team.BILLING
    assert team.margin() == pytest.approx(0.1 / 0.95)
    assert sev.value == "high" and sev.mean() == pytest.approx(0.2 + 1.2)
    assert len(server.requests_to(PATH)) == 2


def test_refusal_is_returned_and_raises_when_read(server):
    def respond(rec: Recorded) -> Reply:
        if "weapon" in question_of(rec):
            return Reply(json=completion({}, refusal="I can't help with that."))
        return Reply(json=completion({"no": 0.8, "yes": 0.2}))

    server.set_default(PATH, respond)
    answers = DecisionModel(make_model(server)).decide(
        "hello", {"a": YesNoQuestion("Is it about a weapon?"), "b": YesNoQuestion("Is it rude?")}
    )
    assert answers["b"].probability == pytest.approx(0.2)
    assert answers["a"].is_refused
    with pytest.raises(RefusalError, match="can't help"):
        answers["a"].is_yes()


def test_top_logprobs_without_any_label_raise_invalid_decision_response(server):
    server.script(PATH, Reply(json=completion({"Sure": 0.6, "I": 0.4})))
    with pytest.raises(InvalidDecisionResponseError, match="none of the answer labels"):
        DecisionModel(make_model(server)).decide("x", {"q": ChoiceQuestion("Which?", ["a", "b"])})


def test_a_server_that_ignores_logprobs_raises_invalid_decision_response(server):
    server.script(PATH, Reply(json=openai_completion("yes")))
    with pytest.raises(InvalidDecisionResponseError, match="no token log-probabilities"):
        DecisionModel(make_model(server)).decide("x", {"q": YesNoQuestion("?")})


def test_a_model_declared_without_logprobs_never_sends_a_request(server):
    model = make_model(server, capabilities=ModelCapabilities(logprobs=False))
    with pytest.raises(UnsupportedFeatureError):
        DecisionModel(model).decide("x", {"q": YesNoQuestion("?")})
    assert server.requests_to(PATH) == []


def test_retries_and_usage_meters_apply_because_the_call_goes_through_the_model(server):
    server.script(
        PATH,
        Reply(429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0"}),
        Reply(json=completion({"yes": 0.9, "no": 0.1})),
    )
    seen: list[int] = []

    class Meter:
        def before_call(self, prompt: Any, model: Any) -> None:
            pass

        def after_call(self, response: Any, model: Any) -> None:
            seen.append(response.metadata.usage.total_tokens)

    with metering(Meter()):
        answer = DecisionModel(make_model(server)).decide("x", {"q": YesNoQuestion("?")})["q"]
    assert answer.probability == pytest.approx(0.9)
    assert len(server.requests_to(PATH)) == 2
    assert seen == [41]


def test_adecide_over_http(server):
    server.set_default(PATH, lambda rec: Reply(json=completion({"yes": 0.3, "no": 0.7})))
    answers = asyncio.run(
        DecisionModel(make_model(server)).adecide("x", {f"q{i}": YesNoQuestion(f"Question {i}?") for i in range(5)})
    )
    assert [round(a.probability, 3) for a in answers.values()] == [0.3] * 5
    assert len(server.requests_to(PATH)) == 5


class Moderation(Protocol):
    @decide("Is this message spam?")
    def is_spam(self, message: str) -> bool: ...


def test_decision_service_and_guardrail_over_http(server):
    server.set_default(PATH, lambda rec: Reply(json=completion({"yes": 0.8, "no": 0.2})))
    model = make_model(server)
    assert decision_service(Moderation, model=model).is_spam("cheap pills") is True
    assert '"message": "cheap pills"' in question_of(server.requests_to(PATH)[0])
    guard = DecisionInputGuardrail(model, "Is the message off topic?", threshold=0.9)
    from chatclient.guardrails import input_request
    from chatclient.messages import UserMessage
    from chatclient.prompt import Prompt
    from chatclient.request import ChatClientRequest

    assert guard.validate(input_request("hi", ChatClientRequest(Prompt([UserMessage("hi")]), {}))).is_success
