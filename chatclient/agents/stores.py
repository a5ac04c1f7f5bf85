"""Where scopes are kept between steps, for crash recovery and for resuming in another process
(LangChain4j: ``AgenticScopeStore``).

A store holds each scope's JSON under its id. A run given ``scope_store=`` saves the scope after
every completed agent; ``run(scope_id=..., scope_store=...)`` with an id the store holds continues
that run. Three stores: ``InMemoryScopeStore`` (tests, one process), ``SqliteScopeStore(path)``
(stdlib sqlite3, WAL; safe across threads and processes) and ``PostgresScopeStore(dsn)`` (psycopg 3,
extra ``postgres``). Failures of the database are ``AgenticScopeError`` naming the store, the
operation and what to check, never a password.

Claims: a run is executed by one claimant at a time. A run (or a resume) with a store first
*claims* its scope id in one atomic step (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT ... FOR
UPDATE``): the row records the claimant and a lease (``lease_seconds``, renewed by every save). A
second claimant gets ``RunClaimedError`` (``reason="running"``) while the lease is live. A resume
also presents the suspension it answers (the ``pending`` question and its random token): once a
resume has spent it, the same scope JSON is refused (``reason="resumed"``), so completed agents never
run twice. A claimant that died frees the run: at once when it ran on this host in this PID
namespace (its process id is gone), otherwise when its lease expires, or when an operator calls ``store.release(scope_id)``.
Saves under a claim check that the claim is still this run's; a run whose lease expired and was
taken over stops with ``reason="lost"`` instead of recording more work.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgenticScopeError, ChatClientError, RunClaimedError
from chatclient.memory._errors import StoreErrors, connection_secrets, scrub_text
from chatclient.memory.sqlite import check_identifier


@runtime_checkable
class ScopeStore(Protocol):
    """Saves and loads scopes by id."""

    def save(self, scope: AgenticScope) -> None: ...

    def load(self, scope_id: str) -> AgenticScope | None: ...

    def delete(self, scope_id: str) -> None: ...

    def ids(self) -> list[str]: ...


class _ScopeStoreErrors(StoreErrors):
    """The memory stores' error reporting, raising ``AgenticScopeError`` instead."""

    def error(self, operation: str, reason: str, *, timeout: bool = False) -> Any:
        reason = " ".join(scrub_text(reason, self.secrets).split())[:300] or "no reason given"
        return AgenticScopeError(
            f"{self.store} scope store: {operation} failed at {self.where}: {reason} - {self.check}"
        )


def _check_id(scope_id: Any) -> str:
    if not isinstance(scope_id, str) or not scope_id:
        raise ValueError(f"a scope id is a non-empty string, got {scope_id!r}")
    return scope_id


# -- claims ------------------------------------------------------------------------------------

DEFAULT_LEASE_SECONDS = 600.0
"""How long a claim stays valid without a save (seconds); every save under the claim renews it."""
MAX_SPENT_RESUMES = 100_000
"""Resumes without a store remembered per process (oldest forgotten first)."""


def _check_lease(lease_seconds: Any) -> float:
    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)) or not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be a positive number of seconds, got {lease_seconds!r}")
    if lease_seconds == float("inf"):
        raise ValueError("lease_seconds must be finite: a claim that never expires strands a run whose host died")
    return float(lease_seconds)


def _process_space() -> str:
    """Where this process's ids are valid: the host name, plus on Linux the boot and the PID
    namespace (containers sharing a host name, or a database, each count their PIDs apart)."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            parts.append(f.read(64).strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:  # not Linux: the host name alone
        pass
    return "/".join(parts)


def new_owner() -> str:
    """A claimant's name: this host (and PID namespace), this process and a random part (unique per run)."""
    return f"{_process_space()}:{os.getpid()}:{os.urandom(8).hex()}"


def _owner_gone(owner: str) -> bool:
    """True when ``owner`` ran on this host, in this PID namespace, in a process that no longer
    exists (a crash or a kill)."""
    host, _, rest = owner.rpartition(":")[0].rpartition(":")
    try:
        pid = int(rest)
    except ValueError:
        return False
    if host != _process_space() or pid == os.getpid() or os.name != "posix" or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def _same_suspension(stored: Mapping[str, Any] | None, presented: Mapping[str, Any] | None) -> bool:
    return (
        stored is not None
        and presented is not None
        and stored.get("key") == presented.get("key")
        and stored.get("token") == presented.get("token")
    )


def _running(scope_id: str, lease_until: float, lease_seconds: float) -> RunClaimedError:
    left = max(0.0, lease_until - time.time())
    return RunClaimedError(
        scope_id,
        "running",
        f"run {scope_id!r} is claimed by another run or resume that is still going (its lease ends in {left:.0f} s); "
        "wait for it to finish. If that claimant died on another machine, its claim ends when the lease expires "
        f"(lease_seconds={lease_seconds:g}) or at once with store.release({scope_id!r})",
    )


def _spent(scope_id: str) -> RunClaimedError:
    return RunClaimedError(
        scope_id,
        "resumed",
        f"the suspended run {scope_id!r} was already resumed: this scope (its resume token) is spent, and completed "
        "agents are not run again. Load the current scope (store.load(...)); if it waits for another answer, "
        "resume that one",
    )


def _lost(scope_id: str) -> RunClaimedError:
    return RunClaimedError(
        scope_id,
        "lost",
        f"run {scope_id!r}: this run's claim expired and another claimant took the run over; it stops here without "
        "recording more work (give the store a lease_seconds longer than the slowest agent step)",
    )


def _check_claim(
    scope: AgenticScope,
    stored_text: str,
    holder: str | None,
    lease_until: float | None,
    resume: bool,
    lease_seconds: float,
) -> AgenticScope:
    """The stored scope a claimant may take over, or ``RunClaimedError`` saying why not."""
    if holder and lease_until is not None and lease_until > time.time() and not _owner_gone(holder):
        raise _running(scope.id, lease_until, lease_seconds)
    stored = AgenticScope.from_json(stored_text)
    if resume and not _same_suspension(stored._pending, scope._pending):
        raise _spent(scope.id)
    return stored


class _SpentResumes:
    """The suspensions resumed without a store in this process, so a replayed scope JSON is refused."""

    def __init__(self, limit: int = MAX_SPENT_RESUMES) -> None:
        self._seen: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._lock = threading.Lock()
        self._limit = limit

    def spend(self, scope_id: str, pending: Mapping[str, Any]) -> None:
        mark = (scope_id, str(pending.get("key")), str(pending.get("token")))
        with self._lock:
            if mark in self._seen:
                raise _spent(scope_id)
            self._seen[mark] = None
            while len(self._seen) > self._limit:
                self._seen.popitem(last=False)


spent_resumes = _SpentResumes()
"""This process's record of store-less resumes (``Agent.resume`` without ``scope_store``)."""


class ClaimedScopeStore:
    """A run's view of its store while it holds the claim: saves renew the claim (and fail with
    ``RunClaimedError(reason="lost")`` once another claimant took the run over); ``release`` ends it."""

    __slots__ = ("owner", "store")

    def __init__(self, store: Any, owner: str) -> None:
        self.store = store
        self.owner = owner

    def save(self, scope: AgenticScope) -> None:
        self.store.save(scope, owner=self.owner)

    def load(self, scope_id: str) -> AgenticScope | None:
        loaded: AgenticScope | None = self.store.load(scope_id)
        return loaded

    def release(self, scope_id: str) -> None:
        self.store.release(scope_id, owner=self.owner)


def claim_run(store: ScopeStore, scope: AgenticScope, *, resume: bool = False) -> tuple[AgenticScope, ScopeStore]:
    """Claim ``scope.id`` in ``store`` for one run: returns the scope to run (the stored one, or
    ``scope`` itself when the store had none) and the store view the run saves through.

    With ``resume=True`` the stored scope must still wait on the suspension ``scope`` answers.
    A store without ``claim`` (one of your own) is used as before: no claim, the stored scope is
    loaded for a plain run; a resume is spent in this process, as without a store.
    """
    claim = getattr(store, "claim", None)
    if not callable(claim):
        if resume and scope._pending is not None:
            spent_resumes.spend(scope.id, scope._pending)
            return scope, store
        stored = None if resume else store.load(scope.id)
        return (stored if stored is not None else scope), store
    owner = new_owner()
    claimed: AgenticScope = claim(scope, owner, resume=resume)
    return claimed, ClaimedScopeStore(store, owner)  # type: ignore[return-value]


def release_run(store: Any, scope_id: str) -> None:
    """End the claim of a finished, failed or suspended run (nothing for an unclaimed store)."""
    if isinstance(store, ClaimedScopeStore):
        store.release(scope_id)


class InMemoryScopeStore:
    """Keeps scopes' JSON in a dict (one process; the JSON round trip is the same as the real stores').

    ``lease_seconds`` bounds a claim that is never released (see the module's claims).
    """

    def __init__(self, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> None:
        self.lease_seconds = _check_lease(lease_seconds)
        self._data: dict[str, str] = {}
        self._claims: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def save(self, scope: AgenticScope, *, owner: str | None = None) -> None:
        """Store ``scope``; with ``owner``, only while that claimant holds the claim (renewing it)."""
        text = scope.to_json()
        with self._lock:
            if owner is not None:
                if self._claims.get(scope.id, ("", 0.0))[0] != owner:
                    raise _lost(scope.id)
                self._claims[scope.id] = (owner, time.time() + self.lease_seconds)
            self._data[scope.id] = text

    def load(self, scope_id: str) -> AgenticScope | None:
        with self._lock:
            text = self._data.get(_check_id(scope_id))
        return None if text is None else AgenticScope.from_json(text)

    def claim(self, scope: AgenticScope, owner: str, *, resume: bool = False) -> AgenticScope:
        """Claim ``scope.id`` for ``owner`` (``RunClaimedError`` when taken or, for a resume, spent):
        the stored scope, or ``scope`` itself, stored now, when there was none."""
        text = scope.to_json()
        with self._lock:
            stored_text = self._data.get(scope.id)
            if stored_text is None:
                self._data[scope.id] = text
                claimed = scope
            else:
                holder, until = self._claims.get(scope.id, (None, None))
                claimed = _check_claim(scope, stored_text, holder, until, resume, self.lease_seconds)
            self._claims[scope.id] = (owner, time.time() + self.lease_seconds)
        return claimed

    def release(self, scope_id: str, *, owner: str | None = None) -> None:
        """End the claim on ``scope_id`` (only ``owner``'s, when given). Without ``owner`` this is the
        recovery call for a run whose claimant is known to be dead."""
        with self._lock:
            held = self._claims.get(_check_id(scope_id))
            if held is not None and (owner is None or held[0] == owner):
                del self._claims[scope_id]

    def delete(self, scope_id: str) -> None:
        with self._lock:
            self._data.pop(_check_id(scope_id), None)
            self._claims.pop(scope_id, None)

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._data)

    def __getstate__(self) -> dict[str, Any]:
        return {"_data": dict(self._data), "lease_seconds": self.lease_seconds}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state["_data"]
        self.lease_seconds = state.get("lease_seconds", DEFAULT_LEASE_SECONDS)
        self._claims = {}
        self._lock = threading.Lock()


class SqliteScopeStore:
    """Scopes in a SQLite file (WAL; one row per scope; safe across threads and processes).

    >>> store = SqliteScopeStore(":memory:")
    >>> store.save(AgenticScope({"a": 1}, id="s1"))
    >>> store.load("s1").read("a"), store.load("nope")
    (1, None)
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "agentic_scopes.db",
        *,
        table: str = "agentic_scope",
        timeout: float = 30.0,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.table = check_identifier(table)
        self.timeout = float(timeout)
        self.lease_seconds = _check_lease(lease_seconds)
        self._errors = _ScopeStoreErrors(
            "SQLite",
            where=self.path,
            check="can this process create and write {where} and its directory, and does no other connection "
            "hold the database locked for long?",
            driver_errors=(sqlite3.Error,),
        )
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, scope TEXT NOT NULL, "
                "updated_at REAL NOT NULL, claim_owner TEXT, lease_until REAL)"
            )
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({self.table})")}
            for column, kind in (("claim_owner", "TEXT"), ("lease_until", "REAL")):
                if column not in columns:  # a table written before claims existed
                    try:
                        conn.execute(f"ALTER TABLE {self.table} ADD COLUMN {column} {kind}")
                    except sqlite3.OperationalError as exc:
                        if "duplicate column" not in str(exc):  # another process added it first
                            raise
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    @contextmanager
    def _op(self, name: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors.operation(name):
            yield self._connection()

    def save(self, scope: AgenticScope, *, owner: str | None = None) -> None:
        """Store ``scope``; with ``owner``, only while that claimant holds the claim (renewing it)."""
        text = scope.to_json()
        with self._op("save") as conn:
            now = time.time()
            if owner is None:
                conn.execute(
                    f"INSERT INTO {self.table} (id, scope, updated_at) VALUES (?, ?, ?) "
                    "ON CONFLICT(id) DO UPDATE SET scope = excluded.scope, updated_at = excluded.updated_at",
                    (scope.id, text, now),
                )
                return
            cursor = conn.execute(
                f"UPDATE {self.table} SET scope = ?, updated_at = ?, lease_until = ? WHERE id = ? AND claim_owner = ?",
                (text, now, now + self.lease_seconds, scope.id, owner),
            )
            if cursor.rowcount != 1:
                raise _lost(scope.id)

    def claim(self, scope: AgenticScope, owner: str, *, resume: bool = False) -> AgenticScope:
        """Claim ``scope.id`` for ``owner`` in one write transaction (``RunClaimedError`` when taken
        or, for a resume, spent): the stored scope, or ``scope`` itself, stored now, when there was none."""
        text = scope.to_json()
        with self._op("claim") as conn:
            conn.execute("BEGIN IMMEDIATE")  # the write lock first: no other claimant reads in between
            try:
                row = conn.execute(
                    f"SELECT scope, claim_owner, lease_until FROM {self.table} WHERE id = ?", (scope.id,)
                ).fetchone()
                now = time.time()
                if row is None:
                    conn.execute(
                        f"INSERT INTO {self.table} (id, scope, updated_at, claim_owner, lease_until) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (scope.id, text, now, owner, now + self.lease_seconds),
                    )
                    claimed = scope
                else:
                    claimed = _check_claim(scope, row[0], row[1], row[2], resume, self.lease_seconds)
                    conn.execute(
                        f"UPDATE {self.table} SET claim_owner = ?, lease_until = ? WHERE id = ?",
                        (owner, now + self.lease_seconds, scope.id),
                    )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return claimed

    def release(self, scope_id: str, *, owner: str | None = None) -> None:
        """End the claim on ``scope_id`` (only ``owner``'s, when given). Without ``owner`` this is the
        recovery call for a run whose claimant is known to be dead."""
        with self._op("release") as conn:
            if owner is None:
                conn.execute(
                    f"UPDATE {self.table} SET claim_owner = NULL, lease_until = NULL WHERE id = ?",
                    (_check_id(scope_id),),
                )
            else:
                conn.execute(
                    f"UPDATE {self.table} SET claim_owner = NULL, lease_until = NULL WHERE id = ? AND claim_owner = ?",
                    (_check_id(scope_id), owner),
                )

    def load(self, scope_id: str) -> AgenticScope | None:
        with self._op("load") as conn:
            row = conn.execute(f"SELECT scope FROM {self.table} WHERE id = ?", (_check_id(scope_id),)).fetchone()
        return None if row is None else AgenticScope.from_json(row[0])

    def delete(self, scope_id: str) -> None:
        with self._op("delete") as conn:
            conn.execute(f"DELETE FROM {self.table} WHERE id = ?", (_check_id(scope_id),))

    def ids(self) -> list[str]:
        with self._op("ids") as conn:
            return [r[0] for r in conn.execute(f"SELECT id FROM {self.table} ORDER BY id")]

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "table": self.table, "timeout": self.timeout, "lease_seconds": self.lease_seconds}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["path"],
            table=state["table"],
            timeout=state["timeout"],
            lease_seconds=state.get("lease_seconds", DEFAULT_LEASE_SECONDS),
        )

    def __repr__(self) -> str:
        return f"SqliteScopeStore({self.path!r}, table={self.table!r})"


class PostgresScopeStore:
    """Scopes in a PostgreSQL table (psycopg 3, extra ``postgres``); one row per scope, JSON as text.

    ``dsn`` is a libpq connection string or URL; ``connect_timeout`` bounds connecting (seconds).
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "agentic_scope",
        connect_timeout: float = 10.0,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
    ) -> None:
        try:
            import psycopg
        except ImportError:
            raise ImportError("PostgresScopeStore needs psycopg 3: pip install 'chatclient[postgres]'") from None
        if not isinstance(dsn, str) or not dsn:
            raise ValueError("PostgresScopeStore needs a DSN")
        self._dsn = dsn
        self.table = check_identifier(table)
        self.connect_timeout = connect_timeout
        self.lease_seconds = _check_lease(lease_seconds)
        try:
            info = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.Error:
            info = {}
        host, port = info.get("host") or info.get("hostaddr"), info.get("port") or "5432"
        self.where = f"{host}:{port}" if host else f"the local socket (port {port})"
        secrets = [*connection_secrets(dsn), *([str(info["password"])] if info.get("password") else [])]
        self._errors = _ScopeStoreErrors(
            "PostgreSQL",
            where=self.where,
            check="is PostgreSQL running at {where} and accepting connections, and are the DSN's database, user "
            "and password right?",
            driver_errors=(psycopg.Error,),
            secrets=secrets,
        )
        self._lock = threading.Lock()
        self._conn: Any = None
        self._pid = os.getpid()
        self._ready = False

    def _connection(self) -> Any:
        import psycopg

        if self._conn is None or self._conn.closed or self._pid != os.getpid():
            self._conn = psycopg.connect(
                self._dsn, autocommit=True, connect_timeout=max(1, round(self.connect_timeout))
            )
            self._pid = os.getpid()
        if not self._ready:
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (id TEXT PRIMARY KEY, scope TEXT NOT NULL, "
                "updated_at DOUBLE PRECISION NOT NULL, claim_owner TEXT, lease_until DOUBLE PRECISION)"
            )
            columns = {
                row[0]
                for row in self._conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = current_schema()",
                    (self.table,),
                ).fetchall()
            }
            if not {"claim_owner", "lease_until"} <= columns:
                # A table written before claims existed. Only then: ALTER TABLE locks the whole table.
                self._conn.execute(
                    f"ALTER TABLE {self.table} ADD COLUMN IF NOT EXISTS claim_owner TEXT, "
                    "ADD COLUMN IF NOT EXISTS lease_until DOUBLE PRECISION"
                )
            self._ready = True
        return self._conn

    @contextmanager
    def _op(self, name: str) -> Iterator[Any]:
        with self._lock, self._errors.operation(name):
            try:
                yield self._connection()
            except ChatClientError:
                # our own refusal (a claim taken, scope JSON refused): its transaction rolled back and
                # the session is fine, so the connection is kept
                raise
            except BaseException:
                conn, self._conn = self._conn, None  # reconnect next time: the session may be broken
                if conn is not None and self._pid == os.getpid():
                    conn.close()
                raise

    def save(self, scope: AgenticScope, *, owner: str | None = None) -> None:
        """Store ``scope``; with ``owner``, only while that claimant holds the claim (renewing it)."""
        text = scope.to_json()  # json escapes NUL, which PostgreSQL text cannot hold
        with self._op("save") as conn:
            now = time.time()
            if owner is None:
                conn.execute(
                    f"INSERT INTO {self.table} (id, scope, updated_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (id) DO UPDATE SET scope = EXCLUDED.scope, updated_at = EXCLUDED.updated_at",
                    (scope.id, text, now),
                )
                return
            cursor = conn.execute(
                f"UPDATE {self.table} SET scope = %s, updated_at = %s, lease_until = %s "
                "WHERE id = %s AND claim_owner = %s",
                (text, now, now + self.lease_seconds, scope.id, owner),
            )
        if cursor.rowcount != 1:
            raise _lost(scope.id)

    def claim(self, scope: AgenticScope, owner: str, *, resume: bool = False) -> AgenticScope:
        """Claim ``scope.id`` for ``owner`` under a row lock (``RunClaimedError`` when taken or, for a
        resume, spent): the stored scope, or ``scope`` itself, stored now, when there was none."""
        text = scope.to_json()
        with self._op("claim") as conn:
            for _ in range(2):  # a second pass when another claimant inserted the row first
                with conn.transaction():
                    row = conn.execute(
                        f"SELECT scope, claim_owner, lease_until FROM {self.table} WHERE id = %s FOR UPDATE",
                        (scope.id,),
                    ).fetchone()
                    now = time.time()
                    if row is None:
                        inserted = conn.execute(
                            f"INSERT INTO {self.table} (id, scope, updated_at, claim_owner, lease_until) "
                            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                            (scope.id, text, now, owner, now + self.lease_seconds),
                        )
                        if inserted.rowcount == 1:
                            return scope
                        continue
                    claimed = _check_claim(scope, row[0], row[1], row[2], resume, self.lease_seconds)
                    conn.execute(
                        f"UPDATE {self.table} SET claim_owner = %s, lease_until = %s WHERE id = %s",
                        (owner, now + self.lease_seconds, scope.id),
                    )
                    return claimed
        raise _running(scope.id, time.time() + self.lease_seconds, self.lease_seconds)

    def release(self, scope_id: str, *, owner: str | None = None) -> None:
        """End the claim on ``scope_id`` (only ``owner``'s, when given). Without ``owner`` this is the
        recovery call for a run whose claimant is known to be dead."""
        with self._op("release") as conn:
            if owner is None:
                conn.execute(
                    f"UPDATE {self.table} SET claim_owner = NULL, lease_until = NULL WHERE id = %s",
                    (_check_id(scope_id),),
                )
            else:
                conn.execute(
                    f"UPDATE {self.table} SET claim_owner = NULL, lease_until = NULL "
                    "WHERE id = %s AND claim_owner = %s",
                    (_check_id(scope_id), owner),
                )

    def load(self, scope_id: str) -> AgenticScope | None:
        with self._op("load") as conn:
            row = conn.execute(f"SELECT scope FROM {self.table} WHERE id = %s", (_check_id(scope_id),)).fetchone()
        return None if row is None else AgenticScope.from_json(row[0])

    def delete(self, scope_id: str) -> None:
        with self._op("delete") as conn:
            conn.execute(f"DELETE FROM {self.table} WHERE id = %s", (_check_id(scope_id),))

    def ids(self) -> list[str]:
        with self._op("ids") as conn:
            return [r[0] for r in conn.execute(f"SELECT id FROM {self.table} ORDER BY id").fetchall()]

    def close(self) -> None:
        """Close the connection (it reopens on next use)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "dsn": self._dsn,
            "table": self.table,
            "connect_timeout": self.connect_timeout,
            "lease_seconds": self.lease_seconds,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["dsn"],
            table=state["table"],
            connect_timeout=state["connect_timeout"],
            lease_seconds=state.get("lease_seconds", DEFAULT_LEASE_SECONDS),
        )

    def __repr__(self) -> str:
        return f"PostgresScopeStore({self.where!r}, table={self.table!r})"


__all__ = ["DEFAULT_LEASE_SECONDS", "InMemoryScopeStore", "PostgresScopeStore", "ScopeStore", "SqliteScopeStore"]
