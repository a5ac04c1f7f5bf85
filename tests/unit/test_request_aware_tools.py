"""Request-aware tool providers, skill-scoped tools and tool-argument augmentation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, Field

from advisors import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.memory import MessageWindowChatMemory
from chatclient.messages import AssistantMessage, ToolCall, UserMessage
from chatclient.prompt import ToolDefinition
from chatclient.skills import Skill, SkillsAdvisor
from chatclient.skills.scoped_tools import SkillScopedTools, skill_activated
from chatclient.testing import ScriptedChatModel
from chatclient.tools import (
    AugmentedArgumentEvent,
    AugmentedToolCallbackProvider,
    FunctionToolCallback,
    ToolCallback,
    ToolProviderRequest,
    tool,
)


def asks(*calls: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(tool_calls=tuple(ToolCall(f"c{i}", n, json.dumps(a)) for i, (n, a) in enumerate(calls)))


@tool
def get_weather(city: str) -> str:
    """Current weather."""
    return f"sunny in {city}"


@tool
def admin_reset(user: str) -> str:
    """Reset a user's password."""
    return f"reset {user}"


ADMIN_RESET = FunctionToolCallback(admin_reset, name="admin_reset", description="Reset a password")
WEATHER = FunctionToolCallback(get_weather, name="get_weather", description="Current weather")


class TenantTools:
    """Offers admin tools only to admins; records what it was asked."""

    def __init__(self) -> None:
        self.seen: list[ToolProviderRequest] = []

    def tool_callbacks(self, request: ToolProviderRequest | None = None) -> list[Any] | None:
        assert request is not None
        self.seen.append(request)
        if request.tool_context.get("role") != "admin":
            return None  # no tools for this request
        return [ADMIN_RESET]


def test_provider_receives_the_request_when_the_request_is_built_and_between_turns() -> None:
    provider = TenantTools()
    model = ScriptedChatModel([asks(("admin_reset", {"user": "bob"})), "done"])
    client = ChatClient.create(model)
    answer = (
        client.prompt("reset bob")
        .tools(get_weather, provider)
        .tool_context({"role": "admin"})
        .advisors(params={"chat_memory_conversation_id": "conv-7"})
        .call()
        .content()
    )
    assert answer == "done"
    first = provider.seen[0]
    assert first.user_text == "reset bob" and first.conversation_id == "conv-7"
    assert first.tool_context["role"] == "admin"
    assert [d.name for d in model.prompts[0].tools] == ["get_weather", "admin_reset"]
    # Between turns it sees the tool exchange of this request.
    assert any(m.type.value == "tool" for m in provider.seen[-1].messages)


def test_the_first_turn_re_asks_only_request_aware_providers() -> None:
    # The loop's first turn re-asks request-aware providers (they see memory); a provider that ignores
    # the request (an MCP server: a tools/list round trip) is not asked a second time for nothing.
    class Listing:
        def __init__(self) -> None:
            self.asked = 0

        def tool_callbacks(self) -> list[Any]:
            self.asked += 1
            return [WEATHER]

    listing, tenant = Listing(), TenantTools()
    model = ScriptedChatModel(["hi"])
    ChatClient.create(model).prompt("x").tools(listing, tenant).tool_context({"role": "admin"}).call().content()
    assert listing.asked == 1 and len(tenant.seen) == 2
    assert [d.name for d in model.prompts[0].tools] == ["get_weather", "admin_reset"]


def test_provider_answering_none_offers_nothing() -> None:
    provider = TenantTools()
    model = ScriptedChatModel(["hi"])
    ChatClient.create(model).prompt("reset bob").tools(get_weather, provider).call().content()
    assert [d.name for d in model.prompts[0].tools] == ["get_weather"]


def test_old_providers_without_request_keep_working_and_bad_answers_are_type_errors() -> None:
    class Old:
        def tool_callbacks(self) -> list[Any]:
            return [FunctionToolCallback(lambda_free_add, name="add", description="add")]

    model = ScriptedChatModel(["ok"])
    ChatClient.create(model).prompt("x").tools(Old()).call().content()
    assert [d.name for d in model.prompts[0].tools] == ["add"]

    class Bad:
        def tool_callbacks(self, request: ToolProviderRequest | None = None) -> list[Any]:
            return ["not a tool"]

    with pytest.raises(TypeError, match="not a ToolCallback"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("x").tools(Bad()).call().content()


def lambda_free_add(a: int, b: int) -> int:
    return a + b


def test_request_aware_provider_sees_remembered_history_on_the_first_turn() -> None:
    seen: list[tuple[str, ...]] = []

    class Recorder:
        def tool_callbacks(self, request: ToolProviderRequest | None = None) -> list[Any]:
            assert request is not None
            seen.append(tuple(m.text or "" for m in request.messages))
            return [WEATHER]

    memory = MessageWindowChatMemory()
    client = (
        ChatClient.builder(ScriptedChatModel(["first answer", "second answer"]))
        .default_advisors(MessageChatMemoryAdvisor(memory))
        .build()
    )
    recorder = Recorder()
    client.prompt("first question").tools(recorder).call().content()
    client.prompt("second question").tools(recorder).call().content()
    assert ("first question", "first answer", "second question") in seen


def test_tool_provider_request_properties() -> None:
    req = ToolProviderRequest((UserMessage("a"), AssistantMessage("b"), UserMessage("c")), {}, {})
    assert req.user_text == "c" and req.conversation_id is None
    assert ToolProviderRequest(()).user_message is None and ToolProviderRequest(()).user_text is None


# -- skill-scoped tools ----------------------------------------------------------------------------

FORMS = Skill("pdf-forms", "Fill in PDF forms", "Read the form, then call fill_field for each field.")


@tool
def fill_field(field: str, value: str) -> str:
    """Fill one field of the open form."""
    return f"{field}={value}"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_skill_tools_appear_only_after_activation(mode: str) -> None:
    model = ScriptedChatModel(
        [
            asks(("activate_skill", {"skill_name": "pdf-forms"})),
            asks(("fill_field", {"field": "name", "value": "Ada"})),
            "The form is filled.",
        ]
    )
    spec = (
        ChatClient.create(model)
        .prompt("Fill in my form")
        .advisors(SkillsAdvisor([FORMS]))
        .tools(SkillScopedTools(FORMS, fill_field))
    )
    answer = spec.call().content() if mode == "sync" else await spec.acall().content()
    assert answer == "The form is filled."
    offered = [[d.name for d in p.tools] for p in model.prompts]
    assert offered == [["activate_skill"], ["activate_skill", "fill_field"], ["activate_skill", "fill_field"]]
    assert model.prompts[2].messages[-1].responses[0].response_data == "name=Ada"  # type: ignore[attr-defined]


def test_a_failed_or_other_activation_does_not_unlock_the_tools() -> None:
    model = ScriptedChatModel(
        [asks(("activate_skill", {"skill_name": "nope"}), ("activate_skill", {"skill_name": "other"})), "hm"]
    )
    other = Skill("other", "Another skill", "Other instructions.")
    ChatClient.create(model).prompt("go").advisors(SkillsAdvisor([FORMS, other])).tools(
        SkillScopedTools("pdf-forms", fill_field)
    ).call().content()
    assert [d.name for d in model.prompts[1].tools] == ["activate_skill"]
    assert not skill_activated((AssistantMessage(tool_calls=(ToolCall("1", "activate_skill", "{" * 20000),)),), "x")


def test_skill_scoped_tools_bad_input() -> None:
    with pytest.raises(ValueError, match="at least one tool"):
        SkillScopedTools("pdf-forms")
    with pytest.raises(TypeError, match="Skill or a skill name"):
        SkillScopedTools(3, fill_field)  # type: ignore[arg-type]
    assert SkillScopedTools("pdf-forms", fill_field).tool_callbacks() == ()


# -- argument augmentation -------------------------------------------------------------------------


class AgentThinking(BaseModel):
    inner_thought: str = Field(description="Why you call this tool")
    confidence: float | None = Field(None, description="How sure you are, 0 to 1")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_augmented_arguments_reach_the_callback_and_not_the_tool(mode: str) -> None:
    events: list[AugmentedArgumentEvent[AgentThinking]] = []
    received: list[str] = []

    @tool
    async def book(city: str) -> str:
        """Book a hotel."""
        received.append(city)
        return "booked"

    provider = AugmentedToolCallbackProvider([book, get_weather], arguments=AgentThinking, on_arguments=events.append)
    model = ScriptedChatModel(
        [asks(("book", {"city": "Oslo", "inner_thought": "the user asked for Oslo", "confidence": 0.9})), "Booked."]
    )
    spec = ChatClient.create(model).prompt("Book Oslo").tools(provider)
    answer = spec.call().content() if mode == "sync" else await spec.acall().content()
    assert answer == "Booked." and received == ["Oslo"]
    (event,) = events
    assert event.arguments == AgentThinking(inner_thought="the user asked for Oslo", confidence=0.9)
    assert event.tool_definition.name == "book" and '"inner_thought"' in event.raw_input
    schema = {d.name: d.input_schema for d in model.prompts[0].tools}
    for name in ("book", "get_weather"):
        assert set(schema[name]["properties"]) >= {"inner_thought", "confidence"}
        assert "inner_thought" in schema[name]["required"] and "confidence" not in schema[name]["required"]
    assert "inner_thought" not in get_weather_definition().input_schema["properties"]  # the tool is untouched


def get_weather_definition() -> ToolDefinition:
    from chatclient.tools import resolve_tools

    return resolve_tools([get_weather])[0].definition


def test_missing_required_augmented_argument_is_an_arguments_error() -> None:
    provider = AugmentedToolCallbackProvider(get_weather, arguments=AgentThinking, on_arguments=lambda e: None)
    model = ScriptedChatModel([asks(("get_weather", {"city": "Oslo"})), "ok"])
    ChatClient.create(model).prompt("weather").tools(provider).call().content()
    response = model.prompts[1].messages[-1].responses[0]  # type: ignore[attr-defined]
    assert response.is_error and "inner_thought: Field required" in response.response_data


def test_keep_extra_arguments_and_wrap_other_providers() -> None:
    received: list[str] = []

    class Raw:
        definition = ToolDefinition("raw", "raw tool", {"type": "object", "properties": {"q": {"type": "string"}}})
        return_direct = False

        def call(self, arguments: str, context: Any = None) -> str:
            received.append(arguments)
            return "ok"

    class Inner:
        def tool_callbacks(self) -> list[ToolCallback]:
            return [Raw()]

    @dataclass
    class Why:
        reason: str

    provider = AugmentedToolCallbackProvider(
        [Inner()], arguments=Why, on_arguments=lambda e: None, remove_extra_arguments=False
    )
    first = provider.tool_callbacks()
    assert provider.tool_callbacks()[0] is not first[0]  # a new Raw() each time: new wrapper
    model = ScriptedChatModel([asks(("raw", {"q": "x", "reason": "because"})), "ok"])
    ChatClient.create(model).prompt("go").tools(provider).call().content()
    assert json.loads(received[0]) == {"q": "x", "reason": "because"}


def test_augmentation_bad_input() -> None:
    with pytest.raises(TypeError, match="on_arguments must be a callable"):
        AugmentedToolCallbackProvider(get_weather, arguments=AgentThinking, on_arguments=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must describe an object with fields"):
        AugmentedToolCallbackProvider(get_weather, arguments=int, on_arguments=print)

    class Clash(BaseModel):
        city: str

    provider = AugmentedToolCallbackProvider(get_weather, arguments=Clash, on_arguments=print)
    with pytest.raises(ValueError, match="already has parameter\\(s\\) city"):
        ChatClient.create(ScriptedChatModel(["x"])).prompt("x").tools(provider).call().content()


def test_augmented_arguments_that_are_not_json_objects() -> None:
    provider = AugmentedToolCallbackProvider(get_weather, arguments=AgentThinking, on_arguments=print)
    (cb,) = provider.tool_callbacks()
    from chatclient.tools import ToolArgumentsError

    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        cb.call("{nope")
    with pytest.raises(ToolArgumentsError, match="must be a JSON object"):
        cb.call("[1]")
    with pytest.raises(ToolArgumentsError, match="characters"):
        cb.call(" " * 1_000_001 + "{}")
