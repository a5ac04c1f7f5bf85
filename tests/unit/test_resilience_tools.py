"""Tool-loop guards (repeat hint then ToolLoopRepeatError, per-tool cap) and IMMEDIATE_IF_LAST."""

from __future__ import annotations

import pytest

from chatclient import TOOL_CALL_ORDER, AdvisorChain, BaseAdvisor, ChatClient, ChatClientRequest
from chatclient.errors import ToolLoopLimitError, ToolLoopRepeatError
from chatclient.messages import AssistantMessage, ToolCall, ToolResponseMessage
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolCallAdvisor, ToolContext, tool
from chatclient.tools.guards import ToolLoopGuard
from tests.conftest import run_spec

RUNS: list[str] = []


@tool
def lookup(city: str) -> str:
    """Look a city up."""
    RUNS.append(city)
    return f"{city}: sunny"


@tool(return_direct_if_last=True)
def final_answer(text: str) -> str:
    """Give the final answer."""
    return f"FINAL {text}"


@tool(return_direct=True)
def direct(text: str) -> str:
    """Answer directly."""
    return f"DIRECT {text}"


def calls(*items: tuple[str, str]) -> AssistantMessage:
    return AssistantMessage(None, tuple(ToolCall(f"c{i}-{n}", n, a) for i, (n, a) in enumerate(items)))


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def test_repeated_identical_call_gets_a_hint_then_stops_the_loop(mode: str) -> None:
    same = calls(("lookup", '{"city": "Oslo"}'))
    reordered = calls(("lookup", '{ "city":"Oslo" }'))  # same arguments, other spelling
    model = ScriptedChatModel([same, reordered, same, "never"])
    guard = ToolCallAdvisor(loop_guard=ToolLoopGuard(max_repeats=2))
    spec = ChatClient.create(model).prompt("weather?").tools(lookup).advisors(guard)
    with pytest.raises(ToolLoopRepeatError) as info:
        run_spec(spec, mode)
    assert info.value.tool_name == "lookup" and info.value.count == 3
    assert isinstance(info.value, ToolLoopLimitError)
    assert RUNS == ["Oslo", "Oslo"]  # the third identical call never ran
    # The second call's response carried the hint into the third prompt.
    last_tool_message = [m for m in model.prompts[2].messages if isinstance(m, ToolResponseMessage)][-1]
    assert "result will not change" in last_tool_message.responses[0].response_data
    first_tool_message = [m for m in model.prompts[1].messages if isinstance(m, ToolResponseMessage)][-1]
    assert "result will not change" not in first_tool_message.responses[0].response_data


def test_model_that_listens_to_the_hint_finishes_normally() -> None:
    same = calls(("lookup", '{"city": "Oslo"}'))
    model = ScriptedChatModel([same, same, "Oslo is sunny."])
    spec = (
        ChatClient.create(model)
        .prompt("weather?")
        .tools(lookup)
        .advisors(ToolCallAdvisor(loop_guard=ToolLoopGuard(max_repeats=2)))
    )
    response = spec.call().chat_client_response()
    assert response.chat_response is not None and response.chat_response.text == "Oslo is sunny."
    assert "result will not change" in response.tool_executions[-1].result


def test_per_tool_cap_stops_before_the_call_over_it() -> None:
    model = ScriptedChatModel(
        [calls(("lookup", '{"city": "A"}')), calls(("lookup", '{"city": "B"}'), ("lookup", '{"city": "C"}'))]
    )
    advisor = ToolCallAdvisor(loop_guard=ToolLoopGuard(max_repeats=None, max_calls_per_tool={"lookup": 2}))
    with pytest.raises(ToolLoopRepeatError, match="cap is 2"):
        ChatClient.create(model).prompt("go").tools(lookup).advisors(advisor).call().content()
    assert RUNS == ["A"]


def test_guard_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="max_repeats"):
        ToolLoopGuard(max_repeats=0)
    with pytest.raises(ValueError, match="max_calls_per_tool"):
        ToolLoopGuard(max_calls_per_tool={"x": -1})


@pytest.mark.parametrize(
    ("turn", "immediate"),
    [
        ([("final_answer", '{"text": "a"}')], True),  # [IL]
        ([("lookup", '{"city": "X"}'), ("final_answer", '{"text": "a"}')], True),  # [TO_LLM, IL]
        ([("final_answer", '{"text": "a"}'), ("lookup", '{"city": "X"}')], False),  # [IL, TO_LLM]
        ([("direct", '{"text": "a"}'), ("final_answer", '{"text": "a"}')], True),  # [I, IL]
        ([("final_answer", '{"text": "a"}'), ("direct", '{"text": "a"}')], True),  # [IL, I]
        ([("lookup", '{"city": "X"}'), ("final_answer", '{"text": "a"}'), ("direct", '{"text": "b"}')], False),
        ([("direct", '{"text": "a"}'), ("lookup", '{"city": "X"}')], False),  # [I, TO_LLM]
        ([("final_answer", '{"wrong": 1}')], False),  # [IL(err)]
        ([("lookup", '{"bad": 1}'), ("final_answer", '{"text": "a"}')], False),  # [TO_LLM(err), IL]
    ],
)
def test_immediate_if_last_matrix(turn: list[tuple[str, str]], immediate: bool) -> None:
    model = ScriptedChatModel([calls(*turn), "model answered"])
    r = ChatClient.create(model).prompt("go").tools(lookup, final_answer, direct).call().chat_response()
    assert r is not None
    if immediate:
        assert len(model.prompts) == 1 and r.result is not None and r.result.finish_reason == "return_direct"
    else:
        assert len(model.prompts) == 2 and r.text == "model answered"


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize(
    ("turn", "answer"),
    [
        ([("lookup", '{"city": "X"}'), ("final_answer", '{"text": "done"}')], "FINAL done"),  # [TO_LLM, IL]
        ([("direct", '{"text": "a"}'), ("final_answer", '{"text": "done"}')], "FINAL done"),  # [I, IL]
        ([("final_answer", '{"text": "a"}'), ("final_answer", '{"text": "b"}')], "FINAL b"),  # [IL, IL]
        ([("direct", '{"text": "a"}'), ("direct", '{"text": "b"}')], "DIRECT a"),  # [I, I]: every result
    ],
)
def test_content_is_the_finishing_tools_result(turn: list[tuple[str, str]], answer: str, streaming: bool) -> None:
    model = ScriptedChatModel([calls(*turn), "never asked"])
    spec = ChatClient.create(model).prompt("go").tools(lookup, final_answer, direct)
    if streaming:
        assert "".join(spec.stream().content()) == answer
        return
    response = spec.call().chat_response()
    assert response is not None and response.text == answer
    texts = [g.output.text for g in response.generations]
    if answer.startswith("FINAL"):
        assert texts == [answer]  # the steps before the finishing tool are not the answer
    else:
        assert texts == ["DIRECT a", "DIRECT b"]


# -- writable ToolContext ----------------------------------------------------------------------------


@tool
def detect_locale(text: str, ctx: ToolContext) -> str:
    """Detect the user's locale from a sample of their text."""
    ctx.set("locale", "nb-NO" if "hei" in text else "en-GB")
    return "noted"


@tool
def greet(ctx: ToolContext) -> str:
    """Greet the user in their language."""
    return "Hei!" if ctx.get("locale") == "nb-NO" else "Hello!"


class SeesLocale(BaseAdvisor):
    def __init__(self, seen: list[object]) -> None:
        self.seen = seen
        self.order = TOOL_CALL_ORDER + 10  # inner to the tool loop: runs every turn

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        self.seen.append(request.context.get("locale"))
        return request


def test_a_tool_writes_the_request_context_for_later_turns_and_the_response(mode: str) -> None:
    seen: list[object] = []
    model = ScriptedChatModel([calls(("detect_locale", '{"text": "hei der"}')), calls(("greet", "{}")), "Sa hei."])
    spec = ChatClient.create(model).prompt("hei der").tools(detect_locale, greet).advisors(SeesLocale(seen))
    response = run_spec(spec, mode)
    assert seen == [None, "nb-NO", "nb-NO"]
    assert response.context["locale"] == "nb-NO"
    assert [e.result for e in response.tool_executions] == ["noted", "Hei!"]


def test_tool_context_set_rejects_reserved_keys() -> None:
    ctx = ToolContext({"user": "ann"})
    ctx.set("locale", "fr")
    assert dict(ctx) == {"user": "ann", "locale": "fr"} and ctx.updates == {"locale": "fr"}
    with pytest.raises(ValueError, match="reserved"):
        ctx.set("chatclient.tool.callbacks", ())
