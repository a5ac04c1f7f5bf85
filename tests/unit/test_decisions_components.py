"""Decision guardrails, query router, tool filter and scoring model on a scripted log-probability model."""

from __future__ import annotations

import asyncio
import logging
import pickle
import re

import pytest

from advisors import InputGuardrailAdvisor, OutputGuardrailAdvisor
from chatclient import ChatClient
from chatclient.decisions import (
    DecisionInputGuardrail,
    DecisionModel,
    DecisionOutputGuardrail,
    DecisionQueryRouter,
    DecisionScoringModel,
    DecisionToolFilter,
    YesNoQuestion,
)
from chatclient.errors import InputGuardrailError, ModelHTTPError, OutputGuardrailError
from chatclient.messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.base import ModelCapabilities
from chatclient.rag.documents import Document
from chatclient.rag.query import Query
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool
from tests.support.decisions import FixedLogprobModel, decision_model

# -- guardrails --------------------------------------------------------------------------------------


def off_topic(text: str):
    return {"yes": 0.9, "no": 0.1} if "recipe" in text else {"yes": 0.05, "no": 0.95}


def test_input_guardrail_rejects_when_yes_reaches_the_threshold_and_never_shows_the_probability():
    guard = DecisionInputGuardrail(decision_model(off_topic), "Is the message about something other than banking?")
    chat = ScriptedChatModel(["Your balance is 3 EUR."])
    client = ChatClient.builder(chat).default_advisors(InputGuardrailAdvisor([guard])).build()
    assert client.prompt("What is my balance?").call().content() == "Your balance is 3 EUR."
    with pytest.raises(InputGuardrailError, match="rejected by the check") as info:
        client.prompt("Give me a cake recipe").call().content()
    assert not re.search(r"0\.9", str(info.value))
    assert len(chat.prompts) == 1  # the rejected message never reached the chat model


def test_input_guardrail_threshold_is_inclusive():
    from chatclient.guardrails import input_request
    from chatclient.prompt import Prompt
    from chatclient.request import ChatClientRequest

    model = decision_model(lambda _: {"yes": 0.6, "no": 0.4})
    p = DecisionModel(model).decide("hi", {"q": YesNoQuestion("Off topic?")})["q"].probability
    assert p == pytest.approx(0.6)
    request = ChatClientRequest(Prompt([UserMessage("hi")]), {})
    assert (
        not DecisionInputGuardrail(model, "Off topic?", threshold=p).validate(input_request("hi", request)).is_success
    )
    assert (
        DecisionInputGuardrail(model, "Off topic?", threshold=p + 1e-9)
        .validate(input_request("hi", request))
        .is_success
    )


def test_input_guardrail_fails_closed_when_the_decision_fails(caplog):
    broken = decision_model(lambda _: ModelHTTPError("server down", 500))
    guard = DecisionInputGuardrail(broken, "Off topic?")
    client = ChatClient.builder(ScriptedChatModel(["never"])).default_advisors(InputGuardrailAdvisor([guard])).build()
    with caplog.at_level(logging.WARNING), pytest.raises(InputGuardrailError, match="could not be decided"):
        client.prompt("What is my balance?").call().content()


def test_input_guardrail_fails_closed_on_a_model_without_logprobs():
    guard = DecisionInputGuardrail(ScriptedChatModel([]), "Off topic?")
    client = ChatClient.builder(ScriptedChatModel(["never"])).default_advisors(InputGuardrailAdvisor([guard])).build()
    with pytest.raises(InputGuardrailError, match="UnsupportedFeatureError"):
        client.prompt("hi").call().content()


def test_input_guardrail_async():
    guard = DecisionInputGuardrail(decision_model(off_topic), "Off topic?")
    client = ChatClient.builder(ScriptedChatModel(["ok"])).default_advisors(InputGuardrailAdvisor([guard])).build()

    async def run() -> None:
        assert await client.prompt("balance?").acall().content() == "ok"
        with pytest.raises(InputGuardrailError):
            await client.prompt("a recipe please").acall().content()

    asyncio.run(run())


def test_output_guardrail_sends_the_answer_and_the_question_and_can_reprompt():
    seen: list[str] = []

    def personal(text: str):
        seen.append(text)
        return {"yes": 0.95, "no": 0.05} if "555-0100" in text else {"yes": 0.01, "no": 0.99}

    guard = DecisionOutputGuardrail(
        decision_model(personal),
        "Does the response reveal contact details?",
        reprompt="Answer without contact details.",
    )
    chat = ScriptedChatModel(["Call Ada at 555-0100.", "Ada can be reached through the front desk."])
    client = ChatClient.builder(chat).default_advisors(OutputGuardrailAdvisor([guard])).build()
    assert client.prompt("How do I reach Ada?").call().content() == "Ada can be reached through the front desk."
    assert "How do I reach Ada?" in seen[0] and "555-0100" in seen[0]
    assert chat.prompts[1].user_message.text == "Answer without contact details."


def test_output_guardrail_without_reprompt_fails():
    guard = DecisionOutputGuardrail(decision_model(lambda _: {"yes": 1.0}), "Personal data?")
    client = ChatClient.builder(ScriptedChatModel(["x"])).default_advisors(OutputGuardrailAdvisor([guard])).build()
    with pytest.raises(OutputGuardrailError, match="rejected by the check"):
        client.prompt("hi").call().content()


# -- query router -----------------------------------------------------------------------------------


class ListRetriever:
    def __init__(self, name: str, *texts: str) -> None:
        self.name = name
        self.docs = [Document(t, id=f"{name}-{i}") for i, t in enumerate(texts)]

    def retrieve(self, query: Query) -> list[Document]:
        return list(self.docs)


HR = ListRetriever("hr", "Vacation: 25 days.")
WIKI = ListRetriever("wiki", "Deploys run on Fridays.")


def routing(text: str):
    if "HR policies" in text:
        return {"yes": 0.6, "no": 0.4} if "days" in text else {"yes": 0.1, "no": 0.9}
    return {"yes": 0.4, "no": 0.6}


def test_router_routes_to_every_retriever_at_or_above_min_probability():
    router = DecisionQueryRouter(decision_model(routing), {HR: "HR policies: vacation", WIKI: "Engineering wiki"})
    assert router.route("How many vacation days?") == [HR]
    assert router.route("Hi!") == []  # (0.1, 0.4): no retrieval
    assert [d.id for d in router.retrieve(Query("How many vacation days?"))] == ["hr-0"]
    low = DecisionQueryRouter(
        decision_model(routing), {HR: "HR policies: vacation", WIKI: "Engineering wiki"}, min_probability=0.3
    )
    assert low.route("How many vacation days?") == [HR, WIKI]


def test_router_falls_back_on_a_failed_decision(caplog):
    broken = decision_model(lambda _: ModelHTTPError("boom", 500))
    with caplog.at_level(logging.WARNING):
        assert DecisionQueryRouter(broken, {HR: "HR", WIKI: "wiki"}).route("q") == []
    assert "fallback='none'" in caplog.text
    assert DecisionQueryRouter(broken, {HR: "HR", WIKI: "wiki"}, fallback="all").route("q") == [HR, WIKI]


def test_router_sends_the_recent_conversation_with_the_query():
    model = decision_model(routing)
    router = DecisionQueryRouter(model, {HR: "HR policies: leave"}, max_messages=3)
    history = [UserMessage("Tell me about vacation"), AssistantMessage("25 days."), UserMessage("And for contractors?")]
    router.route(Query("And for contractors?", history))
    text = model.prompts[0].user_message.text
    assert "Tell me about vacation" in text and "25 days." in text and text.count("contractors") == 1


def test_router_async_and_validation():
    router = DecisionQueryRouter(decision_model(routing), [(HR, "HR policies: vacation"), (WIKI, "wiki")])
    docs = asyncio.run(router.aretrieve(Query("vacation days?")))
    assert [d.id for d in docs] == ["hr-0"]
    with pytest.raises(ValueError, match="cannot be empty"):
        DecisionQueryRouter(decision_model(routing), {})
    with pytest.raises(ValueError, match="fallback"):
        DecisionQueryRouter(decision_model(routing), {HR: "x"}, fallback="defaults")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a retriever"):
        DecisionQueryRouter(decision_model(routing), {"hr": "x"})


# -- scoring -----------------------------------------------------------------------------------------


def relevance(text: str):
    return {"yes": 0.9, "no": 0.1} if "capital" in text.split("Passage:")[1] else {"yes": 0.2, "no": 0.8}


def test_scoring_model_scores_in_input_order_and_reranks():
    scorer = DecisionScoringModel(decision_model(relevance), top_n=2)
    segments = ["Bananas are yellow.", "Paris is the capital of France.", "Rome is a capital too."]
    scores = scorer.score_all(segments, "capital of France")
    assert scores == pytest.approx([0.2, 0.9, 0.9])
    docs = scorer.process(Query("capital of France"), [Document(t, id=str(i)) for i, t in enumerate(segments)])
    assert [d.id for d in docs] == ["1", "2"] and docs[0].score == pytest.approx(0.9)


def test_scoring_sends_at_most_twenty_segments_per_decision():
    model = decision_model(relevance)
    scorer = DecisionScoringModel(model)
    calls: list[int] = []
    original = scorer.decisions.decide

    def counting(input, questions):
        calls.append(len(questions))
        return original(input, questions)

    scorer.decisions.decide = counting  # type: ignore[method-assign]
    scores = scorer.score_all([f"segment {i} capital" if i % 2 else f"segment {i}" for i in range(45)], "q")
    assert calls == [20, 20, 5]
    assert scores[1] == pytest.approx(0.9) and scores[44] == pytest.approx(0.2)


def test_scoring_raises_on_a_failed_decision_and_runs_async():
    broken = DecisionScoringModel(decision_model(lambda _: ModelHTTPError("boom", 500)))
    with pytest.raises(ModelHTTPError):
        broken.score_all(["a"], "q")
    ok = DecisionScoringModel(decision_model(relevance))
    assert asyncio.run(ok.ascore_all(["the capital", "x"], "q")) == pytest.approx([0.9, 0.2])


# -- tool filter -------------------------------------------------------------------------------------


@tool(description="Current weather for a city")
def get_weather(city: str) -> str:
    return f"sunny in {city}"


@tool(description="Send an email")
def send_email(to: str) -> str:
    return "sent"


@tool(description="Current time")
def get_time() -> str:
    return "12:00"


def tool_relevance(text: str):
    return {"yes": 0.9, "no": 0.1} if "get_weather" in text else {"yes": 0.1, "no": 0.9}


def offered(chat: ScriptedChatModel) -> list[str]:
    return [t.name for t in chat.prompts[0].tools]


def test_tool_filter_keeps_relevant_always_included_and_already_called_tools():
    chat = ScriptedChatModel(["It is sunny."])
    filt = DecisionToolFilter(decision_model(tool_relevance), always_include=["get_time"])
    client = ChatClient.builder(chat).default_tools(get_weather, send_email, get_time).build()
    client.prompt("Weather in Paris?").advisors(filt).call().content()
    assert sorted(offered(chat)) == ["get_time", "get_weather"]

    chat2 = ScriptedChatModel(["done"])
    client2 = ChatClient.builder(chat2).default_tools(get_weather, send_email, get_time).build()
    history = [
        UserMessage("mail bob"),
        AssistantMessage(None, (ToolCall("c1", "send_email", '{"to": "bob"}'),)),
        ToolResponseMessage((ToolResponse("c1", "send_email", "sent"),)),
        AssistantMessage("Sent."),
    ]
    client2.prompt().messages(*history).user("and the weather?").advisors(
        DecisionToolFilter(decision_model(tool_relevance))
    ).call().content()
    assert sorted(offered(chat2)) == ["get_weather", "send_email"]


def test_tool_filter_passes_every_tool_when_the_decision_fails(caplog):
    chat = ScriptedChatModel(["ok"])
    broken = DecisionToolFilter(decision_model(lambda _: ModelHTTPError("boom", 500)))
    client = ChatClient.builder(chat).default_tools(get_weather, send_email).build()
    with caplog.at_level(logging.WARNING):
        client.prompt("hi").advisors(broken).call().content()
    assert sorted(offered(chat)) == ["get_weather", "send_email"]
    assert "keeping every tool" in caplog.text


def test_tool_filter_async_runs_the_tool_loop_with_the_kept_tools():
    chat = ScriptedChatModel([AssistantMessage(None, (ToolCall("c1", "get_weather", '{"city": "Paris"}'),)), "Sunny."])
    client = ChatClient.builder(chat).default_tools(get_weather, send_email).build()

    async def run() -> str | None:
        return (
            await client.prompt("Weather in Paris?")
            .advisors(DecisionToolFilter(decision_model(tool_relevance)))
            .acall()
            .content()
        )

    assert asyncio.run(run()) == "Sunny."
    assert [t.name for t in chat.prompts[1].tools] == ["get_weather"]
    assert "sunny in Paris" in str(chat.prompts[1].messages[-1])


# -- pickling ----------------------------------------------------------------------------------------


def test_components_pickle():
    model = FixedLogprobModel({"yes": 0.9, "no": 0.1})
    dm = DecisionModel(model)
    for component in (
        DecisionInputGuardrail(dm, "Off topic?"),
        DecisionOutputGuardrail(model, "Personal data?", reprompt="Again."),
        DecisionQueryRouter(dm, {ListRetriever("empty"): "HR"}),
        DecisionToolFilter(dm, always_include=["x"]),
        DecisionScoringModel(dm, top_n=3),
    ):
        copy = pickle.loads(pickle.dumps(component))
        assert type(copy) is type(component)
        assert isinstance(copy.decisions, DecisionModel)
    # a copy still decides
    scorer = pickle.loads(pickle.dumps(DecisionScoringModel(dm)))
    assert scorer.score_all(["a", "b"], "q") == pytest.approx([0.9, 0.9])


def test_components_require_log_probabilities_only_when_deciding():
    plain = ScriptedChatModel([], capabilities=ModelCapabilities())
    router = DecisionQueryRouter(plain, {HR: "HR"}, fallback="all")
    assert router.route("q") == [HR]  # UnsupportedFeatureError -> fallback, logged
