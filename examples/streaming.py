"""Streaming: text deltas as they arrive, the full response at the end, and partial entities.

    python examples/streaming.py

Runs offline on ``ScriptedChatModel``, which streams each scripted answer chunk by chunk; set
``OPENAI_API_KEY`` or ``CHATCLIENT_BASE_URL`` to stream from a real model instead.
"""

from __future__ import annotations

from _support import make_model
from pydantic import BaseModel

from chatclient import ChatClient
from chatclient.models import ResponseAggregator
from chatclient.testing import ScriptedChatModel


class City(BaseModel):
    name: str
    country: str
    population: int


SCRIPT = [
    ["One", ", two", ", three", ", four", ", five."],
    ["Lisbon ", "is the ", "capital ", "of Portugal."],
    ['{"name": "Lis', 'bon", "coun', 'try": "Portugal", "popu', 'lation": 545', "000}"],
]


def main() -> None:
    client = ChatClient.create(make_model(ScriptedChatModel(SCRIPT)))

    # 1. Text deltas: print them as they come (empty deltas are skipped by content()).
    print("deltas:", end=" ")
    for piece in client.prompt("Count to five.").stream().content():
        print(repr(piece), end=" ", flush=True)
    print()

    # 2. Whole responses per chunk: the last one carries the finish reason and the usage;
    #    ResponseAggregator rebuilds one response from the chunks.
    aggregator = ResponseAggregator()
    chunks = 0
    for chunk in client.prompt("What is the capital of Portugal?").stream().chat_response():
        aggregator.add(chunk)
        chunks += 1
    whole = aggregator.result()
    finish = whole.result.metadata.finish_reason if whole.result else None
    print(f"aggregated {chunks} chunks: {whole.text!r} (finish reason {finish})")

    # 3. Partial entities: successively more complete objects while the JSON streams in,
    #    then the final, fully validated one.
    for partial in client.prompt("Describe Lisbon as JSON.").stream().entity(City):
        print("partial:", partial)


if __name__ == "__main__":
    main()
