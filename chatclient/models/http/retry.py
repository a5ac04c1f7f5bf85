"""The retry policy: which failures are worth another attempt, and how long to wait before it."""

from __future__ import annotations

import random
from collections.abc import Mapping

import httpx

from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelRequestError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models.http.error_mapping import parse_retry_after

RETRY_STATUSES = frozenset({408, 409, 429})


class RetryPolicy:
    """When to retry and how long to wait.

    The n-th retry waits ``backoff_base * 2**n`` seconds (at most ``backoff_max``), scaled by a
    random factor in [0.5, 1) so that many clients do not retry in lockstep. A server's
    ``Retry-After`` wins when it is at most ``max_retry_after``; a longer one ends the retries at
    once, since silently blocking for minutes is worse than raising ``RateLimitError``.
    """

    __slots__ = ("backoff_base", "backoff_max", "max_retries", "max_retry_after")

    def __init__(
        self,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
        max_retry_after: float = 60.0,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if backoff_base < 0 or backoff_max < 0:
            raise ValueError("backoff delays must be >= 0")
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after

    @staticmethod
    def is_retryable(error: ModelError, headers: Mapping[str, str] | httpx.Headers | None = None) -> bool:
        """Whether a failure is worth another attempt."""
        if isinstance(error, ModelRequestError | AuthenticationError):
            return False  # the same request cannot succeed, whatever the server hints
        if headers is not None:
            # OpenAI and Anthropic tell clients explicitly; respect it either way.
            hint = headers.get("x-should-retry")
            if hint == "true":
                return True
            if hint == "false":
                return False
        if isinstance(error, ModelTimeoutError | ModelConnectionError):
            return True
        if isinstance(error, ModelHTTPError) and error.status is not None:
            return error.status in RETRY_STATUSES or error.status >= 500
        return False

    def delay(
        self, retries_done: int, error: ModelError, headers: Mapping[str, str] | httpx.Headers | None = None
    ) -> float | None:
        """Seconds to wait before the next attempt, or ``None`` to give up and raise ``error``."""
        if retries_done >= self.max_retries or not self.is_retryable(error, headers):
            return None
        asked = parse_retry_after(headers) if headers is not None else None
        if asked is None and isinstance(error, RateLimitError):
            asked = error.retry_after
        if asked is not None:
            return asked if asked <= self.max_retry_after else None
        base = min(self.backoff_max, self.backoff_base * (2.0**retries_done))
        return base * (0.5 + random.random() / 2)
