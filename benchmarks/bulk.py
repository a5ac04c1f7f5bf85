"""Bulk runs: what ``run_many`` costs per item, its throughput against the raw lane, checkpoints, memory, Ray.

1. Overhead: ``run_many`` over 20,000 items of a function that returns at once, against a plain
   loop over the same function: µs per item that ``run_many`` adds (threads, ordering, progress
   bar off, the per-item usage meter). Target < 50 µs.
2. Throughput: 10,000 calls of ``client.prompt(...).call().content()`` against an instant loopback
   server (``tests.support.loopback.main``, another process) with 64 in flight through
   ``run_many(concurrency=64)``, against the raw lane: 64 threads calling the same model's
   ``call(prompt)`` directly. Target ≥ 80 % of the raw lane.
3. Checkpoint: the same no-op run with ``checkpoint=`` (SQLite, WAL, one commit per item): µs per item.
4. Memory: ``iter_many`` with a checkpoint over ``iter(range(1_000_000))``: peak traced memory and
   the resident set growth, at 100,000 and at 1,000,000 items.
5. Ray (``--ray``, extra ``ray``): ``map_batches`` over 2,000 rows against a loopback server that
   answers after 20 ms, with 1 and then 2 actors, on ``ray.init(num_cpus=2)``.

    .venv/bin/python benchmarks/bulk.py [--ray] [--skip-million]
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from chatclient import ChatClient  # noqa: E402
from chatclient.batch import iter_many, run_many  # noqa: E402
from chatclient.models.openai import OpenAIChatModel  # noqa: E402
from chatclient.prompt import Prompt  # noqa: E402


def noop(x: int) -> int:
    return x


def best(fn: Any, rounds: int = 3) -> float:
    times = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def overhead(n: int = 20_000) -> None:
    plain = best(lambda: [noop(i) for i in range(n)])
    many = {c: best(lambda c=c: run_many(noop, range(n), concurrency=c, progress=False)) for c in (1, 16, 64)}
    print(f"1. overhead over a plain loop ({n:,} instant items): plain {plain / n * 1e6:.2f} µs/item")
    for c, t in many.items():
        print(
            f"   run_many concurrency={c:<3} {t / n * 1e6:6.1f} µs/item  (+{(t - plain) / n * 1e6:.1f} µs, target < 50)"
        )


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", "from tests.support.loopback import main; main()"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}/v1"


def throughput(url: str, n: int = 10_000, flight: int = 64) -> None:
    model = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=url)
    client = ChatClient.builder(model).build()
    prompt = Prompt("hello")
    model.call(prompt)  # warm: imports, first connections

    def raw() -> None:
        left = iter(range(n))

        def worker() -> None:
            for _ in left:
                model.call(prompt)

        with ThreadPoolExecutor(flight) as pool:
            for f in [pool.submit(worker) for _ in range(flight)]:
                f.result()

    def ask(i: int) -> str | None:
        return client.prompt("hello").call().content()

    def bare_client() -> None:
        left = iter(range(n))

        def worker() -> None:
            for i in left:
                ask(i)

        with ThreadPoolExecutor(flight) as pool:
            for f in [pool.submit(worker) for _ in range(flight)]:
                f.result()

    rates: dict[str, list[float]] = {"raw lane (model.call)": [], "client, bare threads": [], "run_many": []}
    for _ in range(3):
        rates["raw lane (model.call)"].append(n / best(raw, 1))
        rates["client, bare threads"].append(n / best(bare_client, 1))
        rates["run_many"].append(n / best(lambda: run_many(ask, range(n), concurrency=flight, progress=False), 1))
    top = {k: max(v) for k, v in rates.items()}
    print(f"2. throughput, {n:,} calls, {flight} in flight, instant loopback server (best of 3 rounds):")
    for k, v in top.items():
        print(f"   {k:<24} {v:8,.0f} calls/s  (median {statistics.median(rates[k]):,.0f})")
    print(
        f"   run_many / raw lane = {top['run_many'] / top['raw lane (model.call)']:.2f} (target >= 0.80); "
        f"run_many / same client on bare threads = {top['run_many'] / top['client, bare threads']:.2f}"
    )


def checkpoint_cost(n: int = 20_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        without = best(lambda: run_many(noop, range(n), concurrency=16, progress=False))
        counter = iter(range(100))
        with_ckpt = best(
            lambda: run_many(
                noop, range(n), concurrency=16, progress=False, checkpoint=Path(tmp) / f"c{next(counter)}.sqlite"
            )
        )
        resumed = Path(tmp) / "resume.sqlite"
        run_many(noop, range(n), concurrency=16, progress=False, checkpoint=resumed)
        skip = best(lambda: run_many(noop, range(n), concurrency=16, progress=False, checkpoint=resumed))
    print(
        f"3. checkpoint ({n:,} items): +{(with_ckpt - without) / n * 1e6:.1f} µs per item written; "
        f"a re-run that skips every item: {skip / n * 1e6:.1f} µs per item"
    )


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def memory(sizes: tuple[int, ...]) -> None:
    print("4. memory, iter_many + checkpoint over an iterator (items not held):")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            # tracemalloc slows every allocation down ~10x: it runs on the smallest size only; the
            # others report the process's peak resident set, which would grow if results were held
            traced = n == min(sizes)
            gc.collect()
            if traced:
                tracemalloc.start()
            start, rss0 = time.perf_counter(), rss_mib()
            for _ in iter_many(noop, iter(range(n)), concurrency=16, progress=False, checkpoint=Path(tmp) / f"m{n}.db"):
                pass
            took = time.perf_counter() - start
            peak = ""
            if traced:
                peak = f"peak traced {tracemalloc.get_traced_memory()[1] / 2**20:.2f} MiB, "
                tracemalloc.stop()
            size = (Path(tmp) / f"m{n}.db").stat().st_size / 2**20
            print(
                f"   {n:>9,} items: {peak}max RSS {rss_mib():.0f} MiB (+{rss_mib() - rss0:.0f} during the run), "
                f"{took:.1f} s ({took / n * 1e6:.1f} µs/item{' under tracemalloc' if traced else ''}), "
                f"checkpoint file {size:.0f} MiB"
            )


def ray_scaling() -> None:
    import ray

    from chatclient.batch.ray import map_batches
    from tests.support.loopback import LoopbackServer, Reply, openai_completion

    with LoopbackServer() as server:
        server.set_default("/v1/chat/completions", Reply(json=openai_completion("ok"), delay=0.02))
        url = server.url + "/v1"
        # the workers cannot import this script: ship its factory and row function by value
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        try:
            rows = [{"id": i, "text": f"q{i}"} for i in range(2000)]
            for threads in (1, 8):
                for actors in (1, 2):
                    ds = ray.data.from_items(rows)
                    start = time.perf_counter()
                    out = map_batches(
                        ds,
                        _ray_row,
                        client_factory=_RayFactory(url),
                        concurrency=actors,
                        batch_size=50,
                        threads_per_actor=threads,
                    ).take_all()
                    took = time.perf_counter() - start
                    assert len(out) == len(rows)
                    print(
                        f"5. ray map_batches, {len(rows):,} rows, 20 ms server, {threads} thread(s)/actor: "
                        f"{actors} actor(s) {took:.1f} s = {len(rows) / took:,.0f} rows/s"
                    )
        finally:
            ray.shutdown()


class _RayFactory:
    def __init__(self, url: str) -> None:
        self.url = url

    def __call__(self) -> ChatClient:
        return ChatClient.builder(OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=self.url)).build()


def _ray_row(client: ChatClient, row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "answer": client.prompt(row["text"]).call().content()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ray", action="store_true", help="also measure Ray with 1 and 2 actors (extra ray)")
    parser.add_argument("--skip-million", action="store_true", help="memory at 20,000 items only")
    parser.add_argument("--only-ray", action="store_true", help="only the Ray measurement")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.only_ray:
        ray_scaling()
        return
    overhead()
    proc, url = start_server()
    try:
        throughput(url)
    finally:
        proc.terminate()
        proc.wait()
    checkpoint_cost()
    memory((20_000,) if args.skip_million else (20_000, 1_000_000))
    if args.ray:
        ray_scaling()


if __name__ == "__main__":
    main()
