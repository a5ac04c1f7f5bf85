"""Agents: what the workflow machinery costs per agent step, and what recovery costs.

Run: .venv/bin/python benchmarks/agents.py

All figures are CPU time of the measuring thread (``time.thread_time_ns``), so they do not depend
on other work running on the machine; the recovery rows are wall time (they wait for the disk).

1. Per-step overhead with a zero-latency model: a ``sequence`` of 10 model agents (each one
   ``ChatClient`` call: render the templates, call, write the scope, journal the step, record the
   invocation) against the same 10 bare ``client.prompt().user(text).call().content()`` calls,
   measured in alternation (30 rounds of 20 runs each, after a warm-up round); printed as µs per
   step over the bare calls and as a share of the whole sequence, from the medians and from the
   best rounds (targets, issue 40: < 10 µs per step; < 25 % of a sequence on ``ScriptedChatModel``). The same for 10 function agents against 10 plain function calls
   (pure machinery, no model call at all), and the async twins.
2. Recovery: µs per step added by saving the scope after each step (SQLite file store), and the time
   to continue a 10-step run whose 9 first steps are journalled (load + replay + the last step).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatclient import ChatClient, ChatResponse, Prompt
from chatclient.agents import SqliteScopeStore, agent, agent_function, sequence
from chatclient.models.base import BaseChatModel

ANSWER = ChatResponse.of_text("ok")
STEPS = 10


class InstantModel(BaseChatModel):
    """Answers immediately with a prebuilt response, so only framework time is measured."""

    def call(self, prompt: Prompt) -> ChatResponse:
        return ANSWER

    async def acall(self, prompt: Prompt) -> ChatResponse:
        return ANSWER


# CPU time of this thread, not wall time: the figures then hold on a machine busy with other work
# (every run here is single-threaded; the async rows run on this thread's event loop).
CLOCK = time.thread_time_ns


def best_and_median(
    fn: Callable[[], Any], rounds: int = 15, per_round: int = 40, clock: Callable[[], int] = CLOCK
) -> tuple[float, float]:
    """µs per call of ``fn`` (CPU time unless another ``clock``): (median, best) over ``rounds`` rounds."""
    samples = []
    for _ in range(rounds):
        start = clock()
        for _ in range(per_round):
            fn()
        samples.append((clock() - start) / per_round / 1000)
    return statistics.median(samples), min(samples)


def model_agents(client: ChatClient) -> Any:
    agents = [
        agent(client, name=f"a{i}", user="Step {{ n }}: improve {{ text }}", output_key="text") for i in range(STEPS)
    ]
    return sequence(*agents, name="ten")


def paired(
    workflow: Callable[[], Any],
    bare: Callable[[], Any],
    rounds: int = 30,
    per_round: int = 20,
    refill: Callable[[], None] | None = None,
) -> tuple[list[float], list[float]]:
    """µs of CPU per call of ``workflow`` and of ``bare``, measured in alternation round by round
    (so both see the same machine), after one warm-up round each; ``refill`` runs between rounds,
    untimed."""
    wf_samples: list[float] = []
    bare_samples: list[float] = []
    for i in range(rounds + 1):
        for fn, samples in ((workflow, wf_samples), (bare, bare_samples)):
            if refill is not None:
                refill()
            start = CLOCK()
            for _ in range(per_round):
                fn()
            if i:  # round 0 warms both up
                samples.append((CLOCK() - start) / per_round / 1000)
    return wf_samples, bare_samples


def report(label: str, samples: tuple[list[float], list[float]]) -> float:
    """Print the machinery per step from the medians and from the best rounds; return the median's figure."""
    wf, bare = samples
    wf_med, bare_med, wf_best, bare_best = statistics.median(wf), statistics.median(bare), min(wf), min(bare)
    per_step, per_step_best = (wf_med - bare_med) / STEPS, (wf_best - bare_best) / STEPS
    share, share_best = (wf_med - bare_med) / wf_med * 100, (wf_best - bare_best) / wf_best * 100
    print(
        f"{label:<34} workflow {wf_med:7.1f} µs (best {wf_best:6.1f})  bare {bare_med:7.1f} µs (best {bare_best:6.1f})"
        f"  -> {per_step:5.1f} µs per step, {share:4.1f} % of the sequence (best rounds: {per_step_best:5.1f} µs,"
        f" {share_best:4.1f} %)"
    )
    return per_step


class OneMsModel(BaseChatModel):
    """Answers after 1 ms, a very fast model: what share of a real sequence the machinery is."""

    def call(self, prompt: Prompt) -> ChatResponse:
        time.sleep(0.001)
        return ANSWER


def scripted_rows(per_step_us: float) -> None:
    from chatclient.testing import ScriptedChatModel

    model = ScriptedChatModel()
    client = ChatClient.create(model)
    wf = model_agents(client)

    def refill() -> None:  # untimed: each timed batch of 20 runs makes 200 calls
        model.prompts.clear()
        model.add(*(["ok"] * (20 * STEPS - model.remaining)))

    report(
        "10 agents on ScriptedChatModel",
        paired(
            lambda: wf.run(n=1, text="draft"),
            lambda: [client.prompt().user("Step 1: improve draft").call().content() for _ in range(STEPS)],
            refill=refill,
        ),
    )
    slow = model_agents(ChatClient.create(OneMsModel()))
    wall, _ = best_and_median(lambda: slow.run(n=1, text="draft"), 5, 10, time.perf_counter_ns)
    print(
        f"{'10 agents on a 1 ms model':<34} sequence {wall:8.1f} µs wall; the machinery's {per_step_us:.1f} µs per step "
        f"is {per_step_us * STEPS / wall * 100:.1f} % of it"
    )


def sync_rows() -> float:
    client = ChatClient.create(InstantModel())
    wf = model_agents(client)
    text = "Step 1: improve a draft"

    def bare() -> None:
        value = "draft"
        for _ in range(STEPS):
            value = client.prompt().user(text).call().content() or value

    per_step = report("10 model agents (sync)", paired(lambda: wf.run(n=1, text="draft"), bare))

    def plain(text: str) -> str:
        return text + "."

    fn_agents = [agent_function(plain, name=f"f{i}", output_key="text") for i in range(STEPS)]
    fwf = sequence(*fn_agents, name="fns")

    def bare_fns() -> None:
        value = "x"
        for _ in range(STEPS):
            value = plain(value)

    report("10 function agents (sync)", paired(lambda: fwf.run(text="x"), bare_fns, per_round=100))
    return per_step


def async_rows() -> None:
    client = ChatClient.create(InstantModel())
    wf = model_agents(client)
    text = "Step 1: improve a draft"

    async def bare() -> None:
        for _ in range(STEPS):
            await client.prompt().user(text).acall().content()

    async def main() -> None:
        wf_samples: list[float] = []
        bare_samples: list[float] = []
        for i in range(31):
            for fn, samples in ((lambda: wf.arun(n=1, text="draft"), wf_samples), (bare, bare_samples)):
                start = CLOCK()
                for _ in range(20):
                    await fn()
                if i:
                    samples.append((CLOCK() - start) / 20 / 1000)
        report("10 model agents (async)", (wf_samples, bare_samples))

    asyncio.run(main())


def recovery_rows() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteScopeStore(Path(tmp) / "scopes.db")

        def plain(text: str) -> str:
            return text + "."

        fns = [agent_function(plain, name=f"f{i}", output_key="text") for i in range(STEPS)]
        wf = sequence(*fns, name="fns")
        counter = iter(range(10**9))
        wall = time.perf_counter_ns
        with_store = best_and_median(
            lambda: wf.run(text="x", scope_store=store, scope_id=f"s{next(counter)}"), 7, 20, wall
        )
        without = best_and_median(lambda: wf.run(text="x"), 7, 20, wall)
        print(
            f"{'saving after each step (SQLite)':<34} {(with_store[0] - without[0]) / STEPS:8.1f} µs per step "
            f"(run of {STEPS}: {with_store[0]:.0f} µs with the store, {without[0]:.0f} µs without)"
        )

        # A crashed run: the first 9 steps are journalled, the 10th never ran.
        calls = [0]

        def crash_at_ten(text: str) -> str:
            calls[0] += 1
            if calls[0] == STEPS:
                raise RuntimeError("crash")
            return text + "."

        crashing = sequence(
            *(agent_function(crash_at_ten, name=f"c{i}", output_key="text") for i in range(STEPS)), name="crash"
        )
        try:
            crashing.run(text="x", scope_store=store, scope_id="crashed")
        except Exception:
            pass
        start = time.perf_counter_ns()
        result = crashing.run(scope_store=store, scope_id="crashed")
        took = (time.perf_counter_ns() - start) / 1000
        replayed = sum(c.recovered for c in result.invocations[0].children)
        print(
            f"{'recovering a 10-step run':<34} {took:8.1f} µs (load, replay {replayed} journalled steps, run the "
            f"last one and save); the function ran {calls[0] - STEPS} more time(s)"
        )
        store.close()


if __name__ == "__main__":
    per_step = sync_rows()
    async_rows()
    scripted_rows(per_step)
    recovery_rows()
