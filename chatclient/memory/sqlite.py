"""SQLite repository: the embedded default for conversations that survive restarts.

One row per message (``conversation_id, seq, message JSON``) in a WAL-mode database. Every write is
one ``BEGIN IMMEDIATE`` transaction, which takes SQLite's write lock before reading, so a
read-modify-write (``update``) cannot interleave with another writer in any thread or process;
waiting writers retry for up to ``timeout`` seconds. A process killed mid-write leaves the database
as of the last commit.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chatclient.memory._errors import StoreErrors
from chatclient.memory.base import MessageUpdate, check_conversation_id, check_messages, plan_rows
from chatclient.memory.serialization import message_from_json, message_to_json
from chatclient.messages import Message

# Connections a forked child inherited from its parent; see _connection().
_INHERITED: list[sqlite3.Connection] = []
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")


def _is_lock_timeout(exc: BaseException) -> bool:
    # SQLite reports a lock still held when its busy timeout ran out as "database is locked".
    text = str(exc)
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def check_identifier(name: str, what: str = "table") -> str:
    """Accept a plain SQL identifier (letters, digits, underscores); it is spliced into SQL text."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{what} name {name!r} must match [A-Za-z_][A-Za-z0-9_]* (at most 63 characters)")
    return name


class SqliteChatMemoryRepository:
    """Stores conversations in a SQLite file; safe across threads and processes.

    >>> repo = SqliteChatMemoryRepository(":memory:")
    >>> from chatclient.messages import UserMessage
    >>> repo.save_all("c1", [UserMessage("hi")])
    >>> repo.find("c1")[0].text
    'hi'

    ``path`` is a file (created with its table on first use) or ``":memory:"`` (one private
    database per repository object). ``synchronous="NORMAL"`` (the default) survives a crashed
    process; use ``"FULL"`` to also survive a power cut at some cost in write speed. A file that
    cannot be opened or written raises ``ChatMemoryError``; a database still locked by another
    connection after ``timeout`` seconds raises ``ChatMemoryTimeoutError``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = "chat_memory.db",
        *,
        table: str = "chat_memory",
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}")
        if timeout < 0:
            raise ValueError("timeout cannot be negative")
        self.path = str(path) if str(path) == ":memory:" else str(Path(path))
        self.table = check_identifier(table)
        self.timeout = timeout
        self.synchronous = synchronous.upper()
        self._errors = StoreErrors(
            "SQLite",
            where=self.path,
            check="can this process create and write {where} and its directory (with room on the disk), "
            f"and does no other connection hold the database locked for longer than timeout={timeout:g} s?",
            driver_errors=(sqlite3.Error,),
            is_timeout=_is_lock_timeout,
        )
        self._local = threading.local()
        self._lock = threading.RLock()
        # Connections this process opened, with their thread: closed by close(), or when a new one
        # is opened after their thread has ended (sqlite3 connections cannot be weakly referenced).
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._shared: sqlite3.Connection | None = None  # the one connection of a ":memory:" database
        self._pid = os.getpid()

    def __reduce__(self) -> tuple[Any, ...]:
        # A file travels as its path (the worker opens its own connections); ":memory:" cannot.
        if self.path == ":memory:":
            raise TypeError(
                "SqliteChatMemoryRepository(':memory:') lives in this process's open connection and cannot be "
                "pickled; pass a file path (SqliteChatMemoryRepository('chat.db')) or use "
                "InMemoryChatMemoryRepository, whose conversations travel with it"
            )
        return (_reopen, (self.path, self.table, self.timeout, self.synchronous))

    # -- connections ---------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        if self.path != ":memory:":
            self._retry_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"))
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        self._retry_busy(
            lambda: conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} ("
                "conversation_id TEXT NOT NULL, seq INTEGER NOT NULL, message TEXT NOT NULL, "
                "created_at REAL NOT NULL, PRIMARY KEY (conversation_id, seq)) WITHOUT ROWID"
            )
        )
        return conn

    def _retry_busy(self, step: Callable[[], object]) -> None:
        # Switching to WAL and creating the table need a lock that the busy handler does not always
        # wait for when many processes start at once; retry them within the timeout.
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                step()
                return
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _connection(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            if self._shared is None:
                self._shared = self._open()
            return self._shared
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        pid = os.getpid()
        if conn is not None and getattr(self._local, "pid", None) == pid:
            return conn
        # First use in this thread, or a connection inherited through fork() that must not be used.
        conn = self._open()
        self._local.conn, self._local.pid = conn, pid
        with self._lock:
            if pid != self._pid:
                # Never close a connection inherited through fork(): SQLite forbids using it in the
                # child, and closing it could disturb the parent's locks. Keep it referenced instead.
                _INHERITED.extend(c for _, c in self._connections)
                self._connections, self._pid = [], pid
            alive = []
            for thread, other in self._connections:
                if thread.is_alive():
                    alive.append((thread, other))
                else:
                    other.close()
            alive.append((threading.current_thread(), conn))
            self._connections = alive
        return conn

    @contextmanager
    def _transaction(self, operation: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        memory_db = self.path == ":memory:"
        if memory_db:
            self._lock.acquire()  # one connection shared by all threads: serialise its use
        try:
            # Opening the file, the body and the COMMIT all count as the operation.
            with self._errors.operation(operation):
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
        finally:
            if memory_db:
                self._lock.release()

    def close(self) -> None:
        """Close every connection this object opened in this process (it reopens on next use)."""
        with self._lock:
            if self._pid == os.getpid():
                for _, conn in self._connections:
                    conn.close()
            self._connections = []
            if self._shared is not None:
                self._shared.close()
                self._shared = None
        self._local = threading.local()

    # -- the repository ------------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        with self._transaction("find_conversation_ids", write=False) as conn:
            rows = conn.execute(f"SELECT DISTINCT conversation_id FROM {self.table} ORDER BY conversation_id")
            return [r[0] for r in rows]

    def find(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._transaction("find", write=False) as conn:
            rows = conn.execute(
                f"SELECT message FROM {self.table} WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
        return [message_from_json(r[0]) for r in rows]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        stored = check_messages(messages)
        self._update("save_all", conversation_id, lambda _: stored)

    def delete(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        with self._transaction("delete", write=True) as conn:
            conn.execute(f"DELETE FROM {self.table} WHERE conversation_id = ?", (conversation_id,))

    def update(self, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        """Apply ``fn`` to the conversation inside one write transaction."""
        return self._update("update", conversation_id, fn)

    def _update(self, operation: str, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._transaction(operation, write=True) as conn:
            rows = conn.execute(
                f"SELECT seq, message FROM {self.table} WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
            ).fetchall()
            result = check_messages(fn([message_from_json(r[1]) for r in rows]))
            plan = plan_rows([r[1] for r in rows], [message_to_json(m) for m in result])
            if plan.delete:
                conn.executemany(
                    f"DELETE FROM {self.table} WHERE conversation_id = ? AND seq = ?",
                    [(conversation_id, rows[i][0]) for i in plan.delete],
                )
            if plan.append:
                start = rows[-1][0] + 1 if rows else 0
                now = time.time()
                conn.executemany(
                    f"INSERT INTO {self.table} (conversation_id, seq, message, created_at) VALUES (?, ?, ?, ?)",
                    [(conversation_id, start + k, text, now) for k, text in enumerate(plan.append)],
                )
        return result

    def __repr__(self) -> str:
        return f"SqliteChatMemoryRepository({self.path!r}, table={self.table!r})"


def _reopen(path: str, table: str, timeout: float, synchronous: str) -> SqliteChatMemoryRepository:
    return SqliteChatMemoryRepository(path, table=table, timeout=timeout, synchronous=synchronous)
