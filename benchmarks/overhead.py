"""Framework overhead per call: a zero-latency model behind chains of 0, 1, 5 and 20 advisors.

Run: .venv/bin/python benchmarks/overhead.py [--baseline REV]
Prints the median microseconds per full ``client.prompt(...).call().content()`` (and the async
twin), so what is measured is everything chatclient does around the model: building the request,
sorting and walking the chain, the terminal advisor, and the response spec.

Against LangChain (``pip install langchain-core``, in the ``bench`` extra): the same request as an
LCEL chain — ``ChatPromptTemplate`` (the user message) | five ``RunnableLambda`` pass-throughs (the
five advisors) | a zero-latency LangChain chat model | ``StrOutputParser`` — ``invoke``d in rounds
interleaved with chatclient's, so both see the same machine load; the ratio is printed for every
round (goal: at least 20x less time per call than LCEL in every round).

``--baseline REV`` measures the 5-advisor call of another commit (its ``chatclient``/``advisors``
exported with ``git archive``) and of this tree in alternating fresh interpreters, and prints both:
a before/after in one run.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatclient import BaseAdvisor, ChatClient, ChatResponse, Prompt
from chatclient.models.base import BaseChatModel

ANSWER = ChatResponse.of_text("ok")


class InstantModel(BaseChatModel):
    """Answers immediately with a prebuilt response, so only framework time is measured."""

    def call(self, prompt: Prompt) -> ChatResponse:
        return ANSWER

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return ANSWER


class Identity(BaseAdvisor):
    def __init__(self, order: int) -> None:
        self.order = order


def client_with(n: int) -> ChatClient:
    return ChatClient.builder(InstantModel()).default_advisors(*(Identity(i) for i in range(n))).build()


def median_us_sync(client: ChatClient, rounds: int = 15, per_round: int = 400) -> tuple[float, float]:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(per_round):
            client.prompt("hi").call().content()
        samples.append((time.perf_counter_ns() - start) / per_round / 1000)
    return statistics.median(samples), min(samples)


def median_us_async(client: ChatClient, rounds: int = 15, per_round: int = 400) -> tuple[float, float]:
    async def run() -> tuple[float, float]:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            for _ in range(per_round):
                await client.prompt("hi").acall().content()
            samples.append((time.perf_counter_ns() - start) / per_round / 1000)
        return statistics.median(samples), min(samples)

    return asyncio.run(run())


def import_time_ms() -> tuple[float, list[str]]:
    code = (
        "import sys, time; t=time.perf_counter(); import chatclient; d=time.perf_counter()-t; "
        "heavy=[m for m in ('numpy','jsonschema','httpx','pydantic','chatclient.models.openai',"
        "'chatclient.models.anthropic','chatclient.models.ollama') if m in sys.modules]; print(d*1000); print(heavy)"
    )
    # Measure as a user's install would run: with bytecode caches (some sandboxes set
    # PYTHONDONTWRITEBYTECODE, which makes every import recompile the sources). One warm-up run writes them.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import chatclient"], env=env, check=True)
    runs = []
    heavy: list[str] = []
    for _ in range(5):
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        out = result.stdout.split("\n")
        runs.append(float(out[0]))
        heavy = eval(out[1])  # our own subprocess's printed list
    return statistics.median(runs), heavy


STREAM_CHUNKS = 200


def _stream_chunks() -> list[ChatResponse]:
    from chatclient.messages import AssistantMessage
    from chatclient.models.base import ChatResponseMetadata, Generation, GenerationMetadata, Usage

    chunks = [ChatResponse((Generation(AssistantMessage(f"t{i} ")),)) for i in range(STREAM_CHUNKS - 1)]
    last = Generation(AssistantMessage("end"), GenerationMetadata("stop"))
    chunks.append(ChatResponse((last,), ChatResponseMetadata(usage=Usage(5, STREAM_CHUNKS))))
    return chunks


class InstantStreamModel(BaseChatModel):
    """Streams prebuilt chunks with no delay, so only the per-chunk framework cost is measured."""

    def __init__(self) -> None:
        self.chunks = _stream_chunks()

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    def stream(self, prompt: Prompt) -> Any:
        return iter(self.chunks)


def stream_us_per_chunk(events: bool, rounds: int = 15, per_round: int = 10) -> tuple[float, float]:
    """Median (best) µs per chunk of ``stream().content()`` or ``stream().events()`` over 200-chunk streams."""
    client = ChatClient.create(InstantStreamModel())
    samples = []
    for _ in range(rounds):
        start = time.perf_counter_ns()
        for _ in range(per_round):
            spec = client.prompt("hi").stream()
            for _item in spec.events() if events else spec.content():
                pass
        samples.append((time.perf_counter_ns() - start) / per_round / STREAM_CHUNKS / 1000)
    return statistics.median(samples), min(samples)


def service_vs_fluent_us(rounds: int = 15, per_round: int = 400) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median (best) µs of one ``ai_service`` method call and of the same request written fluently."""
    from typing import Protocol

    from chatclient.services import ai_service, system, user

    class Helper(Protocol):
        @system("You are a {{ role }}.")
        @user("Question: {{ question }}")
        def ask(self, question: str, role: str = "teacher") -> str: ...

    client = ChatClient.create(InstantModel())
    service = ai_service(Helper, client=client)

    def fluent() -> None:
        (
            client.prompt()
            .system("You are a {{ role }}.", params={"role": "teacher"})
            .user("Question: {{ question }}", params={"question": "hi"})
            .call()
            .content()
        )

    def facade() -> None:
        service.ask("hi")

    def measure(fn: Any, n: int) -> tuple[float, float]:
        samples = []
        for _ in range(n):
            start = time.perf_counter_ns()
            for _ in range(per_round):
                fn()
            samples.append((time.perf_counter_ns() - start) / per_round / 1000)
        return statistics.median(samples), min(samples)

    measure(fluent, 2)  # warm-up (template compilation, caches)
    measure(facade, 2)
    return measure(fluent, rounds), measure(facade, rounds)


def lcel_chain(advisors: int = 5) -> Any | None:
    """The LCEL equivalent of ``client.prompt(q).call().content()`` with ``advisors`` advisors, or None
    when langchain-core is not installed."""
    try:
        from langchain_core.language_models.chat_models import BaseChatModel as LangChainChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.output_parsers import StrOutputParser
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.prompts import ChatPromptTemplate
        from langchain_core.runnables import RunnableLambda
    except ImportError:
        return None

    class InstantLangChainModel(LangChainChatModel):
        """Answers immediately, like ``InstantModel``."""

        @property
        def _llm_type(self) -> str:
            return "instant"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="ok"))])

    def passthrough(value: Any) -> Any:
        return value

    chain: Any = ChatPromptTemplate.from_messages([("human", "{question}")])
    for _ in range(advisors):
        chain = chain | RunnableLambda(passthrough)
    chain = chain | InstantLangChainModel() | StrOutputParser()
    assert chain.invoke({"question": "hi"}) == "ok"
    return chain


def versus_lcel(rounds: int = 9) -> None:
    """chatclient and LCEL, 5 advisors / 5 steps, measured in interleaved rounds; the ratio per round."""
    chain = lcel_chain()
    if chain is None:
        print("LCEL comparison skipped: pip install langchain-core (in the bench extra)")
        return
    client = client_with(5)
    median_us_sync(client, rounds=2, per_round=100)  # warm-up
    ours_us, theirs_us = [], []
    for _ in range(rounds):
        ours_us.append(median_us_sync(client, rounds=3, per_round=300)[1])
        start = time.perf_counter_ns()
        for _ in range(30):
            chain.invoke({"question": "hi"})
        theirs_us.append((time.perf_counter_ns() - start) / 30 / 1000)
    ratios = [t / o for o, t in zip(ours_us, theirs_us, strict=True)]
    print(
        f"vs LangChain LCEL (5 steps, zero-latency model), µs/call: chatclient {statistics.median(ours_us):.1f}, "
        f"LCEL {statistics.median(theirs_us):.1f}; LCEL takes {statistics.median(ratios):.0f}x as long "
        f"(lowest round {min(ratios):.0f}x; goal >= 20x in every round: {'met' if min(ratios) >= 20 else 'NOT met'})"
    )


_WORKER = """
import sys, json
sys.path.insert(0, {root!r}); sys.path.insert(1, {bench!r})
import chatclient  # from the tree under test, before overhead.py puts this checkout first on the path
assert chatclient.__file__.startswith({root!r}), chatclient.__file__
import overhead
client = overhead.client_with(5)
overhead.median_us_sync(client, rounds=2, per_round=100)
print(json.dumps(overhead.median_us_sync(client, rounds=5, per_round=300)))
"""


def before_after(rev: str, rounds: int = 6) -> None:
    """The 5-advisor call of commit ``rev`` and of this tree, in alternating fresh interpreters."""
    import json
    import shutil
    import tarfile
    import tempfile

    root = Path(__file__).resolve().parents[1]
    folder = Path(tempfile.mkdtemp(prefix="overhead-baseline-"))
    try:
        archive = subprocess.run(
            ["git", "archive", rev, "chatclient", "advisors"], cwd=root, capture_output=True, check=True
        ).stdout
        archive_path = folder / "tree.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(folder / "tree", filter="data")
        samples: dict[str, list[float]] = {"before": [], "after": []}
        for _ in range(rounds):
            for label, tree in (("before", folder / "tree"), ("after", root)):
                code = _WORKER.format(root=str(tree), bench=str(root / "benchmarks"))
                out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
                samples[label].append(json.loads(out.strip().splitlines()[-1])[1])
        before, after = statistics.median(samples["before"]), statistics.median(samples["after"])
        print(
            f"before/after, 5 advisors sync, best-round µs/call, median of {rounds} alternating interpreters: "
            f"{rev} {before:.1f} -> this tree {after:.1f} ({(after - before) / before * 100:+.1f}%)"
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--baseline", metavar="REV", help="also measure the 5-advisor call of this git revision")
    args = parser.parse_args()
    print("µs per call: median of 15 rounds (best round in brackets; on a busy machine the best is the fairer figure)")
    print("chain length | sync µs/call     | async µs/call")
    results = {}
    for n in (0, 1, 5, 20):
        client = client_with(n)
        median_us_sync(client, rounds=2, per_round=100)  # warm-up
        s = median_us_sync(client)
        a = median_us_async(client)
        results[n] = (s, a)
        print(f"{n:12d} | {s[0]:7.1f} ({s[1]:5.1f}) | {a[0]:7.1f} ({a[1]:5.1f})")
    per_advisor = (results[20][0][1] - results[0][0][1]) / 20
    print(f"marginal cost per advisor (sync, best rounds): {per_advisor:.2f} µs")
    print(f"target: 5 advisors sync under 60 µs -> {'met' if results[5][0][0] < 60 else 'NOT met'} (median)")
    stream_us_per_chunk(False, rounds=2)  # warm-up
    stream_us_per_chunk(True, rounds=2)
    content = stream_us_per_chunk(False)
    events = stream_us_per_chunk(True)
    extra = events[1] - content[1]  # best rounds: the fairer figure on a shared machine
    print(
        f"stream, µs per chunk: content() {content[0]:.2f} ({content[1]:.2f}) | events() {events[0]:.2f} "
        f"({events[1]:.2f}) | events() costs {extra:.2f} µs more per chunk (best rounds) "
        f"(target < 2 µs: {'met' if extra < 2 else 'NOT met'})"
    )
    fluent, facade = service_vs_fluent_us()
    added = facade[1] - fluent[1]  # best rounds
    print(
        f"ai_service method vs the same fluent call (system + user templates), µs/call: fluent {fluent[0]:.1f} "
        f"({fluent[1]:.1f}) | service {facade[0]:.1f} ({facade[1]:.1f}) | the facade adds {added:.1f} µs "
        f"(best rounds; target < 10 µs: {'met' if added < 10 else 'NOT met'})"
    )
    versus_lcel()
    if args.baseline:
        before_after(args.baseline)
    ms, heavy = import_time_ms()
    print(f"import chatclient: {ms:.1f} ms (median of 5 fresh interpreters); heavy modules imported: {heavy or 'none'}")


if __name__ == "__main__":
    main()
