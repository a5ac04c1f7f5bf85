"""Scope stores on real engines (SQLite file, the machine's PostgreSQL) and crash recovery: a
process running a workflow is SIGKILLed mid-run; a new process continues it, and the call counts
show that no completed agent (parallel branches included) ran twice."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.agents import (
    AgenticScope,
    PostgresScopeStore,
    SqliteScopeStore,
    agent_function,
    sequence,
)
from chatclient.errors import AgentExecutionError, AgenticScopeError
from tests.support.scope_stores import (
    POSTGRES_DSN,
    STORE_KINDS,
    ScopeStoreSpec,
    drop_table,
    open_scope_store,
    postgres_or_skip,
    scope_store_spec,
)

pytestmark = pytest.mark.integration


@pytest.fixture(params=STORE_KINDS)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ScopeStoreSpec]:
    yield from scope_store_spec(request.param, tmp_path, "scopes")


def test_store_contract(store_spec: Any) -> None:
    store = open_scope_store(store_spec)
    assert store.load("absent") is None
    scope = AgenticScope({"text": "héllo \x00 nul", "n": (1, 2)}, id="s-1")
    store.save(scope)
    scope.write("n", 3)
    store.save(scope)  # overwrites
    loaded = store.load("s-1")
    assert loaded is not None and loaded.read("n") == 3 and loaded.read("text") == "héllo \x00 nul"
    store.save(AgenticScope(id="s-2"))
    assert store.ids() == ["s-1", "s-2"]
    store.delete("s-1")
    assert store.ids() == ["s-2"] and store.load("s-1") is None
    with pytest.raises(ValueError):
        store.load("")


def test_store_is_used_by_a_run_and_continues_it(store_spec: Any) -> None:
    calls: list[str] = []

    @agent_function(output_key="a")
    def first(x: int) -> int:
        calls.append("first")
        return x + 1

    @agent_function(output_key="b")
    def second(a: int) -> int:
        calls.append("second")
        if len(calls) == 2:
            raise RuntimeError("crash")
        return a * 10

    store = open_scope_store(store_spec)
    wf = sequence(first, second, name="wf")
    with pytest.raises(AgentExecutionError):
        wf.run(x=1, scope_id="job", scope_store=store)
    stored = store.load("job")
    assert stored is not None and stored.read("a") == 2 and not stored.has("b")
    result = wf.run(scope_id="job", scope_store=store)  # inputs come from the store
    assert result.output == 20 and calls == ["first", "second", "second"]
    assert [c.recovered for c in result.invocations[0].children] == [True, False]


def test_sqlite_store_that_cannot_open_is_a_typed_error(tmp_path: Path) -> None:
    store = SqliteScopeStore(tmp_path / "missing-dir" / "x.db")
    with pytest.raises(AgenticScopeError, match="SQLite scope store: save failed"):
        store.save(AgenticScope())


@pytest.mark.postgres
def test_postgres_store_down_is_a_typed_error_without_the_password() -> None:
    pytest.importorskip("psycopg")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresScopeStore(f"postgresql://user:s3cretpw@127.0.0.1:{port}/db", connect_timeout=2)
    with pytest.raises(AgenticScopeError) as info:
        store.load("x")
    text = str(info.value) + repr(store)
    assert "PostgreSQL scope store: load failed" in text and "s3cretpw" not in text


# -- crash recovery across processes ----------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, sys, time
    from chatclient.agents import (PostgresScopeStore, SqliteScopeStore, agent_function, parallel, sequence)

    kind, where, table, calls_path, mode = sys.argv[1:6]
    store = SqliteScopeStore(where, table=table) if kind == "sqlite" else PostgresScopeStore(where, table=table)

    def log(name):
        with open(calls_path, "a") as f:
            f.write(name + "\\n")

    @agent_function(output_key="a")
    def first(topic: str) -> str:
        log("first")
        return topic + "-1"

    @agent_function(output_key="b")
    def fast(a: str) -> str:
        log("fast")
        return a + "-fast"

    @agent_function(output_key="c")
    def slow(a: str) -> str:
        log("slow")
        if mode == "crash":
            time.sleep(120)  # killed here
        return a + "-slow"

    @agent_function(output_key="d")
    def last(b: str, c: str) -> str:
        log("last")
        return b + "+" + c

    wf = sequence(first, parallel(fast, slow, name="fan"), last, name="job")
    result = wf.run(topic="t", scope_id="crash-1", scope_store=store)
    print(json.dumps({"output": result.output}))
    """
)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_sigkill_mid_run_then_recovery_never_reruns_completed_agents(kind: str, tmp_path: Path) -> None:
    table = f"crash_{uuid.uuid4().hex[:10]}"
    where = str(tmp_path / "scopes.db") if kind == "sqlite" else POSTGRES_DSN
    if kind == "postgres":
        postgres_or_skip()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    calls = tmp_path / "calls.txt"
    args = [sys.executable, str(script), kind, where, table, str(calls)]
    store = SqliteScopeStore(where, table=table) if kind == "sqlite" else PostgresScopeStore(where, table=table)
    try:
        child = subprocess.Popen([*args, "crash"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        # wait until the fast branch is journalled and the slow one is running, then kill
        while True:
            assert time.monotonic() < deadline, "the worker never reached the slow branch"
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            scope = store.load("crash-1") if calls.exists() else None
            if scope is not None and len(scope._journal) == 2 and "slow" in calls.read_text():
                break
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        assert child.returncode == -signal.SIGKILL
        assert calls.read_text().split() == ["first", "fast", "slow"] or calls.read_text().split() == [
            "first",
            "slow",
            "fast",
        ]

        done = subprocess.run([*args, "recover"], capture_output=True, text=True, timeout=60, check=True)
        assert json.loads(done.stdout.strip().splitlines()[-1]) == {"output": "t-1-fast+t-1-slow"}
        counts = {name: calls.read_text().split().count(name) for name in ("first", "fast", "slow", "last")}
        assert counts == {"first": 1, "fast": 1, "slow": 2, "last": 1}  # only the unfinished branch ran again
        final = store.load("crash-1")
        assert final is not None and final.read("d") == "t-1-fast+t-1-slow"
    finally:
        store.close()
        if kind == "postgres":
            drop_table(table)
