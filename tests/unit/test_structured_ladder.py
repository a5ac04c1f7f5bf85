"""The structured-output ladder without I/O, and conversion errors that say why.

Rungs over real HTTP are in tests/integration/test_structured_ladder_http.py; here: planning,
rejection detection, the per-model memory (thread-safe), the answer-tool rewrite, pinning, the
explanations of OutputConversionError / RefusalError, the validation advisor's early stops, and
entity() after chat_response().
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from advisors import StructuredOutputValidationAdvisor
from chatclient import AssistantMessage, ChatClient, ContextKeys, ModelCapabilities
from chatclient.errors import (
    AuthenticationError,
    ChatClientError,
    ModelHTTPError,
    OutputConversionError,
    RateLimitError,
    RefusalError,
)
from chatclient.messages import ToolCall
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata
from chatclient.models.structured_output import (
    ANSWER_TOOL_NAME,
    ToolAnswerStream,
    forget_rejections,
    plan,
    rejected_rungs,
    rejection_reason,
    remember_rejection,
    tool_answer,
)
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt, ToolDefinition
from chatclient.testing import FunctionChatModel, ScriptedChatModel


class City(BaseModel):
    name: str
    country: str


CITY_JSON = '{"name": "Lisbon", "country": "Portugal"}'
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
LADDER = ModelCapabilities(structured_output=("native", "json_object", "tool"))


class Caps:
    """A model stand-in with capabilities and default options (plan() reads nothing else)."""

    def __init__(self, caps: ModelCapabilities, name: str = "m") -> None:
        self.capabilities = caps
        self.default_options = ChatOptions(model=name)


def response(text: str | None, finish: str = "stop", **extra: Any) -> ChatResponse:
    return ChatResponse.of_text(text, finish_reason=finish, **extra)


# -- capabilities and planning ------------------------------------------------------------------------


def test_capabilities_derive_and_validate_rungs() -> None:
    assert ModelCapabilities().structured_output == ()
    assert ModelCapabilities(native_structured_output=True).structured_output == ("native",)
    assert LADDER.native_structured_output is True
    assert ModelCapabilities(structured_output=()).native_structured_output is False
    with pytest.raises(ValueError, match="unknown structured-output rung 'grammar'"):
        ModelCapabilities(structured_output=("grammar",))
    with pytest.raises(TypeError, match="tuple of rung names"):
        ModelCapabilities(structured_output="native")  # type: ignore[arg-type]


def test_plan_follows_capabilities_then_instructions() -> None:
    ladder = plan(Caps(LADDER), Prompt("q"), SCHEMA)
    assert ladder.rungs == ("native", "json_object", "tool", "instructions")
    assert ladder.reason == "model capabilities" and not ladder.pinned
    assert plan(Caps(ModelCapabilities()), Prompt("q"), SCHEMA).rungs == ("instructions",)
    assert plan(Caps(LADDER), Prompt("q"), {"type": "array"}).rungs == ("instructions",)
    assert plan(Caps(LADDER), Prompt("q"), None).rungs == ("instructions",)
    tools = Prompt("q", tools=[ToolDefinition("t", "d", {"type": "object", "properties": {}})])
    with_tools = plan(Caps(LADDER), tools, SCHEMA)
    assert with_tools.rungs == ("native", "json_object", "instructions")
    assert "request offers its own tools" in with_tools.reason
    pinned = plan(Caps(ModelCapabilities()), Prompt("q"), SCHEMA, "tool")
    assert pinned.rungs == ("tool",) and pinned.pinned
    with pytest.raises(ValueError, match="unknown structured-output mode 'grammar'"):
        plan(Caps(LADDER), Prompt("q"), SCHEMA, "grammar")


def test_memory_is_per_model_and_per_model_name_and_can_be_forgotten() -> None:
    model, other = Caps(LADDER, "a"), Caps(LADDER, "a")
    remember_rejection(model, "native", "rejected: native (HTTP 500)", "a")
    assert plan(model, Prompt("q"), SCHEMA).rungs == ("json_object", "tool", "instructions")
    assert "native was rejected: native (HTTP 500) earlier" in plan(model, Prompt("q"), SCHEMA).reason
    assert plan(other, Prompt("q"), SCHEMA).rungs[0] == "native"  # another instance: its own memory
    renamed = Prompt("q", ChatOptions(model="b"))
    assert plan(model, renamed, SCHEMA).rungs[0] == "native"  # another model name on the same server
    forget_rejections(model)
    assert rejected_rungs(model, "a") == {}


def test_memory_is_thread_safe() -> None:
    model = Caps(LADDER)
    barrier = threading.Barrier(8)

    def worker(i: int) -> None:
        barrier.wait()
        for j in range(200):
            remember_rejection(model, ("native", "json_object", "tool")[j % 3], f"r{i}-{j}", f"name{j % 5}")
            rejected_rungs(model, f"name{j % 5}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for n in range(5):
        assert set(rejected_rungs(model, f"name{n}")) == {"native", "json_object", "tool"}


def test_rejection_detection_needs_an_http_error_naming_the_rung() -> None:
    body = '{"error": {"message": "response_format.type: Input should be \'text\' or \'json_object\'"}}'
    error = ModelHTTPError("OpenAI returned HTTP 500: response_format.type ...", status=500, body=body)
    assert rejection_reason(error, "native") == "rejected: native (OpenAI returned HTTP 500: response_format.type ...)"
    assert rejection_reason(ModelHTTPError("HTTP 400: invalid format", status=400), "json_object") is not None
    assert rejection_reason(ModelHTTPError("HTTP 400: tool_choice unsupported", status=400), "tool") is not None
    # Not rejections: unrelated messages, auth, rate limits, non-HTTP errors, the instructions rung.
    assert rejection_reason(ModelHTTPError("HTTP 500: out of memory", status=500), "native") is None
    assert rejection_reason(ModelHTTPError("HTTP 400: tool_choice unsupported", status=400), "native") is None
    assert rejection_reason(AuthenticationError("HTTP 401 response_format", status=401), "native") is None
    assert rejection_reason(RateLimitError("HTTP 429 response_format"), "native") is None
    assert rejection_reason(ValueError("response_format"), "native") is None
    assert rejection_reason(ModelHTTPError("HTTP 400 response_format", status=400), "instructions") is None
    # "format" as a whole word only: "information" or "formatting" says nothing about the rung.
    assert rejection_reason(ModelHTTPError("HTTP 400: missing information", status=400), "json_object") is None


# -- the tool rung's answer ---------------------------------------------------------------------------


def test_tool_answer_turns_the_answer_call_into_text() -> None:
    call = ToolCall("c1", ANSWER_TOOL_NAME, CITY_JSON)
    raw = ChatResponse((Generation(AssistantMessage(None, (call,)), GenerationMetadata("tool_calls")),))
    out = tool_answer(raw)
    assert out.text == CITY_JSON and not out.has_tool_calls()
    assert out.result is not None and out.result.finish_reason == "stop"
    cut = ChatResponse((Generation(AssistantMessage(None, (call,)), GenerationMetadata("length")),))
    assert tool_answer(cut).result.finish_reason == "length"  # type: ignore[union-attr]


def test_tool_answer_stream_follows_fragments_by_id_and_position() -> None:
    def chunk(*calls: ToolCall, finish: str | None = None) -> ChatResponse:
        return ChatResponse((Generation(AssistantMessage(None, tuple(calls)), GenerationMetadata(finish)),))

    rewriter = ToolAnswerStream()
    chunks = [
        chunk(ToolCall("c1", ANSWER_TOOL_NAME, "")),
        chunk(ToolCall("c1", "", '{"name": ')),
        chunk(ToolCall("", "", '"Lisbon", "country": "Portugal"}')),
        chunk(finish="tool_calls"),
    ]
    out = [rewriter.rewrite(c) for c in chunks]
    assert "".join(c.text or "" for c in out) == CITY_JSON
    assert not any(c.has_tool_calls() for c in out)
    assert out[-1].result is not None and out[-1].result.finish_reason == "stop"


# -- through the client ---------------------------------------------------------------------------------


def test_scripted_models_keep_instructions() -> None:
    model = ScriptedChatModel([CITY_JSON])
    result = ChatClient.create(model).prompt("q").call().response_entity(City)
    assert result.entity == City(name="Lisbon", country="Portugal")
    assert "JSON Schema" in model.last_prompt.user_message.text
    assert result.response is not None
    assert result.response.metadata.extra["structured_output_mode"] == "instructions"
    assert result.response.metadata.extra["structured_output_reason"] == "the model has no schema mode"


class Rejecting(FunctionChatModel):
    """Rejects the native rung like llama-cpp-python's server, answers any other rung."""

    def __init__(self) -> None:
        self.seen: list[Prompt] = []
        super().__init__(self._answer, capabilities=ModelCapabilities(structured_output=("native", "tool")))

    def _answer(self, prompt: Prompt) -> Any:
        self.seen.append(prompt)
        if prompt.options is not None and prompt.options.output_schema is not None:
            raise ModelHTTPError("Fake returned HTTP 500: response_format invalid", status=500)
        if prompt.tools:
            return AssistantMessage(None, (ToolCall("c1", ANSWER_TOOL_NAME, CITY_JSON),))
        return CITY_JSON


@pytest.mark.parametrize("how", ["call", "acall", "stream", "astream"])
def test_ladder_falls_back_through_the_chain_in_every_mode(how: str) -> None:
    model = Rejecting()
    spec = ChatClient.create(model).prompt("q")
    if how == "call":
        value = spec.call().entity(City)
    elif how == "acall":
        value = asyncio.run(spec.acall().entity(City))
    elif how == "stream":
        value = list(spec.stream().entity(City))[-1]
    else:

        async def go() -> Any:
            return [x async for x in spec.astream().entity(City)][-1]

        value = asyncio.run(go())
    assert value == City(name="Lisbon", country="Portugal")
    assert len(model.seen) == 2
    assert model.seen[1].tools[0].name == ANSWER_TOOL_NAME
    assert model.seen[1].options is not None and model.seen[1].options.tool_choice == ANSWER_TOOL_NAME


def test_pinning_by_context_key_and_native_false() -> None:
    model = ScriptedChatModel([CITY_JSON, CITY_JSON], capabilities=LADDER)
    client = ChatClient.create(model)
    r = client.prompt("q").advisors(params={ContextKeys.STRUCTURED_OUTPUT_MODE: "tool"}).call().response_entity(City)
    assert model.last_prompt.options is not None and model.last_prompt.options.tool_choice == ANSWER_TOOL_NAME
    assert r.response is not None and r.response.metadata.extra["structured_output_mode"] == "tool"
    r = client.prompt("q").advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: False}).call().response_entity(City)
    assert r.response is not None and r.response.metadata.extra["structured_output_mode"] == "instructions"
    with pytest.raises(ValueError, match="unknown structured-output mode 'json'"):
        client.prompt("q").call().entity(City, mode="json")  # type: ignore[call-overload]


# -- conversion errors that say why (issue 20.8) --------------------------------------------------------


def _client(*answers: Any, **options: Any) -> ChatClient:
    builder = ChatClient.builder(ScriptedChatModel(list(answers)))
    if options:
        builder.default_options(ChatOptions(**options))
    return builder.build()


def test_cut_off_answer_names_the_token_limit() -> None:
    client = _client(response('{"name": "Lis', "length"), max_tokens=12)
    with pytest.raises(OutputConversionError) as info:
        client.prompt("q").call().entity(City)
    message = str(info.value)
    assert "token limit (max_tokens=12)" in message and "finish reason 'length'" in message
    assert "incomplete answer" in message and '{"name": "Lis' in message


def test_empty_cut_off_answer_and_plain_empty_answer() -> None:
    with pytest.raises(OutputConversionError, match=r"hit its token limit .*returned an empty answer"):
        _client(response("", "length")).prompt("q").call().entity(City)
    with pytest.raises(OutputConversionError, match="returned an empty answer \\(finish reason 'stop'\\)"):
        _client(response("   ")).prompt("q").call().entity(City)


def test_not_json_shows_a_short_excerpt() -> None:
    with pytest.raises(OutputConversionError, match="not valid JSON") as info:
        _client("Lisbon is the capital of Portugal.").prompt("q").call().entity(City)
    assert "'Lisbon is the capital of Portugal.'" in str(info.value)


@pytest.mark.parametrize("how", ["call", "acall", "stream", "astream"])
def test_refusal_raises_refusal_error_with_the_text(how: str) -> None:
    refused = ChatResponse(
        (Generation(AssistantMessage("", refusal="I can't help with that."), GenerationMetadata("stop")),)
    )
    spec = ChatClient.create(ScriptedChatModel([refused])).prompt("q")
    with pytest.raises(RefusalError) as info:
        if how == "call":
            spec.call().entity(City)
        elif how == "acall":
            asyncio.run(spec.acall().entity(City))
        elif how == "stream":
            list(spec.stream().entity(City))
        else:

            async def go() -> None:
                async for _ in spec.astream().entity(City):
                    pass

            asyncio.run(go())
    assert info.value.refusal == "I can't help with that."
    assert isinstance(info.value, OutputConversionError)


def test_stream_cut_off_is_explained_too() -> None:
    client = _client(response('{"name": "Lis', "length"), max_tokens=5)
    with pytest.raises(OutputConversionError, match="max_tokens=5"):
        list(client.prompt("q").stream().entity(City))


class PlainCity:
    def __init__(self, name: str) -> None:
        self.name = name


def test_unsupported_entity_type_lists_supported_types() -> None:
    with pytest.raises(TypeError) as info:
        _client(CITY_JSON).prompt("q").call().entity(PlainCity)
    message = str(info.value)
    assert "PlainCity is a plain class" in message
    assert "pydantic models, dataclasses, TypedDicts" in message and "@dataclass" in message
    assert "arbitrary_types_allowed" not in message  # not pydantic's internal advice


# -- the validation advisor stops when re-asking cannot help (issue 20.2) ---------------------------------


def test_validation_does_not_re_ask_for_a_cut_off_answer_and_reports_attempts() -> None:
    model = ScriptedChatModel([response("", "length"), CITY_JSON])
    spec = ChatClient.create(model).prompt("q").advisors(StructuredOutputValidationAdvisor(City))
    with pytest.raises(OutputConversionError) as info:
        spec.call().entity(City)
    assert len(model.prompts) == 1
    message = str(info.value)
    assert "StructuredOutputValidationAdvisor made 1 model call and stopped early" in message
    assert "cut off by the token limit" in message


def test_a_cut_answer_that_loops_says_more_tokens_would_not_help() -> None:
    # Issue 27.2: a small model looped inside a string until max_tokens; "raise max_tokens" could not help.
    looping = '{"name": "Lis;1;1;1;1;1;1;1;1;1;1;1;1'
    client = _client(response(looping, "length"), max_tokens=384)
    with pytest.raises(OutputConversionError) as info:
        client.prompt("q").call().entity(City)
    message = str(info.value)
    assert "max_tokens=384" in message and "repeating ';1' over and over" in message
    assert "would only repeat more" in message and "maxLength" in message
    assert "raise max_tokens in ChatOptions" not in message
    model = ScriptedChatModel([response(looping, "length"), CITY_JSON])
    spec = ChatClient.create(model).prompt("q").advisors(StructuredOutputValidationAdvisor(City))
    with pytest.raises(OutputConversionError, match=r"stopped early: .*while the model repeated ';1' over and over"):
        spec.call().entity(City)
    assert len(model.prompts) == 1  # a new attempt would loop the same way
    # a cut answer that does not repeat itself keeps the old advice
    with pytest.raises(OutputConversionError, match="raise max_tokens in ChatOptions"):
        _client(response('{"name": "Lisbon is a city on the Tagus', "length")).prompt("q").call().entity(City)


def test_validation_stops_on_the_same_invalid_answer_and_on_refusal() -> None:
    model = ScriptedChatModel(["nope", "nope", "nope", "nope"])
    spec = ChatClient.create(model).prompt("q").advisors(StructuredOutputValidationAdvisor(City))
    with pytest.raises(OutputConversionError, match="made 2 model calls and stopped early: the model gave the same"):
        spec.call().entity(City)
    assert len(model.prompts) == 2

    refused = ChatResponse((Generation(AssistantMessage(None, refusal="No."), GenerationMetadata("stop")),))
    model = ScriptedChatModel([refused, CITY_JSON])
    spec = ChatClient.create(model).prompt("q").advisors(StructuredOutputValidationAdvisor(City))
    with pytest.raises(RefusalError):
        spec.call().entity(City)
    assert len(model.prompts) == 1


def test_validation_attempt_count_is_in_the_error_after_max_attempts() -> None:
    model = ScriptedChatModel(["bad 1", "bad 2", "bad 3"])
    spec = ChatClient.create(model).prompt("q").advisors(StructuredOutputValidationAdvisor(City, max_repeat_attempts=2))
    with pytest.raises(OutputConversionError, match=r"made 3 model calls\.$"):
        spec.call().entity(City)


# -- entity() after chat_response() (issue 20.9) -------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_entity_after_chat_response_reuses_a_fitting_answer(asynchronous: bool) -> None:
    model = ScriptedChatModel([CITY_JSON])
    spec = ChatClient.create(model).prompt("q")
    if asynchronous:

        async def go() -> Any:
            r = spec.acall()
            await r.chat_response()
            return await r.entity(City)

        city = asyncio.run(go())
    else:
        r = spec.call()
        r.chat_response()
        city = r.entity(City)
    assert city == City(name="Lisbon", country="Portugal")
    assert len(model.prompts) == 1


def test_entity_after_chat_response_says_how_to_ask_for_both() -> None:
    model = ScriptedChatModel(["Lisbon, Portugal."])
    r = ChatClient.create(model).prompt("q").call()
    assert r.content() == "Lisbon, Portugal."
    with pytest.raises(ChatClientError, match=r"call response_entity\(City\) instead") as info:
        r.entity(City)
    assert not isinstance(info.value, OutputConversionError)
    assert len(model.prompts) == 1


def test_response_entity_and_entity_first_share_one_call() -> None:
    model = ScriptedChatModel([CITY_JSON])
    r = ChatClient.create(model).prompt("q").call()
    both = r.response_entity(City)
    assert both.entity == r.entity(City) == City(name="Lisbon", country="Portugal")
    assert r.chat_response() is both.response
    assert len(model.prompts) == 1


def test_response_metadata_carries_usage_finish_and_rung_for_a_plain_answer() -> None:
    # A response made without entity() has no rung in its metadata.
    model = ScriptedChatModel(["hi"], capabilities=LADDER)
    cr = ChatClient.create(model).prompt("q").call().chat_response()
    assert cr is not None and "structured_output_mode" not in cr.metadata.extra
    assert isinstance(cr.metadata, ChatResponseMetadata)


def test_rejections_are_remembered_per_model_object_even_for_equal_models() -> None:
    # Models travel as their constructor arguments and compare equal when configured alike; each
    # still remembers only what its own server rejected, and a dropped model forgets.
    import gc

    from chatclient.models import structured_output as so
    from chatclient.models.openai import OpenAIChatModel

    first = OpenAIChatModel("m", api_key="", base_url="http://127.0.0.1:9/v1")
    second = OpenAIChatModel("m", api_key="", base_url="http://127.0.0.1:9/v1")
    assert first == second  # value equality, as the pickling support defines it
    so.remember_rejection(first, "native", "rejected: native (x)", "m")
    assert so.rejected_rungs(first, "m") == {"native": "rejected: native (x)"}
    assert so.rejected_rungs(second, "m") == {}
    gc.collect()  # models of earlier tests that only the cycle collector frees must not count below
    before = len(so._MEMORY)
    del first
    gc.collect()
    assert len(so._MEMORY) == before - 1
