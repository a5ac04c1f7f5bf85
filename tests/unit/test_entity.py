"""entity()/response_entity() through the client: instructions, native mode, fallback, bad input."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ContextKeys,
    ModelCapabilities,
    UserMessage,
)
from chatclient.converters import EntityOutputConverter, ListOutputConverter, converter_for
from chatclient.errors import OutputConversionError
from chatclient.testing import ScriptedChatModel


class Actor(BaseModel):
    name: str
    movies: list[str]


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int


ACTOR_JSON = '{"name": "Tom Hanks", "movies": ["Big", "Cast Away"]}'
ACTOR = Actor(name="Tom Hanks", movies=["Big", "Cast Away"])
NATIVE = ModelCapabilities(native_structured_output=True)
NATIVE_ON = {ContextKeys.NATIVE_STRUCTURED_OUTPUT: True}


class SeenRequests(BaseAdvisor):
    """Records the last user text each request had when it passed (what a memory advisor would store)."""

    def __init__(self) -> None:
        self.user_texts: list[str] = []

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.user_texts.append(request.prompt.user_message.text)
        return request


async def _entity(client: ChatClient, mode: str, target: Any, text: str = "Films of Tom Hanks?") -> Any:
    spec = client.prompt().user(text)
    if mode == "call":
        return spec.call().entity(target)
    if mode == "acall":
        return await spec.acall().entity(target)
    if mode == "stream":
        items = list(spec.stream().entity(target))
    else:
        items = [item async for item in spec.astream().entity(target)]
    return items[-1] if items else None


@pytest.mark.parametrize("mode", ["call", "acall", "stream", "astream"])
async def test_instructions_are_appended_to_the_last_user_message(mode: str) -> None:
    model = ScriptedChatModel([[ACTOR_JSON[:10], ACTOR_JSON[10:]]])
    seen = SeenRequests()
    client = ChatClient.builder(model).default_advisors(seen).build()
    spec = client.prompt().messages(UserMessage("earlier question")).user("Films of Tom Hanks?")
    if mode == "call":
        result = spec.call().entity(Actor)
    elif mode == "acall":
        result = await spec.acall().entity(Actor)
    elif mode == "stream":
        result = list(spec.stream().entity(Actor))[-1]
    else:
        result = [a async for a in spec.astream().entity(Actor)][-1]
    assert result == ACTOR
    fmt = converter_for(Actor).format
    sent = model.last_prompt
    assert sent.user_message.text == "Films of Tom Hanks?\n" + fmt
    assert sent.messages[0] == UserMessage("earlier question")  # only the last user message changes
    assert sent.options is None or sent.options.output_schema is None
    assert seen.user_texts == ["Films of Tom Hanks?"]  # advisors (memory) see the text without them


async def test_response_entity_gives_response_and_entity_in_call_and_acall() -> None:
    model = ScriptedChatModel([ACTOR_JSON, ACTOR_JSON])
    client = ChatClient.create(model)
    sync = client.prompt("q").call().response_entity(Actor)
    assert sync.entity == ACTOR
    assert sync.response is not None
    assert sync.response.text == ACTOR_JSON
    assert sync.response.metadata.extra["structured_output_mode"] == "instructions"
    asynchronous = await client.prompt("q").acall().response_entity(Actor)
    assert asynchronous.entity == ACTOR
    assert asynchronous.response is not None


@pytest.mark.parametrize("mode", ["call", "acall", "stream", "astream"])
async def test_native_mode_puts_the_schema_in_options_and_adds_no_text(mode: str) -> None:
    model = ScriptedChatModel([[ACTOR_JSON]], capabilities=NATIVE)
    client = ChatClient.builder(model).default_advisors(params=NATIVE_ON).build()
    assert await _entity(client, mode, Actor) == ACTOR
    sent = model.last_prompt
    assert sent.user_message.text == "Films of Tom Hanks?"
    assert sent.options is not None
    assert sent.options.output_schema == EntityOutputConverter(Actor).json_schema


def test_native_mode_per_request_and_recorded_in_metadata() -> None:
    model = ScriptedChatModel([ACTOR_JSON], capabilities=NATIVE)
    client = ChatClient.create(model)
    result = client.prompt("q").advisors(params=NATIVE_ON).call().response_entity(Actor)
    assert result.entity == ACTOR
    assert result.response is not None
    assert result.response.metadata.extra["structured_output_mode"] == "native"


def test_native_requested_but_model_cannot_falls_back_to_instructions_and_records_it() -> None:
    model = ScriptedChatModel([ACTOR_JSON])  # capabilities: native_structured_output=False
    client = ChatClient.create(model)
    result = client.prompt("q").advisors(params=NATIVE_ON).call().response_entity(Actor)
    assert result.entity == ACTOR
    assert model.last_prompt.user_message.text == "q\n" + converter_for(Actor).format
    assert model.last_prompt.options is None or model.last_prompt.options.output_schema is None
    assert result.response is not None
    assert result.response.metadata.extra["structured_output_mode"] == "instructions"


def test_native_capable_model_uses_native_by_default_and_instructions_when_pinned() -> None:
    # Issue 20.2: the schema mode is the default path when the capabilities allow it.
    model = ScriptedChatModel([ACTOR_JSON, ACTOR_JSON], capabilities=NATIVE)
    result = ChatClient.create(model).prompt("q").call().response_entity(Actor)
    assert result.entity == ACTOR
    assert model.last_prompt.user_message.text == "q"
    assert result.response is not None
    assert result.response.metadata.extra["structured_output_mode"] == "native"
    pinned = ChatClient.create(model).prompt("q").call().response_entity(Actor, mode="instructions")
    assert model.last_prompt.user_message.text.startswith("q\n")
    assert pinned.response is not None
    assert pinned.response.metadata.extra["structured_output_mode"] == "instructions"


def test_native_mode_keeps_instructions_for_a_top_level_array_and_for_schemaless_converters() -> None:
    model = ScriptedChatModel(['[{"x": 1, "y": 2}]', '{"a": 1}'], capabilities=NATIVE)
    client = ChatClient.builder(model).default_advisors(params=NATIVE_ON).build()
    points = client.prompt("q").call().response_entity(list[Point])
    assert points.entity == [Point(1, 2)]
    assert points.response is not None
    assert points.response.metadata.extra["structured_output_mode"] == "instructions"
    assert "JSON Schema" in model.last_prompt.user_message.text
    mapping = client.prompt("q").call().response_entity(dict)
    assert mapping.entity == {"a": 1}
    assert mapping.response is not None
    assert mapping.response.metadata.extra["structured_output_mode"] == "instructions"


@pytest.mark.parametrize("mode", ["call", "acall"])
async def test_none_content_gives_none_entity(mode: str) -> None:
    model = ScriptedChatModel([AssistantMessage(None), AssistantMessage(None)])
    client = ChatClient.create(model)
    assert await _entity(client, mode, Actor) is None
    spec = client.prompt("q")
    result = spec.call().response_entity(Actor) if mode == "call" else await spec.acall().response_entity(Actor)
    assert result.entity is None
    assert result.response is not None


@pytest.mark.parametrize("mode", ["call", "acall", "stream", "astream"])
@pytest.mark.parametrize(
    "text",
    [
        '{"name": "Tom", "movies": [',  # malformed
        '{"name": "Tom"}',  # wrong shape
        "",  # empty
        'Sure, here you go: {"name": "Tom", "movies": []}',  # wrapped in prose
    ],
)
async def test_unconvertible_output_raises_naming_type_and_text(mode: str, text: str) -> None:
    client = ChatClient.create(ScriptedChatModel([[text]]))
    with pytest.raises(OutputConversionError) as info:
        await _entity(client, mode, Actor)
    assert "Actor" in str(info.value)
    assert repr(text) in str(info.value)


async def test_other_targets_through_the_client() -> None:
    model = ScriptedChatModel(['[{"x": 1, "y": 2}]', "a, b, c", '```json\n{"k": [1]}\n```', "42"])
    client = ChatClient.create(model)
    assert client.prompt("q").call().entity(list[Point]) == [Point(1, 2)]
    assert await client.prompt("q").acall().entity(ListOutputConverter()) == ["a", "b", "c"]
    assert "comma-separated" in model.last_prompt.user_message.text
    assert client.prompt("q").call().entity(dict) == {"k": [1]}
    assert client.prompt("q").call().entity(int) == 42


def test_entity_then_content_reuses_the_single_call() -> None:
    model = ScriptedChatModel([ACTOR_JSON])
    spec = ChatClient.create(model).prompt("q").call()
    assert spec.entity(Actor) == ACTOR
    assert spec.content() == ACTOR_JSON
    assert len(model.prompts) == 1


def test_entity_none_type_is_rejected() -> None:
    spec = ChatClient.create(ScriptedChatModel([])).prompt("q").call()
    with pytest.raises(ValueError, match="cannot be None"):
        spec.entity(None)


def test_memory_stores_the_users_text_without_instructions_or_validation_feedback() -> None:
    from advisors import MessageChatMemoryAdvisor, StructuredOutputValidationAdvisor
    from chatclient.memory import MessageWindowChatMemory

    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(['{"name": "Tom Hanks"}', ACTOR_JSON])
    client = (
        ChatClient.builder(model)
        .default_advisors(MessageChatMemoryAdvisor(memory, "c1"), StructuredOutputValidationAdvisor(Actor))
        .build()
    )
    assert client.prompt("Films of Tom Hanks?").call().entity(Actor) == ACTOR
    assert "JSON Schema" in model.last_prompt.user_message.text  # the model did get the instructions
    stored = [(m.type.value, m.text) for m in memory.get("c1")]
    assert stored == [("user", "Films of Tom Hanks?"), ("assistant", ACTOR_JSON)]


def test_a_streamed_entity_says_it_is_a_stream_when_used_as_the_entity() -> None:
    # Issue 27.4: `spec.stream().entity(P).name` failed with "'generator' object has no attribute 'name'".
    client = ChatClient.create(ScriptedChatModel([[ACTOR_JSON[:12], ACTOR_JSON[12:]]]))
    stream = client.prompt("Films of Tom Hanks?").stream().entity(Actor)
    with pytest.raises(AttributeError) as info:
        stream.name  # noqa: B018
    message = str(info.value)
    assert "stream().entity(Actor) is a stream of partial Actor objects" in message
    assert "no attribute 'name'" in message
    assert "for p in spec.stream().entity(Actor)" in message and "spec.call().entity(Actor)" in message
    items = list(stream)  # still an ordinary iterator
    assert items[-1] == ACTOR and len(items) >= 2


async def test_an_async_streamed_entity_says_the_same() -> None:
    client = ChatClient.create(ScriptedChatModel([ACTOR_JSON]))
    stream = client.prompt("Films of Tom Hanks?").astream().entity(Actor)
    with pytest.raises(AttributeError, match=r"astream\(\)\.entity\(Actor\).*await spec\.acall\(\)\.entity\(Actor\)"):
        stream.movies  # noqa: B018
    assert [a async for a in stream][-1] == ACTOR


def test_closing_a_streamed_entity_early_closes_the_model_stream() -> None:
    chunks = [ACTOR_JSON[:5], ACTOR_JSON[5:12], ACTOR_JSON[12:]]
    model = ScriptedChatModel([chunks])
    stream = ChatClient.create(model).prompt("Films?").stream().entity(Actor)
    next(stream)
    stream.close()
    with pytest.raises(StopIteration):
        next(stream)
