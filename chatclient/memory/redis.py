"""Redis repository (redis-py, extra ``redis``).

A conversation is a Redis list of JSON messages under ``<prefix>conversation:<id>``; the set
``<prefix>conversations`` indexes the ids. Updates are optimistic transactions (WATCH / MULTI /
EXEC): if another writer changed the conversation in between, the update is recomputed on the new
contents, so concurrent writers lose nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chatclient._pickling import Reconstructible
from chatclient.memory._errors import StoreErrors, connection_secrets
from chatclient.memory.base import MessageUpdate, check_conversation_id, check_messages, plan_rows
from chatclient.memory.serialization import message_from_json, message_to_json
from chatclient.messages import Message


def _store_errors(redis: Any, client: Any, url: str | None) -> StoreErrors:
    """How the client's failures are reported: at its host and port, with its password scrubbed."""
    pool = getattr(client, "connection_pool", None)
    settings = getattr(pool, "connection_kwargs", None) or {}
    if settings.get("path"):
        where = str(settings["path"])
    elif settings:
        where = f"{settings.get('host', 'localhost')}:{settings.get('port', 6379)}"
    else:  # a client without a single connection pool (a cluster client, say)
        where = "the given client's server"
    password = settings.get("password")
    return StoreErrors(
        "Redis",
        where=where,
        check="is Redis running at {where}, and are the URL's database number, user and password right?",
        driver_errors=(redis.exceptions.RedisError,),
        is_timeout=lambda exc: isinstance(exc, redis.exceptions.TimeoutError),
        secrets=[*(connection_secrets(url) if url else []), *([str(password)] if password else [])],
    )


def _redis() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError("RedisChatMemoryRepository needs redis-py: pip install 'chatclient[redis]'") from None
    return redis


class RedisChatMemoryRepository(Reconstructible):
    """Stores conversations in Redis lists; safe across threads, processes and hosts.

    Pass a ``url`` (``redis://host:port/db``) or a ready ``client`` (a ``redis.Redis``).
    ``ttl`` (seconds) makes a conversation expire after that long without writes. A server that is
    down or refuses the login raises ``ChatMemoryError`` (``ChatMemoryTimeoutError`` on a timeout),
    never a redis-py exception.
    """

    _live_arguments = {"client": "a redis client"}
    _instead = "pass its url="

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "chatclient:memory:",
        ttl: int | None = None,
        client: Any = None,
    ) -> None:
        redis = _redis()
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl must be a positive number of seconds")
        self.prefix = prefix
        self.ttl = ttl
        # redis-py's connection pool is thread-safe and reconnects after fork() by itself.
        self.client = client if client is not None else redis.Redis.from_url(url)
        self._errors = _store_errors(redis, self.client, url if client is None else None)
        self._index = f"{prefix}conversations"

    def _key(self, conversation_id: str) -> str:
        return f"{self.prefix}conversation:{conversation_id}"

    def find_conversation_ids(self) -> list[str]:
        with self._errors.operation("find_conversation_ids"):
            return self._find_conversation_ids()

    def _find_conversation_ids(self) -> list[str]:
        ids = sorted(_text(i) for i in self.client.smembers(self._index))
        if self.ttl is None or not ids:
            return ids
        # Expired conversations leave their id in the index: drop those ids as they are found.
        with self.client.pipeline(transaction=False) as pipe:
            for cid in ids:
                pipe.exists(self._key(cid))
            alive = pipe.execute()
        stale = [cid for cid, ok in zip(ids, alive, strict=True) if not ok]
        if stale:
            self.client.srem(self._index, *stale)
        return [cid for cid, ok in zip(ids, alive, strict=True) if ok]

    def find(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._errors.operation("find"):
            stored = self.client.lrange(self._key(conversation_id), 0, -1)
        return [message_from_json(raw) for raw in stored]

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        stored = check_messages(messages)
        self._update("save_all", conversation_id, lambda _: stored)

    def delete(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        with self._errors.operation("delete"), self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(conversation_id))
            pipe.srem(self._index, conversation_id)
            pipe.execute()

    def update(self, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        """Apply ``fn`` to the conversation in a WATCHed transaction, retried on conflict."""
        return self._update("update", conversation_id, fn)

    def _update(self, operation: str, conversation_id: str, fn: MessageUpdate) -> list[Message]:
        check_conversation_id(conversation_id)
        key = self._key(conversation_id)

        def attempt(pipe: Any) -> list[Message]:
            raw = [_text(r) for r in pipe.lrange(key, 0, -1)]
            result = check_messages(fn([message_from_json(r) for r in raw]))
            wanted = [message_to_json(m) for m in result]
            plan = plan_rows(raw, wanted)
            pipe.multi()
            if plan.delete:
                # Lists cannot drop items by position cheaply and safely; rewrite the whole list.
                pipe.delete(key)
                if wanted:
                    pipe.rpush(key, *wanted)
            elif plan.append:
                pipe.rpush(key, *plan.append)
            if wanted:
                pipe.sadd(self._index, conversation_id)
                if self.ttl is not None:
                    pipe.expire(key, self.ttl)
            else:
                pipe.srem(self._index, conversation_id)
            return result

        with self._errors.operation(operation):
            outcome: list[Message] = self.client.transaction(attempt, key, value_from_callable=True)
        return outcome

    def close(self) -> None:
        """Close the client's connections; ``ChatMemoryError`` if that fails."""
        with self._errors.operation("close"):
            self.client.close()

    def __repr__(self) -> str:
        return f"RedisChatMemoryRepository(prefix={self.prefix!r})"


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
