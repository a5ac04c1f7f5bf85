"""PostgreSQL memory stores NUL and reads rows written by the previous table layout."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient.messages import AssistantMessage, Message, UserMessage
from tests.conftest import unavailable

POSTGRES_DSN = os.environ.get("CHATCLIENT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def table() -> Iterator[tuple[Any, str]]:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
    try:
        conn = psycopg.connect(POSTGRES_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {POSTGRES_DSN} does not answer: {exc}")
    name = f"test_memory_text_{uuid.uuid4().hex[:12]}"
    try:
        yield conn, name
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.close()


def test_nul_round_trips(table: tuple[Any, str]) -> None:
    from chatclient.memory.postgres import PostgresChatMemoryRepository

    conn, name = table
    repo = PostgresChatMemoryRepository(POSTGRES_DSN, table=name)
    try:
        messages: list[Message] = [UserMessage("a\x00b", metadata={"k\x00": "\x00"}), AssistantMessage("plain")]
        repo.save_all("c", messages)
        assert repo.find("c") == messages
        # only the message that needs it is kept as text; the other stays queryable JSONB
        rows = conn.execute(f"SELECT message IS NULL, message_text IS NULL FROM {name} ORDER BY seq").fetchall()
        assert rows == [(True, False), (False, True)]
    finally:
        repo.close()


def test_rows_of_the_old_layout_stay_readable_and_the_table_is_migrated(table: tuple[Any, str]) -> None:
    from chatclient.memory.postgres import PostgresChatMemoryRepository

    conn, name = table
    conn.execute(
        f"CREATE TABLE {name} (conversation_id TEXT NOT NULL, seq BIGINT NOT NULL, message JSONB NOT NULL, "
        "created_at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (conversation_id, seq))"
    )
    conn.execute(
        f"INSERT INTO {name} (conversation_id, seq, message) VALUES ('c', 0, %s::jsonb)",
        ('{"v": 1, "type": "user", "text": "old row"}',),
    )
    repo = PostgresChatMemoryRepository(POSTGRES_DSN, table=name)
    try:
        assert repo.find("c") == [UserMessage("old row")]
        repo.update("c", lambda old: [*old, UserMessage("new\x00row")])
        assert repo.find("c") == [UserMessage("old row"), UserMessage("new\x00row")]
        again = PostgresChatMemoryRepository(POSTGRES_DSN, table=name)  # the migration runs once
        assert again.find("c") == [UserMessage("old row"), UserMessage("new\x00row")]
        again.close()
    finally:
        repo.close()


def test_a_damaged_text_row_is_a_value_error(table: tuple[Any, str]) -> None:
    from chatclient.memory.postgres import PostgresChatMemoryRepository

    conn, name = table
    repo = PostgresChatMemoryRepository(POSTGRES_DSN, table=name)
    try:
        repo.save_all("c", [UserMessage("x")])
        conn.execute(f"UPDATE {name} SET message = NULL, message_text = %s", ("[" * 100_000,))
        with pytest.raises(ValueError, match="not usable"):
            repo.find("c")
    finally:
        repo.close()
