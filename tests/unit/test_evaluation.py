"""Evaluators: the LLM-judged ones with a scripted judge (valid, malformed then re-asked, hopeless)
and the deterministic ones on hand-made cases."""

from __future__ import annotations

import asyncio
import json
from typing import Protocol

import pytest
from pydantic import BaseModel

from advisors.qa import QuestionAnswerAdvisor
from chatclient import ChatClient
from chatclient.errors import EvaluationError
from chatclient.evaluation import (
    AnswerCorrectnessEvaluator,
    ContainsEvaluator,
    EntityFieldsEvaluator,
    EvaluationRequest,
    EvaluationResult,
    ExactMatchEvaluator,
    FactCheckingEvaluator,
    JsonSchemaEvaluator,
    RegexEvaluator,
    RelevancyEvaluator,
    ToolCallEvaluator,
)
from chatclient.messages import AssistantMessage, ToolCall
from chatclient.rag.documents import Document
from chatclient.rag.embedding import HashingEmbeddingModel
from chatclient.rag.stores.simple import SimpleVectorStore
from chatclient.services import Result
from chatclient.testing import ScriptedChatModel
from chatclient.tools import tool


def verdict(passed: bool, score: float, reasoning: str = "because", feedback: str = "") -> str:
    return json.dumps({"reasoning": reasoning, "passed": passed, "score": score, "feedback": feedback})


# -- LLM-judged ------------------------------------------------------------------------------------


def test_relevancy_reads_question_answer_and_documents_from_a_rag_call() -> None:
    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=64))
    store.add([Document("Advisors run in order: lowest order first on the way in.")])
    app = ChatClient.builder(ScriptedChatModel(["Lowest order runs first."])).default_advisors(
        QuestionAnswerAdvisor(store)
    ).build()
    judge = ScriptedChatModel([verdict(True, 0.9, "It answers the ordering question.", "")])

    result = RelevancyEvaluator(judge).evaluate(app.prompt("Which advisor runs first?").call())

    assert result == EvaluationResult(True, 0.9, "It answers the ordering question.", "", "relevancy")
    sent = judge.last_prompt
    assert "Which advisor runs first?" in sent.user_message.text  # the question before RAG rewrote it
    assert sent.user_message.text.split("Context documents:")[0] == "Question:\nWhich advisor runs first?\n\n"
    assert "Lowest order runs first." in sent.user_message.text
    assert "Advisors run in order" in sent.user_message.text  # the retrieved document
    assert "RELEVANCE" in sent.system_message.text
    assert '"passed"' in sent.user_message.text  # the verdict schema was asked for (entity())


@pytest.mark.parametrize("mode", ["call", "acall", "stream"])
def test_a_chat_client_response_alone_carries_the_question_as_asked(mode: str) -> None:
    # Issue 26.10: the client records the question before advisors rewrite it (retrieval context,
    # re-reading, format instructions), so a ChatClientResponse is enough for an evaluator.
    from advisors import ReReadingAdvisor
    from chatclient import ContextKeys

    store = SimpleVectorStore(HashingEmbeddingModel(dimensions=64))
    store.add([Document("Advisors run in order: lowest order first on the way in.")])
    app = (
        ChatClient.builder(ScriptedChatModel([["Lowest order ", "runs first."]]))
        .default_advisors(QuestionAnswerAdvisor(store), ReReadingAdvisor())
        .build()
    )
    spec = app.prompt().user("Which {{ thing }} runs first?", params={"thing": "advisor"})
    if mode == "call":
        response = spec.call().chat_client_response()
    elif mode == "acall":
        response = asyncio.run(spec.acall().chat_client_response())
    else:
        response = list(spec.stream().chat_client_response())[-1]
    assert response.context[ContextKeys.USER_QUESTION] == "Which advisor runs first?"
    judge = ScriptedChatModel([verdict(True, 0.9, "It answers the ordering question.")])
    result = RelevancyEvaluator(judge).evaluate(response)
    assert result.passed
    task = judge.last_prompt.user_message.text
    assert task.startswith("Question:\nWhich advisor runs first?\n\nContext documents:")  # not the rewritten text
    assert "Read the question again" not in task
    assert "Advisors run in order" in task  # the retrieved document, from the same context
    # a keyword still overrides what the response holds
    judge = ScriptedChatModel([verdict(True, 0.9)])
    RelevancyEvaluator(judge).evaluate(response, question="Another question?")
    assert judge.last_prompt.user_message.text.startswith("Question:\nAnother question?")


def test_a_malformed_verdict_is_re_asked_then_accepted() -> None:
    judge = ScriptedChatModel(['{"passed": "maybe"}', verdict(False, 0.2, "It is about cats.", "Talk about dogs.")])
    result = FactCheckingEvaluator(judge).evaluate("Cats bark.", documents=["Dogs bark."])
    assert (result.passed, result.score, result.feedback) == (False, 0.2, "Talk about dogs.")
    assert len(judge.prompts) == 2
    assert "rejected" in judge.prompts[1].user_message.text  # the validation advisor said what was wrong


def test_a_judge_that_never_answers_in_shape_raises_a_clear_error() -> None:
    judge = ScriptedChatModel(["YES", "yes!", "Yes."])
    with pytest.raises(EvaluationError) as info:
        AnswerCorrectnessEvaluator(judge, max_retries=2).evaluate("Paris", reference="Paris", question="Capital?")
    assert "answer_correctness" in str(info.value) and "3 attempt(s)" in str(info.value)
    assert len(judge.prompts) == 3


def test_an_out_of_range_score_is_rejected_and_re_asked() -> None:
    judge = ScriptedChatModel([verdict(True, 7.0), verdict(True, 0.7)])
    assert AnswerCorrectnessEvaluator(judge).evaluate("4", reference="four").score == 0.7
    assert len(judge.prompts) == 2


def test_threshold_decides_pass_from_the_score_and_a_chat_client_judge_works() -> None:
    judge = ChatClient.create(ScriptedChatModel([verdict(True, 0.4)]))
    result = AnswerCorrectnessEvaluator(judge, threshold=0.5).evaluate("Berlin", reference="Paris")
    assert not result.passed and result.score == 0.4


def test_async_evaluate() -> None:
    judge = ScriptedChatModel([verdict(True, 1.0)])
    result = asyncio.run(RelevancyEvaluator(judge).aevaluate("Hi", question="Say hi"))
    assert result.passed


def test_missing_inputs_are_named() -> None:
    judge = ScriptedChatModel([])
    with pytest.raises(EvaluationError, match="needs the question"):
        RelevancyEvaluator(judge).evaluate("an answer")
    with pytest.raises(EvaluationError, match="documents"):
        FactCheckingEvaluator(judge).evaluate("a claim")
    with pytest.raises(EvaluationError, match="reference"):
        AnswerCorrectnessEvaluator(judge).evaluate("an answer")
    assert judge.prompts == []  # nothing was sent
    with pytest.raises(TypeError, match="EvaluationRequest"):
        RelevancyEvaluator(judge).evaluate(42)


def test_result_bounds() -> None:
    with pytest.raises(ValueError):
        EvaluationResult(True, 1.5, "x")
    with pytest.raises(TypeError):
        EvaluationResult(True, True, "x")  # type: ignore[arg-type]


# -- deterministic ---------------------------------------------------------------------------------


def test_exact_and_contains() -> None:
    assert ExactMatchEvaluator().evaluate("  Paris ", reference="paris").passed
    assert not ExactMatchEvaluator("Paris", case_sensitive=True).evaluate("paris").passed
    r = ContainsEvaluator(["advisor", "order", "chain"]).evaluate("An advisor has an order.")
    assert (r.passed, round(r.score, 2)) == (False, 0.67) and "chain" in r.reasoning
    assert ContainsEvaluator(["x", "order"], any_of=True).evaluate("order").passed


def test_regex_search_full_and_refusals() -> None:
    assert RegexEvaluator(r"\b\d{4}\b").evaluate("born in 1815, died 1852").passed
    assert not RegexEvaluator(r"\d+", full=True).evaluate("12 apples").passed
    assert RegexEvaluator(r"\d+ apples", full=True).evaluate(" 12 APPLES ").passed  # case-insensitive by default
    with pytest.raises(ValueError, match="linear time"):
        RegexEvaluator(r"(a)\1")
    with pytest.raises(ValueError, match="not a valid"):
        RegexEvaluator(r"(unclosed")


class Person(BaseModel):
    name: str
    born: int


def test_json_schema_and_entity_fields() -> None:
    schema = JsonSchemaEvaluator(Person)
    assert schema.evaluate('```json\n{"name": "Ada", "born": 1815}\n```').passed
    bad = schema.evaluate('{"name": "Ada", "born": "long ago"}')
    assert not bad.passed and "born" in bad.reasoning and 0 < bad.score < 1
    assert not schema.evaluate("no json here").passed

    fields = EntityFieldsEvaluator({"name": "Ada", "born": 1815})
    assert fields.evaluate('{"name": "Ada", "born": 1815, "extra": 1}').passed
    wrong = fields.evaluate('{"name": "Ada", "born": 1816}')
    assert (wrong.passed, wrong.score) == (False, 0.5) and "born is 1816, expected 1815" in wrong.reasoning
    typed = EntityFieldsEvaluator({"name": "Ada"}).evaluate(EvaluationRequest(entity=Person(name="Ada", born=1)))
    assert typed.passed


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def test_tool_call_expectations() -> None:
    model = ScriptedChatModel(
        [AssistantMessage(None, (ToolCall("c1", "get_weather", '{"city": "Oslo"}'),)), "It is sunny."]
    )
    response = ChatClient.create(model).prompt("Weather in Oslo?").tools(get_weather).call().chat_client_response()
    assert ToolCallEvaluator(["get_weather"], arguments={"get_weather": {"city": "Oslo"}}).evaluate(response).passed
    wrong = ToolCallEvaluator(["get_weather"], arguments={"get_weather": {"city": "Rome"}}).evaluate(response)
    assert not wrong.passed and "Rome" in wrong.reasoning and "Oslo" in wrong.reasoning
    assert not ToolCallEvaluator(forbidden=["get_weather"]).evaluate(response).passed
    assert not ToolCallEvaluator(["search"]).evaluate(response).passed


class Extractor(Protocol):
    def person(self, text: str) -> Person:
        """Extract the person from: {{ text }}"""

    def person_with_details(self, text: str) -> Result[Person]:
        """Extract the person from: {{ text }}"""


def test_an_ai_service_result_and_a_typed_value_are_evaluated() -> None:
    from chatclient.evaluation import run_evaluation
    from chatclient.services import ai_service

    model = ScriptedChatModel(['{"name": "Ada", "born": 1815}', '{"name": "Ada", "born": 1816}'])
    service = ai_service(Extractor, client=ChatClient.create(model))
    check = EntityFieldsEvaluator({"name": "Ada", "born": 1815})

    report = run_evaluation(service.person, [{"id": "a", "input": "Ada, born 1815"}], [check])
    assert report.passed == 1 and report.cases[0].answer == '{"name": "Ada", "born": 1815}'

    result = service.person_with_details("Ada, born 1815")
    judged = check.evaluate(result)
    assert not judged.passed and "born is 1816" in judged.reasoning  # the typed value was compared
