"""Agents and workflows on scripted models: agent(), @agent_function, sequence, loop, parallel,
parallel_map, conditional, errors and on_error, in sync and async runs."""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.agents import (
    AgentErrorContext,
    AgenticScope,
    Recovery,
    agent,
    agent_function,
    conditional,
    loop,
    parallel,
    parallel_map,
    sequence,
)
from chatclient.errors import AgentExecutionError, AgentInputError, OutputConversionError
from chatclient.testing import FunctionChatModel, ScriptedChatModel


def run(workflow: Any, mode: str, **inputs: Any) -> Any:
    if mode == "sync":
        return workflow.run(**inputs)
    return asyncio.run(workflow.arun(**inputs))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Person(BaseModel):
    name: str
    age: int


# -- model agents -------------------------------------------------------------------------------


def test_agent_renders_templates_over_the_scope_and_writes_its_output(mode: str) -> None:
    model = ScriptedChatModel(["A story about otters."])
    writer = agent(
        ChatClient.create(model),
        name="writer",
        system="You write for {{ audience }}.",
        user="Write a story about {{ topic }}.",
        output_key="story",
    )
    result = run(writer, mode, topic="otters", audience="children")
    assert result.output == "A story about otters."
    assert result.scope.read("story") == "A story about otters."
    prompt = model.prompts[0]
    assert prompt.system_message.text == "You write for children."
    assert prompt.user_message.text == "Write a story about otters."
    assert result.usage.total_tokens > 0
    assert writer.input_names() == ("audience", "topic")


def test_user_text_with_braces_from_the_scope_is_not_rendered_again(mode: str) -> None:
    model = ScriptedChatModel(["ok"])
    a = agent(ChatClient.create(model), name="a", user="Echo {{ text }}")
    run(a, mode, text="{{ secret }}")
    assert model.prompts[0].user_message.text == "Echo {{ secret }}"


def test_missing_template_variable_raises_before_any_model_call(mode: str) -> None:
    model = ScriptedChatModel(["never"])
    a = agent(ChatClient.create(model), name="writer", user="About {{ topic }} for {{ audience }}")
    with pytest.raises(AgentInputError) as info:
        run(a, mode, topic="x")
    assert info.value.agent_name == "writer"
    assert info.value.missing == ("audience",)
    assert model.prompts == []


def test_default_user_message_is_the_request() -> None:
    model = ScriptedChatModel(["hi"])
    a = agent(ChatClient.create(model), name="a")
    a.run(request="Say hi")
    assert model.prompts[0].user_message.text == "Say hi"


def test_output_type_goes_through_entity_and_the_validation_advisor(mode: str) -> None:
    model = ScriptedChatModel(['{"name": "Ada"}', '{"name": "Ada", "age": 36}'])
    a = agent(
        ChatClient.create(model), name="extract", user="Who is in {{ text }}?", output_type=Person, output_key="person"
    )
    result = run(a, mode, text="a text")
    assert result.output == Person(name="Ada", age=36)
    assert len(model.prompts) == 2  # the first answer missed "age" and was re-asked
    assert "age" in model.prompts[1].user_message.text or "age" in model.prompts[1].contents


def test_output_type_that_never_fits_is_a_typed_error() -> None:
    model = ScriptedChatModel(["not json"] * 2)
    a = agent(ChatClient.create(model), name="extract", output_type=Person, max_validation_attempts=1)
    with pytest.raises(OutputConversionError):
        a.run(request="x")


def test_agent_tools_and_advisors_apply_to_its_requests_only() -> None:
    from chatclient.testing import RecordingAdvisor
    from chatclient.tools import tool

    calls: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Weather of a city."""
        calls.append(city)
        return "sunny"

    from chatclient import AssistantMessage, ToolCall

    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("1", "lookup", '{"city": "Paris"}'),)), "It is sunny."])
    log: list[str] = []
    a = agent(
        ChatClient.create(model),
        name="weather",
        user="Weather in {{ city }}?",
        tools=[lookup],
        advisors=[RecordingAdvisor("rec", log)],
    )
    assert a.run(city="Paris").output == "It is sunny."
    assert calls == ["Paris"]
    assert log  # the advisor ran


def test_agent_needs_a_chat_client() -> None:
    with pytest.raises(TypeError, match=r"ChatClient\.create"):
        agent(ScriptedChatModel([]), name="a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name"):
        agent(ChatClient.create(ScriptedChatModel([])), name="")


# -- function agents ----------------------------------------------------------------------------


@agent_function(output_key="total")
def add(a: int, b: int = 10) -> int:
    """Adds two numbers."""
    return a + b


def test_agent_function_reads_and_converts_parameters(mode: str) -> None:
    result = run(add, mode, a="2", b=3)
    assert result.output == 5 and result.scope.read("total") == 5
    assert run(add, mode, a=1).output == 11  # default used when the scope lacks b
    assert add(1, 2) == 3  # the function stays callable
    assert add.description == "Adds two numbers."


def test_agent_function_bad_value_names_the_parameter() -> None:
    with pytest.raises(AgentInputError) as info:
        add.run(a="not a number")
    assert info.value.missing == ("a",) and "int" in str(info.value)


def test_agent_function_missing_required_parameter() -> None:
    with pytest.raises(AgentInputError) as info:
        add.run(b=1)
    assert info.value.missing == ("a",)


def test_agent_function_async_and_scope_parameter(mode: str) -> None:
    @agent_function(output_key="out")
    async def shout(text: str, scope: AgenticScope) -> str:
        scope.write("seen", True)
        return text.upper()

    result = run(shout, mode, text="hi")
    assert result.output == "HI" and result.scope.read("seen") is True


# -- sequence -------------------------------------------------------------------------------------


def test_sequence_passes_outputs_through_the_scope(mode: str) -> None:
    m1, m2 = ScriptedChatModel(["Long story."]), ScriptedChatModel(["Short."])
    writer = agent(ChatClient.create(m1), name="writer", user="Write about {{ topic }}", output_key="story")
    editor = agent(ChatClient.create(m2), name="editor", user="Shorten: {{ story }}", output_key="story")
    result = run(sequence(writer, editor, name="pipeline"), mode, topic="otters")
    assert result.output == "Short."
    assert m2.prompts[0].user_message.text == "Shorten: Long story."
    tree = result.invocations[0]
    assert tree.name == "pipeline" and [c.name for c in tree.children] == ["writer", "editor"]
    assert tree.children[0].inputs == {"topic": "otters"}
    assert tree.children[1].output == "Short."
    assert tree.usage is not None and tree.usage.total_tokens == sum(c.usage.total_tokens for c in tree.children)


def test_sequence_output_callable_and_output_key(mode: str) -> None:
    @agent_function(output_key="x")
    def one() -> int:
        return 1

    @agent_function(output_key="y")
    def two(x: int) -> int:
        return x + 1

    wf = sequence(one, two, output=lambda s: s.read("x") + s.read("y"), output_key="sum")
    result = run(wf, mode)
    assert result.output == 3 and result.scope.read("sum") == 3


def test_workflows_nest() -> None:
    @agent_function(output_key="n")
    def inc(n: int) -> int:
        return n + 1

    inner = sequence(inc, inc, name="inner")
    assert sequence(inner, inner, name="outer").run(n=0).output == 4


def test_a_workflow_cannot_contain_itself() -> None:
    inner = sequence(add, name="inner")
    outer = sequence(inner, name="outer")
    inner.agents = (outer,)  # force a cycle after the fact
    with pytest.raises(ValueError, match="contains itself"):
        sequence(outer, name="top")


def test_workflows_refuse_plain_callables() -> None:
    with pytest.raises(TypeError, match="agent_function"):
        sequence(lambda: 1)  # type: ignore[arg-type]


# -- loop -----------------------------------------------------------------------------------------


def _counter(key: str = "n") -> Any:
    @agent_function(output_key=key, name=f"inc_{key}")
    def inc(n: int = 0) -> int:
        return n + 1

    return inc


def test_loop_exit_checked_after_each_agent(mode: str) -> None:
    seen: list[int] = []

    @agent_function(output_key="log")
    def observe(n: int) -> int:
        seen.append(n)
        return n

    wf = loop(_counter(), observe, max_iterations=10, exit_condition=lambda s: s.read("n") >= 3)
    result = run(wf, mode)
    assert result.scope.read("n") == 3
    assert seen == [1, 2]  # after the third increment the loop exits before observe
    assert result.output == 3  # the last agent invoked


def test_loop_exit_checked_once_per_iteration_with_the_iteration_number(mode: str) -> None:
    seen: list[int] = []

    @agent_function(output_key="log")
    def observe(n: int) -> int:
        seen.append(n)
        return n

    iterations: list[int] = []

    def done(scope: AgenticScope, iteration: int) -> bool:
        iterations.append(iteration)
        return bool(scope.read("n") >= 3)

    result = run(loop(_counter(), observe, max_iterations=10, exit_condition=done, check="iteration"), mode)
    assert seen == [1, 2, 3] and iterations == [1, 2, 3]
    assert result.output == 3


def test_loop_without_exit_condition_runs_max_iterations(mode: str) -> None:
    assert run(loop(_counter(), max_iterations=4), mode).scope.read("n") == 4


def test_loop_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        loop(add, max_iterations=0)
    with pytest.raises(ValueError, match="check"):
        loop(add, check="sometimes")


# -- parallel -------------------------------------------------------------------------------------


def _barrier_agents(n: int) -> tuple[list[Any], threading.Barrier]:
    barrier = threading.Barrier(n, timeout=10)
    agents = []
    for i in range(n):

        def work(i: int = i) -> str:
            barrier.wait()  # every branch must be running at once, or this times out
            return f"r{i}"

        agents.append(agent_function(work, name=f"w{i}", output_key=f"k{i}"))
    return agents, barrier


def test_parallel_sync_runs_branches_on_threads_at_once() -> None:
    agents, _ = _barrier_agents(3)
    result = parallel(*agents).run()
    assert result.output == "r2"
    assert [result.scope.read(f"k{i}") for i in range(3)] == ["r0", "r1", "r2"]


def test_parallel_async_runs_branches_as_tasks_at_once() -> None:
    for_all = asyncio.Event()
    started: list[int] = []

    def make(i: int) -> Any:
        async def work() -> int:
            started.append(i)
            if len(started) == 3:
                for_all.set()
            await asyncio.wait_for(for_all.wait(), 5)
            return i

        return agent_function(work, name=f"t{i}", output_key=f"k{i}")

    result = asyncio.run(parallel(*(make(i) for i in range(3))).arun())
    assert result.output == 2 and sorted(started) == [0, 1, 2]


def test_parallel_max_concurrency_bounds_running_branches() -> None:
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    def make(i: int) -> Any:
        def work() -> int:
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
                if running[0] == 2:
                    gate.set()
            gate.wait(5)
            with lock:
                running[0] -= 1
            return i

        return agent_function(work, name=f"c{i}")

    parallel(*(make(i) for i in range(5)), max_concurrency=2).run()
    assert peak[0] == 2


def test_parallel_writes_in_declaration_order_after_all_finish(mode: str) -> None:
    order: list[str] = []

    @agent_function(name="slow", output_key="winner")
    async def slow() -> str:
        await asyncio.sleep(0.05)
        order.append("slow")
        return "slow"

    @agent_function(name="fast", output_key="winner")
    def fast(winner: str = "none") -> str:
        order.append("fast")
        return f"fast saw {winner}"

    result = run(parallel(slow, fast), mode)
    # the declaration order decides, and a branch never sees another branch's writes
    assert result.scope.read("winner") == "fast saw none"


def test_parallel_output_callable() -> None:
    agents, _ = _barrier_agents(2)
    wf = parallel(*agents, output=lambda s: [s.read("k0"), s.read("k1")])
    assert wf.run().output == ["r0", "r1"]


def test_parallel_failure_after_all_finished(mode: str) -> None:
    done: list[str] = []

    @agent_function(name="ok")
    def ok() -> str:
        done.append("ok")
        return "ok"

    @agent_function(name="boom")
    def boom() -> str:
        raise RuntimeError("kaput")

    with pytest.raises(AgentExecutionError) as info:
        run(parallel(boom, ok, name="fan"), mode)
    assert info.value.agent_name == "boom" and info.value.path == ("fan",)
    assert isinstance(info.value.cause, RuntimeError) and done == ["ok"]


def test_parallel_map(mode: str) -> None:
    @agent_function(output_key="square")
    def square(item: int) -> int:
        return item * item

    wf = parallel_map(square, items_key="numbers", output_key="squares", max_concurrency=2)
    result = run(wf, mode, numbers=[1, 2, 3])
    assert result.output == [1, 4, 9] and result.scope.read("squares") == [1, 4, 9]
    assert not result.scope.has("square")  # item runs' own writes stay in their branches
    assert run(wf, mode, numbers=[]).output == []


def test_parallel_map_needs_a_list(mode: str) -> None:
    wf = parallel_map(add, items_key="numbers", item_key="a", output_key="out")
    with pytest.raises(AgentInputError) as info:
        run(wf, mode, numbers=5)
    assert info.value.missing == ("numbers",)
    with pytest.raises(AgentInputError):
        run(wf, mode)


def test_parallel_map_with_model_agent_is_concurrent_and_ordered() -> None:
    model = FunctionChatModel(lambda p: p.user_message.text.upper())
    shout = agent(ChatClient.create(model), name="shout", user="{{ item }}")
    assert parallel_map(shout, items_key="words", output_key="out").run(words=["a", "b", "c"]).output == ["A", "B", "C"]


# -- conditional ----------------------------------------------------------------------------------


def test_conditional_runs_only_the_first_true_branch(mode: str) -> None:
    calls: list[str] = []

    def make(name: str) -> Any:
        def fn() -> str:
            calls.append(name)
            return name

        return agent_function(fn, name=name)

    wf = conditional(
        (lambda s: s.read("kind") == "legal", make("legal")),
        (lambda s: s.read("kind") in ("legal", "medical"), make("medical")),
        otherwise=make("general"),
    )
    assert run(wf, mode, kind="legal").output == "legal"
    assert run(wf, mode, kind="medical").output == "medical"
    assert run(wf, mode, kind="other").output == "general"
    assert calls == ["legal", "medical", "general"]
    assert run(conditional((lambda s: False, make("x"))), mode).output is None


# -- errors ---------------------------------------------------------------------------------------


def test_execution_error_names_the_agent_and_its_path(mode: str) -> None:
    @agent_function(name="broken")
    def broken() -> None:
        raise ValueError("bad data")

    inner = sequence(add, broken, name="inner")
    with pytest.raises(AgentExecutionError) as info:
        run(sequence(inner, name="outer"), mode, a=1)
    err = info.value
    assert err.agent_name == "broken" and err.path == ("outer", "inner")
    assert isinstance(err.__cause__, ValueError) and "outer > inner > broken" in str(err)


def test_missing_input_inside_a_workflow_is_the_cause(mode: str) -> None:
    with pytest.raises(AgentExecutionError) as info:
        run(sequence(add, name="wf"), mode)
    assert isinstance(info.value.cause, AgentInputError) and info.value.cause.missing == ("a",)


def test_optional_agent_is_skipped_and_recorded(mode: str) -> None:
    model = ScriptedChatModel([])
    maybe = agent(ChatClient.create(model), name="maybe", user="{{ absent }}", optional=True, output_key="m")
    result = run(sequence(maybe, add, name="wf"), mode, a=1)
    assert result.output == 11 and not result.scope.has("m") and model.prompts == []
    skipped = result.invocations[0].children[0]
    assert skipped.name == "maybe" and skipped.skipped


def test_on_error_retry_then_result(mode: str) -> None:
    attempts: list[int] = []

    @agent_function(name="flaky", output_key="value")
    def flaky() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionError("try again")
        return "ok"

    contexts: list[AgentErrorContext] = []

    def handler(ctx: AgentErrorContext) -> Recovery:
        contexts.append(ctx)
        return Recovery.retry()

    assert run(sequence(flaky, on_error=handler), mode).output == "ok"
    assert [c.attempt for c in contexts] == [1, 2] and contexts[0].agent_name == "flaky"

    @agent_function(name="dead", output_key="value")
    def dead() -> str:
        raise ConnectionError("down")

    result = run(sequence(dead, on_error=lambda ctx: Recovery.result("fallback")), mode)
    assert result.output == "fallback" and result.scope.read("value") == "fallback"

    with pytest.raises(AgentExecutionError):
        run(sequence(dead, on_error=lambda ctx: Recovery.throw()), mode)


def test_retry_is_bounded() -> None:
    @agent_function(name="never")
    def never() -> None:
        raise RuntimeError("no")

    with pytest.raises(AgentExecutionError):
        sequence(never, on_error=lambda ctx: Recovery.retry()).run()


def test_on_error_must_return_a_recovery() -> None:
    @agent_function(name="bad")
    def bad() -> None:
        raise RuntimeError("no")

    with pytest.raises(TypeError, match="Recovery"):
        sequence(bad, on_error=lambda ctx: "retry").run()  # type: ignore[arg-type,return-value]


def test_error_is_recorded_in_the_invocation_tree() -> None:
    @agent_function(name="broken")
    def broken() -> None:
        raise ValueError("bad data")

    from chatclient.agents import AgentMonitor

    monitor = AgentMonitor()
    with pytest.raises(AgentExecutionError):
        sequence(broken, name="wf").run(scope_id="s1", monitor=monitor)
    tree = monitor.tree("s1")
    assert tree.error is not None and tree.children[0].error == "ValueError: bad data"


def test_max_duration_bounds_the_whole_run() -> None:
    from chatclient.errors import DeadlineExceededError

    @agent_function(name="nap")
    def nap() -> None:
        import time

        time.sleep(0.05)

    with pytest.raises(DeadlineExceededError):
        loop(nap, max_iterations=100).run(max_duration=0.12)


# -- pickling ---------------------------------------------------------------------------------------


def echo_model(prompt: Any) -> str:
    return f"echo: {prompt.user_message.text}"


def test_agents_and_workflows_pickle() -> None:
    client = ChatClient.create(FunctionChatModel(echo_model))
    writer = agent(client, name="writer", user="{{ topic }}", output_key="story")
    wf = sequence(writer, add, loop(add, max_iterations=2), parallel(writer, add), name="wf")
    copy = pickle.loads(pickle.dumps(wf))
    assert copy.run(topic="t", a=1).scope.read("story") == "echo: t"
    assert pickle.loads(pickle.dumps(add)) is add  # decorated module function: by name


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_result_scope_round_trips_typed_values() -> None:
    @agent_function(output_key="p")
    def make_point(x: int) -> Point:
        return Point(x, x + 1)

    result = make_point.run(x=1)
    again = AgenticScope.from_json(result.scope.to_json())
    assert again.read("p") == Point(1, 2)
    assert again.invocations[0].name == "make_point"


@pytest.mark.parametrize(
    "template",
    [
        "Hi {{ x }}",
        "{{x}}{{ y }} and {{  x  }}\n",
        "a\r\nb {{ x }}\rc",
        "{{ x | upper }} {{ y }}",
        "{% if x %}yes{% endif %} {{ y }}",
        "{# note #}{{ y }}",
        "plain text",
        "a {0} {y} }{ {{ x }} {}",  # literal braces: text, not format fields
    ],
)
@pytest.mark.parametrize("values", [{"x": "otters", "y": 3}, {"x": None, "y": [1, "a"]}, {"x": 1.5, "y": {"k": (1,)}}])
def test_agent_templates_render_exactly_as_jinja(template: str, values: dict[str, Any]) -> None:
    from chatclient.agents.agent import _Template
    from chatclient.templates import default_renderer

    fast = _Template(template)
    scope = AgenticScope(values)
    assert fast.render(scope) == default_renderer().render(template, values)
    assert (fast.parts is not None) == ("|" not in template and "{%" not in template and "{#" not in template)


def test_async_max_duration_cancels_the_agent_in_flight() -> None:
    from chatclient.errors import DeadlineExceededError

    cancelled: list[bool] = []

    @agent_function(name="hang")
    async def hang() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> None:
        with pytest.raises(DeadlineExceededError):
            await sequence(hang).arun(max_duration=0.1)

    asyncio.run(asyncio.wait_for(main(), 10))
    assert cancelled == [True]


def test_max_duration_is_checked() -> None:
    with pytest.raises(ValueError, match="max_duration"):
        add.run(a=1, max_duration=0)


def test_a_client_budget_applies_across_the_agents_of_a_workflow() -> None:
    from advisors import BudgetAdvisor
    from advisors.budget import Budget
    from chatclient.errors import BudgetExceededError

    model = ScriptedChatModel([" ".join(["word"] * 200), "never sent"])
    budget = Budget(max_tokens=150, period=None)
    client = ChatClient.builder(model).default_advisors(BudgetAdvisor(budget=budget)).build()
    first = agent(client, name="first", user="{{ topic }}", output_key="long")
    second = agent(client, name="second", user="Shorten {{ long }}")
    with pytest.raises(AgentExecutionError) as info:
        sequence(first, second).run(topic="t")
    assert info.value.agent_name == "second" and isinstance(info.value.cause, BudgetExceededError)
    assert len(model.prompts) == 1  # the second agent's call was never made


def test_service_agent_pickles() -> None:
    from chatclient.agents import service_agent
    from tests.unit.test_agents_monitor import Summarizer

    summarizer = service_agent(Summarizer, client=ChatClient.create(FunctionChatModel(echo_model)), output_key="s")
    copy = pickle.loads(pickle.dumps(summarizer))
    assert copy.run(text="hello").output == "echo: Summarize in 5 words: hello"
