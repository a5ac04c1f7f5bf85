"""Planner-driven workflows (issue 39.3): the Planner protocol, the seed's pattern recipes (goal
oriented, peer to peer, blackboard, debate) ported with offline models, the agents registry,
cross-agent compensation and a memory id per agent invocation."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.agents import (
    AgenticScope,
    AgentInvocation,
    AgentRegistry,
    Done,
    InMemoryScopeStore,
    PlannerStep,
    PlannerTurn,
    agent,
    agent_function,
    compensating,
    human_input,
    planner_workflow,
    sequence,
    supervisor,
)
from chatclient.agents.patterns import (
    BlackboardPlanner,
    DebatePlanner,
    GoalOrientedPlanner,
    PeerToPeerPlanner,
    prefer,
    unanimous_last_word,
)
from chatclient.errors import AgentExecutionError, AgentInputError, PlannerError, UnknownAgentError
from chatclient.prompt import Prompt
from chatclient.testing import FunctionChatModel, ScriptedChatModel


def _user_text(prompt: Prompt) -> str:
    return str(prompt.messages[-1].text)


# -- the protocol ---------------------------------------------------------------------------------


class SequentialPlanner:
    """The seed's SequentialPlanner: the agents in declaration order, then done (state from history)."""

    def bind(self, agents: AgentRegistry) -> None:
        self.names = agents.names()

    def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
        return Done() if len(history) >= len(self.names) else PlannerStep(agent_name=self.names[len(history)])


@agent_function(output_key="story")
def write(topic: str) -> str:
    return f"a story about {topic}"


@agent_function(output_key="story")
def edit(story: str, style: str = "plain") -> str:
    return f"{story}, told {style}"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_planner_in_code_drives_the_workflow(mode: str) -> None:
    wf = planner_workflow(write, edit, planner=SequentialPlanner())
    result = wf.run(topic="otters") if mode == "sync" else asyncio.run(wf.arun(topic="otters"))
    assert result.output == "a story about otters, told plain"
    assert [c.name for c in result.invocations[0].children] == ["write", "edit"]


def test_done_output_is_the_result_and_arguments_are_written_first() -> None:
    class Once:
        def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
            if history:
                return Done(f"final: {history[-1].output}")
            return PlannerStep(agent_name="write", arguments={"topic": "owls"})

    assert planner_workflow(write, planner=Once()).run().output == "final: a story about owls"


def test_mistakes_go_back_to_the_planner_as_errors() -> None:
    seen: list[PlannerTurn] = []

    class Sloppy:
        def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
            seen[:] = history
            steps = [PlannerStep(agent_name="wirte"), PlannerStep(agent_name="write")]
            return steps[len(history)] if len(history) < len(steps) else Done()

    result = planner_workflow(write, planner=Sloppy()).run(topic="bees")
    assert result.output == "a story about bees"
    assert seen[0].error is not None and "no agent named 'wirte'" in seen[0].error
    assert seen[1].error is None and seen[1].output == "a story about bees"


def test_max_steps_bounds_a_planner_that_never_ends() -> None:
    class Forever:
        def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
            return PlannerStep(agent_name="write", arguments={"topic": str(len(history))})

    result = planner_workflow(write, planner=Forever(), max_steps=3).run()
    assert result.output == "a story about 2"
    assert len(result.invocations[0].children) == 3


def test_bad_planners_and_limits_are_refused() -> None:
    with pytest.raises(TypeError, match="next\\(scope, history\\)"):
        planner_workflow(write, planner=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_steps"):
        planner_workflow(write, planner=SequentialPlanner(), max_steps=0)
    with pytest.raises(ValueError, match="at least one agent"):
        planner_workflow(planner=SequentialPlanner())

    class Wrong:
        def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> Any:
            return "write"

    with pytest.raises(TypeError, match="must return a PlannerStep or Done, got str"):
        planner_workflow(write, planner=Wrong()).run(topic="x")


def test_planner_decisions_are_journalled_and_not_asked_again_on_resume() -> None:
    asked: list[int] = []

    class Counting:
        def next(self, scope: AgenticScope, history: Sequence[PlannerTurn]) -> PlannerStep | Done:
            asked.append(len(history))
            steps: list[PlannerStep | Done] = [PlannerStep(agent_name="ask"), PlannerStep(agent_name="write"), Done()]
            return steps[min(len(history), 2)]

    ask = human_input(question="Topic?", output_key="topic", name="ask")
    wf = planner_workflow(ask, write, planner=Counting())
    first = wf.run()
    assert first.suspended is not None and asked == [0]
    resumed = wf.resume(first.suspended.scope, "whales")
    assert resumed.output == "a story about whales"
    assert asked == [0, 1, 2]  # decision 1 was replayed from the journal


def test_supervisor_is_a_planner_workflow_with_a_model_planner() -> None:
    from chatclient.agents import ModelPlanner, PlannerWorkflow

    planner = ScriptedChatModel(
        ['{"agent_name": "write", "arguments": {"topic": "cats"}}', '{"agent_name": "done", "arguments": {}}']
    )
    wf = supervisor(write, planner=ChatClient.create(planner))
    assert isinstance(wf, PlannerWorkflow) and isinstance(wf.planner, ModelPlanner)
    assert wf.run(request="a cat story").output == "a story about cats"


# -- goal oriented (seed: horoscope writeup) --------------------------------------------------------


def _horoscope_model() -> FunctionChatModel:
    def answer(prompt: Prompt) -> str:
        text = _user_text(prompt)
        if text.startswith("Extract a person"):
            return "Mario"
        if text.startswith("Extract the zodiac sign"):
            return "pisces"
        if text.startswith("Generate the horoscope"):
            return "A great week for Mario."
        if text.startswith("Find a story"):
            return "A fish learned to sing."
        return f"Writeup: {text[:40]}"

    return FunctionChatModel(answer)


def test_goal_oriented_planner_finds_the_seed_path() -> None:
    client = ChatClient.create(_horoscope_model())
    horoscope = agent(
        client,
        name="horoscope",
        user="Generate the horoscope for {{ person }} who is a {{ sign }}.",
        output_key="horoscope",
    )
    person = agent(client, name="extract_person", user="Extract a person from: {{ prompt }}", output_key="person")
    sign = agent(client, name="extract_sign", user="Extract the zodiac sign of: {{ prompt }}", output_key="sign")
    writer = agent(
        client,
        name="write",
        user="Create a writeup for {{ person }}: {{ horoscope }} / {{ story }}",
        output_key="writeup",
    )
    story = agent(client, name="find_story", user="Find a story for {{ person }}: {{ horoscope }}", output_key="story")
    planner = GoalOrientedPlanner("writeup")
    wf = planner_workflow(horoscope, person, sign, writer, story, planner=planner, output_key="writeup")
    result = wf.run(prompt="My name is Mario and my zodiac sign is pisces")
    order = [c.name for c in result.invocations[0].children]
    assert order == ["extract_person", "extract_sign", "horoscope", "find_story", "write"]
    assert result.output.startswith("Writeup: Create a writeup for Mario")
    # From a scope that already holds the person and sign, the path is shorter.
    assert [a.name for a in planner.path({"person", "sign"})] == ["horoscope", "find_story", "write"]


def test_goal_oriented_planner_says_when_no_path_exists() -> None:
    @agent_function(output_key="answer")
    def needs_x(x: int) -> int:
        return x

    with pytest.raises(
        PlannerError,
        match="no path found for goal 'answer': 'answer', which cannot be produced: "
        "'needs_x' needs 'x', which cannot be produced: it is not in the scope",
    ):
        planner_workflow(needs_x, planner=GoalOrientedPlanner("answer")).run()
    with pytest.raises(ValueError, match="no agent writes the goal 'nothing'"):
        planner_workflow(needs_x, planner=GoalOrientedPlanner("nothing"))


def test_a_planner_serves_one_workflow() -> None:
    planner = GoalOrientedPlanner("story")
    planner_workflow(write, planner=planner)
    with pytest.raises(ValueError, match="already plans another workflow"):
        planner_workflow(write, edit, planner=planner)


# -- peer to peer (seed: research on a topic) -------------------------------------------------------


def test_peer_to_peer_agents_run_when_their_inputs_change_until_the_exit_condition() -> None:
    scores = iter([0.5, 0.9])

    @agent_function(output_key="research_findings")
    def literature(topic: str) -> str:
        return f"papers on {topic}"

    @agent_function(output_key="hypothesis")
    def hypothesis(topic: str, research_findings: str) -> str:
        return f"H0 from {research_findings}"

    @agent_function(output_key="critique")
    def critic(topic: str, hypothesis: str) -> str:
        return f"critique of {hypothesis}"

    @agent_function(output_key="hypothesis")
    def validation(topic: str, hypothesis: str, critique: str) -> str:
        return "H1" if hypothesis.startswith("H0") else hypothesis + "+"

    @agent_function(output_key="score")
    def scorer(topic: str, hypothesis: str, critique: str) -> float:
        return next(scores)

    def good_enough(scope: AgenticScope) -> bool:
        return bool(scope.read("score", 0.0) >= 0.85)

    wf = planner_workflow(
        literature,
        hypothesis,
        critic,
        validation,
        scorer,
        planner=PeerToPeerPlanner(10, good_enough, output="hypothesis"),
    )
    result = wf.run(topic="black holes")
    order = [c.name for c in result.invocations[0].children]
    assert order[:3] == ["literature", "hypothesis", "critic"]
    assert order.count("scorer") == 2 and order[-1] == "scorer"
    assert result.output == result.scope.read("hypothesis")


def test_peer_to_peer_stops_when_the_scope_is_stable_or_at_the_limit() -> None:
    wf = planner_workflow(write, edit, planner=PeerToPeerPlanner(10, output="story"))
    result = wf.run(topic="moles")
    # write runs, edit (its input story changed) runs, then nothing changed: stable.
    assert [c.name for c in result.invocations[0].children] == ["write", "edit"]

    @agent_function(output_key="n")
    def bump(n: int) -> int:
        return n + 1

    @agent_function(output_key="m")
    def echo(n: int) -> int:
        return n

    @agent_function(output_key="n")
    def back(m: int) -> int:
        return m + 1

    limited = planner_workflow(bump, echo, back, planner=PeerToPeerPlanner(5, lambda scope, count: False))
    assert len(limited.run(n=0).invocations[0].children) == 5
    with pytest.raises(ValueError, match="max_invocations"):
        PeerToPeerPlanner(0)


# -- blackboard (seed: medical diagnostics) ---------------------------------------------------------


@agent_function(output_key="symptoms")
def symptom_extractor(patient_input: str) -> str:
    return f"symptoms({patient_input})"


@agent_function(output_key="lab_analysis")
def lab_analyzer(symptoms: str, lab_results: str) -> str:
    return f"labs({lab_results})"


@agent_function(output_key="drug_interactions")
def drug_checker(symptoms: str, medications: str) -> str:
    return f"drugs({medications})"


@agent_function(output_key="diagnosis")
def diagnosis(symptoms: str, lab_analysis: str) -> str:
    return f"diagnosis from {symptoms} and {lab_analysis}"


def _diagnostics(planner: BlackboardPlanner) -> Any:
    return planner_workflow(symptom_extractor, lab_analyzer, drug_checker, diagnosis, planner=planner)


def test_blackboard_fires_one_ready_agent_per_step_until_the_goal() -> None:
    result = _diagnostics(BlackboardPlanner("diagnosis")).run(
        patient_input="fever", lab_results="CRP high", medications="aspirin"
    )
    order = [c.name for c in result.invocations[0].children]
    assert order == ["symptom_extractor", "lab_analyzer", "drug_checker", "diagnosis"]
    assert result.output == "diagnosis from symptoms(fever) and labs(CRP high)"


def test_blackboard_conflict_resolution_and_limits() -> None:
    preferring = BlackboardPlanner("diagnosis", conflict_resolution=prefer("drug_checker"))
    result = _diagnostics(preferring).run(patient_input="cough", lab_results="ok", medications="none")
    assert [c.name for c in result.invocations[0].children][:2] == ["symptom_extractor", "drug_checker"]

    with pytest.raises(PlannerError, match="not reached in 2 agent invocations"):
        _diagnostics(BlackboardPlanner("diagnosis", max_invocations=2)).run(
            patient_input="x", lab_results="y", medications="z"
        )

    # Quiescence: the lab results never come, so nothing more can fire: done without a diagnosis.
    quiet = _diagnostics(BlackboardPlanner("diagnosis")).run(patient_input="x", medications="z")
    assert quiet.output == "drugs(z)" and not quiet.scope.has("diagnosis")  # the last agent's output
    with pytest.raises(TypeError, match="goal"):
        BlackboardPlanner(3)  # type: ignore[arg-type]


# -- debate (seed: ethics panel) --------------------------------------------------------------------


def _panel(verdicts: dict[str, list[str]]) -> tuple[Any, FunctionChatModel]:
    def answer(prompt: Prompt) -> str:
        text = _user_text(prompt)
        if text.startswith("You are an impartial ethics judge"):
            return "Judge: " + text.split("Debate context:", 1)[1].strip().replace("\n", " | ")
        who = re.match(r"You are a (\w+)", text)
        assert who is not None
        return verdicts[who.group(1)].pop(0)

    model = FunctionChatModel(answer)
    client = ChatClient.create(model)
    template = (
        "You are a {kind} debater. Question: {{{{ question }}}} Previous debate context: {{{{ debate_context }}}}"
    )
    debaters = [
        agent(client, name=name, user=template.format(kind=kind), output_key=kind)
        for name, kind in (
            ("Utilitarian", "utilitarian"),
            ("Deontologist", "deontological"),
            ("Pragmatist", "pragmatist"),
        )
    ]
    judge = agent(
        client,
        name="Judge",
        user="You are an impartial ethics judge. Debate context: {{ debate_context }}",
        output_key="verdict",
    )
    return (debaters, judge), model


def test_debate_runs_rounds_until_the_debaters_agree_then_the_judge_decides() -> None:
    (debaters, judge), model = _panel(
        {
            "utilitarian": ["It helps many. AGREE", "Still AGREE"],
            "deontological": ["Credit is owed. DISAGREE", "On reflection, AGREE."],
            "pragmatist": ["Fine in practice. AGREE", "agree"],
        }
    )
    wf = planner_workflow(*debaters, judge, planner=DebatePlanner(3, unanimous_last_word), output_key="verdict")
    result = wf.run(question="Is AI art without credit ethical?")
    order = [c.name for c in result.invocations[0].children]
    assert order == ["Utilitarian", "Deontologist", "Pragmatist"] * 2 + ["Judge"]
    assert result.output.startswith('Judge: Utilitarian: "Still AGREE" | Deontologist: "On reflection, AGREE."')
    # Round 2 debaters saw round 1's positions.
    second_round = _user_text(model.prompts[3])
    assert 'Deontologist: "Credit is owed. DISAGREE"' in second_round


def test_debate_stops_at_max_rounds_and_needs_a_judge_and_two_debaters() -> None:
    (debaters, judge), _ = _panel({"utilitarian": ["A"], "deontological": ["B"], "pragmatist": ["C"]})
    result = planner_workflow(*debaters, judge, planner=DebatePlanner(1)).run(question="q")
    assert [c.name for c in result.invocations[0].children][-1] == "Judge"
    assert len(result.invocations[0].children) == 4
    with pytest.raises(ValueError, match="at least two debaters and a judge"):
        planner_workflow(debaters[0], judge, planner=DebatePlanner())


# -- registry ---------------------------------------------------------------------------------------


def test_registry_registers_and_finds_agents_by_name() -> None:
    registry = AgentRegistry()
    registry.register(write)
    registry.register(edit, name="style_editor")
    assert registry.get("style_editor") is edit and "write" in registry and len(registry) == 2
    assert registry.names() == ("write", "style_editor")
    assert sequence(registry.get("write"), registry.get("style_editor")).run(topic="elk").output.endswith("plain")
    with pytest.raises(UnknownAgentError, match="did you mean 'style_editor'") as caught:
        registry.get("style_edtor")
    assert caught.value.known == ("write", "style_editor") and isinstance(caught.value, LookupError)
    with pytest.raises(ValueError, match="two agents are named 'write'"):
        registry.register(edit, name="write")
    registry.register(edit, name="write", replace=True)
    assert registry.get("write") is edit
    registry.unregister("write")
    with pytest.raises(UnknownAgentError):
        registry.unregister("write")
    with pytest.raises(TypeError, match="holds agents"):
        registry.register(print)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="two agents are named"):
        planner_workflow(write, write.__class__(write.fn, name="write"), planner=SequentialPlanner())


# -- compensation -----------------------------------------------------------------------------------


def _trip(log: list[str], fail: bool) -> Any:
    @agent_function(output_key="flight", compensate=lambda flight: log.append(f"cancel {flight}"))
    def book_flight(city: str) -> str:
        return f"flight:{city}"

    def cancel_hotel(invocation: AgentInvocation) -> None:
        log.append(f"cancel {invocation.output} (city {invocation.inputs['city']})")

    @agent_function(output_key="hotel", compensate=cancel_hotel)
    def book_hotel(city: str) -> str:
        return f"hotel:{city}"

    @agent_function(output_key="car")
    def book_car(city: str) -> str:
        if fail:
            raise RuntimeError("no cars")
        return f"car:{city}"

    return compensating(sequence(book_flight, book_hotel, book_car))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_workflow_undoes_completed_agents_last_first(mode: str) -> None:
    log: list[str] = []
    wf = _trip(log, fail=True)
    with pytest.raises(AgentExecutionError, match="no cars"):
        wf.run(city="Rome") if mode == "sync" else asyncio.run(wf.arun(city="Rome"))
    assert log == ["cancel hotel:Rome (city Rome)", "cancel flight:Rome"]

    log.clear()
    assert _trip(log, fail=False).run(city="Oslo").output == "car:Oslo" and log == []


def test_a_failing_undo_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    log: list[str] = []

    @agent_function(output_key="a", compensate=lambda: log.append("undo a"))
    def step_a() -> str:
        return "a"

    def broken(output: str) -> None:
        raise OSError("undo failed")

    @agent_function(output_key="b", compensate=broken)
    def step_b() -> str:
        return "b"

    @agent_function(output_key="c")
    def step_c() -> str:
        raise ValueError("boom")

    with caplog.at_level(logging.WARNING), pytest.raises(AgentExecutionError):
        compensating(sequence(step_a, step_b, step_c)).run()
    assert log == ["undo a"]
    assert "undoing agent 'step_b' failed" in caplog.text


def test_a_suspended_run_is_not_compensated_and_names_must_be_distinct() -> None:
    log: list[str] = []

    @agent_function(output_key="a", compensate=lambda: log.append("undo a"))
    def step_a() -> str:
        return "a"

    wf = compensating(sequence(step_a, human_input(question="ok?", output_key="ok")))
    assert wf.run().suspended is not None and log == []

    twin = agent_function(name="step_a", output_key="b", compensate=lambda: None)(lambda: "b")
    with pytest.raises(ValueError, match="distinct names"):
        compensating(sequence(step_a, twin))
    with pytest.raises(TypeError, match="compensate= must be a callable"):
        agent_function(name="x", compensate="undo")(lambda: 1)  # type: ignore[call-overload]


# -- memory id per invocation -----------------------------------------------------------------------


def test_each_agent_invocation_can_have_its_own_memory_conversation() -> None:
    from advisors.memory import MessageChatMemoryAdvisor
    from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory

    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=10)
    model = ScriptedChatModel(["medical 1", "legal 1", "medical 2"])
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build()
    medical = agent(client, name="medical", user="Medical: {{ request }}", memory_id="{{ user }}/medical")
    legal = agent(
        client, name="legal", user="Legal: {{ request }}", memory_id=lambda scope: f"{scope.read('user')}/legal"
    )
    medical.run(user="u1", request="I broke my leg")
    legal.run(user="u1", request="Should I sue?")
    medical.run(user="u1", request="And now?")
    assert [m.text for m in memory.get("u1/medical")] == [
        "Medical: I broke my leg",
        "medical 1",
        "Medical: And now?",
        "medical 2",
    ]
    assert [m.text for m in memory.get("u1/legal")] == ["Legal: Should I sue?", "legal 1"]
    # The last medical call saw its own earlier turn, not the legal one.
    assert [m.text for m in model.prompts[2].messages][:2] == ["Medical: I broke my leg", "medical 1"]
    assert medical.input_names() == ("request", "user")


def test_memory_id_errors() -> None:
    client = ChatClient.create(ScriptedChatModel(["x"]))
    with pytest.raises(ValueError, match="memory_id must be a non-empty template"):
        agent(client, name="a", memory_id=" ")
    with pytest.raises(AgentInputError, match="'user'"):
        agent(client, name="a", memory_id="{{ user }}").run(request="hi")
    with pytest.raises(ValueError, match="empty conversation id"):
        agent(client, name="a", memory_id=lambda scope: "").run(request="hi")


def test_scope_store_recovers_a_planner_workflow() -> None:
    store = InMemoryScopeStore()
    wf = planner_workflow(write, edit, planner=SequentialPlanner())
    assert wf.run(scope_store=store, scope_id="r1", topic="yaks").output == "a story about yaks, told plain"


def test_planner_workflows_registries_and_compensating_workflows_pickle() -> None:
    import pickle

    planner = ScriptedChatModel(
        ['{"agent_name": "write", "arguments": {"topic": "owls"}}', '{"agent_name": "done", "arguments": {}}']
    )
    team = pickle.loads(pickle.dumps(supervisor(write, edit, planner=ChatClient.create(planner))))
    assert team.planner.agents.names() == ("write", "edit")
    assert team.run(request="owls").output == "a story about owls"
    goal = pickle.loads(pickle.dumps(planner_workflow(edit, write, planner=GoalOrientedPlanner("story"))))
    assert goal.run(topic="elk").output == "a story about elk"
    registry = pickle.loads(pickle.dumps(AgentRegistry([write])))
    registry.register(edit)  # its lock was made anew
    assert registry.names() == ("write", "edit")
    assert pickle.loads(pickle.dumps(compensating(sequence(write)))).run(topic="x").output == "a story about x"
