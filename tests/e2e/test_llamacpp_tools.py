"""A forced tool round trip on the real model, through the whole client: the model calls the tool,
the tool loop runs it and feeds the result back, and the model's final (typed) answer uses it."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.messages import AssistantMessage, ToolResponseMessage
from chatclient.tools import tool

pytestmark = pytest.mark.e2e


class Weather(BaseModel):
    city: str
    conditions: str
    temperature_c: int


# Values the model cannot guess: if they come back, they came from the tool.
TABLE = {"oslo": ("light snow", 2), "lima": ("foggy", 17)}


class WeatherService:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @tool
    def get_weather(self, city: Annotated[str, Field(description="City name, e.g. Lisbon")]) -> dict[str, Any]:
        """Current weather of a city."""
        self.calls.append(city)
        conditions, temperature = TABLE.get(city.strip().lower(), ("cloudy", 15))
        return {"city": city, "conditions": conditions, "temperature_c": temperature}


def weather_spec(client: ChatClient, service: WeatherService, city: str) -> Any:
    return (
        client.prompt()
        .user(f"What is the weather like in {city}?")
        .tools(service)
        .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
        .options(ChatOptions(tool_choice="get_weather", temperature=0.0, seed=42, max_tokens=64))
    )


@pytest.mark.parametrize("city", ["Oslo", "Lima"])
def test_forced_tool_round_trip_feeds_the_result_back(local_model: Any, city: str) -> None:
    service = WeatherService()
    result = weather_spec(ChatClient.create(local_model), service, city).call()
    weather = result.entity(Weather)
    exchange = result.chat_client_response().context[ContextKeys.TOOL_EXCHANGE]  # same (cached) call

    assert service.calls == [city]  # called once: forcing ends once the result is in
    conditions, temperature = TABLE[city.lower()]
    assert weather == Weather(city=city, conditions=conditions, temperature_c=temperature)
    call_message, result_message = exchange
    assert isinstance(call_message, AssistantMessage) and call_message.tool_calls[0].name == "get_weather"
    assert isinstance(result_message, ToolResponseMessage)
    assert result_message.responses[0].id == call_message.tool_calls[0].id
    assert conditions in result_message.responses[0].response_data


def test_forced_tool_round_trip_async_stream(local_model: Any) -> None:
    service = WeatherService()
    spec = weather_spec(ChatClient.create(local_model), service, "Oslo")

    async def run() -> list[Weather]:
        # entity() on a stream yields partial objects as the JSON grows; the last one is complete
        return [w async for w in spec.astream().entity(Weather)]

    partials = asyncio.run(run())
    assert service.calls == ["Oslo"]
    assert len(partials) > 1
    assert partials[-1] == Weather(city="Oslo", conditions="light snow", temperature_c=2)
