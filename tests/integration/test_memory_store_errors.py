"""A chat memory store that is down, refuses us or is locked raises ChatMemoryError, never a driver error.

Each case points a repository at something that fails for real: a TCP port nothing listens on, the
local PostgreSQL with a role or database that does not exist, a SQLite file that cannot be created
or is held locked by another connection. The error must name the store, the operation and the
place, and no text derived from it (``str``, ``repr``, the formatted traceback with its causes) may
contain the password from the DSN or URL.
"""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from advisors import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.errors import ChatClientError, ChatMemoryError, ChatMemoryTimeoutError
from chatclient.memory import MessageWindowChatMemory, SqliteChatMemoryRepository
from chatclient.memory._errors import StoreErrors
from chatclient.messages import Message, UserMessage
from chatclient.testing import ScriptedChatModel
from tests.conftest import unavailable
from tests.integration.test_memory_repositories import POSTGRES_DSN

pytestmark = pytest.mark.integration

PASSWORD = "Hunter2-pa55word-XYZ"  # long enough that any leak of it is unmistakable

OPERATIONS: dict[str, Callable[[Any], object]] = {
    "find_conversation_ids": lambda repo: repo.find_conversation_ids(),
    "find": lambda repo: repo.find("c1"),
    "save_all": lambda repo: repo.save_all("c1", [UserMessage("hello")]),
    "delete": lambda repo: repo.delete("c1"),
    "update": lambda repo: repo.update("c1", lambda stored: [*stored, UserMessage("hello")]),
}
WRITES = ["save_all", "delete", "update"]


@pytest.fixture
def closed_port() -> int:
    """A local TCP port that was just free: connecting to it is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _all_text(error: BaseException) -> str:
    """Every text a user could see of the error: message, repr and the whole chained traceback."""
    return "\n".join([str(error), repr(error), *traceback.format_exception(error)])


def _check(error: BaseException, store: str, operation: str, where: str) -> None:
    assert isinstance(error, ChatMemoryError) and isinstance(error, ChatClientError)
    assert error.store == store
    message = str(error)
    assert message.startswith(f"{store} chat memory: {operation} failed at {where}:"), message
    assert f"is {store} running at {where}" in message or store == "SQLite"
    text = _all_text(error)
    assert PASSWORD not in text
    assert PASSWORD[:8] not in text  # no recognisable part of it either


def _postgres(dsn: str, **options: Any) -> Any:
    pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
    from chatclient.memory import PostgresChatMemoryRepository

    options.setdefault("connect_timeout", 2)
    return PostgresChatMemoryRepository(dsn, **options)


def _redis(url: str) -> Any:
    pytest.importorskip("redis", reason="redis-py is not installed (extra 'redis')")
    from chatclient.memory import RedisChatMemoryRepository

    return RedisChatMemoryRepository(url)


def _live_postgres() -> None:
    psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
    try:
        psycopg.connect(POSTGRES_DSN, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        unavailable(f"PostgreSQL at {POSTGRES_DSN} does not answer: {exc}")


# -- PostgreSQL ------------------------------------------------------------------------------------


def _down(store: str, port: int) -> tuple[Any, type[BaseException]]:
    """A repository of ``store`` pointed at a closed port, and the driver error it must wrap."""
    if store == "PostgreSQL":
        psycopg = pytest.importorskip("psycopg")
        return _postgres(f"postgresql://alice:{PASSWORD}@127.0.0.1:{port}/test"), psycopg.OperationalError
    redis = pytest.importorskip("redis")
    return _redis(f"redis://bob:{PASSWORD}@127.0.0.1:{port}/0"), redis.exceptions.ConnectionError


@pytest.mark.parametrize(
    "store", [pytest.param("PostgreSQL", marks=pytest.mark.postgres), pytest.param("Redis", marks=pytest.mark.redis)]
)
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_a_store_that_is_down_is_a_chat_memory_error(store: str, operation: str, closed_port: int) -> None:
    repo, driver_error = _down(store, closed_port)
    with pytest.raises(ChatMemoryError) as info:
        OPERATIONS[operation](repo)
    _check(info.value, store, operation, f"127.0.0.1:{closed_port}")
    assert isinstance(info.value.__cause__, driver_error)  # the driver's reason stays reachable
    assert "refused" in str(info.value).lower()
    assert not isinstance(info.value, TimeoutError)  # refused is not a timeout
    assert PASSWORD not in repr(repo)


@pytest.mark.postgres
def test_postgres_key_value_dsn_password_is_not_shown(closed_port: int) -> None:
    repo = _postgres(f"host=127.0.0.1 port={closed_port} dbname=test user=alice password='{PASSWORD}'")
    with pytest.raises(ChatMemoryError) as info:
        repo.find("c1")
    _check(info.value, "PostgreSQL", "find", f"127.0.0.1:{closed_port}")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("dsn_tail", "reason"),
    [
        # Trust authentication accepts any password, so make the login itself impossible.
        ("no_such_role_{token}:{password}@127.0.0.1:5432/test", "role"),
        ("postgres:{password}@127.0.0.1:5432/no_such_db_{token}", "database"),
    ],
)
def test_postgres_refused_login_is_a_chat_memory_error(dsn_tail: str, reason: str) -> None:
    _live_postgres()
    token = uuid.uuid4().hex[:8]
    repo = _postgres("postgresql://" + dsn_tail.format(token=token, password=PASSWORD))
    for operation in ("find", "save_all"):
        with pytest.raises(ChatMemoryError) as info:
            OPERATIONS[operation](repo)
        _check(info.value, "PostgreSQL", operation, "127.0.0.1:5432")
        assert reason in str(info.value) and "does not exist" in str(info.value)


@pytest.mark.postgres
def test_postgres_pool_exhaustion_is_a_timeout_and_a_chat_memory_error() -> None:
    _live_postgres()
    table = f"errors_{uuid.uuid4().hex[:12]}"
    repo = _postgres(POSTGRES_DSN, table=table, max_connections=1, connect_timeout=1)
    holding, release = threading.Event(), threading.Event()

    def hold(stored: list[Message]) -> list[Message]:
        holding.set()
        release.wait(30)  # keeps the only pooled connection busy inside the transaction
        return stored

    holder = threading.Thread(target=repo.update, args=("c1", hold))
    holder.start()
    try:
        assert holding.wait(10)
        with pytest.raises(ChatMemoryError) as info:
            repo.find("c1")  # waits max(connect_timeout, 1) * 6 = 6 s for a free connection
        release.set()
        holder.join(10)
        error = info.value
        assert isinstance(error, TimeoutError) and isinstance(error, ChatMemoryTimeoutError)
        assert error.store == "PostgreSQL"
        assert "max_connections=1" in str(error) and "find failed" in str(error)
        assert repo.find("c1") == []  # the pool is usable again once the connection is back
    finally:
        release.set()
        holder.join(10)
        repo.close()
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")


# -- Redis -----------------------------------------------------------------------------------------


@pytest.mark.redis
def test_redis_bad_input_stays_a_value_error(closed_port: int) -> None:
    # Caller mistakes are checked before the store is touched, and keep their own type.
    repo = _redis(f"redis://127.0.0.1:{closed_port}/0")
    with pytest.raises(ValueError, match="conversation_id"):
        repo.find("")
    with pytest.raises(TypeError):
        repo.save_all("c1", "plain text")


# -- SQLite ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_sqlite_file_that_cannot_be_created(operation: str, tmp_path: Path) -> None:
    # A regular file where the directory should be: no user (root included) can create the database.
    (tmp_path / "not_a_dir").write_text("x")
    path = tmp_path / "not_a_dir" / "chat.db"
    repo = SqliteChatMemoryRepository(path, timeout=0.2)
    with pytest.raises(ChatMemoryError) as info:
        OPERATIONS[operation](repo)
    _check(info.value, "SQLite", operation, str(path))
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    assert "unable to open database file" in str(info.value)
    assert not isinstance(info.value, TimeoutError)


@pytest.fixture
def locked_database(tmp_path: Path) -> Iterator[Path]:
    """A SQLite database (already initialised by the repository) held under an exclusive lock."""
    path = tmp_path / "chat.db"
    SqliteChatMemoryRepository(path).save_all("c1", [UserMessage("before")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        yield path
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize("operation", WRITES)
def test_sqlite_locked_database_is_a_timeout(operation: str, locked_database: Path) -> None:
    repo = SqliteChatMemoryRepository(locked_database, timeout=0.2)
    with pytest.raises(ChatMemoryError) as info:
        OPERATIONS[operation](repo)
    _check(info.value, "SQLite", operation, str(locked_database))
    assert isinstance(info.value, ChatMemoryTimeoutError) and isinstance(info.value, TimeoutError)
    assert "locked" in str(info.value) and "timeout=0.2 s" in str(info.value)
    repo.close()


def test_sqlite_damaged_row_stays_a_value_error(tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    repo = SqliteChatMemoryRepository(path)
    repo.save_all("c1", [UserMessage("hi")])
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE chat_memory SET message = 'not json'")
    with pytest.raises(ValueError) as info:
        repo.find("c1")
    assert not isinstance(info.value, ChatMemoryError)
    repo.close()


# -- the scrubbing helper --------------------------------------------------------------------------


def test_a_driver_message_quoting_the_password_is_scrubbed_and_not_chained() -> None:
    errors = StoreErrors(
        "PostgreSQL",
        where="db.example:5432",
        check="check {where}",
        driver_errors=(sqlite3.Error,),
        secrets=[PASSWORD],
    )
    with pytest.raises(ChatMemoryError) as info, errors.operation("find"):
        raise sqlite3.OperationalError(
            f"bad dsn postgresql://alice:{PASSWORD}@db.example/x and host=db password={PASSWORD[:12]}zz"
        )
    assert PASSWORD[:8] not in _all_text(info.value)
    message = str(info.value)
    assert "alice" not in message  # the whole userinfo goes, not only the password
    assert "postgresql://db.example/x" in message and "password=[REDACTED]" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # the raw text is not printed


# -- end to end: a chat client whose memory store is down -----------------------------------------


def _client(repository: Any) -> tuple[ChatClient, ScriptedChatModel]:
    model = ScriptedChatModel(["an answer"])
    memory = MessageWindowChatMemory(repository=repository, max_messages=10)
    client = ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory, "c1")).build()
    return client, model


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def test_chat_client_over_an_unreachable_store_raises_chat_memory_error(kind: str, closed_port: int) -> None:
    if kind == "redis":
        repository, store = _redis(f"redis://bob:{PASSWORD}@127.0.0.1:{closed_port}/0"), "Redis"
    else:
        repository, store = _postgres(f"postgresql://alice:{PASSWORD}@127.0.0.1:{closed_port}/test"), "PostgreSQL"
    client, model = _client(repository)
    with pytest.raises(ChatMemoryError) as info:
        client.prompt("hello").call().content()
    assert info.value.store == store and PASSWORD not in _all_text(info.value)
    with pytest.raises(ChatMemoryError):
        asyncio.run(client.prompt("hello").acall().content())
    assert model.prompts == []  # the history could not be loaded, so the model was never asked


@pytest.mark.postgres
def test_a_sub_second_connect_timeout_still_times_out() -> None:
    # libpq reads connect_timeout=0 as "wait forever": 0.5 must not be truncated to it. The server
    # here accepts the TCP connection (the kernel does) and then never says a word.
    pytest.importorskip("psycopg")
    silent = socket.create_server(("127.0.0.1", 0), backlog=8)
    port = silent.getsockname()[1]
    repo = _postgres(f"postgresql://alice:{PASSWORD}@127.0.0.1:{port}/test", connect_timeout=0.5)
    outcome: list[BaseException] = []

    def attempt() -> None:
        try:
            repo.find("c1")
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(15)
    silent.close()
    assert not worker.is_alive(), "the connection attempt never timed out"
    assert outcome and isinstance(outcome[0], ChatMemoryError)
