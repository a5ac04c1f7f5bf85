"""Custom advisors, both ways: ``BaseAdvisor`` (before/after) and around-style (all four modes).

    python examples/custom_advisor.py

``TodayAdvisor`` adds the date to the system message and marks the answer; ``TimingAdvisor`` times
the rest of the chain. Each request runs in the four modes (call, stream, acall, astream) to show
that one advisor serves them all. Runs offline on ``ScriptedChatModel``; set ``OPENAI_API_KEY`` or
``CHATCLIENT_BASE_URL`` for a real model.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import date

from _support import make_model

from chatclient import (
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    StreamAdvisor,
    SystemMessage,
)
from chatclient.advisor import is_finished
from chatclient.models import aggregate
from chatclient.testing import ScriptedChatModel


class TodayAdvisor(BaseAdvisor):
    """Tells the model today's date in the system message, and marks the answer as dated."""

    order = 100  # inside advisors at the default order 0

    def before(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientRequest:
        line = f"Today is {date.today().isoformat()}."

        def add_line(system: SystemMessage) -> SystemMessage:
            return SystemMessage(f"{system.text}\n{line}" if system.text else line, system.metadata)

        return request.mutate(prompt=request.prompt.augment_system_message(add_line))

    def after(self, response: ChatClientResponse, chain: AdvisorChain) -> ChatClientResponse:
        cr = response.chat_response
        return response if cr is None else response.mutate(chat_response=cr.with_metadata(dated=True))


def _stamp(response: ChatClientResponse, started: float) -> ChatClientResponse:
    cr = response.chat_response
    if cr is None:
        return response
    return response.mutate(chat_response=cr.with_metadata(elapsed_s=time.perf_counter() - started))


class TimingAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Records how long the rest of the chain took, in the response metadata (``elapsed_s``)."""

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        started = time.perf_counter()
        return _stamp(chain.next_call(request), started)

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        started = time.perf_counter()
        return _stamp(await chain.next_acall(request), started)

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        started = time.perf_counter()
        for chunk in chain.next_stream(request):
            # Only the last chunk (the one with the finish reason) gets the figure.
            yield _stamp(chunk, started) if is_finished(chunk) else chunk

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        started = time.perf_counter()
        async for chunk in chain.next_astream(request):
            yield _stamp(chunk, started) if is_finished(chunk) else chunk


def run(client: ChatClient, mode: str) -> ChatResponse:
    """One request in ``mode``; streams are aggregated back into one response."""
    spec = client.prompt("What day is it?")
    if mode == "call":
        cr = spec.call().chat_response()
    elif mode == "acall":
        cr = asyncio.run(spec.acall().chat_response())
    elif mode == "stream":
        cr = aggregate(spec.stream().chat_response())
    else:

        async def collect() -> list[ChatResponse]:
            return [c async for c in spec.astream().chat_response()]

        cr = aggregate(asyncio.run(collect()))
    assert cr is not None
    return cr


def main() -> None:
    model = make_model(ScriptedChatModel([["It is ", "a fine day."] for _ in range(4)]))
    client = (
        ChatClient.builder(model)
        .default_system("You are a concise assistant.")
        .default_advisors(TimingAdvisor(), TodayAdvisor())
        .build()
    )
    for mode in ("call", "stream", "acall", "astream"):
        cr = run(client, mode)
        extra = cr.metadata.extra
        print(f"{mode:>7}: {cr.text!r} dated={extra.get('dated')} timed={'elapsed_s' in extra}")
    if isinstance(model, ScriptedChatModel):
        print("system message sent:", model.last_prompt.system_message.text.replace("\n", " | "))


if __name__ == "__main__":
    main()
