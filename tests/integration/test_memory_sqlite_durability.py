"""SQLite memory under many writers and under a crash: nothing is lost, nothing is torn."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from chatclient.messages import UserMessage

# fork: children inherit this module without re-importing it, and also inherit the parent's
# repository object, which must notice the fork and open its own connections.
FORK = multiprocessing.get_context("fork")

THREADS, PROCESSES, THREADS_PER_PROCESS, PER_WRITER = 4, 3, 2, 20
BATCH = 40


def _append(memory: MessageWindowChatMemory, writer: str) -> None:
    for i in range(PER_WRITER):
        memory.add("shared", UserMessage(f"{writer}:{i}"))


def _process_writer(repo: SqliteChatMemoryRepository, p: int) -> None:
    memory = MessageWindowChatMemory(repo, max_messages=1_000_000)
    workers = [threading.Thread(target=_append, args=(memory, f"p{p}t{t}")) for t in range(THREADS_PER_PROCESS)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    repo.close()


def test_threads_and_processes_appending_to_one_conversation_lose_nothing(tmp_path: Path) -> None:
    repo = SqliteChatMemoryRepository(tmp_path / "chat.db", timeout=60)
    memory = MessageWindowChatMemory(repo, max_messages=1_000_000)
    memory.add("shared", UserMessage("start"))  # the parent has open connections before forking
    processes = [FORK.Process(target=_process_writer, args=(repo, p)) for p in range(PROCESSES)]
    threads = [threading.Thread(target=_append, args=(memory, f"main{t}")) for t in range(THREADS)]
    for proc in processes:
        proc.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for proc in processes:
        proc.join(120)
        assert proc.exitcode == 0
    writers = [f"main{t}" for t in range(THREADS)] + [
        f"p{p}t{t}" for p in range(PROCESSES) for t in range(THREADS_PER_PROCESS)
    ]
    stored = [m.text or "" for m in SqliteChatMemoryRepository(tmp_path / "chat.db").find("shared")]
    assert stored[0] == "start"
    assert len(stored) == 1 + len(writers) * PER_WRITER
    for w in writers:  # every message of every writer, in the writer's order
        assert [s for s in stored if s.split(":")[0] == w] == [f"{w}:{i}" for i in range(PER_WRITER)]


def _write_batches_forever(path: str) -> None:
    repo = SqliteChatMemoryRepository(path)
    batch = 0
    while True:
        # Each update adds a whole batch in one transaction and evicts the oldest batch, so a torn
        # write would show as a partial batch.
        def step(old: list, k: int = batch) -> list:  # type: ignore[type-arg]
            kept = old[BATCH:] if len(old) >= 3 * BATCH else old
            return [*kept, *(UserMessage(f"b{k}:{i}:" + "x" * 200) for i in range(BATCH))]

        repo.update("crash", step)
        batch += 1


def test_process_killed_mid_write_leaves_a_readable_consistent_database(tmp_path: Path) -> None:
    path = str(tmp_path / "crash.db")
    for round_ in range(3):
        proc = FORK.Process(target=_write_batches_forever, args=(path,))
        proc.start()
        deadline = time.monotonic() + 60
        # Let it commit a few batches so the kill lands while it is busy writing.
        while time.monotonic() < deadline:
            time.sleep(0.05 + 0.03 * round_)
            if len(SqliteChatMemoryRepository(path).find("crash")) >= BATCH * 2:
                break
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(30)
        assert proc.exitcode == -signal.SIGKILL

        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = SqliteChatMemoryRepository(path).find("crash")
        assert stored, "nothing was committed before the kill"
        assert len(stored) % BATCH == 0
        batches = [stored[i : i + BATCH] for i in range(0, len(stored), BATCH)]
        for chunk in batches:  # whole batches only, each in order
            tag = (chunk[0].text or "").split(":")[0]
            assert [(m.text or "").split(":")[:2] for m in chunk] == [[tag, str(i)] for i in range(BATCH)]
