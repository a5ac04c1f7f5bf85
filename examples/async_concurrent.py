"""Async: many concurrent calls with asyncio.gather (bounded by a semaphore), and an async stream.

    python examples/async_concurrent.py

Runs offline on ``FunctionChatModel``, whose answer is computed from each prompt (so every
concurrent call can be checked against its own question); set ``OPENAI_API_KEY`` or
``CHATCLIENT_BASE_URL`` to send the calls to a real model. One client serves every task: clients
and models are safe to share between tasks and threads.
"""

from __future__ import annotations

import asyncio
import time

from _support import make_model

from chatclient import ChatClient, Prompt
from chatclient.testing import FunctionChatModel

CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Dakar", "Lima", "Riga", "Perth", "Cairo", "Turin"] * 5


def offline_answer(prompt: Prompt) -> str:
    city = prompt.user_message.text.rsplit(" ", 1)[-1].rstrip("?")
    return f"{city} has {len(city)} letters."


async def main() -> None:
    client = ChatClient.create(make_model(FunctionChatModel(offline_answer)))
    limit = asyncio.Semaphore(16)  # at most 16 requests in flight: be kind to rate limits

    async def ask(city: str) -> str | None:
        async with limit:
            return await client.prompt(f"How many letters are in the name {city}?").acall().content()

    started = time.perf_counter()
    answers = await asyncio.gather(*(ask(c) for c in CITIES))
    elapsed = time.perf_counter() - started
    matched = sum(1 for city, answer in zip(CITIES, answers, strict=True) if answer and city in answer)
    print(f"{len(answers)} concurrent calls in {elapsed:.2f}s; {matched} answers match their question")
    print("first answers:", answers[:3])

    # An async stream: deltas arrive while other tasks keep running.
    pieces = [p async for p in client.prompt("How many letters are in the name Reykjavik?").astream().content()]
    print("streamed:", "".join(pieces))


if __name__ == "__main__":
    asyncio.run(main())
