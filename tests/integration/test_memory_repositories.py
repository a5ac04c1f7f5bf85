"""One contract suite, run against every chat memory repository.

PostgreSQL and Redis cases are marked ``integration`` + ``postgres``/``redis``; each test uses its
own table or key prefix and removes it afterwards. They skip when the driver is not installed, and
when the server does not answer they skip locally but fail under CHATCLIENT_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chatclient.memory import (
    AtomicChatMemoryRepository,
    ChatMemoryRepository,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    SqliteChatMemoryRepository,
)
from chatclient.messages import AssistantMessage, Message, SystemMessage, UserMessage
from tests.conftest import unavailable
from tests.unit.test_memory_serialization import ALL_KINDS

POSTGRES_DSN = os.environ.get("CHATCLIENT_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("CHATCLIENT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

KINDS = [
    "in_memory",
    "sqlite",
    pytest.param("postgres", marks=[pytest.mark.integration, pytest.mark.postgres]),
    pytest.param("redis", marks=[pytest.mark.integration, pytest.mark.redis]),
]


class Store:
    """Makes repositories of one kind that share storage (to test persistence across instances)."""

    def __init__(self, kind: str, tmp_path: Any) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.token = uuid.uuid4().hex[:12]
        self.made: list[Any] = []
        self.shared = InMemoryChatMemoryRepository() if kind == "in_memory" else None
        if kind == "postgres":
            psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (extra 'postgres')")
            try:
                psycopg.connect(POSTGRES_DSN, connect_timeout=5).close()
            except psycopg.OperationalError as exc:
                unavailable(f"PostgreSQL at {POSTGRES_DSN} does not answer: {exc}")
        if kind == "redis":
            redis = pytest.importorskip("redis", reason="redis-py is not installed (extra 'redis')")
            try:
                redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5).ping()
            except redis.exceptions.ConnectionError as exc:
                unavailable(f"Redis at {REDIS_URL} does not answer: {exc}")

    def make(self) -> ChatMemoryRepository:
        repo: Any
        if self.kind == "in_memory":
            return self.shared  # type: ignore[return-value]
        if self.kind == "sqlite":
            repo = SqliteChatMemoryRepository(self.tmp_path / "memory.db", table=f"t_{self.token}")
        elif self.kind == "postgres":
            from chatclient.memory.postgres import PostgresChatMemoryRepository

            repo = PostgresChatMemoryRepository(POSTGRES_DSN, table=f"test_memory_{self.token}")
        else:
            from chatclient.memory.redis import RedisChatMemoryRepository

            repo = RedisChatMemoryRepository(REDIS_URL, prefix=f"test:memory:{self.token}:")
        self.made.append(repo)
        return repo  # type: ignore[no-any-return]

    def cleanup(self) -> None:
        for repo in self.made:
            repo.close()
        if self.kind == "postgres":
            import psycopg

            with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
                conn.execute(f"DROP TABLE IF EXISTS test_memory_{self.token}")
        if self.kind == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(f"test:memory:{self.token}:*"))
            if keys:
                client.delete(*keys)
            client.close()


def _store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Store]:
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        s.cleanup()


store = pytest.fixture(params=KINDS)(_store)
# Repositories shared between processes (an in-memory one is private to its process by design).
shared_store = pytest.fixture(params=KINDS[1:])(_store)


@pytest.fixture
def repo(store: Store) -> ChatMemoryRepository:
    return store.make()


def test_implements_the_protocols(repo: ChatMemoryRepository) -> None:
    assert isinstance(repo, ChatMemoryRepository)
    assert isinstance(repo, AtomicChatMemoryRepository)


def test_unknown_conversation_is_empty(repo: ChatMemoryRepository) -> None:
    assert repo.find("nobody") == []
    assert repo.find_conversation_ids() == []
    repo.delete("nobody")  # deleting the unknown is a no-op


def test_every_message_kind_round_trips(repo: ChatMemoryRepository) -> None:
    repo.save_all("c1", ALL_KINDS)
    back = repo.find("c1")
    assert back == ALL_KINDS
    assert [type(m) for m in back] == [type(m) for m in ALL_KINDS]
    assert [dict(m.metadata) for m in back] == [dict(m.metadata) for m in ALL_KINDS]


def test_save_all_overwrites(repo: ChatMemoryRepository) -> None:
    repo.save_all("c1", [UserMessage("a"), AssistantMessage("b")])
    repo.save_all("c1", [UserMessage("c")])
    assert repo.find("c1") == [UserMessage("c")]


def test_conversations_are_separate_and_listed(repo: ChatMemoryRepository) -> None:
    repo.save_all("c1", [UserMessage("one")])
    repo.save_all("c2", [UserMessage("two")])
    assert sorted(repo.find_conversation_ids()) == ["c1", "c2"]
    repo.delete("c1")
    assert repo.find("c1") == []
    assert repo.find("c2") == [UserMessage("two")]
    assert repo.find_conversation_ids() == ["c2"]


def test_saving_nothing_removes_the_conversation(repo: ChatMemoryRepository) -> None:
    repo.save_all("c1", [UserMessage("x")])
    repo.save_all("c1", [])
    assert repo.find("c1") == []
    assert repo.find_conversation_ids() == []


@pytest.mark.parametrize("cid", ["", "  ", None])
def test_empty_conversation_id_is_rejected(repo: ChatMemoryRepository, cid: Any) -> None:
    for op in (
        lambda: repo.find(cid),
        lambda: repo.save_all(cid, [UserMessage("x")]),
        lambda: repo.delete(cid),
        lambda: repo.update(cid, lambda old: old),  # type: ignore[attr-defined]
    ):
        with pytest.raises(ValueError, match="conversation_id"):
            op()


def test_update_rewrites_only_as_asked(repo: ChatMemoryRepository) -> None:
    # Equal messages at several positions, deletions in the middle and appends: the stored rows
    # must read back exactly as the list the update returned.
    u = UserMessage("same")
    repo.save_all("c1", [u, AssistantMessage("x"), u, AssistantMessage("y"), u])
    wanted = [u, u, AssistantMessage("y"), UserMessage("new"), u]
    result = repo.update("c1", lambda old: [old[0], old[2], old[3], UserMessage("new"), old[4]])  # type: ignore[attr-defined]
    assert result == wanted
    assert repo.find("c1") == wanted
    repo.update("c1", lambda old: [*old[2:], *old[:2]])  # type: ignore[attr-defined]
    assert repo.find("c1") == [AssistantMessage("y"), UserMessage("new"), u, u, u]


def test_data_survives_a_new_repository_object(store: Store) -> None:
    first = store.make()
    MessageWindowChatMemory(first, max_messages=3).add("c1", [SystemMessage("s"), UserMessage("u1")])
    second = store.make()
    memory = MessageWindowChatMemory(second, max_messages=3)
    memory.add("c1", [AssistantMessage("a1"), UserMessage("u2")])
    assert memory.get("c1") == [SystemMessage("s"), AssistantMessage("a1"), UserMessage("u2")]
    assert first.find("c1") == memory.get("c1")


def test_concurrent_appends_from_threads_lose_nothing(repo: ChatMemoryRepository) -> None:
    memory = MessageWindowChatMemory(repo, max_messages=100_000)
    threads, per_thread = 8, 15
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(per_thread):
                memory.add("shared", UserMessage(f"t{t}-{i}"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    stored = [m.text or "" for m in memory.get("shared")]
    assert len(stored) == threads * per_thread
    assert sorted(stored) == sorted(f"t{t}-{i}" for t in range(threads) for i in range(per_thread))
    for t in range(threads):  # each writer's messages keep their order
        mine = [s for s in stored if s.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(per_thread)]


def _process_appends(repo: ChatMemoryRepository, p: int, n: int) -> None:
    memory = MessageWindowChatMemory(repo, max_messages=100_000)
    for i in range(n):
        memory.add("shared", UserMessage(f"p{p}-{i}"))


def test_concurrent_appends_from_processes_lose_nothing(shared_store: Store) -> None:
    store = shared_store
    repo = store.make()
    repo.save_all("warm-up", [UserMessage("x")])  # open connections before forking
    processes, per_process = 3, 15
    ctx = multiprocessing.get_context("fork")
    workers = [ctx.Process(target=_process_appends, args=(repo, p, per_process)) for p in range(processes)]
    for w in workers:
        w.start()
    _process_appends(repo, processes, per_process)  # the parent writes too, with the same object
    for w in workers:
        w.join(120)
        assert w.exitcode == 0
    stored = [m.text or "" for m in store.make().find("shared")]
    assert len(stored) == (processes + 1) * per_process
    for p in range(processes + 1):
        assert [s for s in stored if s.startswith(f"p{p}-")] == [f"p{p}-{i}" for i in range(per_process)]


def test_window_eviction_is_persisted(repo: ChatMemoryRepository) -> None:
    memory = MessageWindowChatMemory(repo, max_messages=2)
    for i in range(5):
        memory.add("c1", UserMessage(str(i)))
    assert repo.find("c1") == [UserMessage("3"), UserMessage("4")]


@pytest.mark.integration
@pytest.mark.redis
def test_redis_ttl_expires_conversations_and_their_ids(tmp_path: Any) -> None:
    s = Store("redis", tmp_path)
    try:
        from chatclient.memory.redis import RedisChatMemoryRepository

        repo = RedisChatMemoryRepository(REDIS_URL, prefix=f"test:memory:{s.token}:", ttl=60)
        s.made.append(repo)
        repo.save_all("short", [UserMessage("x")])
        assert 0 < repo.client.ttl(f"test:memory:{s.token}:conversation:short") <= 60
        repo.client.delete(f"test:memory:{s.token}:conversation:short")  # what expiry does
        assert repo.find_conversation_ids() == []
        assert repo.find("short") == []
    finally:
        s.cleanup()


# Any text a Python str can carry through UTF-8 round-trips in every repository: NUL, other control
# characters, non-characters, astral planes, combining marks. Lone surrogates (category Cs) are
# excluded because they are not text (they cannot be encoded as UTF-8 at all); this is the
# documented rule of the memory repositories.
STORABLE_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
NASTY_TEXT = st.one_of(
    STORABLE_TEXT,
    st.sampled_from(["\x00", "a\x00b", "\\u0000", "\\\x00", "\ufeff\u200b", "\U0010ffff", '"\\', "\r\n\x1f"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(user=NASTY_TEXT, assistant=NASTY_TEXT, meta_key=NASTY_TEXT, meta_value=NASTY_TEXT)
@example(user="\x00", assistant="a\x00b", meta_key="\x00", meta_value="\\u0000")
def test_any_unicode_text_round_trips(
    repo: ChatMemoryRepository, user: str, assistant: str, meta_key: str, meta_value: str
) -> None:
    conversation = f"c-{uuid.uuid4().hex}"  # one conversation per example: the repository is shared
    messages: list[Message] = [
        UserMessage(user, metadata={meta_key: meta_value, "nested": [meta_value, {"k": user}]}),
        AssistantMessage(assistant),
        SystemMessage(meta_value),
    ]
    repo.save_all(conversation, messages)
    back = repo.find(conversation)
    assert back == messages
    assert [dict(m.metadata) for m in back] == [dict(m.metadata) for m in messages]
    # the read-modify-write path compares stored rows with new ones: an unchanged prefix is kept
    assert isinstance(repo, AtomicChatMemoryRepository)
    repo.update(conversation, lambda old: [*old, UserMessage(user + "!")])
    assert repo.find(conversation) == [*messages, UserMessage(user + "!")]
    repo.delete(conversation)
