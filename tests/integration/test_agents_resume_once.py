"""A suspended run is resumed once: a replayed scope JSON is refused, two racing resumes run the
work once, a killed claimant frees the run (at once on this host, by lease expiry or by
``store.release`` elsewhere), and a run whose claim was taken over stops before recording more.

The step after the human gate is ``pay``: every test counts how often it ran."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.agents import (
    AgenticScope,
    InMemoryScopeStore,
    PostgresScopeStore,
    SqliteScopeStore,
    agent_function,
    human_input,
    sequence,
)
from chatclient.errors import AgenticScopeError, RunClaimedError
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
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def spec(kind: str, tmp_path: Path) -> Iterator[ScopeStoreSpec]:
    yield from scope_store_spec(kind, tmp_path, "resume")


_MEMORY: dict[str, InMemoryScopeStore] = {}


def open_store(spec: ScopeStoreSpec, **options: Any) -> Any:
    """A new store object (a new connection) on the spec's database; in memory the same store."""
    return open_scope_store(spec, _MEMORY, **options)


def payment_workflow(paid: list[str], *, pay_hook: Any = None) -> Any:
    @agent_function(output_key="invoice")
    def prepare(amount: int) -> str:
        paid.append("prepare")
        return f"invoice for {amount}"

    @agent_function(output_key="receipt")
    def pay(invoice: str, approval: str) -> str:
        paid.append("pay")
        if pay_hook is not None:
            pay_hook()
        return f"paid {invoice} ({approval})"

    gate = human_input(question="Pay {{ invoice }}?", output_key="approval", name="approve")
    return sequence(prepare, gate, pay, name="payment")


# -- replayed JSON ------------------------------------------------------------------------------


def test_replayed_scope_json_is_refused_and_pay_runs_once(spec: Any) -> None:
    paid: list[str] = []
    wf = payment_workflow(paid)
    store = open_store(spec)
    first = wf.run(amount=10, scope_id="order-1", scope_store=store)
    assert first.suspended is not None
    text = first.suspended.scope.to_json()  # handed to a UI, a queue, another process...

    done = wf.resume(text, "yes", scope_store=store)
    assert done.output == "paid invoice for 10 (yes)" and paid == ["prepare", "pay"]

    with pytest.raises(RunClaimedError) as info:
        wf.resume(text, "yes", scope_store=open_store(spec))  # the same JSON again, even on a new connection
    assert info.value.reason == "resumed" and info.value.scope_id == "order-1"
    assert isinstance(info.value, AgenticScopeError)
    assert "already resumed" in str(info.value)
    assert paid == ["prepare", "pay"]  # not paid twice

    # recovery by id after the run finished replays everything: nothing runs again
    again = wf.run(scope_id="order-1", scope_store=store)
    assert again.output == "paid invoice for 10 (yes)" and paid == ["prepare", "pay"]


def test_a_store_of_ones_own_without_claims_still_resumes_once_in_this_process() -> None:
    # A ScopeStore without claim()/release() cannot refuse a replay across processes, but in this
    # process the replayed JSON is refused as it is without any store.
    class DictStore:
        def __init__(self) -> None:
            self.data: dict[str, str] = {}

        def save(self, scope: AgenticScope) -> None:
            self.data[scope.id] = scope.to_json()

        def load(self, scope_id: str) -> AgenticScope | None:
            text = self.data.get(scope_id)
            return None if text is None else AgenticScope.from_json(text)

        def delete(self, scope_id: str) -> None:
            self.data.pop(scope_id, None)

    paid: list[str] = []
    wf = payment_workflow(paid)
    store = DictStore()
    text = wf.run(amount=3, scope_id=f"own-{uuid.uuid4().hex}", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    assert wf.resume(text, "yes", scope_store=store).output == "paid invoice for 3 (yes)"
    with pytest.raises(RunClaimedError) as info:
        wf.resume(text, "yes", scope_store=store)
    assert info.value.reason == "resumed" and paid == ["prepare", "pay"]


def test_a_scope_suspended_without_a_store_is_claimed_in_the_store_it_is_resumed_with(spec: Any) -> None:
    paid: list[str] = []
    wf = payment_workflow(paid)
    text = wf.run(amount=5).suspended.scope.to_json()  # type: ignore[union-attr]
    store = open_store(spec)
    assert wf.resume(text, "ok", scope_store=store).output == "paid invoice for 5 (ok)"
    with pytest.raises(RunClaimedError, match="already resumed"):
        wf.resume(text, "ok", scope_store=store)
    assert paid.count("pay") == 1


def test_a_second_gate_gets_a_fresh_token_and_the_first_json_stays_spent(spec: Any) -> None:
    paid: list[str] = []

    @agent_function(output_key="receipt")
    def pay(approval: str, second: str) -> str:
        paid.append("pay")
        return f"{approval}+{second}"

    wf = sequence(
        human_input(question="one?", output_key="approval", name="one"),
        human_input(question="two?", output_key="second", name="two"),
        pay,
    )
    store = open_store(spec)
    gate1 = wf.run(scope_id="two-gates", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    gate2 = wf.resume(gate1, "a", scope_store=store)
    assert gate2.suspended is not None
    with pytest.raises(RunClaimedError):
        wf.resume(gate1, "a", scope_store=store)  # the first gate's JSON cannot restart the run
    assert wf.resume(gate2.suspended.scope.to_json(), "b", scope_store=store).output == "a+b"
    assert paid == ["pay"]


def test_recovering_a_suspended_run_by_id_keeps_the_question_handed_out_valid(spec: Any) -> None:
    paid: list[str] = []
    wf = payment_workflow(paid)
    store = open_store(spec)
    text = wf.run(amount=3, scope_id="keep", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    again = wf.run(scope_id="keep", scope_store=store)  # e.g. a worker restarted and re-ran pending ids
    assert again.suspended is not None
    assert wf.resume(text, "yes", scope_store=store).output == "paid invoice for 3 (yes)"
    assert paid == ["prepare", "pay"]


# -- racing resumes ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_two_racing_resumes_on_separate_connections_pay_once(spec: Any) -> None:
    paid: list[str] = []
    loser_done = threading.Event()
    # The winner's pay step waits until the loser has been turned away, so both overlap for sure.
    wf = payment_workflow(paid, pay_hook=lambda: loser_done.wait(30))
    setup = open_store(spec)
    text = wf.run(amount=7, scope_id="race", scope_store=setup).suspended.scope.to_json()  # type: ignore[union-attr]

    start = threading.Barrier(2)
    outcomes: list[Any] = []

    def resume() -> None:
        store = open_store(spec)  # its own connection
        start.wait(10)
        try:
            outcomes.append(wf.resume(text, "yes", scope_store=store).output)
        except RunClaimedError as exc:
            outcomes.append(exc)
            loser_done.set()
        finally:
            store.close()

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    errors = [o for o in outcomes if isinstance(o, RunClaimedError)]
    assert sorted(map(str, outcomes)) and len(outcomes) == 2
    assert outcomes.count("paid invoice for 7 (yes)") == 1 and len(errors) == 1
    assert errors[0].reason in ("running", "resumed")
    assert paid == ["prepare", "pay"]
    with pytest.raises(RunClaimedError) as late:
        wf.resume(text, "yes", scope_store=setup)
    assert late.value.reason == "resumed"
    setup.close()


def test_two_racing_plain_runs_of_one_id_do_not_both_run(spec: Any) -> None:
    calls: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    @agent_function(output_key="out")
    def slow(x: int) -> int:
        calls.append("slow")
        holding.set()
        release.wait(30)
        return x

    wf = sequence(slow, name="one")
    box: list[Any] = []
    runner = threading.Thread(target=lambda: box.append(wf.run(x=1, scope_id="busy", scope_store=open_store(spec))))
    runner.start()
    assert holding.wait(30)
    try:
        with pytest.raises(RunClaimedError) as info:
            wf.run(x=1, scope_id="busy", scope_store=open_store(spec))
        assert info.value.reason == "running" and "store.release('busy')" in str(info.value)
    finally:
        release.set()
        runner.join(30)
    assert box[0].output == 1 and calls == ["slow"]
    assert wf.run(scope_id="busy", scope_store=open_store(spec)).output == 1  # claim released at the end
    assert calls == ["slow"]


# -- a claimant that dies, a claim that expires, a claim taken over ------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from chatclient.agents import PostgresScopeStore, SqliteScopeStore, agent_function, human_input, sequence

    kind, where, table, log_path, text_path = sys.argv[1:6]
    store = SqliteScopeStore(where, table=table) if kind == "sqlite" else PostgresScopeStore(where, table=table)

    def log(name):
        with open(log_path, "a") as f:
            f.write(name + "\\n")

    @agent_function(output_key="invoice")
    def prepare(amount: int) -> str:
        log("prepare")
        return f"invoice for {amount}"

    @agent_function(output_key="receipt")
    def pay(invoice: str, approval: str) -> str:
        log("pay-start")
        time.sleep(120)  # SIGKILLed here, holding the claim
        return "never"

    wf = sequence(prepare, human_input(question="Pay?", output_key="approval", name="approve"), pay, name="payment")
    wf.resume(open(text_path).read(), "yes", scope_store=store)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_sigkilled_claimant_on_this_host_frees_the_run_and_completed_steps_do_not_rerun(
    spec: Any, tmp_path: Path
) -> None:
    kind, where, table = spec
    log = tmp_path / "log.txt"

    @agent_function(output_key="invoice")
    def prepare(amount: int) -> str:
        with log.open("a") as f:
            f.write("prepare\n")
        return f"invoice for {amount}"

    @agent_function(output_key="receipt")
    def pay(invoice: str, approval: str) -> str:
        with log.open("a") as f:
            f.write("pay-done\n")
        return f"paid {invoice} ({approval})"

    wf = sequence(prepare, human_input(question="Pay?", output_key="approval", name="approve"), pay, name="payment")
    store = open_store(spec)
    text = wf.run(amount=9, scope_id="killed", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    (tmp_path / "scope.json").write_text(text)
    (tmp_path / "child.py").write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(tmp_path / "child.py"), kind, str(where), table, str(log), str(tmp_path / "scope.json")],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while "pay-start" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, "the child never reached pay"
            assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
            time.sleep(0.02)
        # While the child lives, its claim holds.
        with pytest.raises(RunClaimedError) as busy:
            wf.run(scope_id="killed", scope_store=store)
        assert busy.value.reason == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    # The child spent the suspension when it claimed: the JSON cannot be resumed again...
    with pytest.raises(RunClaimedError) as spent:
        wf.resume(text, "yes", scope_store=store)
    assert spent.value.reason == "resumed"
    # ...but its claim died with it (same host, process gone): recovery by id continues at once.
    done = wf.run(scope_id="killed", scope_store=store)
    assert done.output == "paid invoice for 9 (yes)"
    assert log.read_text().split() == ["prepare", "pay-start", "pay-done"]  # prepare never ran again
    store.close()


def _set_claim(spec: Any, scope_id: str, owner: str, lease_until: float) -> None:
    kind, where, table = spec
    if kind == "sqlite":
        import sqlite3

        with sqlite3.connect(where) as conn:
            conn.execute(
                f"UPDATE {table} SET claim_owner = ?, lease_until = ? WHERE id = ?", (owner, lease_until, scope_id)
            )
    elif kind == "postgres":
        import psycopg

        with psycopg.connect(where, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {table} SET claim_owner = %s, lease_until = %s WHERE id = %s", (owner, lease_until, scope_id)
            )
    else:
        open_store(spec)._claims[scope_id] = (owner, lease_until)


def test_a_claim_from_another_host_holds_until_its_lease_expires_or_it_is_released(spec: Any) -> None:
    paid: list[str] = []
    wf = payment_workflow(paid)
    store = open_store(spec)
    text = wf.run(amount=1, scope_id="remote", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    remote = "another-host:4242:feedface"  # a claimant whose process we cannot see
    _set_claim(spec, "remote", remote, time.time() + 3600)
    with pytest.raises(RunClaimedError) as info:
        wf.resume(text, "yes", scope_store=store)
    assert info.value.reason == "running" and paid == ["prepare"]

    _set_claim(spec, "remote", remote, time.time() - 1)  # its lease ran out (no save renewed it)
    assert wf.resume(text, "yes", scope_store=store).output == "paid invoice for 1 (yes)"

    # the explicit recovery call: an operator who knows the claimant is dead releases the claim
    text2 = wf.run(amount=2, scope_id="remote-2", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    _set_claim(spec, "remote-2", remote, time.time() + 3600)
    with pytest.raises(RunClaimedError):
        wf.resume(text2, "yes", scope_store=store)
    store.release("remote-2")
    assert wf.resume(text2, "yes", scope_store=store).output == "paid invoice for 2 (yes)"
    assert paid == ["prepare", "pay", "prepare", "pay"]


def test_a_claim_from_a_same_named_host_in_another_pid_namespace_holds(spec: Any) -> None:
    # Replicas of one container image often share a host name and number their PIDs from 1: a PID
    # that is not running here says nothing about a claimant in another container.
    import socket

    paid: list[str] = []
    wf = payment_workflow(paid)
    store = open_store(spec)
    text = wf.run(amount=1, scope_id="replica", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    pid = int(finished.stdout)  # a PID with no process behind it here
    _set_claim(spec, "replica", f"{socket.gethostname()}/other-boot/pid:[1]:{pid}:feedface", time.time() + 3600)
    with pytest.raises(RunClaimedError) as info:
        wf.resume(text, "yes", scope_store=store)
    assert info.value.reason == "running" and paid == ["prepare"]
    _set_claim(spec, "replica", f"{socket.gethostname()}:{pid}:feedface", time.time() + 3600)  # host name only
    with pytest.raises(RunClaimedError):
        wf.resume(text, "yes", scope_store=store)
    assert paid == ["prepare"]


def test_a_run_whose_claim_was_taken_over_stops_before_the_next_step(spec: Any) -> None:
    calls: list[str] = []
    store = open_store(spec)

    @agent_function(output_key="a")
    def first(x: int) -> int:
        calls.append("first")
        # Meanwhile the lease ran out and another claimant took the run over.
        store.release("taken")
        store.claim(AgenticScope(id="taken"), "another-host:1:thief")
        return x

    @agent_function(output_key="b")
    def second(a: int) -> int:
        calls.append("second")
        return a

    with pytest.raises(RunClaimedError) as info:
        sequence(first, second).run(x=1, scope_id="taken", scope_store=store)
    assert info.value.reason == "lost" and calls == ["first"]


def test_lease_seconds_is_checked(spec: Any) -> None:
    kind, where, table = spec
    if kind == "memory":
        bad: Any = lambda v: InMemoryScopeStore(lease_seconds=v)  # noqa: E731
    elif kind == "sqlite":
        bad = lambda v: SqliteScopeStore(where, table=table, lease_seconds=v)  # noqa: E731
    else:
        bad = lambda v: PostgresScopeStore(where, table=table, lease_seconds=v)  # noqa: E731
    for value in (0, -1, float("inf"), float("nan"), "10", True):
        with pytest.raises(ValueError, match="lease_seconds"):
            bad(value)


def test_a_store_table_written_before_claims_gets_the_claim_columns(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE agentic_scope (id TEXT PRIMARY KEY, scope TEXT NOT NULL, updated_at REAL NOT NULL)")
    paid: list[str] = []
    wf = payment_workflow(paid)
    store = SqliteScopeStore(path)
    text = wf.run(amount=4, scope_id="old", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    assert wf.resume(text, "y", scope_store=store).output == "paid invoice for 4 (y)"
    with pytest.raises(RunClaimedError):
        wf.resume(text, "y", scope_store=store)


@pytest.mark.postgres
def test_a_postgres_table_written_before_claims_gets_the_claim_columns() -> None:
    postgres_or_skip()
    import psycopg

    table = f"old_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (id TEXT PRIMARY KEY, scope TEXT NOT NULL, updated_at DOUBLE PRECISION NOT NULL)"
        )
    try:
        paid: list[str] = []
        wf = payment_workflow(paid)
        store = PostgresScopeStore(POSTGRES_DSN, table=table)
        text = wf.run(amount=4, scope_id="old", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
        assert wf.resume(text, "y", scope_store=store).output == "paid invoice for 4 (y)"
        with pytest.raises(RunClaimedError):
            wf.resume(text, "y", scope_store=PostgresScopeStore(POSTGRES_DSN, table=table))
        store.close()
    finally:
        drop_table(table)


RACER = textwrap.dedent(
    """
    import os, sys, time
    from chatclient.agents import PostgresScopeStore, SqliteScopeStore, agent_function, human_input, sequence
    from chatclient.errors import RunClaimedError

    kind, where, table, folder, me = sys.argv[1:6]
    store = SqliteScopeStore(where, table=table) if kind == "sqlite" else PostgresScopeStore(where, table=table)

    @agent_function(output_key="invoice")
    def prepare(amount: int) -> str:
        return f"invoice for {amount}"

    @agent_function(output_key="receipt")
    def pay(invoice: str, approval: str) -> str:
        with open(os.path.join(folder, "paid.txt"), "a") as f:
            f.write(me + "\\n")
        deadline = time.monotonic() + 30  # hold the claim until the other racer was turned away
        while not any(n.startswith("refused") for n in os.listdir(folder)) and time.monotonic() < deadline:
            time.sleep(0.01)
        return "paid"

    wf = sequence(prepare, human_input(question="Pay?", output_key="approval", name="approve"), pay, name="payment")
    text = open(os.path.join(folder, "scope.json")).read()
    open(os.path.join(folder, "ready-" + me), "w").close()
    while not os.path.exists(os.path.join(folder, "go")):
        time.sleep(0.002)
    try:
        print("ok", wf.resume(text, "yes", scope_store=store).output)
    except RunClaimedError as exc:
        open(os.path.join(folder, "refused-" + me), "w").close()
        print("refused", exc.reason)
    """
)


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
def test_two_processes_racing_to_resume_pay_once(spec: Any, tmp_path: Path) -> None:
    kind, where, table = spec
    paid: list[str] = []
    store = open_store(spec)
    text = payment_workflow(paid).run(amount=8, scope_id="proc-race", scope_store=store).suspended.scope.to_json()  # type: ignore[union-attr]
    store.close()
    (tmp_path / "scope.json").write_text(text)
    (tmp_path / "racer.py").write_text(RACER)
    racers = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "racer.py"), kind, str(where), table, str(tmp_path), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("r1", "r2")
    ]
    try:
        deadline = time.monotonic() + 60
        while not all((tmp_path / f"ready-{n}").exists() for n in ("r1", "r2")):
            assert time.monotonic() < deadline, [r.stderr and r.stderr.read() for r in racers if r.poll() is not None]
            time.sleep(0.01)
        (tmp_path / "go").touch()  # both start their resume together
        outputs = sorted(r.communicate(timeout=60)[0].strip() for r in racers)
    finally:
        for r in racers:
            if r.poll() is None:
                r.kill()
    assert outputs[0] == "ok paid" and outputs[1] in ("refused running", "refused resumed"), outputs
    assert len((tmp_path / "paid.txt").read_text().split()) == 1  # one process paid


@pytest.mark.postgres
def test_a_refused_claim_keeps_the_postgres_connection(tmp_path: Path) -> None:
    # A RunClaimedError is an answer, not a broken session: the store goes on with the same connection.
    spec = next(scope_store_spec("postgres", tmp_path, "keep"))
    paid: list[str] = []
    wf = payment_workflow(paid)
    store = open_store(spec)
    first = wf.run(amount=5, scope_id=f"keep-{uuid.uuid4().hex}", scope_store=store)
    text = first.suspended.scope.to_json()  # type: ignore[union-attr]
    wf.resume(text, "yes", scope_store=store)
    connection = store._conn
    with pytest.raises(RunClaimedError):
        wf.resume(text, "yes", scope_store=store)
    assert store._conn is connection and not connection.closed
    assert store.load(first.scope.id) is not None and paid == ["prepare", "pay"]
    store.delete(first.scope.id)
