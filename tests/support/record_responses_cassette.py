"""Record tests/data/cassettes/openai_responses.json: OpenAIResponsesModel conversations through the client.

The answers come from the recorded Responses payloads of tests/data/providers/responses/, served by
the loopback server; the cassette stores the requests chatclient sent and those answers. The e2e
suite (tests/e2e/test_responses_cassette.py) replays it. Re-record after a change to the request
bodies: ``python -m tests.support.record_responses_cassette``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.models.openai_responses import OpenAIResponsesModel
from chatclient.testing import Cassette
from chatclient.tools import tool
from chatclient.tools.builtin import WebSearch
from tests.support.loopback import LoopbackServer, Reply
from tests.support.responses_replay import load, recorded

CASSETTE = Path(__file__).resolve().parent.parent / "data" / "cassettes" / "openai_responses.json"
PATH = "/v1/responses"
KEY = "sk-recording-0123456789abcdef"


@tool
def get_weather(city: str, unit: str = "c") -> str:
    """Weather of a city."""
    return f"sunny in {city}"


class City(BaseModel):
    name: str
    country: str


def city_answer() -> dict[str, Any]:
    body = load("responses", "responses_text")["body"]
    text = json.dumps({"name": "Paris", "country": "FR"})
    return {
        **body,
        "output": [{**body["output"][0], "content": [{"type": "output_text", "text": text, "annotations": []}]}],
    }


def conversations(model: OpenAIResponsesModel) -> tuple[str, str, City]:
    """The three exchanges the cassette holds (the e2e test runs the same ones)."""
    client = ChatClient.create(model)
    answer = client.prompt("Weather in Paris?").tools(get_weather).call().content() or ""
    streamed = "".join(client.prompt("What is chatclient?").tools(WebSearch()).stream().content())
    city = client.prompt("The capital of France?").call().entity(City)
    return answer, streamed, city


def main() -> None:
    with LoopbackServer() as srv:
        srv.script(
            PATH,
            recorded(load("responses", "responses_reasoning_tool_call"), seed="c1", whole=True),
            recorded(load("responses", "responses_text"), seed="c2", whole=True),
            recorded(load("responses", "responses_web_search_stream"), seed="c3", whole=True),
            Reply(json=city_answer()),
        )
        with Cassette(CASSETTE, mode="record", secrets=[KEY]) as cassette:
            model = OpenAIResponsesModel(
                "gpt-5-mini",
                api_key=KEY,
                base_url=srv.url + "/v1",
                http_client=cassette.http_client(),
                async_http_client=cassette.async_http_client(),
                max_retries=0,
            )
            print(conversations(model))
    print(f"wrote {CASSETTE}")


if __name__ == "__main__":
    main()
