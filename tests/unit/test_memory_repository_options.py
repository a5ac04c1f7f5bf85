"""Repository construction: optional drivers named in errors, SQLite settings, argument checks."""

from __future__ import annotations

import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from chatclient.memory import SqliteChatMemoryRepository
from chatclient.memory.base import plan_rows
from chatclient.messages import UserMessage


def test_postgres_without_psycopg_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.memory.postgres import PostgresChatMemoryRepository

    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an environment without the extra looks like
    with pytest.raises(ImportError, match=r"chatclient\[postgres\]"):
        PostgresChatMemoryRepository("postgresql://localhost/x")


def test_redis_without_redis_py_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from chatclient.memory.redis import RedisChatMemoryRepository

    monkeypatch.setitem(sys.modules, "redis", None)
    with pytest.raises(ImportError, match=r"chatclient\[redis\]"):
        RedisChatMemoryRepository()


def test_lazy_names_resolve_from_the_package() -> None:
    import chatclient.memory as memory

    assert memory.PostgresChatMemoryRepository.__name__ == "PostgresChatMemoryRepository"
    assert memory.RedisChatMemoryRepository.__name__ == "RedisChatMemoryRepository"
    with pytest.raises(AttributeError):
        memory.NoSuchRepository  # noqa: B018


def test_sqlite_creates_its_table_in_wal_mode_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "sub.db"
    repo = SqliteChatMemoryRepository(path, table="my_memory")
    assert not path.exists()  # nothing happens before first use
    repo.save_all("c", [UserMessage("x")])
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "my_memory" in tables
    repo.close()


def test_sqlite_in_memory_database_is_shared_by_threads() -> None:
    repo = SqliteChatMemoryRepository(":memory:")
    threads = [threading.Thread(target=repo.save_all, args=(f"c{i}", [UserMessage(str(i))])) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert repo.find_conversation_ids() == ["c0", "c1", "c2", "c3"]


@pytest.mark.parametrize("table", ["", "drop table x", "1abc", "a;b", "x" * 64])
def test_sqlite_table_name_must_be_a_plain_identifier(table: str) -> None:
    with pytest.raises(ValueError, match="table name"):
        SqliteChatMemoryRepository(":memory:", table=table)


def test_sqlite_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="synchronous"):
        SqliteChatMemoryRepository(":memory:", synchronous="SOMETIMES")
    with pytest.raises(ValueError, match="timeout"):
        SqliteChatMemoryRepository(":memory:", timeout=-1)


def test_row_plan_keeps_matching_rows_and_appends_the_rest() -> None:
    plan = plan_rows(["a", "b", "c", "d"], ["b", "d", "e"])
    assert plan.delete == (0, 2)
    assert plan.append == ("e",)
    reorder = plan_rows(["a", "b"], ["b", "a"])
    assert reorder.delete == (0,)
    assert reorder.append == ("a",)
