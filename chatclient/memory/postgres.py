"""PostgreSQL repository (psycopg 3, extra ``postgres``).

One row per message (``conversation_id, seq, message JSONB, message_text TEXT``). Every write is one transaction that
first takes a transaction-scoped advisory lock on the conversation, so read-modify-write updates
from any number of threads, processes or machines run one at a time per conversation and lose
nothing. The table is created on first use (under an advisory lock too, since concurrent
``CREATE TABLE IF NOT EXISTS`` can collide in PostgreSQL).

Any text the other repositories store is stored here too, NUL (``\\x00``) included. JSONB refuses
``\\u0000`` (and TEXT refuses a raw NUL byte), so a message whose JSON holds that escape is kept as
its JSON text in ``message_text`` (with ``message`` NULL); every other message stays plain JSONB,
so rows written before this column existed, and the JSONB queries users run on them, still work.
Tables created by older versions get the column on first use. The rule for all repositories: any
``str`` that encodes as UTF-8 round-trips (lone surrogates do not, they are not text).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from chatclient import jsonsafe
from chatclient._pickling import Reconstructible
from chatclient.errors import ChatMemoryError
from chatclient.memory._errors import StoreErrors, connection_secrets, scrub_text
from chatclient.memory.base import MessageUpdate, check_conversation_id, check_messages, plan_rows
from chatclient.memory.serialization import message_from_dict, message_to_dict
from chatclient.memory.sqlite import check_identifier
from chatclient.messages import Message
from chatclient.redaction import Secret

# Connections inherited through fork() must never be closed by the child (closing would end the
# parent's session on the shared socket), so the child parks them here for the life of the process.
_INHERITED: list[Any] = []


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError("PostgresChatMemoryRepository needs psycopg 3: pip install 'chatclient[postgres]'") from None
    return psycopg


def _store_errors(psycopg: Any, dsn: str) -> StoreErrors:
    """How this DSN's failures are reported: at its host and port, with its password scrubbed."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:  # a malformed DSN fails again, reported, at the first operation
        info = {}
    host, port = info.get("host") or info.get("hostaddr"), info.get("port") or "5432"
    where = f"{host}:{port}" if host else f"the local socket (port {port})"
    password = info.get("password")
    timeouts = tuple(
        getattr(psycopg.errors, name)
        for name in ("ConnectionTimeout", "QueryCanceled")
        if hasattr(psycopg.errors, name)
    )
    return StoreErrors(
        "PostgreSQL",
        where=where,
        check="is PostgreSQL running at {where} and accepting connections, and are the DSN's "
        "database name, user and password right?",
        driver_errors=(psycopg.Error,),
        is_timeout=lambda exc: isinstance(exc, timeouts),
        secrets=[*connection_secrets(dsn), *([password] if password else [])],
    )


# Pickles made before the DSN was kept in a ``Secret`` name this class; they load as a Secret.
_HiddenDsn = Secret


def _lock_key(*parts: str) -> int:
    # A stable signed 64-bit key for pg_advisory_xact_lock (Python's hash() differs per process).
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _columns(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(message, message_text)`` for a record: JSONB when PostgreSQL can hold it, else the JSON text."""
    text = json.dumps(record, ensure_ascii=False, allow_nan=False)
    # json.dumps writes NUL as the escape \u0000, which JSONB refuses but TEXT takes as six
    # characters. (A literal backslash followed by "u0000" also matches; it round-trips either way.)
    if "\\u0000" in text:
        return None, text
    return text, None


def _stored(message: Any, message_text: str | None) -> Any:
    """The record of one row, from whichever column holds it."""
    if message_text is None:
        return message
    try:
        return jsonsafe.loads(message_text)
    except ValueError as exc:  # JSONDepthError or a damaged row: the memory error type
        raise ValueError(f"a stored message is not usable: {exc}") from None


class PostgresChatMemoryRepository(Reconstructible):
    """Stores conversations in a PostgreSQL table; safe across threads, processes and hosts.

    ``dsn`` is a libpq connection string or URL. Up to ``max_connections`` connections are kept open
    and shared by threads. Call :meth:`close` when done. A server that is down, refuses the login or
    fails a query raises ``ChatMemoryError`` (``ChatMemoryTimeoutError`` when it times out or every
    pooled connection stays busy), never a psycopg exception.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "chat_memory",
        schema: str | None = None,
        max_connections: int = 8,
        connect_timeout: float = 10.0,
    ) -> None:
        # the DSN as given, password included, where repr, vars and logs do not show it; the recorded
        # constructor arguments mask it by its name (chatclient._pickling)
        hidden = Secret(dsn)
        dsn = hidden.reveal()
        if not dsn:
            raise ValueError("dsn cannot be empty")
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._psycopg = _psycopg()
        from psycopg import sql

        self._dsn = hidden
        self.table = check_identifier(table)
        self.schema = check_identifier(schema, "schema") if schema is not None else None
        self._name = sql.Identifier(self.schema, self.table) if self.schema else sql.Identifier(self.table)
        self._qualified = f"{self.schema}.{self.table}" if self.schema else self.table
        self.connect_timeout = connect_timeout
        self._errors = _store_errors(self._psycopg, dsn)
        self.dsn = scrub_text(dsn, self._errors.secrets)
        """The connection string with its password removed (for display; the real one is not an attribute)."""
        self._idle: list[Any] = []
        self._max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._ready = False

    # -- connections ---------------------------------------------------------------------------

    def _check_fork(self) -> None:
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    _INHERITED.extend(self._idle)
                    self._idle, self._pid, self._ready = [], os.getpid(), False
                    # Slots held by the parent's other threads at fork time are never released here.
                    self._slots = threading.BoundedSemaphore(self._max_connections)

    @contextmanager
    def _connection(self, operation: str) -> Iterator[Any]:
        # Everything the caller does with the connection runs inside the operation too, so a
        # failing query or commit is reported like a failing connect.
        with self._errors.operation(operation), self._pooled(operation) as conn:
            yield conn

    @contextmanager
    def _pooled(self, operation: str) -> Iterator[Any]:
        self._check_fork()
        slots = self._slots  # release the semaphore that was acquired, even if a fork replaced it
        wait = max(self.connect_timeout, 1.0) * 6
        if not slots.acquire(timeout=wait):
            raise self._errors.error(
                operation,
                f"no PostgreSQL connection became free within {wait:g} s (max_connections={self._max_connections})",
                timeout=True,
            )
        conn = None
        try:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or conn.closed:
                # libpq counts whole seconds and reads 0 as "wait forever": round up, at least 1.
                conn = self._psycopg.connect(
                    self._dsn.reveal(), autocommit=True, connect_timeout=max(1, math.ceil(self.connect_timeout))
                )
            if not self._ready:
                self._create_table(conn)
            yield conn
        finally:
            if conn is not None and not conn.closed and not conn.broken:
                with self._lock:
                    self._idle.append(conn)
            slots.release()

    def _create_table(self, conn: Any) -> None:
        from psycopg import sql

        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key("chatclient.memory.schema"),))
            if self.schema:
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, "
                    "message JSONB, message_text TEXT, created_at TIMESTAMPTZ NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (conversation_id, seq))"
                ).format(self._name)
            )
            # A table from an older version has ``message JSONB NOT NULL`` and no ``message_text``:
            # migrate it once (checked first, because ALTER TABLE locks the table even when idle).
            has_text = conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = COALESCE(%s, current_schema()) "
                "AND table_name = %s AND column_name = 'message_text'",
                (self.schema, self.table),
            ).fetchone()
            if has_text is None:
                conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN message_text TEXT").format(self._name))
                conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN message DROP NOT NULL").format(self._name))
        self._ready = True

    def close(self) -> None:
        """Close the idle connections (the repository reconnects on next use); ``ChatMemoryError`` if one fails."""
        with self._lock:
            idle, self._idle = self._idle, []
        if self._pid == os.getpid():
            failure: ChatMemoryError | None = None
            for conn in idle:  # close every one, then report the first failure
                try:
                    with self._errors.operation("close"):
                        conn.close()
                except ChatMemoryError as exc:
                    failure = failure or exc
            if failure is not None:
                raise failure

    def _sql(self, text: str) -> Any:
        from psycopg import sql

        return sql.SQL(text).format(table=self._name)

    # -- the repository ------------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        with self._connection("find_conversation_ids") as conn:
            rows = conn.execute(self._sql("SELECT DISTINCT conversation_id FROM {table} ORDER BY 1")).fetchall()
        return [r[0] for r in rows]

    def find(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._connection("find") as conn:
            rows = conn.execute(
                self._sql("SELECT message, message_text FROM {table} WHERE conversation_id = %s ORDER BY seq"),
                (conversation_id,),
            ).fetchall()
        return [message_from_dict(_stored(r[0], r[1])) for r in rows]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        stored = check_messages(messages)
        self._update("save_all", conversation_id, lambda _: stored)

    def delete(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        with self._connection("delete") as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self._qualified, conversation_id),))
            conn.execute(self._sql("DELETE FROM {table} WHERE conversation_id = %s"), (conversation_id,))

    def update(self, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        """Apply ``fn`` to the conversation in one transaction holding the conversation's lock."""
        return self._update("update", conversation_id, fn)

    def _update(self, operation: str, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        check_conversation_id(conversation_id)
        # Pipeline mode sends the lock and the read together, then the writes and the commit
        # together: two round trips per update instead of six, which is what bounds throughput
        # while writers queue on the conversation's lock.
        with self._connection(operation) as conn, conn.pipeline(), conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_lock_key(self._qualified, conversation_id),))
            rows = conn.execute(
                self._sql("SELECT seq, message, message_text FROM {table} WHERE conversation_id = %s ORDER BY seq"),
                (conversation_id,),
            ).fetchall()
            stored = [_stored(r[1], r[2]) for r in rows]
            result = check_messages(fn([message_from_dict(d) for d in stored]))
            # JSONB normalises the text, so compare parsed values rather than strings.
            wanted = [message_to_dict(m) for m in result]
            plan = plan_rows(stored, wanted)
            if plan.delete:
                conn.execute(
                    self._sql("DELETE FROM {table} WHERE conversation_id = %s AND seq = ANY(%s)"),
                    (conversation_id, [rows[i][0] for i in plan.delete]),
                )
            if plan.append:
                start = rows[-1][0] + 1 if rows else 0
                with conn.cursor() as cur:
                    cur.executemany(
                        self._sql(
                            "INSERT INTO {table} (conversation_id, seq, message, message_text) "
                            "VALUES (%s, %s, %s::jsonb, %s)"
                        ),
                        [(conversation_id, start + k, *_columns(d)) for k, d in enumerate(plan.append)],
                    )
        return result

    def __repr__(self) -> str:
        return f"PostgresChatMemoryRepository(table={self._qualified!r})"
