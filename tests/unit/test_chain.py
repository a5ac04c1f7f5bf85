"""The advisor chain: ordering, the four modes, copy, short-circuit, errors, BaseAdvisor rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from chatclient import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AdvisorChain,
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    Prompt,
)
from chatclient.advisor import ChatModelAdvisor, build_chain
from chatclient.errors import AdvisorChainError
from chatclient.testing import RecordingAdvisor, ScriptedChatModel
from tests.conftest import run_spec, run_text


def test_advisors_run_as_a_stack_sorted_by_order(mode: str) -> None:
    log: list[str] = []
    model = ScriptedChatModel([["he", "llo"]])
    client = ChatClient.builder(model).default_advisors(RecordingAdvisor("late", log, order=10)).build()
    spec = client.prompt("hi").advisors(RecordingAdvisor("early", log, order=-10), RecordingAdvisor("mid", log))
    assert run_text(spec, mode) == "hello"
    assert log == ["early:before", "mid:before", "late:before", "late:after", "mid:after", "early:after"]


def test_ties_keep_defaults_first_then_registration_order(mode: str) -> None:
    log: list[str] = []
    client = ChatClient.builder(ScriptedChatModel(["x"])).default_advisors(RecordingAdvisor("d1", log)).build()
    spec = client.prompt("hi").advisors(RecordingAdvisor("r1", log), RecordingAdvisor("r2", log))
    run_spec(spec, mode)
    assert [e for e in log if e.endswith("before")] == ["d1:before", "r1:before", "r2:before"]


def test_terminal_advisor_is_last_even_after_lowest_precedence() -> None:
    model = ScriptedChatModel(["x"])
    lowest = RecordingAdvisor("lowest", [], order=LOWEST_PRECEDENCE)
    chain = build_chain(
        [lowest, RecordingAdvisor("first", [], order=HIGHEST_PRECEDENCE)], ChatModelAdvisor(model), "call"
    )
    names = [a.name for a in chain.advisors]
    assert names == ["first", "lowest", "ChatModelAdvisor"]
    log: list[str] = []
    spec = ChatClient.create(model).prompt("q").advisors(RecordingAdvisor("lowest", log, order=LOWEST_PRECEDENCE))
    assert spec.call().content() == "x"
    assert log == ["lowest:before", "lowest:after"]


class ShortCircuit(BaseAdvisor):
    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return ChatClientResponse(ChatResponse.of_text("cached"), request.context)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return self.advise_call(request, chain)

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        yield self.advise_call(request, chain)

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        yield self.advise_call(request, chain)


def test_short_circuit_never_calls_the_model(mode: str) -> None:
    model = ScriptedChatModel([])
    log: list[str] = []
    spec = ChatClient.create(model).prompt("q").advisors(ShortCircuit(), RecordingAdvisor("after", log, order=5))
    assert run_text(spec, mode) == "cached"
    assert model.prompts == []
    assert log == []


class ContextWriter(BaseAdvisor):
    def __init__(self, key: str, value: str, order: int = 0) -> None:
        self.key, self.value, self.order = key, value, order

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        return request.mutate(context={self.key: self.value})

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        return response.mutate(context={f"{self.key}.after": True})


def test_context_flows_from_request_to_response_and_merges(mode: str) -> None:
    spec = (
        ChatClient.create(ScriptedChatModel([["a", "b"]]))
        .prompt("q")
        .advisors(ContextWriter("one", "1"), ContextWriter("two", "2", order=1), params={"user": "u"})
    )
    ctx = run_spec(spec, mode).context
    assert ctx["one"] == "1" and ctx["two"] == "2" and ctx["user"] == "u"
    assert ctx["one.after"] is True and ctx["two.after"] is True


class Recursive(BaseAdvisor):
    """Re-runs the rest of the chain twice, as tool loops and validators do."""

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        chain.copy(self).next_call(request)
        return chain.copy(self).next_call(request)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        await chain.copy(self).next_acall(request)
        return await chain.copy(self).next_acall(request)


@pytest.mark.parametrize("mode", ["call", "acall"])
def test_copy_reruns_only_the_advisors_after(mode: str) -> None:
    log: list[str] = []
    model = ScriptedChatModel(["one", "two"])
    spec = (
        ChatClient.create(model)
        .prompt("q")
        .advisors(RecordingAdvisor("outer", log, order=-1), Recursive(), RecordingAdvisor("inner", log, order=1))
    )
    assert run_text(spec, mode) == "two"
    assert log == ["outer:before", "inner:before", "inner:after", "inner:before", "inner:after", "outer:after"]


def test_copy_in_stream_mode() -> None:
    class StreamTwice(BaseAdvisor):
        def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
            list(chain.copy(self).next_stream(request))
            yield from chain.copy(self).next_stream(request)

    model = ScriptedChatModel([["a"], ["b", "c"]])
    spec = ChatClient.create(model).prompt("q").advisors(StreamTwice())
    assert list(spec.stream().content()) == ["b", "c"]


def test_copy_with_unknown_advisor_names_it() -> None:
    chain = build_chain([], ChatModelAdvisor(ScriptedChatModel([])), "call")
    stranger = RecordingAdvisor("stranger", [])
    with pytest.raises(ValueError, match="stranger"):
        chain.copy(stranger)


def test_exhausted_chain_raises() -> None:
    terminal = ChatModelAdvisor(ScriptedChatModel([]))
    chain = build_chain([], terminal, "call").copy(terminal)
    request = ChatClientRequest(Prompt("q"))
    with pytest.raises(AdvisorChainError, match="exhausted"):
        chain.next_call(request)
    with pytest.raises(AdvisorChainError):
        asyncio.run(chain.next_acall(request))
    with pytest.raises(AdvisorChainError):
        chain.next_stream(request)


class CallOnly(CallAdvisor):
    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        return chain.next_call(request)


@pytest.mark.parametrize("terminal", ["stream", "acall", "astream"])
def test_advisor_that_cannot_serve_a_mode_fails_at_chain_build(terminal: str) -> None:
    model = ScriptedChatModel(["x"])
    spec = ChatClient.create(model).prompt("q").advisors(CallOnly())
    with pytest.raises(AdvisorChainError, match="CallOnly"):
        getattr(spec, terminal)().chat_client_response() if terminal != "acall" else asyncio.run(
            spec.acall().chat_client_response()
        )
    assert model.prompts == []


def test_call_only_advisor_serves_call() -> None:
    assert ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(CallOnly()).call().content() == "x"


def test_none_advisor_is_rejected_at_the_spec_call() -> None:
    with pytest.raises(ValueError, match="None"):
        ChatClient.create(ScriptedChatModel([])).prompt("q").advisors(None)  # type: ignore[arg-type]


class CountingAfter(BaseAdvisor):
    def __init__(self) -> None:
        self.after_calls = 0
        self.seen_finish: list[str | None] = []

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        self.after_calls += 1
        assert response.chat_response is not None and response.chat_response.result is not None
        self.seen_finish.append(response.chat_response.result.finish_reason)
        return response


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_base_advisor_after_runs_once_on_the_finishing_chunk(mode: str) -> None:
    advisor = CountingAfter()
    spec = ChatClient.create(ScriptedChatModel([["a", "b", "c"]])).prompt("q").advisors(advisor)
    assert run_text(spec, mode) == "abc"
    assert advisor.after_calls == 1
    assert advisor.seen_finish == ["stop"]


def test_base_advisor_async_hooks_are_used_in_async_modes() -> None:
    class AsyncOnly(BaseAdvisor):
        def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
            raise AssertionError("sync before must not run in acall")

        async def abefore(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
            await asyncio.sleep(0)
            return request.mutate(prompt=request.prompt.augment_user_message("rewritten"))

    model = ScriptedChatModel(["ok"])
    assert asyncio.run(ChatClient.create(model).prompt("q").advisors(AsyncOnly()).acall().content()) == "ok"
    assert model.last_prompt.user_message.text == "rewritten"


def test_chain_snapshot_lists_sorted_advisors() -> None:
    seen: list[list[str]] = []

    class Peek(BaseAdvisor):
        def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
            seen.append([a.name for a in chain.advisors])
            return request

    a = RecordingAdvisor("a", [], order=5)
    ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(a, Peek()).call().content()
    assert seen == [["Peek", "a", "ChatModelAdvisor"]]


def test_advisor_errors_propagate_unchanged(mode: str) -> None:
    model = ScriptedChatModel([RuntimeError("provider down")])
    spec = ChatClient.create(model).prompt("q")
    with pytest.raises(RuntimeError, match="provider down"):
        run_spec(spec, mode)
