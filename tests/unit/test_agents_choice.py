"""The embedded model chooses by probability where it must choose (issue 41.4): the supervisor's next
agent and a routed conditional's branch are DecisionModel choices over the candidates' names on a
model that reports log-probabilities (one single-token call, no free text), typed answers otherwise."""

from __future__ import annotations

import asyncio
import json
import re
from types import MappingProxyType

import pytest

from chatclient import ChatClient
from chatclient.agents import agent_function, conditional, human_input, sequence, supervisor
from chatclient.agents.choice import Candidate, Chooser, decides_by_probability
from chatclient.errors import AgentInputError, OutputConversionError
from chatclient.messages import AssistantMessage
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel, ScriptedChatModel
from tests.support.decisions import LOGPROBS, lp_response


@agent_function(output_key="forecast", description="Tells the weather forecast for a city.")
def weather(request: str) -> str:
    return f"sunny ({request})"


@agent_function(output_key="translation", description="Translates text into another language.")
def translator(request: str) -> str:
    return "hola"


@agent_function(output_key="converted", description="Converts euros to dollars.")
def to_dollars(amount: float, rate: float) -> float:
    return round(amount * rate, 2)


def _is_decision(prompt: Prompt) -> bool:
    """A one-token call asking for log-probabilities (a DecisionModel question)."""
    options = prompt.options
    return options is not None and options.max_tokens == 1 and bool((options.extra or {}).get("logprobs"))


def _text(data: str) -> ChatResponse:
    return ChatResponse(
        (Generation(AssistantMessage(data), GenerationMetadata("stop", MappingProxyType({}))),), ChatResponseMetadata()
    )


class Picker:
    """A logprob model that answers with the name of the listed option the input mentions."""

    def __init__(self, structured: list[str] | None = None) -> None:
        self.calls: list[Prompt] = []
        self.structured = list(structured or [])

    def __call__(self, prompt: Prompt) -> ChatResponse:
        self.calls.append(prompt)
        text = prompt.user_message.text
        if not _is_decision(prompt):
            return _text(self.structured.pop(0))
        names = re.findall(r"^- (\w+)", text, flags=re.M)
        request = text.split("Request:\n", 1)[1].split("Question:")[0].lower()
        if request.strip() == "n/a":  # the calibration baseline: no preference
            return lp_response({f" {name[:3]}": 1.0 / len(names) for name in names})
        wanted = next((name for name in names if name in request), names[0])
        return lp_response({f" {n[:3]}": (0.9 if n == wanted else 0.1 / len(names)) for n in names})


def _client(picker: Picker) -> ChatClient:
    return ChatClient.create(FunctionChatModel(picker, capabilities=LOGPROBS))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_supervisor_chooses_the_next_agent_by_probability(mode: str) -> None:
    picker = Picker()
    wf = supervisor(weather, translator, planner=_client(picker), by_probability=True)
    request = "Ask the translator for 'hello' in Spanish."
    result = wf.run(request=request) if mode == "sync" else asyncio.run(wf.arun(request=request))
    children = result.invocations[0].children
    assert children[0].name == "translator" and children[0].inputs == {"request": request}
    # Every planner call was a one-token choice with log-probabilities: no free text, no JSON.
    assert picker.calls and all(_is_decision(p) for p in picker.calls)
    # "done" is a candidate only once an agent ran.
    first = next(p.user_message.text for p in picker.calls if "Request:\nN/A" not in p.user_message.text)
    assert "done" not in first


def test_done_ends_the_plan_when_the_model_says_so() -> None:
    class Finisher(Picker):
        def __call__(self, prompt: Prompt) -> ChatResponse:
            text = prompt.user_message.text
            if "Results so far" in text:
                self.calls.append(prompt)
                return lp_response({"done": 0.95, "weather": 0.05})
            return super().__call__(prompt)

    wf = supervisor(weather, translator, planner=_client(Finisher()), by_probability=True)
    result = wf.run(request="weather in Oslo")
    assert [c.name for c in result.invocations[0].children] == ["weather"]
    assert result.output == "sunny (weather in Oslo)"


def test_missing_typed_inputs_are_asked_for_as_an_entity() -> None:
    picker = Picker(structured=['{"amount": 20, "rate": 1.1}'])
    wf = supervisor(weather, to_dollars, planner=_client(picker), by_probability=True, max_steps=1)
    result = wf.run(request="Use to_dollars: 20 EUR at 1.1")
    assert result.output == 22.0
    asked = [p for p in picker.calls if not _is_decision(p)]
    assert len(asked) == 1 and "to_dollars" in asked[0].user_message.text


def test_a_model_without_log_probabilities_keeps_the_structured_planner() -> None:
    planner = ScriptedChatModel(
        ['{"agent_name": "weather", "arguments": {}}', '{"agent_name": "done", "arguments": {}}']
    )
    wf = supervisor(weather, planner=ChatClient.create(planner))
    assert not wf.planner.chooser.uses_probability
    assert wf.run(request="Oslo").output == "sunny (Oslo)"
    with pytest.raises(Exception, match="log-probabilities"):
        supervisor(weather, translator, planner=ChatClient.create(ScriptedChatModel(["x"])), by_probability=True).run(
            request="hi"
        )


def test_by_probability_is_automatic_only_on_the_embedded_model() -> None:
    class LlamaCppChatModel(FunctionChatModel):  # the class name is what the automatic choice checks
        pass

    embedded = ChatClient.create(LlamaCppChatModel(Picker(), capabilities=LOGPROBS))
    other = _client(Picker())
    assert decides_by_probability(embedded, None) is True
    assert decides_by_probability(other, None) is False
    assert decides_by_probability(other, True) is True
    assert decides_by_probability(embedded, False) is False


# -- routed conditional -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_routed_conditional_runs_the_branch_the_model_chooses(mode: str) -> None:
    picker = Picker()
    router = conditional(weather, translator, router=_client(picker), by_probability=True)
    request = "Is the weather nice in Rome?"
    result = router.run(request=request) if mode == "sync" else asyncio.run(router.arun(request=request))
    assert result.output == f"sunny ({request})"
    assert result.scope._journal["route"]["output"] == 0
    assert all(_is_decision(p) for p in picker.calls)


def test_routed_conditional_typed_answer_and_errors() -> None:
    typed = conditional(weather, translator, router=ChatClient.create(ScriptedChatModel(['"translator"'])))
    assert typed.run(request="hello in Spanish").output == "hola"
    wrong = conditional(weather, translator, router=ChatClient.create(ScriptedChatModel(['"poet"'] * 3)))
    with pytest.raises(OutputConversionError):
        wrong.run(request="a poem")
    with pytest.raises(AgentInputError, match="'request'"):
        conditional(weather, translator, router=ChatClient.create(ScriptedChatModel([]))).run(topic="x")
    with pytest.raises(TypeError, match="takes agents, not \\(predicate, agent\\)"):
        conditional((lambda s: True, weather), router=ChatClient.create(ScriptedChatModel([])))
    with pytest.raises(TypeError, match="router=ChatClient"):
        conditional(weather, translator, router=object())  # type: ignore[arg-type]


def test_a_single_candidate_needs_no_model_call_and_a_label_miss_falls_back_to_a_typed_answer() -> None:
    calls: list[Prompt] = []

    def answer(prompt: Prompt) -> ChatResponse:
        calls.append(prompt)
        if _is_decision(prompt):
            return lp_response({"Hmm": 0.9, "Well": 0.1})  # no label among the top tokens
        return _text(json.dumps("translator"))

    chooser = Chooser(ChatClient.create(FunctionChatModel(answer, capabilities=LOGPROBS)), by_probability=True)
    assert chooser.choose("x", "Which?", [Candidate("only")]).index == 0 and not calls
    chosen = chooser.choose("say hi in Spanish", "Which?", [Candidate("weather"), Candidate("translator")])
    assert chosen.index == 1 and chosen.probabilities is None


def test_the_choice_is_replayed_from_the_journal_on_resume() -> None:
    picker = Picker()
    ask = human_input(question="Which city?", output_key="city", name="ask")
    translate_then_ask = sequence(translator, ask, name="translator", description="Translates text.")
    router = conditional(weather, translate_then_ask, router=_client(picker), by_probability=True)
    first = router.run(request="translator please")
    assert first.suspended is not None
    asked = len(picker.calls)
    resumed = router.resume(first.suspended.scope.to_json(), "Lyon")
    assert resumed.scope.read("city") == "Lyon" and len(picker.calls) == asked  # not asked again
