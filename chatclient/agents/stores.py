"""Where scopes are kept between steps, for crash recovery and for resuming in another process
(LangChain4j: ``AgenticScopeStore``).

A store holds each scope's JSON under its id. A run given ``scope_store=`` saves the scope after
every completed agent; ``run(scope_id=..., scope_store=...)`` with an id the store holds continues
that run. Three stores: ``InMemoryScopeStore`` (tests, one process), ``SqliteScopeStore(path)``
(stdlib sqlite3, WAL; safe across threads and processes) and ``PostgresScopeStore(dsn)`` (psycopg 3,
extra ``postgres``). Failures of the database are ``AgenticScopeError`` naming the store, the
operation and what to check, never a password.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from chatclient.agents.scope import AgenticScope
from chatclient.errors import AgenticScopeError
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


class InMemoryScopeStore:
    """Keeps scopes' JSON in a dict (one process; the JSON round trip is the same as the real stores')."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def save(self, scope: AgenticScope) -> None:
        text = scope.to_json()
        with self._lock:
            self._data[scope.id] = text

    def load(self, scope_id: str) -> AgenticScope | None:
        with self._lock:
            text = self._data.get(_check_id(scope_id))
        return None if text is None else AgenticScope.from_json(text)

    def delete(self, scope_id: str) -> None:
        with self._lock:
            self._data.pop(_check_id(scope_id), None)

    def ids(self) -> list[str]:
        with self._lock:
            return sorted(self._data)

    def __getstate__(self) -> dict[str, Any]:
        return {"_data": dict(self._data)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._data = state["_data"]
        self._lock = threading.Lock()


class SqliteScopeStore:
    """Scopes in a SQLite file (WAL; one row per scope; safe across threads and processes).

    >>> store = SqliteScopeStore(":memory:")
    >>> store.save(AgenticScope({"a": 1}, id="s1"))
    >>> store.load("s1").read("a"), store.load("nope")
    (1, None)
    """

    def __init__(
        self, path: str | os.PathLike[str] = "agentic_scopes.db", *, table: str = "agentic_scope", timeout: float = 30.0
    ) -> None:
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.table = check_identifier(table)
        self.timeout = float(timeout)
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
                "updated_at REAL NOT NULL)"
            )
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    @contextmanager
    def _op(self, name: str) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors.operation(name):
            yield self._connection()

    def save(self, scope: AgenticScope) -> None:
        text = scope.to_json()
        with self._op("save") as conn:
            conn.execute(
                f"INSERT INTO {self.table} (id, scope, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET scope = excluded.scope, updated_at = excluded.updated_at",
                (scope.id, text, time.time()),
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
        return {"path": self.path, "table": self.table, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"], table=state["table"], timeout=state["timeout"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"SqliteScopeStore({self.path!r}, table={self.table!r})"


class PostgresScopeStore:
    """Scopes in a PostgreSQL table (psycopg 3, extra ``postgres``); one row per scope, JSON as text.

    ``dsn`` is a libpq connection string or URL; ``connect_timeout`` bounds connecting (seconds).
    """

    def __init__(self, dsn: str, *, table: str = "agentic_scope", connect_timeout: float = 10.0) -> None:
        try:
            import psycopg
        except ImportError:
            raise ImportError("PostgresScopeStore needs psycopg 3: pip install 'chatclient[postgres]'") from None
        if not isinstance(dsn, str) or not dsn:
            raise ValueError("PostgresScopeStore needs a DSN")
        self._dsn = dsn
        self.table = check_identifier(table)
        self.connect_timeout = connect_timeout
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
                "updated_at DOUBLE PRECISION NOT NULL)"
            )
            self._ready = True
        return self._conn

    @contextmanager
    def _op(self, name: str) -> Iterator[Any]:
        with self._lock, self._errors.operation(name):
            try:
                yield self._connection()
            except BaseException:
                conn, self._conn = self._conn, None  # reconnect next time: the session may be broken
                if conn is not None and self._pid == os.getpid():
                    conn.close()
                raise

    def save(self, scope: AgenticScope) -> None:
        text = scope.to_json()  # json escapes NUL, which PostgreSQL text cannot hold
        with self._op("save") as conn:
            conn.execute(
                f"INSERT INTO {self.table} (id, scope, updated_at) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET scope = EXCLUDED.scope, updated_at = EXCLUDED.updated_at",
                (scope.id, text, time.time()),
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
        return {"dsn": self._dsn, "table": self.table, "connect_timeout": self.connect_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["dsn"], table=state["table"], connect_timeout=state["connect_timeout"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"PostgresScopeStore({self.where!r}, table={self.table!r})"


__all__ = ["InMemoryScopeStore", "PostgresScopeStore", "ScopeStore", "SqliteScopeStore"]
