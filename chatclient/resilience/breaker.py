"""A circuit breaker: stop sending calls to a model that keeps failing, then probe it again.

States: ``closed`` (calls flow; failures are counted in a sliding time window), ``open`` (calls are
refused until the open time passes) and ``half_open`` (exactly one probe call may go; its success
closes the breaker, its failure opens it again). A failure that carries a ``Retry-After`` (a 429 or
503 saying how long to wait) opens the breaker at once, for that long: the provider has told us
when to come back.

Every method takes one short lock and never blocks on I/O, so one breaker is safe to share across
threads and asyncio tasks.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from enum import StrEnum

from chatclient._pickling import PicklesWithoutLocks

__all__ = ["CircuitBreaker", "CircuitState"]


class CircuitState(StrEnum):
    """The three states of a ``CircuitBreaker``."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker(PicklesWithoutLocks):
    """Opens after ``failure_threshold`` failures within ``window`` seconds; stays open ``reset_timeout``
    seconds (or the failure's ``Retry-After``), then lets one probe call through.

    >>> breaker = CircuitBreaker(failure_threshold=2, window=60.0, reset_timeout=30.0)
    >>> breaker.allow()
    True
    >>> breaker.record_failure(); breaker.record_failure()
    >>> breaker.state
    <CircuitState.OPEN: 'open'>
    >>> breaker.allow()
    False

    ``clock`` (seconds, monotonic) is injectable for tests. ``clone()`` returns a fresh breaker with the
    same settings: ``FallbackChatModel`` gives each of its models its own clone.
    """

    def __init__(
        self,
        failure_threshold: int = 5,
        window: float = 60.0,
        reset_timeout: float = 30.0,
        *,
        max_open_time: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(failure_threshold, bool) or not isinstance(failure_threshold, int) or failure_threshold < 1:
            raise ValueError(f"failure_threshold must be an int >= 1, got {failure_threshold!r}")
        for label, value in (("window", window), ("reset_timeout", reset_timeout), ("max_open_time", max_open_time)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{label} must be a number of seconds > 0, got {value!r}")
        self.failure_threshold = failure_threshold
        self.window = float(window)
        self.reset_timeout = float(reset_timeout)
        # A server's Retry-After is honoured but bounded: a bogus "retry in a week" must not
        # take a model out of rotation for a week.
        self.max_open_time = float(max_open_time)
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: deque[float] = deque()
        self._state = CircuitState.CLOSED
        self._open_until = 0.0
        self._probe_out = False

    def clone(self) -> CircuitBreaker:
        """A new, closed breaker with the same settings."""
        return CircuitBreaker(
            self.failure_threshold,
            self.window,
            self.reset_timeout,
            max_open_time=self.max_open_time,
            clock=self._clock,
        )

    def __repr__(self) -> str:
        return (
            f"CircuitBreaker(state={self.state.value!r}, failure_threshold={self.failure_threshold}, "
            f"window={self.window}, reset_timeout={self.reset_timeout})"
        )

    # -- state ----------------------------------------------------------------------------------

    def _refresh(self, now: float) -> None:
        if self._state is CircuitState.OPEN and now >= self._open_until:
            self._state = CircuitState.HALF_OPEN
            self._probe_out = False

    @property
    def state(self) -> CircuitState:
        """The current state (an open breaker whose time has passed reads as half-open)."""
        with self._lock:
            self._refresh(self._clock())
            return self._state

    @property
    def retry_in(self) -> float:
        """Seconds until an open breaker lets a probe through (0 when closed or half-open)."""
        with self._lock:
            now = self._clock()
            self._refresh(now)
            return max(0.0, self._open_until - now) if self._state is CircuitState.OPEN else 0.0

    @property
    def failure_count(self) -> int:
        """Failures counted in the current window."""
        with self._lock:
            self._prune(self._clock())
            return len(self._failures)

    def _prune(self, now: float) -> None:
        horizon = now - self.window
        while self._failures and self._failures[0] <= horizon:
            self._failures.popleft()

    # -- protocol -------------------------------------------------------------------------------

    def allow(self) -> bool:
        """Whether a call may be sent now. In half-open state only the first caller gets ``True``
        (the probe); it must then report ``record_success``, ``record_failure`` or ``release``."""
        with self._lock:
            self._refresh(self._clock())
            if self._state is CircuitState.CLOSED:
                return True
            if self._state is CircuitState.HALF_OPEN and not self._probe_out:
                self._probe_out = True
                return True
            return False

    def record_success(self) -> None:
        """The call went through: a half-open breaker closes and forgets its failures."""
        with self._lock:
            self._refresh(self._clock())
            if self._state is CircuitState.HALF_OPEN:
                self._state = CircuitState.CLOSED
                self._failures.clear()
            self._probe_out = False

    def record_failure(self, retry_after: float | None = None) -> None:
        """The call failed in a way that says the model is unhealthy.

        With ``retry_after`` (seconds, from the provider) the breaker opens at once for that long;
        otherwise it opens when the window holds ``failure_threshold`` failures, or when a half-open
        probe fails.
        """
        with self._lock:
            now = self._clock()
            self._refresh(now)
            self._probe_out = False
            if retry_after is not None and retry_after > 0:
                self._open(now, min(float(retry_after), self.max_open_time))
                return
            if self._state is CircuitState.HALF_OPEN:
                self._open(now, self.reset_timeout)
                return
            if self._state is CircuitState.OPEN:
                return
            self._prune(now)
            self._failures.append(now)
            if len(self._failures) >= self.failure_threshold:
                self._open(now, self.reset_timeout)

    def release(self) -> None:
        """Give back a probe permit without an outcome (the call was abandoned before it answered)."""
        with self._lock:
            self._probe_out = False

    def reset(self) -> None:
        """Close the breaker and forget every failure."""
        with self._lock:
            self._state = CircuitState.CLOSED
            self._failures.clear()
            self._open_until = 0.0
            self._probe_out = False

    def _open(self, now: float, seconds: float) -> None:
        self._state = CircuitState.OPEN
        self._open_until = max(self._open_until, now + seconds) if self._open_until > now else now + seconds
        self._failures.clear()
