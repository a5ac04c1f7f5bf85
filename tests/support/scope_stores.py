"""The scope stores the agents' integration tests run on: in memory, a SQLite file and the
machine's PostgreSQL (skipped, saying why, where it does not answer), each test on a table of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatclient.agents import InMemoryScopeStore, PostgresScopeStore, SqliteScopeStore

POSTGRES_DSN = os.environ.get("CHATCLIENT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

STORE_KINDS = ["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""The ``params`` of a fixture that runs a test on each kind of store."""

ScopeStoreSpec = tuple[str, str | None, str]
"""``(kind, where, table)``: the kind of store, its file or DSN (``None`` in memory) and its table."""


def postgres_or_skip() -> None:
    """Skip the test unless psycopg is installed and PostgreSQL answers at ``POSTGRES_DSN``."""
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
    try:
        psycopg.connect(POSTGRES_DSN, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL at {POSTGRES_DSN} does not answer: {exc}")


def drop_table(table: str) -> None:
    """Drop a test's PostgreSQL table."""
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def scope_store_spec(kind: str, tmp_path: Path, prefix: str) -> Iterator[ScopeStoreSpec]:
    """For a fixture to ``yield from``: a fresh table named ``{prefix}_...`` on ``kind`` (dropped
    afterwards on PostgreSQL, which is skipped where it does not answer)."""
    if kind == "postgres":
        postgres_or_skip()
    table = f"{prefix}_{uuid.uuid4().hex[:10]}"
    where = str(tmp_path / "scopes.db") if kind == "sqlite" else POSTGRES_DSN if kind == "postgres" else None
    yield (kind, where, table)
    if kind == "postgres":
        drop_table(table)


def open_scope_store(spec: ScopeStoreSpec, memory: dict[str, InMemoryScopeStore] | None = None, **options: Any) -> Any:
    """A new store object (on SQLite and PostgreSQL a new connection) on the spec's table. In memory
    a new store, or with ``memory`` the one kept there for the table (as if reconnecting)."""
    kind, where, table = spec
    if kind == "memory":
        if memory is None:
            return InMemoryScopeStore(**options)
        return memory.setdefault(table, InMemoryScopeStore(**options))
    assert where is not None
    if kind == "sqlite":
        return SqliteScopeStore(where, table=table, **options)
    return PostgresScopeStore(where, table=table, **options)
