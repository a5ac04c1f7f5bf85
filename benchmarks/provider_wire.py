"""Wire-format costs of the Azure / Bedrock / Gemini providers, next to the OpenAI stream parser.

    .venv/bin/python benchmarks/provider_wire.py

Prints, best of 5 rounds: µs to SigV4-sign one Bedrock request (2 KB body); µs per frame and MB/s
of the AWS event-stream decoder; µs per streamed chunk of the Bedrock, Gemini and Azure stream
parsers against the OpenAI Chat Completions parser on the same text, fed whole events as a
network read would deliver them. No network: everything runs in-process.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the frames are built by the test support

from chatclient.models.azure import AzureStreamParser
from chatclient.models.bedrock import BedrockStreamParser
from chatclient.models.gemini import GeminiStreamParser
from chatclient.models.http.eventstream import EventStreamDecoder
from chatclient.models.http.sigv4 import AWSCredentials, sign
from chatclient.models.openai import OpenAIStreamParser
from tests.support.eventstream import event

CHUNKS = 2000
ROUNDS = 5


def best(fn: Callable[[], Any], repeat: int) -> float:
    """Best seconds per repetition over ROUNDS rounds."""
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        times.append((time.perf_counter() - start) / repeat)
    return min(times)


def sse_lines(payloads: list[dict[str, Any]], done: bool) -> list[str]:
    lines: list[str] = []
    for p in payloads:
        lines += [f"data: {json.dumps(p)}", ""]
    if done:
        lines += ["data: [DONE]", ""]
    return lines


def per_chunk(make: Callable[[], Any], items: list[Any]) -> float:
    def run() -> None:
        parser = make()
        for item in items:
            parser.feed(item)
        parser.finish()

    return best(run, 3) / CHUNKS * 1e6


def main() -> None:
    creds = AWSCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token")
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "x" * 2000}]}]}).encode()
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    when = datetime.now(UTC)
    sig = best(lambda: sign("POST", url, {"content-type": "application/json"}, body, creds,
                            region="us-east-1", service="bedrock", now=when), 2000)  # fmt: skip
    print(f"SigV4 sign, 2 KB body: {sig * 1e6:.1f} µs per request")

    words = [f"word{i} " for i in range(CHUNKS)]
    frames = [
        event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": w}, "p": "abcdefgh"}) for w in words
    ]
    frames.append(event("messageStop", {"stopReason": "end_turn"}))
    frames.append(event("metadata", {"usage": {"inputTokens": 5, "outputTokens": CHUNKS, "totalTokens": CHUNKS + 5}}))
    blob = b"".join(frames)

    def decode() -> None:
        decoder = EventStreamDecoder()
        for f in frames:
            decoder.feed(f)

    seconds = best(decode, 3)
    print(f"event-stream decoder: {seconds / len(frames) * 1e6:.2f} µs per frame, {len(blob) / seconds / 1e6:.0f} MB/s")

    bedrock = per_chunk(BedrockStreamParser, frames)
    gemini_payloads = [
        {"candidates": [{"content": {"parts": [{"text": w}], "role": "model"}, "index": 0}], "modelVersion": "g"}
        for w in words
    ]
    gemini_payloads[-1]["candidates"][0]["finishReason"] = "STOP"
    gemini = per_chunk(GeminiStreamParser, sse_lines(gemini_payloads, done=False))
    openai_payloads = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]}
        for w in words
    ]
    openai = per_chunk(OpenAIStreamParser, sse_lines(openai_payloads, done=True))
    azure_payloads = [
        {
            **p,
            "choices": [
                {**p["choices"][0], "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}
            ],
        }
        for p in openai_payloads
    ]
    azure = per_chunk(AzureStreamParser, sse_lines(azure_payloads, done=True))
    print(f"stream parser per chunk: OpenAI {openai:.2f} µs, Azure {azure:.2f} µs (filter verdicts read), "
          f"Gemini {gemini:.2f} µs, Bedrock {bedrock:.2f} µs (CRC checks included)")  # fmt: skip


if __name__ == "__main__":
    main()
