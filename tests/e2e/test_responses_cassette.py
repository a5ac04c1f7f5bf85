"""The OpenAI Responses model end to end against a cassette (tests/data/cassettes/openai_responses.json).

A tool loop on a reasoning model (the encrypted reasoning item goes back in the follow-up request),
a streamed answer that used the hosted web search, and an entity through ``text.format``, replayed
from the file in all four modes: every request chatclient sends must match the recorded one byte
for byte (as JSON), so a change in the Responses mapping fails here. Re-record with
``python -m tests.support.record_responses_cassette``.
"""

from __future__ import annotations

import asyncio

import pytest

from chatclient import ChatClient
from chatclient.models.openai_responses import OpenAIResponsesModel
from chatclient.testing import Cassette
from chatclient.tools.builtin import WebSearch
from tests.support.record_responses_cassette import CASSETTE, City, conversations, get_weather


def model_for(cassette: Cassette) -> OpenAIResponsesModel:
    # No server behind this address: every answer comes from the cassette.
    return OpenAIResponsesModel(
        "gpt-5-mini",
        api_key="sk-replay-0123456789",
        base_url="http://127.0.0.1:9/v1",
        http_client=cassette.http_client(),
        async_http_client=cassette.async_http_client(),
        max_retries=0,
    )


def test_replayed_conversations_match_the_recording() -> None:
    with Cassette(CASSETTE) as cassette:
        answer, streamed, city = conversations(model_for(cassette))
        assert cassette.played == 4 and cassette.sent == 0
    assert answer.startswith("On a peaceful moonlit night")
    assert streamed == "chatclient is a fluent LLM client (source)."
    assert city == City(name="Paris", country="FR")


@pytest.mark.parametrize("mode", ["acall", "astream"])
def test_async_modes_replay_too(mode: str) -> None:
    async def run() -> str:
        async with Cassette(CASSETTE) as cassette:
            client = ChatClient.create(model_for(cassette))
            if mode == "acall":
                return await client.prompt("Weather in Paris?").tools(get_weather).acall().content() or ""
            parts = [p async for p in client.prompt("What is chatclient?").tools(WebSearch()).astream().content()]
            return "".join(parts)

    text = asyncio.run(run())
    assert text.startswith("On a peaceful") if mode == "acall" else text.endswith("(source).")


def test_a_changed_request_does_not_reach_the_network() -> None:
    from chatclient.errors import CassetteMismatchError

    with Cassette(CASSETTE) as cassette, pytest.raises(CassetteMismatchError):
        ChatClient.create(model_for(cassette)).prompt("Weather in Rome?").tools(get_weather).call().content()
