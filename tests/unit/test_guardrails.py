"""Guardrail results and the two guardrail advisors, in all four modes, with the scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from advisors import InputGuardrailAdvisor, MessageChatMemoryAdvisor, OutputGuardrailAdvisor
from advisors.guardrails import INPUT_GUARDRAIL_ORDER, OUTPUT_GUARDRAIL_ORDER
from chatclient import ChatClient
from chatclient.advisor import DEFAULT_CHAT_MEMORY_ORDER, TOOL_CALL_ORDER
from chatclient.errors import GuardrailError, InputGuardrailError, OutputGuardrailError
from chatclient.guardrails import (
    GuardrailResult,
    InputGuardrail,
    InputGuardrailRequest,
    OutputGuardrail,
    OutputGuardrailRequest,
)
from chatclient.memory import MessageWindowChatMemory
from chatclient.messages import AssistantMessage, Media, UserMessage
from chatclient.request import ChatClientResponse
from chatclient.testing import ScriptedChatModel
from tests.conftest import MODES, run_spec, run_text


class In(InputGuardrail):
    """An input guard that records the text it saw and returns what ``decide`` says."""

    def __init__(self, name: str, decide: Callable[[In, InputGuardrailRequest], GuardrailResult]) -> None:
        self.name = name
        self.decide = decide
        self.seen: list[str] = []

    def validate(self, request: InputGuardrailRequest) -> GuardrailResult:
        self.seen.append(request.text)
        return self.decide(self, request)


class Out(OutputGuardrail):
    """An output guard that records the text it saw and returns what ``decide`` says."""

    def __init__(self, name: str, decide: Callable[[Out, OutputGuardrailRequest], GuardrailResult]) -> None:
        self.name = name
        self.decide = decide
        self.seen: list[str] = []

    def validate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        self.seen.append(request.text)
        return self.decide(self, request)


def ok_in(name: str = "ok") -> In:
    return In(name, lambda g, r: g.success())


def ok_out(name: str = "ok") -> Out:
    return Out(name, lambda g, r: g.success())


def stream_chunks(spec: object, mode: str) -> list[ChatClientResponse]:
    if mode == "stream":
        return list(spec.stream().chat_client_response())  # type: ignore[attr-defined]

    async def collect() -> list[ChatClientResponse]:
        return [c async for c in spec.astream().chat_client_response()]  # type: ignore[attr-defined]

    return asyncio.run(collect())


# -- input guardrails ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_input_success_passes_the_request_unchanged(mode: str) -> None:
    model = ScriptedChatModel(["fine"])
    guard = ok_in()
    spec = ChatClient.create(model).prompt("hello").advisors(InputGuardrailAdvisor([guard]))
    assert run_text(spec, mode) == "fine"
    assert guard.seen == ["hello"]
    assert model.last_prompt.user_message.text == "hello"


@pytest.mark.parametrize("mode", MODES)
def test_input_rewrite_reaches_later_guards_and_the_model_and_the_last_rewrite_wins(mode: str) -> None:
    model = ScriptedChatModel(["a", "b"])
    g1 = In("g1", lambda g, r: g.success_with("[REDACTED] card"))
    g2 = ok_in("g2")
    client = ChatClient.create(model)
    run_spec(client.prompt("4111 card").advisors(InputGuardrailAdvisor([g1, g2])), mode)
    assert g2.seen == ["[REDACTED] card"]
    assert model.last_prompt.user_message.text == "[REDACTED] card"

    g3 = In("g3", lambda g, r: g.success_with("v3"))
    run_spec(client.prompt("4111 card").advisors(InputGuardrailAdvisor([g1, g2, g3])), mode)
    assert model.last_prompt.user_message.text == "v3"


def test_input_rewrite_keeps_media_and_the_rest_of_the_conversation() -> None:
    model = ScriptedChatModel(["ok"])
    media = Media("image/png", b"\x89PNG")
    spec = (
        ChatClient.create(model)
        .prompt()
        .system("be brief")
        .messages(UserMessage("earlier"), AssistantMessage("reply"))
        .user("look at this", media=[media])
        .advisors(InputGuardrailAdvisor(In("r", lambda g, r: g.success_with(r.text.upper()))))
    )
    spec.call().content()
    sent = model.last_prompt
    assert sent.user_message.text == "LOOK AT THIS"
    assert sent.user_message.media == (media,)
    assert [m.text for m in sent.messages] == ["be brief", "earlier", "reply", "LOOK AT THIS"]


@pytest.mark.parametrize("mode", MODES)
def test_input_failures_accumulate_and_the_model_is_not_called(mode: str) -> None:
    model = ScriptedChatModel([])
    g1 = In("g1", lambda g, r: g.failure("f1"))
    g2 = In("g2", lambda g, r: g.failure("f2"))
    spec = ChatClient.create(model).prompt("x").advisors(InputGuardrailAdvisor([g1, g2]))
    with pytest.raises(InputGuardrailError) as err:
        run_spec(spec, mode)
    assert [(f.guardrail, f.message, f.kind) for f in err.value.failures] == [
        ("g1", "f1", "failure"),
        ("g2", "f2", "failure"),
    ]
    assert "g1: f1" in str(err.value) and "g2: f2" in str(err.value)
    assert model.prompts == []


@pytest.mark.parametrize("mode", MODES)
def test_input_fatal_stops_the_list(mode: str) -> None:
    model = ScriptedChatModel([])
    g1 = In("g1", lambda g, r: g.fatal("stop", cause=ValueError("why")))
    g2 = ok_in("g2")
    spec = ChatClient.create(model).prompt("x").advisors(InputGuardrailAdvisor([g1, g2]))
    with pytest.raises(InputGuardrailError) as err:
        run_spec(spec, mode)
    assert g2.seen == []
    assert model.prompts == []
    (failure,) = err.value.failures
    assert failure.kind == "fatal" and isinstance(failure.cause, ValueError)


def test_a_rejected_input_is_never_stored_and_a_rewritten_one_is_stored_rewritten() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["noted"])
    redact = In("redact", lambda g, r: g.success_with(r.text.replace("hunter2", "[password]")))
    block = In("block", lambda g, r: g.fatal("no") if "forbidden" in r.text else g.success())
    client = (
        ChatClient.builder(model)
        .default_advisors(MessageChatMemoryAdvisor(memory), InputGuardrailAdvisor([redact, block]))
        .build()
    )
    assert client.prompt("my password is hunter2").call().content() == "noted"
    with pytest.raises(InputGuardrailError):
        client.prompt("forbidden words").call().content()
    assert [m.text for m in memory.get("default")] == ["my password is [password]", "noted"]


# -- output guardrails ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_output_success_returns_the_answer_with_one_attempt(mode: str) -> None:
    model = ScriptedChatModel([["Hel", "lo"]])
    guard = ok_out()
    response = run_spec(ChatClient.create(model).prompt("hi").advisors(OutputGuardrailAdvisor([guard])), mode)
    assert response.chat_response is not None
    assert response.chat_response.text == "Hello"
    assert response.chat_response.metadata.extra["guardrail_attempts"] == 1
    assert guard.seen == ["Hello"]


@pytest.mark.parametrize("mode", MODES)
def test_output_rewrite_replaces_the_answer(mode: str) -> None:
    model = ScriptedChatModel([["se", "cret"]])
    g1 = Out("g1", lambda g, r: g.success_with("[hidden]"))
    g2 = ok_out("g2")
    response = run_spec(ChatClient.create(model).prompt("hi").advisors(OutputGuardrailAdvisor([g1, g2])), mode)
    assert g2.seen == ["[hidden]"]
    assert response.chat_response is not None and response.chat_response.text == "[hidden]"
    assert response.chat_response.metadata.extra["guardrail_rewritten"] is True


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_streamed_rewrite_arrives_as_one_chunk_without_the_original_text(mode: str) -> None:
    model = ScriptedChatModel([["se", "cret"]])
    spec = (
        ChatClient.create(model)
        .prompt("hi")
        .advisors(OutputGuardrailAdvisor(Out("r", lambda g, r: g.success_with("ok"))))
    )
    chunks = stream_chunks(spec, mode)
    assert [c.chat_response.text for c in chunks if c.chat_response] == ["ok"]


@pytest.mark.parametrize("mode", MODES)
def test_output_failures_accumulate_and_fatal_stops(mode: str) -> None:
    model = ScriptedChatModel(["bad", "bad"])
    g1 = Out("g1", lambda g, r: g.failure("f1"))
    g2 = Out("g2", lambda g, r: g.failure("f2"))
    client = ChatClient.create(model)
    with pytest.raises(OutputGuardrailError) as err:
        run_spec(client.prompt("q").advisors(OutputGuardrailAdvisor([g1, g2])), mode)
    assert [(f.guardrail, f.message) for f in err.value.failures] == [("g1", "f1"), ("g2", "f2")]
    assert len(model.prompts) == 1  # a plain failure is not retried

    g3 = ok_out("g3")
    with pytest.raises(OutputGuardrailError) as err:
        run_spec(client.prompt("q").advisors(OutputGuardrailAdvisor([Out("f", lambda g, r: g.fatal("end")), g3])), mode)
    assert g3.seen == []
    assert [f.kind for f in err.value.failures] == ["fatal"]


@pytest.mark.parametrize("mode", MODES)
def test_reprompt_makes_one_plus_max_retries_calls_then_fails(mode: str) -> None:
    model = ScriptedChatModel(["a1", "a2", "a3", "never"])
    guard = Out("json", lambda g, r: g.reprompt("bad", "Please return JSON"))
    spec = ChatClient.create(model).prompt("give json").advisors(OutputGuardrailAdvisor([guard]))
    with pytest.raises(OutputGuardrailError) as err:
        run_spec(spec, mode)
    assert str(err.value).startswith(
        "Output validation failed. The guardrails have reached the maximum number of retries."
    )
    assert len(model.prompts) == 3
    assert guard.seen == ["a1", "a2", "a3"]  # every regenerated answer is validated
    assert [(f.kind, f.attempt, f.reprompt) for f in err.value.failures] == [
        ("reprompt", 1, "Please return JSON"),
        ("reprompt", 2, "Please return JSON"),
        ("reprompt", 3, "Please return JSON"),
    ]
    first, second, third = ([m.text for m in p.messages] for p in model.prompts)
    assert first == ["give json"]
    # Each reprompt is built from the original: the last rejected answer, then the reprompt text.
    assert second == ["give json", "a1", "Please return JSON"]
    assert third == ["give json", "a2", "Please return JSON"]
    assert isinstance(model.prompts[1].messages[1], AssistantMessage)


@pytest.mark.parametrize("mode", MODES)
def test_max_retries_zero_means_one_call(mode: str) -> None:
    model = ScriptedChatModel(["a1", "never"])
    spec = (
        ChatClient.create(model)
        .prompt("q")
        .advisors(OutputGuardrailAdvisor([Out("r", lambda g, r: g.retry("again"))], max_retries=0))
    )
    with pytest.raises(OutputGuardrailError, match="maximum number of retries"):
        run_spec(spec, mode)
    assert len(model.prompts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_retry_resends_the_same_prompt_and_revalidates_from_the_first_guard(mode: str) -> None:
    model = ScriptedChatModel(["first", ["sec", "ond"]])
    g1 = ok_out("g1")
    g2 = Out("g2", lambda g, r: g.retry("once more") if r.attempt == 1 else g.success())
    response = run_spec(ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([g1, g2])), mode)
    assert response.chat_response is not None and response.chat_response.text == "second"
    assert response.chat_response.metadata.extra["guardrail_attempts"] == 2
    assert g1.seen == ["first", "second"] and g2.seen == ["first", "second"]
    assert model.prompts[0] == model.prompts[1]


@pytest.mark.parametrize("mode", MODES)
def test_no_retry_after_a_rewrite(mode: str) -> None:
    model = ScriptedChatModel(["text", "never"])
    g1 = Out("g1", lambda g, r: g.success_with("fixed"))
    g2 = Out("g2", lambda g, r: g.retry("again"))
    with pytest.raises(OutputGuardrailError, match="Retry or reprompt is not allowed after a rewritten output"):
        run_spec(ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([g1, g2])), mode)
    assert len(model.prompts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_plain_failure_before_a_retry_is_not_retried(mode: str) -> None:
    model = ScriptedChatModel(["x", "never"])
    g1 = Out("g1", lambda g, r: g.failure("wrong"))
    g2 = Out("g2", lambda g, r: g.retry("again"))
    with pytest.raises(OutputGuardrailError) as err:
        run_spec(ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([g1, g2])), mode)
    assert [f.guardrail for f in err.value.failures] == ["g1"]
    assert len(model.prompts) == 1


@pytest.mark.parametrize("mode", MODES)
def test_usage_of_every_attempt_is_summed(mode: str) -> None:
    model = ScriptedChatModel(["one two", "three four five"])
    guard = Out("g", lambda g, r: g.retry("again") if r.attempt == 1 else g.success())
    response = run_spec(ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([guard])), mode)
    assert response.chat_response is not None
    assert response.chat_response.metadata.usage.completion_tokens == 5  # 2 + 3 words


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_streams_replay_only_the_accepted_attempt_after_it_is_complete(mode: str) -> None:
    log: list[str] = []
    model = ScriptedChatModel([["bad ", "one"], ["Hel", "lo"]])

    def decide(g: Out, r: OutputGuardrailRequest) -> GuardrailResult:
        log.append(f"validated {r.text}")
        return g.success() if r.text == "Hello" else g.reprompt("bad", "try again")

    spec = ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([Out("g", decide)]))
    texts: list[str] = []
    for chunk in stream_chunks(spec, mode):
        if chunk.chat_response is not None:
            log.append(f"delivered {chunk.chat_response.text}")
            texts.append(chunk.chat_response.text or "")
    assert texts == ["Hel", "lo"]
    assert log == ["validated bad one", "validated Hello", "delivered Hel", "delivered lo"]


def test_stream_delivers_nothing_before_the_model_finished() -> None:
    events: list[str] = []

    class Tracing(ScriptedChatModel):
        def stream(self, prompt):  # type: ignore[no-untyped-def]
            for chunk in super().stream(prompt):
                events.append("produced")
                yield chunk

    model = Tracing([["a", "b", "c"]])
    spec = ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([ok_out()]))
    for _ in spec.stream().content():
        events.append("delivered")
    assert events == ["produced"] * 3 + ["delivered"] * 3


def test_memory_keeps_only_the_accepted_answer_not_the_reprompt() -> None:
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(["not json", '{"a": 1}'])
    guard = Out("json", lambda g, r: g.success() if r.text.startswith("{") else g.reprompt("bad", "Please return JSON"))
    client = (
        ChatClient.builder(model)
        .default_advisors(MessageChatMemoryAdvisor(memory), OutputGuardrailAdvisor([guard]))
        .build()
    )
    assert client.prompt("data please").call().content() == '{"a": 1}'
    assert [m.text for m in memory.get("default")] == ["data please", '{"a": 1}']
    assert model.prompts[1].messages[-1].text == "Please return JSON"


# -- async guards, typing errors, construction ----------------------------------------------------


class AsyncOnly(InputGuardrail):
    def __init__(self) -> None:
        self.calls = 0

    async def avalidate(self, request: InputGuardrailRequest) -> GuardrailResult:
        self.calls += 1
        await asyncio.sleep(0)
        return self.success_with(request.text + "!")


@pytest.mark.parametrize("mode", MODES)
def test_a_guard_with_only_avalidate_works_in_every_mode(mode: str) -> None:
    model = ScriptedChatModel(["ok"])
    guard = AsyncOnly()
    run_spec(ChatClient.create(model).prompt("hey").advisors(InputGuardrailAdvisor([guard])), mode)
    assert model.last_prompt.user_message.text == "hey!"
    assert guard.calls == 1


class AsyncOut(OutputGuardrail):
    """Sync and async forms that disagree, to prove which one each mode calls."""

    def validate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        return self.success_with("sync")

    async def avalidate(self, request: OutputGuardrailRequest) -> GuardrailResult:
        return self.success_with("async")


@pytest.mark.parametrize("mode", MODES)
def test_async_modes_call_avalidate_and_blocking_modes_validate(mode: str) -> None:
    model = ScriptedChatModel(["x"])
    text = run_text(ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([AsyncOut()])), mode)
    assert text == ("async" if mode.startswith("a") else "sync")


def test_a_guard_without_validate_says_what_to_implement() -> None:
    class Empty(InputGuardrail):
        pass

    with pytest.raises(NotImplementedError, match="Empty must implement validate"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(
            InputGuardrailAdvisor([Empty()])
        ).call().content()


def test_a_guard_returning_something_else_is_a_type_error() -> None:
    class Sloppy(InputGuardrail):
        def validate(self, request: InputGuardrailRequest) -> GuardrailResult:
            return True  # type: ignore[return-value]

    with pytest.raises(TypeError, match=r"Sloppy.validate\(\) returned bool"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("q").advisors(
            InputGuardrailAdvisor([Sloppy()])
        ).call().content()


def test_constructor_checks() -> None:
    with pytest.raises(TypeError, match="use OutputGuardrailAdvisor"):
        InputGuardrailAdvisor([ok_out()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="use InputGuardrailAdvisor"):
        OutputGuardrailAdvisor([ok_in()])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="max_retries"):
        OutputGuardrailAdvisor([ok_out()], max_retries=-1)
    with pytest.raises(TypeError, match="max_retries"):
        OutputGuardrailAdvisor([ok_out()], max_retries=True)
    with pytest.raises(ValueError, match="needs guardrails"):
        InputGuardrailAdvisor(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt"):
        ok_out().reprompt("bad", "")
    single = OutputGuardrailAdvisor(ok_out(), max_retries=5)
    assert len(single.guards) == 1 and single.max_retries == 5
    assert OutputGuardrailAdvisor([ok_out()]).max_retries == 2


def test_default_orders_sit_between_memory_and_the_tool_loop() -> None:
    assert InputGuardrailAdvisor([]).order == INPUT_GUARDRAIL_ORDER < DEFAULT_CHAT_MEMORY_ORDER
    assert DEFAULT_CHAT_MEMORY_ORDER < OutputGuardrailAdvisor([]).order == OUTPUT_GUARDRAIL_ORDER < TOOL_CALL_ORDER


def test_errors_share_a_base_and_results_are_data() -> None:
    assert issubclass(InputGuardrailError, GuardrailError) and issubclass(OutputGuardrailError, GuardrailError)
    guard = ok_out("named")
    assert guard.success() == GuardrailResult("success", "named")
    assert guard.retry("m").asks_again and guard.retry("m").stops
    assert guard.fatal("m").stops and not guard.failure("m").stops
    assert guard.success_with("t").is_rewrite and guard.success_with("t").is_success


@pytest.mark.parametrize("mode", MODES)
def test_retries_and_rejections_are_reported_as_events(mode: str) -> None:
    from chatclient.events import AdvisorEvent

    events: list[AdvisorEvent] = []

    def listen(event: object) -> None:
        if isinstance(event, AdvisorEvent):
            events.append(event)

    model = ScriptedChatModel(["a", "b"])
    guard = Out("g", lambda g, r: g.reprompt("too vague", "Be precise.") if r.attempt == 1 else g.fatal("wrong"))
    spec = ChatClient.create(model).prompt("q").advisors(OutputGuardrailAdvisor([guard])).on_event(listen)
    with pytest.raises(OutputGuardrailError):
        run_spec(spec, mode)
    assert [(e.name, e.data["message"]) for e in events] == [
        ("guardrail.reprompt", "g: too vague"),
        ("guardrail.output_rejected", "g: wrong"),
    ]
    assert events[0].data["attempt"] == 2

    events.clear()
    spec = ChatClient.create(model).prompt("x").advisors(InputGuardrailAdvisor([In("i", lambda g, r: g.fatal("no"))]))
    with pytest.raises(InputGuardrailError):
        run_spec(spec.on_event(listen), mode)
    assert [(e.name, e.data["message"]) for e in events] == [("guardrail.input_rejected", "i: no")]


def test_retry_from_a_guard_used_on_input_is_a_type_error() -> None:
    class Both(InputGuardrail, OutputGuardrail):
        def validate(self, request):  # type: ignore[no-untyped-def, override]
            return self.retry("again")

    spec = ChatClient.create(ScriptedChatModel([])).prompt("q").advisors(InputGuardrailAdvisor([Both()]))
    with pytest.raises(TypeError, match="retry and reprompt are for answers only"):
        spec.call().content()
