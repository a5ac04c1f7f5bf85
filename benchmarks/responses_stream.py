"""Per-chunk cost of the OpenAI Responses stream parser, alone and through the advisor chain.

    .venv/bin/python benchmarks/responses_stream.py [--chunks 200] [--rounds 15]

1. The parser alone: µs per text-delta event for ``ResponsesStreamParser.feed`` over the SSE lines
   of a Responses stream (``event:`` + ``data:`` lines, as OpenAI sends them), next to
   ``OpenAIStreamParser`` over the equivalent Chat Completions lines: JSON decoding included.
2. Through the chain: µs per chunk of ``stream().content()`` / ``astream().content()`` with 5
   pass-through advisors, for a model that runs the parser over those lines in ``stream()`` (no
   HTTP), so what is measured is parsing + the chain; and the chain alone over the chunks the
   parser made (prebuilt), which is the figure the streams budget (< 3 µs per chunk with 5
   advisors) is about.

Median and best of ``--rounds`` rounds (on a loaded machine the best is the figure to compare);
nothing is asserted, the figures are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatclient import BaseAdvisor, ChatClient, ChatResponse, Prompt  # noqa: E402
from chatclient.models.base import BaseChatModel  # noqa: E402
from chatclient.models.openai import OpenAIStreamParser  # noqa: E402
from chatclient.models.openai_responses import ResponsesStreamParser  # noqa: E402


def responses_lines(n: int) -> list[str]:
    """The lines of a Responses stream with ``n`` text deltas (the shape OpenAI sends)."""
    events: list[dict[str, Any]] = [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_1", "model": "gpt-test", "status": "in_progress", "output": []},
        },
        {
            "type": "response.output_item.added",
            "sequence_number": 1,
            "output_index": 0,
            "item": {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []},
        },
    ]
    for i in range(n):
        events.append(
            {
                "type": "response.output_text.delta",
                "sequence_number": i + 2,
                "item_id": "msg_1",
                "output_index": 0,
                "content_index": 0,
                "delta": f"w{i} ",
                "logprobs": [],
            }
        )
    text = "".join(f"w{i} " for i in range(n))
    item = {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    events.append({"type": "response.output_item.done", "sequence_number": n + 2, "output_index": 0, "item": item})
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": n,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 10 + n,
    }
    events.append(
        {
            "type": "response.completed",
            "sequence_number": n + 3,
            "response": {"id": "resp_1", "model": "gpt-test", "status": "completed", "output": [item], "usage": usage},
        }
    )
    lines: list[str] = []
    for e in events:
        lines += [f"event: {e['type']}", "data: " + json.dumps(e), ""]
    return lines


def chat_lines(n: int) -> list[str]:
    """The lines of a Chat Completions stream with ``n`` content deltas."""
    lines: list[str] = []
    for i in range(n):
        chunk = {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": {"content": f"w{i} "}, "logprobs": None, "finish_reason": None}],
        }
        lines += ["data: " + json.dumps(chunk), ""]
    last = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": n, "total_tokens": 10 + n},
    }
    lines += ["data: " + json.dumps(last), "", "data: [DONE]", ""]
    return lines


def parse(make: Callable[[], Any], lines: list[str]) -> list[ChatResponse]:
    parser = make()
    out: list[ChatResponse] = []
    for line in lines:
        out.extend(parser.feed(line))
        if parser.done:
            break
    return out + parser.finish()


def parser_us(make: Callable[[], Any], lines: list[str], n: int, rounds: int) -> str:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(5):
            parse(make, lines)
        samples.append((time.perf_counter() - start) / (5 * n) * 1e6)
    return _figure(samples)


def _figure(samples: list[float]) -> str:
    return f"{statistics.median(samples):6.2f} (best {min(samples):5.2f})"


class ParsingModel(BaseChatModel):
    """Runs a real stream parser over prebuilt SSE lines in ``stream()`` (no HTTP)."""

    def __init__(self, make: Callable[[], Any], lines: list[str]) -> None:
        self.make = make
        self.lines = lines

    def call(self, prompt: Prompt) -> ChatResponse:
        return ChatResponse.of_text("x")

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        return self._gen()

    def _gen(self) -> Iterator[ChatResponse]:
        parser = self.make()
        for line in self.lines:
            yield from parser.feed(line)
            if parser.done:
                break
        yield from parser.finish()

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        for chunk in self._gen():
            yield chunk


class PrebuiltModel(ParsingModel):
    """The parser's chunks, made once: only the chain is measured."""

    def __init__(self, make: Callable[[], Any], lines: list[str]) -> None:
        super().__init__(make, lines)
        self.chunks = parse(make, lines)

    def _gen(self) -> Iterator[ChatResponse]:
        return iter(self.chunks)


class PassThrough(BaseAdvisor):
    def __init__(self, order: int) -> None:
        self.order = order


def chain_us(model: BaseChatModel, n: int, use_async: bool, rounds: int, advisors: int = 5) -> str:
    client = ChatClient.builder(model).default_advisors(*(PassThrough(i) for i in range(advisors))).build()

    def one_sync() -> None:
        for _ in client.prompt("hi").stream().content():
            pass

    async def one_async() -> None:
        async for _ in client.prompt("hi").astream().content():
            pass

    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(5):
            if use_async:
                asyncio.run(one_async())
            else:
                one_sync()
        samples.append((time.perf_counter() - start) / (5 * n) * 1e6)
    return _figure(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    n, rounds = args.chunks, args.rounds
    kinds = {
        "Responses": (ResponsesStreamParser, responses_lines(n)),
        "Chat Completions": (lambda: OpenAIStreamParser(None), chat_lines(n)),
    }
    for name, (make, lines) in kinds.items():
        got = "".join(c.text or "" for c in parse(make, lines))
        assert got == "".join(f"w{i} " for i in range(n)), name
    print(f"1. parser alone, µs per text delta ({n}-delta streams, median of {rounds})")
    for name, (make, lines) in kinds.items():
        print(f"   {name:17} {parser_us(make, lines, n, rounds)}")
    print("\n2. stream().content() with 5 pass-through advisors, µs per chunk (sync / async)")
    for name, (make, lines) in kinds.items():
        parsing = ParsingModel(make, lines)
        prebuilt = PrebuiltModel(make, lines)
        print(
            f"   {name:17} parser + chain: sync {chain_us(parsing, n, False, rounds)}, async {chain_us(parsing, n, True, rounds)}"
        )
        print(
            f"   {'':17} chain alone:    sync {chain_us(prebuilt, n, False, rounds)}, async {chain_us(prebuilt, n, True, rounds)}"
        )


if __name__ == "__main__":
    main()
