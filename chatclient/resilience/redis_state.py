"""Shared state in Redis for fleet-wide limits: one ``RateLimiter`` and one ``Budget`` for N processes.

``RedisState(url)`` opens its client lazily and pickles as its URL (a process that unpickles a
limiter opens its own connection). Every operation is one atomic Lua script or one transaction, so
processes never read and write around each other. When Redis cannot be reached the call raises
``SharedStateError`` naming host and port (the password is never shown); a limiter or budget built
with ``on_redis_error="local"`` instead logs a warning and keeps counting in the process until
Redis answers again.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from chatclient.errors import SharedStateError
from chatclient.memory._errors import connection_secrets, scrub_text
from chatclient.redaction import Secret

__all__ = ["RedisState"]


def _redis() -> Any:
    try:
        import redis
    except ImportError:
        raise ImportError(
            "a Redis-backed RateLimiter or Budget needs redis-py: pip install 'chatclient[redis]'"
        ) from None
    return redis


class RedisState:
    """A lazily opened Redis client for ``url``, with typed errors; pickles as ``(url, timeout)``."""

    def __init__(self, url: str, *, timeout: float = 2.0) -> None:
        if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError(f"redis_url must be a redis://, rediss:// or unix:// URL, got {type(url).__name__}")
        self._url = Secret(url)  # may carry a password: kept out of repr(vars(state))
        self.timeout = timeout
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        self._lock = threading.Lock()
        parts = urlsplit(url)
        self.where = parts.path if parts.scheme == "unix" else f"{parts.hostname or 'localhost'}:{parts.port or 6379}"
        self._secrets = Secret(tuple(connection_secrets(url)))

    @property
    def url(self) -> str:
        """The Redis URL as given (password included: never for a message)."""
        return str(self._url.reveal())

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["url"], timeout=state["timeout"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"RedisState({scrub_text(self.url, self._secrets.reveal())!r})"

    def client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    redis = _redis()
                    self._client = redis.Redis.from_url(
                        self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout
                    )
        return self._client

    def error(self, operation: str, exc: BaseException) -> SharedStateError:
        reason = " ".join(scrub_text(f"{type(exc).__name__}: {exc}", self._secrets.reveal()).split())[:300]
        return SharedStateError(
            f"shared {operation} state: Redis at {self.where} failed ({reason}); is Redis running at {self.where}, "
            "and are the URL's database number, user and password right? (on_redis_error='local' keeps counting "
            "in this process while Redis is away)",
            where=self.where,
        )

    def script(self, name: str, source: str, keys: Sequence[str], args: Sequence[Any], *, operation: str) -> Any:
        """Run a Lua script atomically; a driver failure becomes ``SharedStateError``."""
        redis = _redis()
        try:
            found = self._scripts.get(name)
            if found is None:
                found = self._scripts[name] = self.client().register_script(source)
            return found(keys=list(keys), args=list(args))
        except redis.exceptions.RedisError as exc:
            raise self.error(operation, exc) from None

    def call(self, operation: str, fn: Any) -> Any:
        """``fn(client)`` with driver failures turned into ``SharedStateError``."""
        redis = _redis()
        try:
            return fn(self.client())
        except redis.exceptions.RedisError as exc:
            raise self.error(operation, exc) from None
