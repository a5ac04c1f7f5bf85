"""ToolCallAdvisor: the tool loop through the client, in call, stream, acall and astream."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.advisor import HIGHEST_PRECEDENCE, TOOL_CALL_ORDER, is_finished
from chatclient.errors import ToolExecutionError, ToolLoopLimitError, UnknownToolError
from chatclient.messages import AssistantMessage, SystemMessage, ToolCall, ToolResponseMessage, UserMessage
from chatclient.models.base import Usage
from chatclient.request import ChatClientResponse
from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from chatclient.tools import RETURN_DIRECT, ToolCallAdvisor, ToolCallingManager, ToolContext, tool

MODES = ["call", "stream", "acall", "astream"]


def tool_turn(*specs: tuple[str, str], text: str | None = None) -> AssistantMessage:
    return AssistantMessage(text, tuple(ToolCall(f"{n}-{i}", n, a) for i, (n, a) in enumerate(specs)))


class Outcome:
    """What one run produced: the final response (the one chunk with a finish reason) and all chunks."""

    def __init__(self, final: ChatClientResponse, chunks: list[ChatClientResponse]) -> None:
        self.final = final
        self.chunks = chunks

    @property
    def text(self) -> str:
        return "".join(c.chat_response.text or "" for c in self.chunks if c.chat_response is not None)

    @property
    def exchange(self) -> tuple[Any, ...]:
        return tuple(self.final.context[ContextKeys.TOOL_EXCHANGE])


async def run(spec: Any, mode: str) -> Outcome:
    if mode == "call":
        r = spec.call().chat_client_response()
        return Outcome(r, [r])
    if mode == "acall":
        r = await spec.acall().chat_client_response()
        return Outcome(r, [r])
    if mode == "stream":
        chunks = list(spec.stream().chat_client_response())
    else:
        chunks = [c async for c in spec.astream().chat_client_response()]
    finished = [c for c in chunks if is_finished(c)]
    # Advisors before the tool loop must see exactly one end of stream, whatever happened inside.
    assert len(finished) == 1, chunks
    assert finished[0] is chunks[-1]
    return Outcome(finished[0], chunks)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(return_direct=True)
def lookup_order(order_id: str) -> dict[str, str]:
    """Look up an order; the result goes straight to the user."""
    return {"order": order_id, "status": "shipped"}


@pytest.mark.parametrize("mode", MODES)
async def test_round_trip_history_exchange_and_usage(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("add", '{"a": 2, "b": 3}')), ["The sum ", "is 5."]])
    client = ChatClient.builder(model).default_system("Be brief.").build()
    out = await run(client.prompt("What is 2+3?").tools(add), mode)

    assert out.text == "The sum is 5."
    assert len(model.prompts) == 2
    first, second = model.prompts
    assert [d.name for d in first.tools] == ["add"] and second.tools == first.tools
    assert second.messages[:2] == (SystemMessage("Be brief."), UserMessage("What is 2+3?"))
    assert second.messages[2] == tool_turn(("add", '{"a": 2, "b": 3}'))
    assert isinstance(second.messages[3], ToolResponseMessage)
    assert second.messages[3].responses[0].response_data == "5"
    assert out.exchange == second.messages[2:]
    # usage: scripted models count words; turn 1 = 5 prompt + 0 completion, turn 2 = (5 + "5") + 4
    assert out.final.chat_response.metadata.usage == Usage(5 + 6, 0 + 4)  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_no_tool_call_means_one_model_call_and_empty_exchange(mode: str) -> None:
    model = ScriptedChatModel([["Just ", "text."]])
    out = await run(ChatClient.create(model).prompt("hi").tools(add), mode)
    assert out.text == "Just text."
    assert out.exchange == ()
    assert len(model.prompts) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_two_tools_in_one_turn_run_concurrently_results_in_order(mode: str) -> None:
    barrier = threading.Barrier(2, timeout=30)
    second_done = threading.Event()

    @tool
    def slow_first() -> str:
        barrier.wait()  # both tools must be running at once to get past this
        assert second_done.wait(timeout=30)
        return "first"

    @tool
    def fast_second() -> str:
        barrier.wait()
        second_done.set()
        return "second"

    model = ScriptedChatModel([tool_turn(("slow_first", ""), ("fast_second", "")), "done"])
    out = await run(ChatClient.create(model).prompt("go").tools(slow_first, fast_second), mode)
    assert out.text == "done"
    responses = model.prompts[1].messages[-1].responses  # type: ignore[union-attr]
    assert [(r.name, r.response_data) for r in responses] == [("slow_first", "first"), ("fast_second", "second")]


@pytest.mark.parametrize("mode", ["acall", "astream"])
async def test_async_tools_run_on_the_event_loop_concurrently(mode: str) -> None:
    loop_thread = threading.get_ident()
    running: list[str] = []
    both = asyncio.Event()

    @tool
    async def fetch(url: str) -> str:
        assert threading.get_ident() == loop_thread  # native async: no worker thread
        running.append(url)
        if len(running) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), timeout=30)
        return f"<{url}>"

    model = ScriptedChatModel([tool_turn(("fetch", '{"url": "a"}'), ("fetch", '{"url": "b"}')), "ok"])
    out = await run(ChatClient.create(model).prompt("go").tools(fetch), mode)
    assert out.text == "ok"
    assert [r.response_data for r in model.prompts[1].messages[-1].responses] == ["<a>", "<b>"]  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_async_tool_also_works_in_sync_modes(mode: str) -> None:
    @tool
    async def aecho(text: str) -> str:
        await asyncio.sleep(0)
        return text * 2

    model = ScriptedChatModel([tool_turn(("aecho", '{"text": "ab"}')), "fine"])
    await run(ChatClient.create(model).prompt("go").tools(aecho), mode)
    assert model.prompts[1].messages[-1].responses[0].response_data == "abab"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_error_goes_back_to_the_model(mode: str) -> None:
    @tool
    def fragile(x: int) -> str:
        raise ConnectionError("upstream down")

    model = ScriptedChatModel([tool_turn(("fragile", '{"x": 1}')), "Sorry, the service is down."])
    out = await run(ChatClient.create(model).prompt("go").tools(fragile), mode)
    assert out.text == "Sorry, the service is down."
    (response,) = model.prompts[1].messages[-1].responses  # type: ignore[union-attr]
    assert response.is_error
    assert "fragile" in response.response_data and "ConnectionError: upstream down" in response.response_data


@pytest.mark.parametrize("mode", MODES)
async def test_raise_on_tool_error_propagates(mode: str) -> None:
    @tool
    def fragile() -> str:
        raise ConnectionError("upstream down")

    advisor = ToolCallAdvisor(tool_calling_manager=ToolCallingManager(raise_on_tool_error=True))
    model = ScriptedChatModel([tool_turn(("fragile", ""))])
    with pytest.raises(ToolExecutionError, match="fragile"):
        await run(ChatClient.create(model).prompt("go").tools(fragile).advisors(advisor), mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [('{"a": 1, "b"', "not valid JSON"), ('{"a": "x", "b": 1}', "a: Input should be a valid integer")],
)
async def test_bad_arguments_let_the_model_retry(mode: str, arguments: str, expected: str) -> None:
    model = ScriptedChatModel([tool_turn(("add", arguments)), tool_turn(("add", '{"a": 1, "b": 1}')), "2"])
    out = await run(ChatClient.create(model).prompt("1+1").tools(add), mode)
    assert out.text == "2"
    bad = model.prompts[1].messages[-1].responses[0]  # type: ignore[union-attr]
    assert bad.is_error and "add" in bad.response_data and expected in bad.response_data
    good = model.prompts[2].messages[-1].responses[0]  # type: ignore[union-attr]
    assert (good.is_error, good.response_data) == (False, "2")
    assert len(out.exchange) == 4


@pytest.mark.parametrize("mode", MODES)
async def test_hallucinated_tool_name(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("multiply", '{"a": 2, "b": 3}')), "I cannot multiply."])
    out = await run(ChatClient.create(model).prompt("2*3").tools(add, lookup_order), mode)
    assert out.text == "I cannot multiply."
    response = model.prompts[1].messages[-1].responses[0]  # type: ignore[union-attr]
    assert response.is_error and "'multiply'" in response.response_data
    assert "Available tools: add, lookup_order" in response.response_data

    strict = ToolCallAdvisor(tool_calling_manager=ToolCallingManager(raise_on_unknown_tool=True))
    model = ScriptedChatModel([tool_turn(("multiply", "{}"))])
    with pytest.raises(UnknownToolError, match="multiply"):
        await run(ChatClient.create(model).prompt("2*3").tools(add).advisors(strict), mode)


@pytest.mark.parametrize("mode", MODES)
async def test_iteration_limit(mode: str) -> None:
    executed: list[int] = []

    @tool
    def step(n: int) -> int:
        executed.append(n)
        return n

    turns = [tool_turn(("step", f'{{"n": {i}}}')) for i in range(3)]
    model = ScriptedChatModel([*turns, "never reached"])
    advisor = ToolCallAdvisor(max_iterations=2)
    with pytest.raises(ToolLoopLimitError, match="max_iterations=2"):
        await run(ChatClient.create(model).prompt("go").tools(step).advisors(advisor), mode)
    assert executed == [0, 1]  # the third tool turn is refused, not executed
    assert len(model.prompts) == 3

    # exactly max_iterations tool turns is fine
    model = ScriptedChatModel([*turns[:2], "finished"])
    out = await run(ChatClient.create(model).prompt("go").tools(step).advisors(ToolCallAdvisor(max_iterations=2)), mode)
    assert out.text == "finished"


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_pure(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("lookup_order", '{"order_id": "A7"}'))])
    out = await run(ChatClient.create(model).prompt("Where is A7?").tools(lookup_order, add), mode)
    assert len(model.prompts) == 1  # the model is not asked again
    cr = out.final.chat_response
    assert cr is not None and cr.text == '{"order":"A7","status":"shipped"}'
    assert cr.result.finish_reason == RETURN_DIRECT  # type: ignore[union-attr]
    assert cr.result.metadata.extra["tool_name"] == "lookup_order"  # type: ignore[union-attr]
    assert len(out.exchange) == 2
    assert out.text == '{"order":"A7","status":"shipped"}'


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_mixed_goes_back_to_the_model(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("lookup_order", '{"order_id": "A7"}'), ("add", '{"a":1,"b":1}')), "Shipped."])
    out = await run(ChatClient.create(model).prompt("Where is A7?").tools(lookup_order, add), mode)
    assert len(model.prompts) == 2
    assert out.text == "Shipped."
    assert out.final.chat_response.result.finish_reason == "stop"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_content_through_client(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("lookup_order", '{"order_id": "B1"}'))])
    spec = ChatClient.create(model).prompt("B1?").tools(lookup_order)
    if mode == "call":
        content = spec.call().content()
    elif mode == "acall":
        content = await spec.acall().content()
    elif mode == "stream":
        content = "".join(spec.stream().content())
    else:
        content = "".join([c async for c in spec.astream().content()])
    assert content == '{"order":"B1","status":"shipped"}'


@pytest.mark.parametrize("mode", MODES)
async def test_advisors_after_see_every_iteration_before_see_one(mode: str) -> None:
    log: list[str] = []
    outer = RecordingAdvisor("outer", log, order=HIGHEST_PRECEDENCE + 100)  # e.g. memory
    inner = RecordingAdvisor("inner", log, order=0)  # after the ToolCallAdvisor
    model = ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}')), tool_turn(("add", '{"a":2,"b":2}')), "4"])
    await run(ChatClient.create(model).prompt("go").tools(add).advisors(inner, outer), mode)
    assert log == [
        "outer:before",
        "inner:before",
        "inner:after",
        "inner:before",
        "inner:after",
        "inner:before",
        "inner:after",
        "outer:after",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_conversation_history_disabled_sends_system_and_latest_exchange(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}')), tool_turn(("add", '{"a":2,"b":2}')), "4"])
    client = ChatClient.builder(model).default_system("sys").build()
    advisor = ToolCallAdvisor(conversation_history=False)
    await run(client.prompt("go").tools(add).advisors(advisor), mode)
    third = model.prompts[2].messages
    assert len(third) == 3
    assert third[0] == SystemMessage("sys")
    assert third[1] == tool_turn(("add", '{"a":2,"b":2}'))
    assert third[2].responses[0].response_data == "4"  # type: ignore[union-attr]
    # without a system message, only the exchange is sent
    model = ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}')), "2"])
    await run(ChatClient.create(model).prompt("go").tools(add).advisors(advisor), mode)
    assert [type(m).__name__ for m in model.prompts[1].messages] == ["AssistantMessage", "ToolResponseMessage"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_context_merged_received_and_never_sent(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        seen.append(dict(ctx))
        return "ok"

    model = ScriptedChatModel([tool_turn(("whoami", "")), "done"])
    client = ChatClient.builder(model).default_tool_context({"tenant": "default", "secret": "s3cr3t-token"}).build()
    await run(client.prompt("who").tools(whoami).tool_context({"tenant": "acme"}), mode)
    assert seen == [{"tenant": "acme", "secret": "s3cr3t-token"}]
    assert model.prompts[0].tools[0].input_schema["properties"] == {}
    for prompt in model.prompts:
        assert "s3cr3t-token" not in repr(prompt.messages) and "s3cr3t-token" not in repr(prompt.tools)


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_tool_call_chunks_hidden_unless_requested(mode: str) -> None:
    def script() -> ScriptedChatModel:
        return ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}')), ["It ", "is 2"]])

    out = await run(ChatClient.create(script()).prompt("go").tools(add), mode)
    assert not any(c.chat_response.has_tool_calls() for c in out.chunks)  # type: ignore[union-attr]
    assert len(out.chunks) == 2

    advisor = ToolCallAdvisor(stream_tool_call_responses=True)
    out = await run(ChatClient.create(script()).prompt("go").tools(add).advisors(advisor), mode)
    assert len(out.chunks) == 3
    tool_chunk = out.chunks[0].chat_response
    assert tool_chunk is not None and tool_chunk.has_tool_calls()
    assert not tool_chunk.has_finish_reason()  # stripped: only the final chunk ends the stream


@pytest.mark.parametrize("mode", MODES)
async def test_forced_tool_choice_applies_to_first_turn_only(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}')), "2"])
    options = ChatOptions(tool_choice="required", temperature=0.0)
    await run(ChatClient.create(model).prompt("go").tools(add).options(options), mode)
    assert model.prompts[0].options == options
    assert model.prompts[1].options == ChatOptions(temperature=0.0)


@pytest.mark.parametrize("mode", MODES)
async def test_duplicate_tool_names_fail_when_the_request_is_built(mode: str) -> None:
    @tool(name="add")
    def other_add(x: int) -> int:
        return x

    model = ScriptedChatModel(["unused"])
    with pytest.raises(ValueError, match=r"duplicate tool name.*add"):
        await run(ChatClient.create(model).prompt("go").tools(add, other_add), mode)
    assert model.prompts == []


async def test_default_tool_call_advisor_added_once_and_explicit_one_kept() -> None:
    model = ScriptedChatModel()
    spec = ChatClient.create(model).prompt("go").tools(add)
    from chatclient.client import _to_request

    _, advisors = _to_request(spec._state)  # type: ignore[attr-defined]
    assert [type(a) for a in advisors] == [ToolCallAdvisor] and advisors[0].order == TOOL_CALL_ORDER
    mine = ToolCallAdvisor(max_iterations=3)
    _, advisors = _to_request(spec.advisors(mine)._state)  # type: ignore[attr-defined]
    assert advisors == [mine]


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match="max_iterations"):
        ToolCallAdvisor(max_iterations=0)
    with pytest.raises(ValueError, match="order"):
        ToolCallAdvisor(order=HIGHEST_PRECEDENCE)
    from advisors import ToolCallAdvisor as Reexported

    assert Reexported is ToolCallAdvisor


@pytest.mark.parametrize("mode", MODES)
async def test_without_tools_in_the_request_tool_calls_are_returned_untouched(mode: str) -> None:
    model = ScriptedChatModel([tool_turn(("add", '{"a":1,"b":1}'))])
    out = await run(ChatClient.create(model).prompt("go").advisors(ToolCallAdvisor()), mode)
    assert len(model.prompts) == 1
    assert out.final.chat_response is not None
    aggregated = [
        c.chat_response for c in out.chunks if c.chat_response is not None and c.chat_response.has_tool_calls()
    ]
    assert aggregated and aggregated[0].result.output.tool_calls[0].name == "add"  # type: ignore[union-attr]
    assert out.exchange == ()
