"""Chat memory benchmark: append+read latency per repository, and messages/s under 8 writers.

    .venv/bin/python benchmarks/memory.py                 # every repository that is reachable
    .venv/bin/python benchmarks/memory.py --only sqlite --ops 500

For each repository a MessageWindowChatMemory(max_messages=20) does ``add`` + ``get`` of one
conversation ``--ops`` times (latency percentiles), then 8 writer threads append ``--per-writer``
messages each, once all to one shared conversation (every add contends for the same lock) and once
to one conversation per writer. SQLite is also measured with 8 writer processes, since Python
threads share one interpreter lock. Everything it creates (temp files, tables, keys) is removed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chatclient.memory import (
    ChatMemoryRepository,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from chatclient.messages import AssistantMessage, UserMessage

POSTGRES_DSN = os.environ.get("CHATCLIENT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CHATCLIENT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
WRITERS = 8
TEXT = "The quick brown fox jumps over the lazy dog. " * 4  # ~180 characters, a short chat turn


def make_repositories(tmp: Path) -> dict[str, tuple[Callable[[], ChatMemoryRepository], Callable[[], None]]]:
    """name -> (factory making a repository on shared storage, cleanup)."""
    token = uuid.uuid4().hex[:10]
    shared = InMemoryChatMemoryRepository()
    repos: dict[str, tuple[Callable[[], ChatMemoryRepository], Callable[[], None]]] = {
        "in-memory": (lambda: shared, lambda: None),
        "sqlite": (lambda: SqliteChatMemoryRepository(tmp / "bench.db"), lambda: None),
    }
    try:
        import psycopg

        from chatclient.memory.postgres import PostgresChatMemoryRepository

        psycopg.connect(POSTGRES_DSN, connect_timeout=3).close()
        table = f"bench_memory_{token}"

        def drop_table() -> None:
            with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS {table}")

        repos["postgres"] = (lambda: PostgresChatMemoryRepository(POSTGRES_DSN, table=table), drop_table)
    except Exception as exc:  # benchmark: report and go on with what is reachable
        print(f"postgres: skipped ({type(exc).__name__}: {exc})")
    try:
        import redis

        from chatclient.memory.redis import RedisChatMemoryRepository

        redis.Redis.from_url(REDIS_URL).ping()
        prefix = f"bench:memory:{token}:"

        def drop_keys() -> None:
            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(f"{prefix}*"))
            if keys:
                client.delete(*keys)

        repos["redis"] = (lambda: RedisChatMemoryRepository(REDIS_URL, prefix=prefix), drop_keys)
    except Exception as exc:
        print(f"redis: skipped ({type(exc).__name__}: {exc})")
    return repos


def latency(repo: ChatMemoryRepository, ops: int) -> dict[str, float]:
    memory = MessageWindowChatMemory(repo, max_messages=20)
    cid = f"latency-{uuid.uuid4().hex[:8]}"
    add_ms, get_ms = [], []
    for i in range(ops):
        message = UserMessage(f"{i} {TEXT}") if i % 2 == 0 else AssistantMessage(f"{i} {TEXT}")
        t0 = time.perf_counter()
        memory.add(cid, message)
        t1 = time.perf_counter()
        memory.get(cid)
        t2 = time.perf_counter()
        add_ms.append((t1 - t0) * 1000)
        get_ms.append((t2 - t1) * 1000)
    memory.clear(cid)
    both = [a + g for a, g in zip(add_ms, get_ms, strict=True)]
    return {
        "add_p50": statistics.median(add_ms),
        "get_p50": statistics.median(get_ms),
        "both_p50": statistics.median(both),
        "both_p95": statistics.quantiles(both, n=20)[18],
    }


def _writer(memory: MessageWindowChatMemory, cid: str, n: int, name: str) -> None:
    for i in range(n):
        memory.add(cid, UserMessage(f"{name}:{i} {TEXT}"))


def throughput_threads(factory: Callable[[], ChatMemoryRepository], per_writer: int, shared: bool) -> float:
    repo = factory()
    memory = MessageWindowChatMemory(repo, max_messages=20)
    run = uuid.uuid4().hex[:8]
    cids = [f"tp-{run}" if shared else f"tp-{run}-{w}" for w in range(WRITERS)]
    threads = [threading.Thread(target=_writer, args=(memory, cids[w], per_writer, f"w{w}")) for w in range(WRITERS)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    for cid in set(cids):
        memory.clear(cid)
    return WRITERS * per_writer / elapsed


def _process_writer(path: str, cid: str, n: int, name: str, start: Any) -> None:
    memory = MessageWindowChatMemory(SqliteChatMemoryRepository(path), max_messages=20)
    memory.get(cid)  # connect before the clock starts
    start.wait()
    _writer(memory, cid, n, name)


def throughput_sqlite_processes(path: Path, per_writer: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    cid = f"tp-proc-{uuid.uuid4().hex[:8]}"
    start = ctx.Event()
    procs = [
        ctx.Process(target=_process_writer, args=(str(path), cid, per_writer, f"p{w}", start)) for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every process import and connect
    t0 = time.perf_counter()
    start.set()
    for p in procs:
        p.join()
    elapsed = time.perf_counter() - t0
    SqliteChatMemoryRepository(path).delete(cid)
    return WRITERS * per_writer / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=300, help="add+get pairs for the latency figures")
    parser.add_argument("--per-writer", type=int, default=100, help="messages each of the 8 writers appends")
    parser.add_argument("--only", action="append", help="measure only this repository (repeatable)")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, window max_messages=20, ~{len(TEXT)}-char messages")
    with tempfile.TemporaryDirectory() as tmp:
        repos = make_repositories(Path(tmp))
        header = f"{'repository':<10} {'add p50':>9} {'get p50':>9} {'add+get p50':>12} {'add+get p95':>12}"
        header += f" {'8 writers, 1 conv':>18} {'8 writers, 8 convs':>19}"
        print(header)
        for name, (factory, cleanup) in repos.items():
            if args.only and name not in args.only:
                continue
            try:
                lat = latency(factory(), args.ops)
                one = throughput_threads(factory, args.per_writer, shared=True)
                many = throughput_threads(factory, args.per_writer, shared=False)
                print(
                    f"{name:<10} {lat['add_p50']:>7.3f}ms {lat['get_p50']:>7.3f}ms {lat['both_p50']:>10.3f}ms "
                    f"{lat['both_p95']:>10.3f}ms {one:>14.0f} msg/s {many:>15.0f} msg/s"
                )
            finally:
                cleanup()
        if not args.only or "sqlite" in args.only:
            rate = throughput_sqlite_processes(Path(tmp) / "bench.db", args.per_writer)
            print(f"sqlite, 8 writer processes, 1 conversation: {rate:.0f} msg/s")


if __name__ == "__main__":
    main()
