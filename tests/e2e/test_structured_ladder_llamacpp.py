"""entity() through llama-cpp-python's real OpenAI-compatible server with the DEFAULT OpenAIChatModel.

No ``structured_output=`` argument and no context key: the ladder tries ``response_format:
json_schema`` first; llama-cpp-python's server rejects that form (HTTP 500 naming
``response_format``), so the same request goes on with ``{"type": "json_object", "schema": ...}``,
which the server turns into a grammar. The model instance remembers the rejection: the second
entity() goes straight to JSON mode. Values are the small model's; the shape is guaranteed.

The server runs with llama.cpp's extra weight buffers switched off (see the shared ``llama_server``
fixture): with them on, llama-cpp-python 0.3.36 crashes in its first decode on this machine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from chatclient import BaseAdvisor, ChatClient, ChatClientResponse, ChatOptions
from chatclient.models.openai import OpenAIChatModel

pytestmark = pytest.mark.e2e


class Person(BaseModel):
    name: str
    age: int
    city: str


TEXT = "Extract the person from this text: Maria Silva is 31 years old and lives in Lisbon."
OPTIONS = ChatOptions(temperature=0.0, seed=42, max_tokens=96)


class Recorder(BaseAdvisor):
    def __init__(self) -> None:
        self.extra: dict[str, Any] = {}

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        if response.chat_response is not None:
            self.extra = dict(response.chat_response.metadata.extra)
        return response


@pytest.fixture(scope="module")
def model(llama_server: str) -> Iterator[OpenAIChatModel]:
    # The default configuration; api_key="" only keeps a stray OPENAI_API_KEY out of the request.
    with OpenAIChatModel("gemma-3-270m", base_url=llama_server, api_key="", timeout=120.0) as m:
        yield m


def test_entity_works_on_the_default_configuration_and_remembers_the_rung(model: OpenAIChatModel) -> None:
    client = ChatClient.builder(model).default_options(OPTIONS).build()
    recorder = Recorder()
    started = time.perf_counter()
    person = client.prompt(TEXT).advisors(recorder).call().entity(Person)
    first_s = time.perf_counter() - started
    assert isinstance(person, Person)
    mode = recorder.extra["structured_output_mode"]
    reason = recorder.extra["structured_output_reason"]
    print(f"\nfirst entity(): {first_s:.2f}s, mode={mode}, reason={reason[:120]!r}, value={person!r}")
    assert mode in ("native", "json_object")
    if mode == "json_object":
        assert reason.startswith("rejected: native")

    # Stream and async on the same model go straight to the remembered rung.
    again = Recorder()
    started = time.perf_counter()
    items = list(client.prompt(TEXT).advisors(again).stream().entity(Person))
    print(f"stream entity(): {time.perf_counter() - started:.2f}s, mode={again.extra['structured_output_mode']}")
    assert isinstance(items[-1], Person)
    assert again.extra["structured_output_mode"] == mode
    if mode == "json_object":
        assert "native was rejected" in again.extra["structured_output_reason"]

    async def acall() -> Any:
        return await client.prompt(TEXT).acall().entity(Person)

    assert isinstance(asyncio.run(acall()), Person)
