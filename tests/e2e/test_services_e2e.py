"""AI services on the real local model (Gemma 3 270M, in-process): an entity, a tool, memory.

Each service call is one ordinary ChatClient request, so these runs exercise the whole stack under
the facade: the native output schema and llama.cpp grammar for entities, a forced tool round trip,
and the memory advisor feeding the first turn into the second.
"""

from __future__ import annotations

from typing import Any, Protocol

import pytest
from pydantic import BaseModel

from chatclient import BaseAdvisor, ChatClient, ChatClientRequest, ChatOptions, ContextKeys, Prompt
from chatclient.memory import MessageWindowChatMemory
from chatclient.services import MemoryId, Result, ToolArg, ai_service, system
from chatclient.tools import ToolContext, tool

pytestmark = pytest.mark.e2e


class Person(BaseModel):
    name: str
    age: int
    city: str


class Weather(BaseModel):
    city: str
    conditions: str
    temperature_c: int


class Extractor(Protocol):
    def extract(self, text: str) -> Person:
        """Extract the person (name, age, city) from this text: {{ text }}"""


class Forecaster(Protocol):
    def forecast(self, city: str, tenant: ToolArg[str]) -> Result[Weather]:
        """What is the weather like in {{ city }}?"""


class Companion(Protocol):
    @system("You are a friendly assistant. Answer in one short sentence.")
    def chat(self, message: str, user: MemoryId[str]) -> str: ...


def structured_client(model: Any, **options: Any) -> ChatClient:
    return (
        ChatClient.builder(model)
        .default_options(ChatOptions(temperature=0.0, seed=42, max_tokens=64, **options))
        .default_advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
        .build()
    )


def test_service_extracts_an_entity(local_model: Any) -> None:
    extractor = ai_service(Extractor, client=structured_client(local_model))
    person = extractor.extract("Alice Smith is 34 years old and lives in Paris.")
    assert person == Person(name="Alice Smith", age=34, city="Paris")


# Values the model cannot guess: if they come back, they came from the tool.
TABLE = {"oslo": ("light snow", 2)}


def test_service_with_a_tool(local_model: Any) -> None:
    calls: list[tuple[str, Any]] = []

    @tool
    def get_weather(city: str, ctx: ToolContext) -> dict[str, Any]:
        """Current weather of a city."""
        calls.append((city, ctx.get("tenant")))
        conditions, temperature = TABLE.get(city.strip().lower(), ("cloudy", 15))
        return {"city": city, "conditions": conditions, "temperature_c": temperature}

    forecaster = ai_service(
        Forecaster, client=structured_client(local_model, tool_choice="get_weather"), tools=[get_weather]
    )
    result = forecaster.forecast("Oslo", tenant="e2e")
    assert calls == [("Oslo", "e2e")]
    assert result.value == Weather(city="Oslo", conditions="light snow", temperature_c=2)
    assert [e.name for e in result.tool_executions] == ["get_weather"]
    assert not result.tool_executions[0].is_error


class PromptLog(BaseAdvisor):
    """Records each prompt as the model receives it (runs inside the memory advisor)."""

    order = 0

    def __init__(self) -> None:
        self.prompts: list[Prompt] = []

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.prompts.append(request.prompt)
        return request


def test_service_with_memory_across_two_calls(local_model: Any) -> None:
    memory = MessageWindowChatMemory()
    log = PromptLog()
    client = (
        ChatClient.builder(local_model).default_options(ChatOptions(temperature=0.0, seed=42, max_tokens=32)).build()
    )
    companion = ai_service(Companion, client=client, memory=memory, advisors=[log])
    first = companion.chat("Hello! My name is Zorblax.", user="z")
    second = companion.chat("What is my name?", user="z")
    assert first.strip() and second.strip()
    # the second request carried the first turn, and memory holds both turns for this user only
    texts = [m.text for m in log.prompts[1].messages]
    assert texts[1:3] == ["Hello! My name is Zorblax.", first]
    assert [m.text for m in memory.get("z")] == ["Hello! My name is Zorblax.", first, "What is my name?", second]
    assert memory.get("someone else") == []
    print(f"\nsecond answer: {second!r}")
