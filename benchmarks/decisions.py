"""One decision on the embedded model against the same question through ``entity(Enum)``: latency and agreement.

    .venv/bin/python benchmarks/decisions.py [--model smollm2-135m|gemma3-270m] [--runs 3]
    .venv/bin/python benchmarks/decisions.py --only-reading   # reading a hostile top_logprobs list, no model

For each of 10 labelled yes/no cases and 6 labelled three-way cases (sentiment), the question is
asked twice on the same in-process model (greedy, seed 42, prefix cache off):

- ``DecisionModel.decide``: one chat completion of one token, probabilities read from the logits;
- the same with ``calibrate=True`` (contextual calibration: the baseline answer to a content-free
  input is asked once per distinct question and cached, so it is not in the per-question time);
- ``ChatClient.prompt(...).call().entity(Answer, mode="native")`` with an ``Enum`` (the JSON schema
  becomes a llama.cpp grammar, so the answer always parses), the same question text.

Printed: median milliseconds per question for each path (over ``--runs`` passes), accuracy of each
against the labels, and how often each decision path picks the same answer as ``entity(Enum)``. The machine may be shared, so the
load average is printed too.
"""

from __future__ import annotations

import argparse
import enum
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatclient import ChatClient, ChatOptions
from chatclient.decisions import ChoiceQuestion, DecisionModel, YesNoQuestion
from chatclient.errors import OutputConversionError
from chatclient.models.llamacpp import LlamaCppChatModel
from chatclient.models.model_files import bundled_model_path

YES_NO: list[tuple[str, str, bool]] = [
    ("I love this product, it works perfectly!", "Is the customer happy?", True),
    ("This is terrible. It broke after one day and I want my money back.", "Is the customer happy?", False),
    ("Paris is the capital of France.", "Is Paris the capital of France?", True),
    ("A cat is a small furry animal that says meow.", "Is a cat a plant?", False),
    ("My order never arrived. Please refund me.", "Does the customer ask for a refund?", True),
    ("What time does the store open tomorrow?", "Does the customer ask for a refund?", False),
    ("BUY CHEAP PILLS NOW!!! Click here to WIN $1,000,000 FREE!!!", "Is this message spam?", True),
    ("Hi Anna, are we still meeting for lunch at noon tomorrow?", "Is this message spam?", False),
    ("The meeting is on Monday at 10 am.", "Is the meeting on Monday?", True),
    ("Water freezes at 0 degrees Celsius.", "Does water freeze at 50 degrees Celsius?", False),
]

SENTIMENT: list[tuple[str, str]] = [
    ("I absolutely love it, best purchase ever!", "positive"),
    ("Awful. It broke immediately and support ignored me.", "negative"),
    ("The package arrived on Tuesday.", "neutral"),
    ("Fantastic service, thank you so much!", "positive"),
    ("I hate this app, it crashes all the time.", "negative"),
    ("The store is on Main Street.", "neutral"),
]


class YesNo(enum.Enum):
    yes = "yes"
    no = "no"


class Sentiment(enum.Enum):
    positive = "positive"
    negative = "negative"
    neutral = "neutral"


def entity_prompt(text: str, question: str) -> str:
    return f"Input:\n{text}\n\nQuestion: {question}"


def reading(entries: int = 12_000, runs: int = 5) -> None:
    """Milliseconds to read the answer from a response whose ``top_logprobs`` has ``entries`` entries
    (a misbehaving server; 20 are asked for): bounded by ``MAX_TOP_TOKENS_READ``, linear."""
    from types import MappingProxyType

    from chatclient.decisions.model import MAX_TOP_TOKENS_READ, read_probabilities
    from chatclient.messages import AssistantMessage
    from chatclient.models.base import ChatResponse, Generation, GenerationMetadata

    first = {"token": "yes", "logprob": -0.1}
    tops = [{"token": f"t{i}", "logprob": -5.0} for i in range(entries)] + [first]
    payload = {"content": [{**first, "top_logprobs": tops}]}
    meta = GenerationMetadata("length", MappingProxyType({"logprobs": payload}))
    response = ChatResponse((Generation(AssistantMessage("yes"), meta),))
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        read_probabilities(YesNoQuestion("?"), response)
        times.append((time.perf_counter() - started) * 1000)
    print(
        f"reading {entries:,} top_logprobs entries (cap {MAX_TOP_TOKENS_READ}): {statistics.median(times):.2f} ms median"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only-reading", action="store_true", help="only time reading a 12,000-entry top_logprobs")
    args = parser.parse_args()
    reading()
    if args.only_reading:
        return

    model = LlamaCppChatModel(bundled_model_path(args.model), n_ctx=2048, seed=42, prefix_cache=False)
    decisions = DecisionModel(model)
    calibrated = DecisionModel(model, calibrate=True)
    client = ChatClient.create(model)
    sentiment = ChoiceQuestion("What is the sentiment of the message?", ["positive", "negative", "neutral"])

    cases: list[tuple[str, str, str, object, type[enum.Enum]]] = [
        (text, q, "yes" if expected else "no", YesNoQuestion(q), YesNo) for text, q, expected in YES_NO
    ]
    cases += [(text, sentiment.text, label, sentiment, Sentiment) for text, label in SENTIMENT]

    for _, _, _, asked, _ in cases:  # warm the calibration baselines (once per distinct question)
        calibrated.decide("N/A", {"q": asked})  # type: ignore[dict-item]

    def label(asked: object, answer: object) -> str:
        if isinstance(asked, YesNoQuestion):
            return "yes" if answer.is_yes() else "no"  # type: ignore[attr-defined]
        return str(answer.value)  # type: ignore[attr-defined]

    decide_ms: list[float] = []
    calibrated_ms: list[float] = []
    entity_ms: list[float] = []
    decided: list[str] = []
    decided_cal: list[str] = []
    typed: list[str] = []
    for run in range(args.runs):
        for text, question, _, asked, target in cases:
            start = time.perf_counter()
            answer = decisions.decide(text, {"q": asked})["q"]  # type: ignore[dict-item]
            decide_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            answer_cal = calibrated.decide(text, {"q": asked})["q"]  # type: ignore[dict-item]
            calibrated_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            try:
                value: object = (
                    client.prompt(entity_prompt(text, question))
                    .options(ChatOptions(temperature=0.0))
                    .call()
                    .entity(target, mode="native")
                )
            except OutputConversionError:
                value = "(unparsable)"  # counted as wrong: a decision always has an answer
            entity_ms.append((time.perf_counter() - start) * 1000)
            if run == 0:
                decided.append(label(asked, answer))
                decided_cal.append(label(asked, answer_cal))
                typed.append(value.value if isinstance(value, enum.Enum) else str(value))

    labels = [label for _, _, label, _, _ in cases]
    n = len(cases)
    print(
        f"model: {args.model}  cases: {n} (10 yes/no, 6 three-way)  runs: {args.runs}  load: {os.getloadavg()[0]:.2f}"
    )
    yn = len(YES_NO)

    def same(a: list[str], b: list[str], part: slice = slice(None)) -> int:
        return sum(x == y for x, y in zip(a[part], b[part], strict=True))

    unparsable = typed.count("(unparsable)")
    print(f"entity(Enum) answers that did not parse: {unparsable}/{n}")
    print(f"{'path':<24}{'median ms':>10}{'p90 ms':>9}{'right':>8}{'yes/no':>8}{'3-way':>7}{'= entity':>10}")
    for name, times, answers in (
        ("decide (1 token)", decide_ms, decided),
        ("decide, calibrated", calibrated_ms, decided_cal),
        ("entity(Enum)", entity_ms, typed),
    ):
        p90 = statistics.quantiles(times, n=10)[-1] if len(times) > 1 else times[0]
        print(
            f"{name:<24}{statistics.median(times):>10.1f}{p90:>9.1f}{same(answers, labels):>5}/{n}"
            f"{same(answers, labels, slice(0, yn)):>5}/{yn}{same(answers, labels, slice(yn, None)):>5}/{n - yn}"
            f"{same(answers, typed):>7}/{n}"
        )


if __name__ == "__main__":
    main()
