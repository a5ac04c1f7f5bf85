"""Quality and speed of every bundled local model, and the framework's share of a ``call().entity()``.

    .venv/bin/python benchmarks/local_model.py                 # quality table, every bundled model
    .venv/bin/python benchmarks/local_model.py --speed [--runs 5] [--threads N]   # speed figures too

Quality (the table ``benchmarks/README.md`` quotes; it decided which model is the default for chat
and for extraction): for each model in ``BUNDLED_MODELS``, greedy decoding (temperature 0, seed 42,
prefix cache off so each answer depends only on its prompt):

- 10 chat prompts through ``ChatClient`` with the model's default options, each judged by simple
  checks: the expected keyword is present, no chat-template markup leaked (``[INST]``, ``<<SYS>>``,
  ``<|im_start|>``, ``<start_of_turn>``, ...), the answer is not empty, and it does not repeat itself
  (a line or a 6-word run that occurs three times);
- 10 extractions with ``call().entity(T)`` on the native path (the JSON schema becomes a llama.cpp
  grammar), counted right only when the whole object equals the expected one;
- seconds per answer (mean) for each of the two;
- the first hour (issue 27, data in ``benchmarks/data/first_hour.json``): 3 questions over the
  Markdown files of ``examples/data/kettle`` answered through ``QuestionAnswerAdvisor`` with its
  default template (MiniLM embeddings when installed, else ``HashingEmbeddingModel``), right when
  the expected phrase is in the answer; and 5 nested invoice extractions (number, date, total and a
  list of line items) with the model's default options, counted right when number, date and total
  all are, and cut when the token limit ended the answer.

Speed (``--speed``, the default chat model): load time; prompt processing (a ~400-token prompt, 1
generated token, a different first word each run so the prefix cache cannot skip work); free
generation (64 tokens); grammar-constrained generation with LlamaCppChatModel's grammar prefilter and
with llama-cpp-python's stock sampler; and ``call().entity(Person)`` wall time against the time inside
``create_chat_completion`` (the framework's share; target under 1%). Medians over ``--runs``.
The machine may be shared, so the load average is printed.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
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
from chatclient.models.model_files import BUNDLED_MODELS, bundled_model_available

# -- quality -------------------------------------------------------------------------------------

# (prompt, any of these keywords must appear, case-insensitive)
CHAT: list[tuple[str, tuple[str, ...]]] = [
    ("What is the capital of Australia?", ("canberra",)),
    ("What is the capital of France?", ("paris",)),
    ("How many days are there in a week?", ("seven", "7")),
    ("What colour is the sky on a clear day?", ("blue",)),
    ("How do you say 'thank you' in Spanish?", ("gracias",)),
    ("What is 2 + 2?", ("4", "four")),
    ("Which planet is the largest in the solar system?", ("jupiter",)),
    ("Who wrote Romeo and Juliet?", ("shakespeare",)),
    ("What gas do plants take from the air to make food?", ("carbon dioxide", "co2")),
    ("Give me three tips for studying.", ("study", "focus", "break", "sleep", "notes")),
]

MARKUP = re.compile(r"\[/?INST\]|<<SYS>>|<\|im_(start|end)\|>|<(start|end)_of_turn>|<\|eot_id\|>|<\|start_header_id\|>")


class Person(BaseModel):
    name: str
    age: int
    city: str


class Invoice(BaseModel):
    invoice_number: str
    total_eur: float


class Book(BaseModel):
    title: str
    author: str
    year: int


EXTRACT: list[tuple[str, type[BaseModel], dict[str, Any]]] = [
    ("Maria Silva is 31 years old and lives in Lisbon.", Person, {"name": "Maria Silva", "age": 31, "city": "Lisbon"}),
    ("Tom Becker, aged 45, moved to Berlin last year.", Person, {"name": "Tom Becker", "age": 45, "city": "Berlin"}),
    ("Living in Oslo, Ingrid Berg turned 28 this spring.", Person, {"name": "Ingrid Berg", "age": 28, "city": "Oslo"}),
    ("Kenji Sato (52) runs a small shop in Osaka.", Person, {"name": "Kenji Sato", "age": 52, "city": "Osaka"}),
    ("Our new colleague Ana Costa is 24 and comes from Porto.", Person, {"name": "Ana Costa", "age": 24, "city": "Porto"}),
    ("Invoice INV-2024-0117: total due 1250.50 EUR.", Invoice, {"invoice_number": "INV-2024-0117", "total_eur": 1250.5}),
    ("Please pay invoice number A-778 for a total of 89.90 euros.", Invoice, {"invoice_number": "A-778", "total_eur": 89.9}),
    ("Re: invoice 55312, amount 400 EUR, due in 30 days.", Invoice, {"invoice_number": "55312", "total_eur": 400.0}),
    ("'Dune' by Frank Herbert was first published in 1965.", Book, {"title": "Dune", "author": "Frank Herbert", "year": 1965}),
    ("George Orwell wrote the novel 1984, published in 1949.", Book, {"title": "1984", "author": "George Orwell", "year": 1949}),
]


def repeats_itself(text: str) -> bool:
    """A line (10+ characters) or a run of 6 words that occurs three times or more."""
    lines = [line.strip() for line in text.splitlines() if len(line.strip()) >= 10]
    if any(lines.count(line) >= 3 for line in set(lines)):
        return True
    words = text.lower().split()
    runs = [" ".join(words[i : i + 6]) for i in range(len(words) - 5)]
    return any(runs.count(run) >= 3 for run in set(runs))


def chat_checks(answer: str, keywords: tuple[str, ...]) -> dict[str, bool]:
    """The four judgements of one chat answer."""
    return {
        "keyword": any(k in answer.lower() for k in keywords),
        "no markup": MARKUP.search(answer) is None,
        "not empty": bool(answer.strip()),
        "no repeat": not repeats_itself(answer),
    }


def quality(name: str, verbose: bool, store: Any = None) -> dict[str, Any]:
    """Load one bundled model and run the 10 chat prompts and the 10 extractions."""
    start = time.perf_counter()
    model = LlamaCppChatModel.from_bundled(name, n_ctx=2048, seed=42, prefix_cache=False)
    load_s = time.perf_counter() - start
    client = ChatClient.create(model)
    counts = {"keyword": 0, "no markup": 0, "not empty": 0, "no repeat": 0}
    chat_s: list[float] = []
    for question, keywords in CHAT:
        start = time.perf_counter()
        answer = client.prompt(question).options(ChatOptions(temperature=0.0)).call().content() or ""
        chat_s.append(time.perf_counter() - start)
        checks = chat_checks(answer, keywords)
        for key, ok in checks.items():
            counts[key] += ok
        if verbose:
            print(f"  [{name}] {question!r} -> {answer[:160]!r} {[k for k, ok in checks.items() if not ok]}")
    exact = 0
    extract_s: list[float] = []
    for text, target, expected in EXTRACT:
        start = time.perf_counter()
        try:
            value = (
                client.prompt()
                .user(f"Extract the {target.__name__.lower()} from this text: {text}")
                .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
                .options(ChatOptions(temperature=0.0, max_tokens=96))
                .call()
                .entity(target)
            )
            got: Any = value.model_dump()
        except Exception as exc:  # a failed conversion counts as a wrong answer
            got = f"{type(exc).__name__}: {exc}"
        extract_s.append(time.perf_counter() - start)
        exact += got == expected
        if verbose:
            print(f"  [{name}] {text!r} -> {got!r}{'' if got == expected else '  WRONG'}")
    hour = first_hour(client, store, name, verbose) if store is not None else None
    return {
        "first_hour": hour,
        "name": name,
        "template": f"{model.chat_template.source}:{model.chat_template.name}",
        "load_s": load_s,
        "chat": counts,
        "chat_s": statistics.mean(chat_s),
        "exact": exact,
        "extract_s": statistics.mean(extract_s),
    }


FIRST_HOUR = json.loads((Path(__file__).parent / "data" / "first_hour.json").read_text())
KETTLE = Path(__file__).resolve().parent.parent / "examples" / "data" / "kettle"


class LineItem(BaseModel):
    description: str
    quantity: int
    unit_price: float


class NestedInvoice(BaseModel):
    number: str
    date: str
    total: float
    items: list[LineItem]


def kettle_store() -> Any:
    """The kettle manual's sections in a vector store (MiniLM when installed, else word hashing)."""
    from chatclient.rag import HashingEmbeddingModel, MarkdownReader, SimpleVectorStore

    try:
        from chatclient.rag import LocalEmbeddingModel

        embedding: Any = LocalEmbeddingModel()
        embedding.embed(["warm-up"])
    except Exception:  # the MiniLM weights are optional
        embedding = HashingEmbeddingModel(dimensions=1024, char_ngrams=True)
    store = SimpleVectorStore(embedding)
    for path in sorted(KETTLE.glob("*.md")):
        store.add(MarkdownReader(path).read())
    return store


def first_hour(client: ChatClient, store: Any, name: str, verbose: bool) -> dict[str, Any]:
    """RAG answers with QuestionAnswerAdvisor's default template, and nested extractions."""
    from advisors import QuestionAnswerAdvisor
    from chatclient.rag import SearchRequest

    qa = QuestionAnswerAdvisor(store, SearchRequest(top_k=2))
    rag_right, rag_s = 0, []
    for case in FIRST_HOUR["rag_questions"]:
        start = time.perf_counter()
        answer = client.prompt(case["question"]).advisors(qa).options(ChatOptions(temperature=0.0)).call().content()
        rag_s.append(time.perf_counter() - start)
        right = any(k in (answer or "").lower() for k in case["any_of"])
        rag_right += right
        if verbose:
            print(f"  [{name}] RAG {case['question']!r} -> {(answer or '')[:160]!r}{'' if right else '  WRONG'}")
    nested_right, cut, nested_s = 0, 0, []
    for case in FIRST_HOUR["invoices"]:
        start = time.perf_counter()
        spec = (
            client.prompt()
            .user(f"Extract the invoice from this text: {case['text']}")
            .advisors(params={ContextKeys.NATIVE_STRUCTURED_OUTPUT: True})
            .options(ChatOptions(temperature=0.0))
            .call()
        )
        try:
            result = spec.response_entity(NestedInvoice)
            invoice, response = result.entity, result.response
        except Exception as exc:  # a failed conversion counts as wrong
            invoice, response = None, spec.chat_response()
            if verbose:
                print(f"  [{name}] {type(exc).__name__}: {str(exc)[:200]}")
        nested_s.append(time.perf_counter() - start)
        finish = response.result.finish_reason if response is not None and response.result is not None else None
        cut += finish == "length"
        right = invoice is not None and (
            invoice.number.strip("# ") == case["number"]
            and invoice.date == case["date"]
            and abs(invoice.total - case["total"]) < 0.005
        )
        nested_right += right
        if verbose:
            shown = invoice.model_dump() if invoice is not None else None
            print(f"  [{name}] invoice {case['number']} -> {str(shown)[:200]} finish={finish}{'' if right else '  WRONG'}")
    return {
        "rag": rag_right,
        "rag_s": statistics.mean(rag_s),
        "nested": nested_right,
        "cut": cut,
        "nested_s": statistics.mean(nested_s),
    }


def print_first_hour_table(rows: list[dict[str, Any]]) -> None:
    n_rag, n_inv = len(FIRST_HOUR["rag_questions"]), len(FIRST_HOUR["invoices"])
    print("| model | RAG answers right (default QA template) | s/RAG answer | nested invoices right "
          "(number, date, total) | cut by the token limit | s/invoice |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        f = r["first_hour"]
        print(
            f"| {r['name']} | {f['rag']}/{n_rag} | {f['rag_s']:.2f} | {f['nested']}/{n_inv} "
            f"| {f['cut']}/{n_inv} | {f['nested_s']:.2f} |"
        )


def print_quality_table(rows: list[dict[str, Any]]) -> None:
    n_chat, n_ext = len(CHAT), len(EXTRACT)
    print(
        "| model | chat template | keyword | no markup | not empty | no repeat | s/chat answer "
        "| extraction exact | s/extraction | load s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        c = r["chat"]
        print(
            f"| {r['name']} | {r['template']} | {c['keyword']}/{n_chat} | {c['no markup']}/{n_chat} "
            f"| {c['not empty']}/{n_chat} | {c['no repeat']}/{n_chat} | {r['chat_s']:.2f} "
            f"| {r['exact']}/{n_ext} | {r['extract_s']:.2f} | {r['load_s']:.2f} |"
        )


# -- speed ---------------------------------------------------------------------------------------

FILLER = (
    "The river town kept its old stone bridge, its market on Thursdays and a bakery that opened "
    "before dawn. Travellers stopped to rest, trade news and buy bread for the road ahead. "
)
WORDS = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel", "India", "Juliet", "Kilo"]


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


def prompt_processing(model: LlamaCppChatModel, runs: int) -> float:
    rates = []
    body = FILLER * 12
    for i in range(runs):
        text = f"{WORDS[i % len(WORDS)]} {i}. {body}"
        start = time.perf_counter()
        out = model.llama.create_completion(text, max_tokens=1, temperature=0.0)
        elapsed = time.perf_counter() - start
        rates.append(out["usage"]["prompt_tokens"] / elapsed)
    return statistics.median(rates)


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
    return statistics.median(rates)


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
    model_time = statistics.median(walls) * (1 - statistics.median(shares))
    return statistics.median(walls), model_time, statistics.median(shares), statistics.median(rates)


def speed(runs: int, threads: int | None) -> None:
    start = time.perf_counter()
    model = LlamaCppChatModel(n_ctx=2048, n_threads=threads, seed=42)
    print(f"speed of {model.model_name}, loaded in {time.perf_counter() - start:.2f} s")
    print(f"prompt processing: {prompt_processing(model, runs):8.1f} tokens/s")
    print(f"generation:        {generation(model, runs):8.1f} tokens/s (free text)")
    k = model.grammar_prefilter_k
    model.grammar_prefilter_k = 0
    _, stock_model_s, _, stock_rate = entity_runs(model, runs)
    model.grammar_prefilter_k = k
    wall, model_s, share, rate = entity_runs(model, runs)
    print(f"generation:        {rate:8.1f} tokens/s (JSON-schema grammar, likely tokens checked first)")
    print(f"generation:        {stock_rate:8.1f} tokens/s (JSON-schema grammar, whole vocabulary checked: stock)")
    print(
        f"call().entity(Person): {wall * 1000:.0f} ms wall, {model_s * 1000:.0f} ms in llama.cpp, "
        f"framework {share * 100:.3f}% of wall time (target < 1%)"
    )
    print(f"  (with the stock grammar check: {stock_model_s * 1000:.0f} ms in llama.cpp)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--speed", action="store_true", help="also measure tokens/s and the framework's share")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: half the cores)")
    parser.add_argument("--verbose", action="store_true", help="print every answer")
    args = parser.parse_args()

    print(f"# local model benchmark, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    rows = []
    store = kettle_store()
    for name in BUNDLED_MODELS:
        if not bundled_model_available(name):
            print(f"{name}: not installed ({BUNDLED_MODELS[name].install}), skipped")
            continue
        rows.append(quality(name, args.verbose, store))
    print_quality_table(rows)
    print()
    print_first_hour_table(rows)
    if args.speed:
        speed(args.runs, args.threads)


if __name__ == "__main__":
    main()
