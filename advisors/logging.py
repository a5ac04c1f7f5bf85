"""SimpleLoggerAdvisor: log each request and response through the standard ``logging`` module.

By default the advisor writes to the stdlib logger ``chatclient.advisors.logging`` (a child of
``chatclient``) through a structlog ``BoundLogger`` that is wrapped locally, so structlog is never
configured globally for your application. Python's logging decides where lines go (stderr with
``logging.basicConfig``; nothing is ever printed to stdout) and at which level they appear:

- DEBUG: ``chat_client.request`` and ``chat_client.response`` with the message texts, options,
  tool calls and usage;
- INFO: one ``chat_client.summary`` line per call (model, tokens, finish reason, milliseconds).

Both levels are constructor arguments, so ``SimpleLoggerAdvisor(level="DEBUG")`` keeps even the
summary out of an INFO-level log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, fields
from typing import Any

import structlog

from chatclient.advisor import (
    AdvisorChain,
    AsyncCallAdvisor,
    AsyncStreamAdvisor,
    CallAdvisor,
    StreamAdvisor,
)
from chatclient.models.base import ChatResponse, ResponseAggregator
from chatclient.request import ChatClientRequest, ChatClientResponse

LOGGER_NAME = "chatclient.advisors.logging"
"""The stdlib logger the advisor writes to unless given another one."""

_METHOD_OF_LEVEL = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


def describe_request(request: ChatClientRequest) -> str:
    """Default request formatter: message roles and texts, the options that are set, tools, context keys."""
    lines = [f"{m.type.value}: {m.text}" for m in request.prompt.messages]
    options = request.prompt.options
    if options is not None:
        # Only what was set: a row of "None"s hides the one option that matters.
        given = [
            f"{f.name}={getattr(options, f.name)!r}" for f in fields(options) if getattr(options, f.name) is not None
        ]
        if given:
            lines.append("options: " + ", ".join(given))
    if request.prompt.tools:
        lines.append("tools: " + ", ".join(t.name for t in request.prompt.tools))
    if request.context:
        lines.append("context keys: " + ", ".join(sorted(map(str, request.context))))
    return "\n".join(lines)


def describe_response(response: ChatResponse | None) -> str:
    """Default response formatter: text, refusal, reasoning, tool calls, finish reason, usage, model."""
    if response is None:
        return "no response"
    parts = []
    for g in response.generations:
        parts.append(f"text: {g.output.text}")
        if g.output.refusal:
            parts.append(f"refusal: {g.output.refusal}")
        if g.output.reasoning_text:
            parts.append(f"reasoning: {g.output.reasoning_text}")
        for call in g.output.tool_calls:
            parts.append(f"tool call: {call.name}({call.arguments})")
        parts.append(f"finish_reason: {g.metadata.finish_reason}")
    u = response.metadata.usage
    usage = f"usage: prompt={u.prompt_tokens} completion={u.completion_tokens} total={u.total_tokens}"
    if u.cached_input_tokens:
        usage += f" cached_input={u.cached_input_tokens}"
    if u.reasoning_tokens:
        usage += f" reasoning={u.reasoning_tokens}"
    parts.append(usage)
    if response.metadata.model:
        parts.append(f"model: {response.metadata.model}")
    return "\n".join(parts)


def _level(value: int | str | None, what: str) -> int | None:
    if value is None:
        return None
    number = logging.getLevelName(value.upper()) if isinstance(value, str) else value
    if isinstance(number, bool) or number not in _METHOD_OF_LEVEL:
        raise ValueError(
            f"{what} must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL (or None to turn it off), got {value!r}"
        )
    return int(number)


def format_event(event: str, fields_: Mapping[str, Any]) -> str:
    """Render one event as text: ``event key=value ...`` on the first line, multi-line values indented below."""
    head = [event]
    blocks = []
    for key, value in fields_.items():
        text = str(value)
        if "\n" in text:
            blocks.append(f"  {key}:\n" + "\n".join("    " + line for line in text.splitlines()))
        elif len(text) > 80 or " " in text:
            blocks.append(f"  {key}: {text}")
        else:
            head.append(f"{key}={text}")
    return "\n".join([" ".join(head), *blocks])


def _to_stdlib(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> Mapping[str, Any]:
    # The last structlog processor: hand the stdlib logger a readable message, and the fields as
    # record attributes (``record.chatclient``) for JSON or other structured formatters.
    event = str(event_dict.pop("event", ""))
    return {"msg": format_event(event, event_dict), "extra": {"chatclient": {"event": event, **event_dict}}}


def stdlib_logger(logger: logging.Logger | str = LOGGER_NAME) -> Any:
    """A structlog ``BoundLogger`` writing to a stdlib logger (by name or object), without global structlog setup."""
    target = logging.getLogger(logger) if isinstance(logger, str) else logger
    return structlog.wrap_logger(
        target,
        processors=[_to_stdlib],
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
        cache_logger_on_first_use=True,
    )


# What a structlog ``BoundLoggerLazyProxy`` (``wrap_logger`` / ``get_logger`` with caching) is built
# from, in its constructor's order. The proxy itself cannot be pickled once used: its first ``bind``
# caches a local function on the instance. It travels as these parts and is built again on arrival.
_PROXY_PARTS = (
    "_logger",
    "_wrapper_class",
    "_processors",
    "_context_class",
    "_cache_logger_on_first_use",
    "_initial_values",
    "_logger_factory_args",
)


@dataclass(frozen=True)
class _LazyLoggerRecipe:
    """A pickled structlog lazy proxy: its class and constructor arguments."""

    cls: type
    parts: tuple[Any, ...]

    def build(self) -> Any:
        return self.cls(*self.parts)


def _recipe(logger: Any) -> _LazyLoggerRecipe | None:
    if type(logger).__name__ != "BoundLoggerLazyProxy" or not all(hasattr(logger, p) for p in _PROXY_PARTS):
        return None
    parts = [getattr(logger, p) for p in _PROXY_PARTS]
    if parts[2] is not None:
        parts[2] = list(parts[2])  # processors may be any iterable
    return _LazyLoggerRecipe(type(logger), tuple(parts))


class SimpleLoggerAdvisor(CallAdvisor, StreamAdvisor, AsyncCallAdvisor, AsyncStreamAdvisor):
    """Logs each request and response (``body_level``, DEBUG) and a one-line summary (``level``, INFO).

    Events: ``chat_client.request`` before the call, ``chat_client.response`` after it, then
    ``chat_client.summary`` with ``model``, ``prompt_tokens``, ``completion_tokens``,
    ``total_tokens``, ``finish_reason`` and ``duration_ms`` (or ``error`` when the call raised).
    Streams are logged once, on the aggregate of all chunks.

    ``logger`` is a stdlib ``logging.Logger`` or logger name (routed the same way as the default
    ``chatclient.advisors.logging``), or any structlog-style logger with ``debug``/``info`` methods
    taking ``(event, **fields)`` — ``structlog.get_logger()`` uses your global structlog setup.
    ``level``/``body_level`` accept a level number or name; ``None`` turns that part off.
    ``request_to_str``/``response_to_str`` change how bodies are rendered; they run only when the
    body level is enabled. Requests carry no credentials (providers keep API keys in their HTTP
    headers), so nothing secret can reach the log through this advisor.

    >>> import logging
    >>> quiet = SimpleLoggerAdvisor(level=logging.DEBUG)   # summary only in a DEBUG log
    """

    def __init__(
        self,
        *,
        request_to_str: Callable[[ChatClientRequest], str] | None = None,
        response_to_str: Callable[[ChatResponse | None], str] | None = None,
        logger: Any = None,
        level: int | str | None = logging.INFO,
        body_level: int | str | None = logging.DEBUG,
        order: int = 0,
    ) -> None:
        self.request_to_str = request_to_str or describe_request
        self.response_to_str = response_to_str or describe_response
        if logger is None:
            logger = stdlib_logger()
        elif isinstance(logger, (logging.Logger, str)):
            logger = stdlib_logger(logger)
        self.logger = logger
        self.level = _level(level, "level")
        self.body_level = _level(body_level, "body_level")
        self.order = order

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        recipe = _recipe(state.get("logger"))
        if recipe is not None:
            state["logger"] = recipe
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        logger = state.get("logger")
        if isinstance(logger, _LazyLoggerRecipe):
            state = {**state, "logger": logger.build()}
        self.__dict__.update(state)

    def _enabled(self, level: int | None) -> bool:
        if level is None:
            return False
        check = getattr(self.logger, "isEnabledFor", None)
        return bool(check(level)) if callable(check) else True

    def _emit(self, level: int, event: str, **fields_: Any) -> None:
        getattr(self.logger, _METHOD_OF_LEVEL[level])(event, **fields_)

    def _log_request(self, request: ChatClientRequest) -> float:
        if self.body_level is not None and self._enabled(self.body_level):
            self._emit(self.body_level, "chat_client.request", advisor=self.name, request=self.request_to_str(request))
        return time.perf_counter()

    def _log_response(
        self, request: ChatClientRequest, response: ChatResponse | None, started: float, mode: str
    ) -> None:
        if self.body_level is not None and self._enabled(self.body_level):
            self._emit(
                self.body_level, "chat_client.response", advisor=self.name, response=self.response_to_str(response)
            )
        if self.level is not None and self._enabled(self.level):
            self._emit(self.level, "chat_client.summary", **_summary(request, response, started, mode))

    def _log_failure(self, request: ChatClientRequest, error: BaseException, started: float, mode: str) -> None:
        if self.level is not None and self._enabled(self.level):
            fields_ = _summary(request, None, started, mode)
            fields_["error"] = type(error).__name__
            self._emit(self.level, "chat_client.summary", **fields_)

    def advise_call(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        started = self._log_request(request)
        try:
            response = chain.next_call(request)
        except Exception as exc:
            self._log_failure(request, exc, started, "call")
            raise
        self._log_response(request, response.chat_response, started, "call")
        return response

    async def advise_acall(self, request: ChatClientRequest, chain: AdvisorChain) -> ChatClientResponse:
        started = self._log_request(request)
        try:
            response = await chain.next_acall(request)
        except Exception as exc:
            self._log_failure(request, exc, started, "acall")
            raise
        self._log_response(request, response.chat_response, started, "acall")
        return response

    def advise_stream(self, request: ChatClientRequest, chain: AdvisorChain) -> Iterator[ChatClientResponse]:
        started = self._log_request(request)
        aggregator = ResponseAggregator()
        try:
            for response in chain.next_stream(request):
                aggregator.add(response.chat_response)
                yield response
        except Exception as exc:
            self._log_failure(request, exc, started, "stream")
            raise
        self._log_response(request, aggregator.result(), started, "stream")

    async def advise_astream(
        self, request: ChatClientRequest, chain: AdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        started = self._log_request(request)
        aggregator = ResponseAggregator()
        try:
            async for response in chain.next_astream(request):
                aggregator.add(response.chat_response)
                yield response
        except Exception as exc:
            self._log_failure(request, exc, started, "astream")
            raise
        self._log_response(request, aggregator.result(), started, "astream")


def _summary(request: ChatClientRequest, response: ChatResponse | None, started: float, mode: str) -> dict[str, Any]:
    """The one-line summary's fields; unknown values are left out rather than logged as None."""
    out: dict[str, Any] = {}
    model = response.metadata.model if response is not None else None
    if not model and request.prompt.options is not None:
        model = request.prompt.options.model
    if model:
        out["model"] = model
    out["mode"] = mode
    if response is not None:
        u = response.metadata.usage
        out["prompt_tokens"] = u.prompt_tokens
        out["completion_tokens"] = u.completion_tokens
        out["total_tokens"] = u.total_tokens
        finish = response.result.metadata.finish_reason if response.result is not None else None
        if finish:
            out["finish_reason"] = finish
    out["duration_ms"] = round((time.perf_counter() - started) * 1000)
    return out
