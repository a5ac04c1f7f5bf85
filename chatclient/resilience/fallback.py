"""``FallbackChatModel``: try the next model when one is down, throttled, overloaded or out of room.

It is a ``ChatModel`` itself, so every advisor works on top of it unchanged, in all four modes.
Each wrapped model has its own ``CircuitBreaker``: a model whose breaker is open is skipped without
a call. A stream falls back only while nothing has been emitted; once the first chunk went out, an
error reaches the caller (a second model cannot continue the first one's sentence).

    model = FallbackChatModel(primary, backup, on=("rate_limit", "server_error", "connection", "timeout"))
    client = ChatClient.create(model)
    r = client.prompt("hi").call().chat_response()
    r.metadata.extra["fallback_model"]   # which model answered
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any

from chatclient.errors import (
    CircuitOpenError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models.base import BaseChatModel, ChatModel, ChatResponse
from chatclient.options import ChatOptions
from chatclient.prompt import Prompt
from chatclient.resilience._common import annotate_span, common_capabilities, unique_labels
from chatclient.resilience.breaker import CircuitBreaker

__all__ = ["DEFAULT_TRIGGERS", "TRIGGERS", "FallbackChatModel", "fallback_trigger"]

TRIGGERS = ("connection", "timeout", "rate_limit", "server_error", "overloaded", "context_length", "circuit_open")
"""The names ``on=`` accepts."""

DEFAULT_TRIGGERS = TRIGGERS
"""Every trigger: by default any of these moves on to the next model."""

_CONTEXT_LENGTH = re.compile(
    r"context[ _-]?length|context window|maximum context|prompt is too long|too many tokens|"
    r"input is too long|reduce the length",
    re.IGNORECASE,
)
_OVERLOADED = re.compile(r"overloaded", re.IGNORECASE)


def fallback_trigger(error: BaseException) -> str | None:
    """The trigger name ``error`` matches (one of ``TRIGGERS``), or ``None`` for any other error.

    >>> fallback_trigger(RateLimitError("slow down"))
    'rate_limit'
    """
    if isinstance(error, CircuitOpenError):
        return "circuit_open"
    if isinstance(error, ModelConnectionError):
        return "connection"
    if isinstance(error, ModelTimeoutError):
        return "timeout"
    if isinstance(error, RateLimitError):
        return "rate_limit"
    if isinstance(error, ModelHTTPError):
        kind = " ".join(str(x) for x in (error.type, error.code) if x)
        if error.status == 529 or _OVERLOADED.search(kind):
            return "overloaded"
        text = " ".join(str(x) for x in (error.code, error.type, error.body, str(error)) if x)
        if error.status in (400, 413, 422) and _CONTEXT_LENGTH.search(text):
            return "context_length"
        if error.status is not None and error.status >= 500:
            return "server_error"
        return None
    if isinstance(error, ModelError) and _OVERLOADED.search(str(error)):
        return "overloaded"
    return None


# Triggers that say the model itself is unhealthy (they count against its breaker); a context-length
# error says only that this prompt is too long for it.
_HEALTH = frozenset({"connection", "timeout", "rate_limit", "server_error", "overloaded"})

FallbackOn = Iterable[str | type[BaseException]] | Callable[[BaseException], bool]


class _Trigger:
    """Whether an error moves on to the next model: one of ``kinds``, or a trigger named in ``names``
    (``names=None``: any known trigger). A class, not a closure, so the model pickles."""

    __slots__ = ("kinds", "names")

    def __init__(self, kinds: tuple[type[BaseException], ...] = (), names: frozenset[str] | None = None) -> None:
        self.kinds = kinds
        self.names = names

    def __call__(self, error: BaseException) -> bool:
        if self.names is None:
            return fallback_trigger(error) is not None
        return isinstance(error, self.kinds) or fallback_trigger(error) in self.names

    def __getstate__(self) -> tuple[tuple[type[BaseException], ...], frozenset[str] | None]:
        return self.kinds, self.names

    def __setstate__(self, state: tuple[tuple[type[BaseException], ...], frozenset[str] | None]) -> None:
        self.kinds, self.names = state


def _predicate(on: FallbackOn | None) -> Callable[[BaseException], bool]:
    if on is None:
        return _Trigger()
    if callable(on) and not isinstance(on, type):
        return on
    names: set[str] = set()
    kinds: list[type[BaseException]] = []
    for item in on:  # type: ignore[union-attr]
        if isinstance(item, type) and issubclass(item, BaseException):
            kinds.append(item)
        elif isinstance(item, str) and item in TRIGGERS:
            names.add(item)
        else:
            raise ValueError(f"on= takes trigger names ({', '.join(TRIGGERS)}) or exception classes, got {item!r}")
    return _Trigger(tuple(kinds), frozenset(names))


def _retry_after(error: BaseException) -> float | None:
    value = getattr(error, "retry_after", None)
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


class FallbackChatModel(BaseChatModel):
    """A chat model that answers with ``primary`` and falls back to ``fallbacks`` in order.

    ``on`` says which errors move on to the next model: trigger names from ``TRIGGERS``
    (``"connection"``, ``"timeout"``, ``"rate_limit"``, ``"server_error"`` (5xx), ``"overloaded"``,
    ``"context_length"``, ``"circuit_open"``), exception classes, or a predicate
    ``fn(error) -> bool``; by default all the triggers. Any other error is raised at once.

    ``breaker`` is a template: each model gets its own ``breaker.clone()``. Pass ``breakers=`` (one
    per model) to share breakers between wrappers of the same model. Connection errors, timeouts,
    429s, 5xx and overloaded answers count as failures; a ``Retry-After`` opens the breaker for that
    long. When every model failed, the last model's error is raised (the others are in its
    ``__notes__``); when every breaker was open, ``CircuitOpenError``.

    The answer's metadata ``extra`` gets ``fallback_model`` (the label of the model that answered) and
    ``fallback_failed`` (labels and error types of the models tried or skipped before it); the same
    label goes on the current span (``chatclient.fallback.model``) when observation is on.
    """

    def __init__(
        self,
        primary: ChatModel,
        *fallbacks: ChatModel,
        on: FallbackOn | None = None,
        breaker: CircuitBreaker | None = None,
        breakers: Sequence[CircuitBreaker] | None = None,
        names: Sequence[str] | None = None,
        default_options: ChatOptions | None = None,
    ) -> None:
        models = (primary, *fallbacks)
        for m in models:
            if m is None or not callable(getattr(m, "call", None)):
                raise TypeError(f"FallbackChatModel wraps ChatModels, got {type(m).__name__}")
        self.models: tuple[ChatModel, ...] = models
        self._should_fall_back = _predicate(on)
        if breakers is not None:
            if len(breakers) != len(models):
                raise ValueError(f"breakers= needs one CircuitBreaker per model ({len(models)}), got {len(breakers)}")
            self.breakers: tuple[CircuitBreaker, ...] = tuple(breakers)
        else:
            template = (
                breaker if breaker is not None else CircuitBreaker(failure_threshold=5, window=60.0, reset_timeout=30.0)
            )
            self.breakers = tuple(template.clone() for _ in models)
        if names is not None and len(names) != len(models):
            raise ValueError(f"names= needs one name per model ({len(models)}), got {len(names)}")
        self.names: tuple[str, ...] = tuple(names) if names is not None else unique_labels(models)
        self.capabilities = common_capabilities(models)
        self.default_options = default_options

    def __repr__(self) -> str:
        return f"FallbackChatModel({', '.join(self.names)})"

    # -- bookkeeping ------------------------------------------------------------------------------

    def _failed(self, index: int, error: BaseException) -> bool:
        """Report ``error`` to the model's breaker; True when the next model should be tried."""
        breaker = self.breakers[index]
        if not isinstance(error, Exception):  # cancellation, interrupts: no verdict on the model
            breaker.release()
            return False
        trigger = fallback_trigger(error)
        if trigger in _HEALTH:
            breaker.record_failure(_retry_after(error))
        elif isinstance(error, ModelError):
            breaker.record_success()  # it answered, just not with what we wanted
        else:
            breaker.release()
        return bool(self._should_fall_back(error))

    def _mark(self, response: ChatResponse, index: int, failed: Sequence[str]) -> ChatResponse:
        annotate_span("chatclient.fallback.model", self.names[index])
        return response.with_metadata(fallback_model=self.names[index], fallback_failed=tuple(failed))

    def _exhausted(self, errors: list[BaseException], skipped: list[int]) -> BaseException:
        if errors:
            last = errors[-1]
            for i, err in enumerate(errors[:-1]):
                last.add_note(f"fallback attempt {i + 1} failed first: {type(err).__name__}: {str(err)[:200]}")
            if skipped:
                last.add_note(f"skipped with an open circuit: {', '.join(self.names[i] for i in skipped)}")
            return last
        wait = min(self.breakers[i].retry_in for i in skipped) if skipped else None
        names = ", ".join(self.names[i] for i in skipped)
        return CircuitOpenError(
            f"every model's circuit breaker is open ({names}); the first probe is allowed in {wait or 0:.1f} s - "
            "retry later or add another fallback model",
            model=names,
            retry_in=wait,
        )

    # -- the four modes ---------------------------------------------------------------------------

    def call(self, prompt: Prompt) -> ChatResponse:
        errors: list[BaseException] = []
        skipped: list[int] = []
        failed: list[str] = []
        for i, model in enumerate(self.models):
            if not self.breakers[i].allow():
                skipped.append(i)
                failed.append(f"{self.names[i]}: circuit open")
                continue
            try:
                response = model.call(prompt)
            except BaseException as exc:
                if not self._failed(i, exc):
                    raise
                errors.append(exc)
                failed.append(f"{self.names[i]}: {type(exc).__name__}")
                continue
            self.breakers[i].record_success()
            return self._mark(response, i, failed)
        raise self._exhausted(errors, skipped)

    async def acall(self, prompt: Prompt) -> ChatResponse:
        errors: list[BaseException] = []
        skipped: list[int] = []
        failed: list[str] = []
        for i, model in enumerate(self.models):
            if not self.breakers[i].allow():
                skipped.append(i)
                failed.append(f"{self.names[i]}: circuit open")
                continue
            try:
                response = await model.acall(prompt)
            except BaseException as exc:
                if not self._failed(i, exc):
                    raise
                errors.append(exc)
                failed.append(f"{self.names[i]}: {type(exc).__name__}")
                continue
            self.breakers[i].record_success()
            return self._mark(response, i, failed)
        raise self._exhausted(errors, skipped)

    def stream(self, prompt: Prompt) -> Iterator[ChatResponse]:
        errors: list[BaseException] = []
        skipped: list[int] = []
        failed: list[str] = []
        for i, model in enumerate(self.models):
            breaker = self.breakers[i]
            if not breaker.allow():
                skipped.append(i)
                failed.append(f"{self.names[i]}: circuit open")
                continue
            chunks: Iterator[ChatResponse] | None = None
            try:
                chunks = iter(model.stream(prompt))
                first = next(chunks, None)
            except BaseException as exc:
                _close(chunks)
                if not self._failed(i, exc):
                    raise
                errors.append(exc)
                failed.append(f"{self.names[i]}: {type(exc).__name__}")
                continue
            # From here on something was emitted: errors go to the caller, never to another model.
            try:
                if first is not None:
                    yield self._mark(first, i, failed)
                    for chunk in chunks:
                        yield self._mark(chunk, i, failed) if chunk.has_finish_reason() else chunk
            except GeneratorExit:
                breaker.release()
                raise
            except BaseException as exc:
                if isinstance(exc, Exception) and fallback_trigger(exc) in _HEALTH:
                    breaker.record_failure(_retry_after(exc))
                else:
                    breaker.release()
                raise
            finally:
                _close(chunks)
            breaker.record_success()
            return
        raise self._exhausted(errors, skipped)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        errors: list[BaseException] = []
        skipped: list[int] = []
        failed: list[str] = []
        for i, model in enumerate(self.models):
            breaker = self.breakers[i]
            if not breaker.allow():
                skipped.append(i)
                failed.append(f"{self.names[i]}: circuit open")
                continue
            chunks: AsyncIterator[ChatResponse] | None = None
            try:
                chunks = aiter(model.astream(prompt))
                first = await anext(chunks, None)
            except BaseException as exc:
                await _aclose(chunks)
                if not self._failed(i, exc):
                    raise
                errors.append(exc)
                failed.append(f"{self.names[i]}: {type(exc).__name__}")
                continue
            try:
                if first is not None:
                    yield self._mark(first, i, failed)
                    async for chunk in chunks:
                        yield self._mark(chunk, i, failed) if chunk.has_finish_reason() else chunk
            except GeneratorExit:
                breaker.release()
                raise
            except BaseException as exc:
                if isinstance(exc, Exception) and fallback_trigger(exc) in _HEALTH:
                    breaker.record_failure(_retry_after(exc))
                else:
                    breaker.release()
                raise
            finally:
                await _aclose(chunks)
            breaker.record_success()
            return
        raise self._exhausted(errors, skipped)


def _close(chunks: Any) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


async def _aclose(chunks: Any) -> None:
    aclose = getattr(chunks, "aclose", None)
    if aclose is not None:
        await aclose()
