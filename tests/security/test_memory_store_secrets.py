"""Issue 26 item 12: the PostgreSQL repository keeps its password out of its attributes, and
``close()`` of the PostgreSQL and Redis repositories raises ``ChatMemoryError``, scrubbed, never a
driver exception. Against the real PostgreSQL and Redis (trust auth: the password is never checked).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from chatclient.errors import ChatMemoryError
from chatclient.messages import UserMessage
from tests.conftest import unavailable

PASSWORD = "pg-Secret-0123456789"
POSTGRES_DSN = os.environ.get("CHATCLIENT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CHATCLIENT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

pytestmark = pytest.mark.integration


def _with_password(dsn: str) -> str:
    scheme, _, rest = dsn.partition("://")
    userinfo, _, where = rest.rpartition("@")
    return f"{scheme}://{userinfo.split(':')[0] or 'postgres'}:{PASSWORD}@{where}"


@pytest.fixture
def pg_repo() -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
    from chatclient.memory.postgres import PostgresChatMemoryRepository

    try:
        psycopg.connect(POSTGRES_DSN, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {POSTGRES_DSN} does not answer: {exc}")
    name = f"test_memory_secret_{uuid.uuid4().hex[:12]}"
    repo = PostgresChatMemoryRepository(_with_password(POSTGRES_DSN), table=name)
    try:
        yield repo
    finally:
        repo.close()
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


@pytest.mark.postgres
def test_the_password_is_in_no_attribute_and_the_repository_still_connects(pg_repo: Any) -> None:
    pg_repo.save_all("c", [UserMessage("hi")])
    assert pg_repo.find("c") == [UserMessage("hi")]
    shown = f"{pg_repo.dsn} {pg_repo!r} {vars(pg_repo)!r}"
    assert PASSWORD not in shown
    assert "127.0.0.1" in pg_repo.dsn or "localhost" in pg_repo.dsn  # the rest of the DSN stays readable


class _FailingConnection:
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.closed = False

    def close(self) -> None:
        self.closed = True
        raise self.error


@pytest.mark.postgres
def test_close_raises_a_scrubbed_memory_error_after_closing_every_connection(pg_repo: Any) -> None:
    import psycopg

    pg_repo.save_all("c", [UserMessage("hi")])  # opens a real pooled connection
    failing = _FailingConnection(psycopg.OperationalError(f"connection to postgres:{PASSWORD}@db lost"))
    real = list(pg_repo._idle)
    pg_repo._idle.insert(0, failing)  # fault injection: the first connection fails to close
    with pytest.raises(ChatMemoryError, match="close failed") as caught:
        pg_repo.close()
    assert PASSWORD not in str(caught.value) and caught.value.__cause__ is None
    assert failing.closed and all(conn.closed for conn in real)


@pytest.mark.redis
def test_redis_close_raises_a_memory_error(monkeypatch: pytest.MonkeyPatch) -> None:
    redis = pytest.importorskip("redis", reason="redis-py is not installed (extra 'redis')")
    from chatclient.memory.redis import RedisChatMemoryRepository

    repo = RedisChatMemoryRepository(REDIS_URL, prefix=f"test:{uuid.uuid4().hex}:")
    try:
        repo.find("nothing")
    except ChatMemoryError as exc:
        unavailable(f"Redis at {REDIS_URL} does not answer: {exc}")

    def broken_close() -> None:
        raise redis.ConnectionError("Error 104 while closing")

    monkeypatch.setattr(repo.client, "close", broken_close)
    with pytest.raises(ChatMemoryError, match="Redis chat memory: close failed"):
        repo.close()
