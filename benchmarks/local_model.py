"""Local model speed on this machine, and the framework's share of a full ``call().entity()``.

    .venv/bin/python benchmarks/local_model.py [--runs 5] [--threads N]

Model: the default ``LlamaCppChatModel`` (Gemma 3 270M, Q4_K_M) on the CPU. Printed:

- load time of the model;
- prompt processing (tokens/s): a ~400-token prompt, 1 generated token; each run starts with a
  different first word, so llama.cpp's prefix cache cannot skip the work;
- generation (tokens/s): 64 free tokens (plain completion, no chat template, no grammar);
- constrained generation (tokens/s): the same model filling a JSON schema under a grammar
  (what ``entity()`` with native structured output does), with LlamaCppChatModel's grammar
  prefilter (the likely tokens are checked first) and with llama-cpp-python's stock sampler
  (every one of Gemma's 262k tokens is checked at every step);
- ``call().entity(Person)`` through ``ChatClient``: wall time, time inside llama-cpp's
  ``create_chat_completion`` (the model), and the rest (client, advisor chain, prompt mapping,
  response parsing, JSON-schema generation and pydantic validation) as a share of wall time.
  Target: under 1%.

Figures are medians over ``--runs`` runs. The machine may be shared, so the load average is printed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatclient import ChatClient, ChatOptions, ContextKeys
from chatclient.models.llamacpp import LlamaCppChatModel

FILLER = (
    "The river town kept its old stone bridge, its market on Thursdays and a bakery that opened "
    "before dawn. Travellers stopped to rest, trade news and buy bread for the road ahead. "
)
WORDS = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet", "Kilo"]


class Person(BaseModel):
    name: str
    age: int
    city: str


class Stopwatch:
    """Wraps a callable and sums the time spent inside it."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def median(values: list[float]) -> float:
    return statistics.median(values)


def prompt_processing(model: LlamaCppChatModel, runs: int) -> float:
    rates = []
    body = FILLER * 12
    for i in range(runs):
        text = f"{WORDS[i % len(WORDS)]} {i}. {body}"
        start = time.perf_counter()
        out = model.llama.create_completion(text, max_tokens=1, temperature=0.0)
        elapsed = time.perf_counter() - start
        rates.append(out["usage"]["prompt_tokens"] / elapsed)
    return median(rates)


def generation(model: LlamaCppChatModel, runs: int) -> float:
    rates = []
    for i in range(runs):
        start = time.perf_counter()
        out = model.llama.create_completion(
            f"{WORDS[i % len(WORDS)]}: once upon a time", max_tokens=64, temperature=0.8, seed=i
        )
        elapsed = time.perf_counter() - start
        # the prompt is a handful of tokens, so nearly all of the time is generation
        rates.append(out["usage"]["completion_tokens"] / elapsed)
    return median(rates)


def entity_runs(model: LlamaCppChatModel, runs: int) -> tuple[float, float, float, float]:
    """Median (wall s, model s, framework share, constrained tokens/s) of call().entity(Person)."""
    watch = Stopwatch(model.llama.create_chat_completion)
    model.llama.create_chat_completion = watch  # instance attribute: only this model is timed
    client = ChatClient.create(model)
    walls, shares, rates = [], [], []
    try:
        for i in range(runs + 1):
            watch.seconds = 0.0
            start = time.perf_counter()
            person = (
                client.prompt()
                .user(
                    f"Extract the person (name, age, city) from this text: {WORDS[i % len(WORDS)]} Smith is {30 + i} years old and lives in Paris."
                )
                .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
                .options(ChatOptions(temperature=0.0, seed=42, max_tokens=64))
                .call()
                .entity(Person)
            )
            wall = time.perf_counter() - start
            assert isinstance(person, Person), person
            if i == 0:
                continue  # warm-up: first use imports the converter and pydantic's schema machinery
            tokens = model._counter.sampled  # sampled in this call (the answer plus its end token)
            walls.append(wall)
            shares.append((wall - watch.seconds) / wall)
            rates.append(tokens / watch.seconds)
    finally:
        del model.llama.create_chat_completion
    model_time = median(walls) * (1 - median(shares))
    return median(walls), model_time, median(shares), median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: half the cores)")
    args = parser.parse_args()

    print(f"# local model benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    start = time.perf_counter()
    model = LlamaCppChatModel(n_ctx=2048, n_threads=args.threads, seed=42)
    print(f"model: {model.model_name}, loaded in {time.perf_counter() - start:.2f} s")

    print(f"prompt processing: {prompt_processing(model, args.runs):8.1f} tokens/s")
    print(f"generation:        {generation(model, args.runs):8.1f} tokens/s (free text)")
    k = model.grammar_prefilter_k
    model.grammar_prefilter_k = 0
    _, stock_model_s, _, stock_rate = entity_runs(model, args.runs)
    model.grammar_prefilter_k = k
    wall, model_s, share, rate = entity_runs(model, args.runs)
    print(f"generation:        {rate:8.1f} tokens/s (JSON-schema grammar, likely tokens checked first)")
    print(f"generation:        {stock_rate:8.1f} tokens/s (JSON-schema grammar, whole vocabulary checked: stock)")
    print(
        f"call().entity(Person): {wall * 1000:.0f} ms wall, {model_s * 1000:.0f} ms in llama.cpp, "
        f"framework {share * 100:.3f}% of wall time (target < 1%)"
    )
    print(f"  (with the stock grammar check: {stock_model_s * 1000:.0f} ms in llama.cpp)")


if __name__ == "__main__":
    main()
