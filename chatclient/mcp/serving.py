"""What a tool served by ``serve()`` can do while it runs: log, report progress, ask the user, sample.

A served tool declares a ``ToolContext`` parameter and gets the MCP request's handle from it::

    @tool
    async def index(path: str, ctx: ToolContext) -> str:
        mcp = mcp_server_context(ctx)
        await mcp.alog("info", f"indexing {path}")
        await mcp.aprogress(50, 100, "half way")
        return "done"

Sync tools (run on a worker thread) use the methods without the ``a``: ``mcp.log(...)``,
``mcp.progress(...)``. ``ResourceChanges`` tells subscribed clients that a served resource changed,
and ``EmbeddedResource`` is a ``Media`` with a URI that a tool returns to send MCP embedded-resource
content.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from chatclient.errors import McpError
from chatclient.messages import Media
from chatclient.tools.context import ToolContext

CONTEXT_KEY = "chatclient.mcp.server"
"""The ``ToolContext`` key under which ``serve()`` hands a tool its ``McpServerContext``."""

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "info"
MAX_LOG_DATA_CHARS = 16_384
"""A log message longer than this is cut before it is sent (a client's log view is no place for megabytes)."""

MAX_SUBSCRIPTIONS = 10_000
"""Resource subscriptions one ``ResourceChanges`` keeps, over all clients and URIs."""

_log = logging.getLogger("chatclient.mcp")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class EmbeddedResource(Media):
    """A ``Media`` with a URI: a served tool returning it sends MCP ``resource`` content.

    Text MIME types (``text/*``, JSON, XML) travel as text, anything else as base64 ``blob``. To a
    local model it is an ordinary ``Media`` attachment.

    >>> EmbeddedResource("text/plain", b"hello", uri="notes://greeting").uri
    'notes://greeting'
    """

    uri: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or "://" not in self.uri:
            raise ValueError(f"an EmbeddedResource needs a URI with a scheme, e.g. 'notes://x', got {self.uri!r}")


class _LogLevels:
    """The level each client connection asked for with ``logging/setLevel`` (default ``info``)."""

    def __init__(self) -> None:
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    def set(self, connection: Any, level: str) -> None:
        self._levels[connection] = level

    def allows(self, connection: Any, level: str) -> bool:
        wanted = self._levels.get(connection, DEFAULT_LOG_LEVEL)
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted)


def connection_of(session: Any) -> Any:
    """The long-lived connection behind a request's SDK session (the SDK makes one session per request;
    per-client state such as the log level and subscriptions must outlive it)."""
    return getattr(session, "_connection", session)


class McpServerContext:
    """The MCP request a served tool is answering: log to the client, report progress, elicit, sample.

    Get it with ``mcp_server_context(ctx)``. Every method has an async form (``alog``) for async
    tools and a blocking form (``log``) for sync tools, which run on worker threads.
    """

    __slots__ = ("_levels", "_loop", "_request_id", "_session")

    def __init__(self, session: Any, request_id: Any, levels: _LogLevels, loop: asyncio.AbstractEventLoop) -> None:
        self._session = session
        self._request_id = request_id
        self._levels = levels
        self._loop = loop

    def __repr__(self) -> str:
        return f"McpServerContext(request_id={self._request_id!r})"

    async def alog(self, level: LogLevel, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` to the client, unless it asked for a higher level."""
        from chatclient.mcp._sdk import types

        if level not in LOG_LEVELS:
            raise ValueError(f"log level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
        if not self._levels.allows(connection_of(self._session), level):
            return
        if isinstance(data, str) and len(data) > MAX_LOG_DATA_CHARS:
            data = data[:MAX_LOG_DATA_CHARS] + f" [... {len(data) - MAX_LOG_DATA_CHARS} characters cut]"
        params = types.LoggingMessageNotificationParams(level=level, data=data, logger=logger)
        await self._session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=self._request_id
        )

    async def aprogress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` for this call (nothing when the client gave no progress token)."""
        await self._session.report_progress(float(progress), None if total is None else float(total), message)

    async def aelicit(self, message: str, requested_schema: Mapping[str, Any]) -> dict[str, Any]:
        """Ask the user through the client (``elicitation/create``, form mode).

        Returns the client's answer as a dict: ``{"action": "accept"|"decline"|"cancel", "content": {...}}``.
        """
        result = await self._session.elicit_form(message, dict(requested_schema), related_request_id=self._request_id)
        return dict(result.model_dump(mode="json", exclude_none=True))

    async def asample(self, prompt: str, *, max_tokens: int = 512, system_prompt: str | None = None) -> str:
        """Ask the client's model (``sampling/createMessage``) and return its text answer."""
        from chatclient.mcp._sdk import types

        message = types.SamplingMessage(role="user", content=types.TextContent(text=prompt))
        result = await self._session.create_message(
            [message], max_tokens=max_tokens, system_prompt=system_prompt, related_request_id=self._request_id
        )
        content = result.content
        return str(getattr(content, "text", "") or "")

    def log(self, level: LogLevel, data: Any, logger: str | None = None) -> None:
        """Blocking ``alog`` for sync tools."""
        self._blocking(self.alog(level, data, logger))

    def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Blocking ``aprogress`` for sync tools."""
        self._blocking(self.aprogress(progress, total, message))

    def elicit(self, message: str, requested_schema: Mapping[str, Any]) -> dict[str, Any]:
        """Blocking ``aelicit`` for sync tools."""
        return self._blocking(self.aelicit(message, requested_schema))

    def sample(self, prompt: str, *, max_tokens: int = 512, system_prompt: str | None = None) -> str:
        """Blocking ``asample`` for sync tools."""
        return self._blocking(self.asample(prompt, max_tokens=max_tokens, system_prompt=system_prompt))

    def _blocking(self, coro: Coroutine[Any, Any, _T]) -> _T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coro.close()
            raise McpError("a blocking McpServerContext method was called from an async tool; await the 'a' method")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()


def mcp_server_context(ctx: ToolContext) -> McpServerContext:
    """The ``McpServerContext`` of a tool running under ``serve()``; ``McpError`` anywhere else."""
    found = ctx.get(CONTEXT_KEY)
    if not isinstance(found, McpServerContext):
        raise McpError("this tool is not running under chatclient.mcp.serve(): no MCP request to report to")
    return found


class ResourceChanges:
    """Tell subscribed clients that a served resource changed (``notifications/resources/updated``).

    Pass one to ``serve(..., resource_changes=changes)`` and call ``changes.changed(uri)`` from any
    thread (or ``await changes.achanged(uri)`` on the server's loop); only clients that sent
    ``resources/subscribe`` for that URI are told. With it, the server offers subscriptions.
    Subscribers are held weakly: a client that goes away without unsubscribing is forgotten.
    """

    def __init__(self, *, max_subscriptions: int = MAX_SUBSCRIPTIONS) -> None:
        self._subscribers: dict[str, weakref.WeakSet[Any]] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.max_subscriptions = max_subscriptions

    def _count(self) -> int:
        # A connection that went away without unsubscribing leaves an empty set behind: drop those,
        # or clients coming and going would grow the table by one URI each without bound.
        for uri in [uri for uri, subscribers in self._subscribers.items() if not subscribers]:
            del self._subscribers[uri]
        return sum(len(s) for s in self._subscribers.values())

    def subscribe(self, uri: str, session: Any) -> None:
        """Record ``session``'s client as a subscriber of ``uri`` (the server calls this).

        ``McpError`` past ``max_subscriptions`` in all (a template matches endless URIs: clients
        must not be able to grow the table without bound)."""
        self._loop = asyncio.get_running_loop()
        with self._lock:
            if self._count() >= self.max_subscriptions:
                import gc

                gc.collect()  # connections that closed may still sit in reference cycles: free them first
                if self._count() >= self.max_subscriptions:
                    raise McpError(f"this server keeps at most {self.max_subscriptions} resource subscriptions")
            self._subscribers.setdefault(uri, weakref.WeakSet()).add(connection_of(session))

    def unsubscribe(self, uri: str, session: Any) -> None:
        """Forget ``session``'s client for ``uri`` (unknown subscriptions are ignored)."""
        with self._lock:
            subscribers = self._subscribers.get(uri)
            if subscribers is not None:
                subscribers.discard(connection_of(session))
                if not subscribers:
                    del self._subscribers[uri]

    def subscribed(self, uri: str) -> int:
        """How many client connections are subscribed to ``uri``."""
        with self._lock:
            return len(self._subscribers.get(uri, ()))

    async def achanged(self, uri: str) -> None:
        """Notify every subscriber of ``uri``; a subscriber whose connection is gone is dropped."""
        with self._lock:
            connections = list(self._subscribers.get(uri, ()))
        for connection in connections:
            try:
                await connection.send_resource_updated(uri)
            except Exception as exc:  # a closed connection: forget it, keep telling the others
                _log.debug("dropping a subscriber of %s: %s", uri[:200], type(exc).__name__)
                with self._lock:
                    self._subscribers.get(uri, weakref.WeakSet()).discard(connection)

    def changed(self, uri: str) -> None:
        """Thread-safe ``achanged``: schedules the notifications on the server's loop (no-op before any subscription)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(self.achanged(uri))
        else:
            asyncio.run_coroutine_threadsafe(self.achanged(uri), loop)


CompletionSource = Iterable[str] | Callable[..., "Iterable[str] | Awaitable[Iterable[str]]"]
"""Values for one argument: a list, or ``fn(value, context)`` (sync or async) returning candidates."""

MAX_COMPLETIONS = 100
"""The MCP limit on values in one ``completion/complete`` answer."""
MAX_CANDIDATES = 10_000
"""How many candidates a completion source is read for (a generator may be endless)."""


def choices_of(annotation: Any) -> list[str]:
    """The string choices a ``Literal[...]`` or ``Enum`` annotation allows (empty for anything else)."""
    import enum
    import typing

    if typing.get_origin(annotation) is Literal:
        return [str(v) for v in typing.get_args(annotation)]
    if inspect.isclass(annotation) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    return []


async def complete_values(source: CompletionSource, value: str, context: Mapping[str, str]) -> tuple[list[str], int]:
    """The candidates ``source`` offers for ``value``: prefix-filtered when it is a list, at most 100."""
    if callable(source):
        produced = source(value, context)
        if inspect.isawaitable(produced):
            produced = await produced
        candidates = [str(v) for v in itertools.islice(produced, MAX_CANDIDATES)]  # type: ignore[call-overload]
    else:
        candidates = [str(v) for v in itertools.islice(source, MAX_CANDIDATES) if str(v).startswith(value)]
    return candidates[:MAX_COMPLETIONS], len(candidates)


__all__ = [
    "CONTEXT_KEY",
    "CompletionSource",
    "EmbeddedResource",
    "LogLevel",
    "McpServerContext",
    "ResourceChanges",
    "mcp_server_context",
]
