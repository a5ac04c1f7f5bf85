"""``McpClient``: one connection to a Model Context Protocol server, over stdio, streamable HTTP or SSE.

The connection is the official SDK's ``ClientSession`` on top of its transports; this module adds
what an application needs around it: a sync face, timeouts, typed errors with the server's stderr,
bounded listings, a cached tool list kept fresh by ``notifications/tools/list_changed``, and
conversions to chatclient's own ``Document`` and ``Message`` types.

Where the session runs: ``async with`` runs it on the caller's event loop, in a task of its own;
``with`` starts a private event loop on a daemon thread (one per client) and every sync method
hands its work to that loop and waits. Either way the session can be used from any thread or loop:
a call from elsewhere is forwarded to the session's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import re
import shlex
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import structlog
from pydantic import ValidationError

from chatclient.errors import (
    McpAuthError,
    McpConnectionError,
    McpError,
    McpProtocolError,
    McpServerError,
    McpTimeoutError,
)
from chatclient.mcp._sdk import (
    ClientRequestContext,
    ClientSession,
    IncomingMessage,
    MCPError,
    StdioServerParameters,
    sse_client,
    streamable_http_client,
    types,
)
from chatclient.mcp._stdio import DEFAULT_MAX_MESSAGE_BYTES, bounded_stdio_client, check_max_message_bytes
from chatclient.messages import Message

if TYPE_CHECKING:
    from chatclient.client import ChatClient
    from chatclient.mcp.elicitation import ElicitationHandler
    from chatclient.mcp.oauth import McpOAuth
    from chatclient.mcp.sampling import SamplingApproval
    from chatclient.rag.documents import Document

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds to start a server and finish the ``initialize`` handshake."""
DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds any one request (list, call, read, get) may take."""
MAX_PAGES = 50
"""Listings follow at most this many cursor pages (a server that paginates forever cannot hang a call)."""
MAX_ITEMS = 2000
"""Listings keep at most this many items."""
STDERR_TAIL_BYTES = 8192

ProgressCallback = Callable[[float, "float | None", "str | None"], object]
ResourceUpdateCallback = Callable[[str], object]
"""``callback(uri)``, sync or async: a subscribed resource changed on the server."""
MAX_URI_CHARS = 8_192
MAX_PROGRESS_MESSAGE_CHARS = 4_096
MAX_COMPLETION_VALUES = 100
"""``fn(progress, total, message)``; may be sync or ``async``."""

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
_log = logging.getLogger("chatclient.mcp")


def _server_logger() -> Any:
    """A structlog logger writing to the stdlib logger ``chatclient.mcp.server`` (no global structlog setup)."""

    def render(_logger: Any, _method: str, event: Any) -> Any:
        message = str(event.pop("event", ""))
        fields = " ".join(f"{k}={v!r}" for k, v in event.items())
        return {"msg": f"{message} {fields}".strip(), "extra": {"chatclient": {"event": message, **event}}}

    return structlog.wrap_logger(
        logging.getLogger("chatclient.mcp.server"),
        processors=[render],
        wrapper_class=structlog.stdlib.BoundLogger,
        context_class=dict,
    )


class _StderrTail:
    """The last few KB a stdio server wrote to stderr: a pipe drained by a daemon thread into a bounded buffer."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        self._read_fd = read_fd
        self._buffer: deque[bytes] = deque()
        self._size = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="chatclient-mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        with open(self._read_fd, "rb", buffering=0) as pipe:
            while chunk := pipe.read(4096):
                with self._lock:
                    self._buffer.append(chunk)
                    self._size += len(chunk)
                    while self._size - len(self._buffer[0]) >= STDERR_TAIL_BYTES:
                        self._size -= len(self._buffer.popleft())

    def release_writer(self) -> None:
        """Close our copy of the pipe's write end (the child has its own), so the drain ends when the server does."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def text(self, wait: float = 0.0) -> str:
        """The tail as text (at most the last 20 lines); ``wait`` seconds for the server to finish writing."""
        if wait:
            self._thread.join(wait)
        with self._lock:
            data = b"".join(self._buffer)[-STDERR_TAIL_BYTES:]
        lines = data.decode("utf-8", errors="replace").strip().splitlines()
        return "\n".join(lines[-20:])


class _LoopThread:
    """A private event loop on a daemon thread (the sync face of ``McpClient``)."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    def stop(self) -> None:
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)


def _check_seconds(value: float | None, what: str, *, allow_none: bool) -> float | None:
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{what} must be a positive number of seconds")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value != value:
        raise ValueError(f"{what} must be a positive number of seconds, got {value!r}")
    return float(value)


_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def _slug(text: str, limit: int = 32) -> str:
    """``text`` as a name part of ``A-Za-z0-9_-`` (server names in tool prefixes and logs)."""
    return _NAME.sub("_", text).strip("_-")[:limit] or "server"


class McpClient:
    """A connection to one MCP server; build it with ``stdio``, ``http`` or ``sse`` and open it as a context manager.

    ``timeout`` bounds starting the server and the ``initialize`` handshake; ``call_timeout`` bounds
    every later request (a call may pass its own). A server that cannot start, dies, answers late,
    speaks an unsupported protocol version or answers with an error raises the matching
    ``McpError`` subclass (``McpConnectionError`` carries a stdio server's stderr tail).

    ``sampling`` is a ``ChatClient`` that answers the server's ``sampling/createMessage``
    requests (off by default: the capability is not advertised); ``approve_sampling(request)`` sees
    each request first and returns ``True`` to allow it. ``elicitation(request)`` answers the
    server's ``elicitation/create`` requests with an ``ElicitationResponse`` (off by default; see
    ``chatclient.mcp.elicitation``). Log messages the server sends go to structlog (stdlib logger
    ``chatclient.mcp.server``).

    The constructor is for custom transports: ``transport(errlog)`` must return an async context
    manager yielding the SDK's ``(read_stream, write_stream)`` pair (``errlog`` is the stderr sink
    for subprocess transports when ``capture_stderr`` is true, else ``None``); ``label`` names the
    server in error messages.

    >>> with McpClient.stdio("python", ["-m", "mcp_server_time"]) as time_server:  # doctest: +SKIP
    ...     print([t.name for t in time_server.list_tools()])
    """

    def __init__(
        self,
        transport: Callable[[Any], Any],
        *,
        label: str,
        name: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        capture_stderr: bool = False,
        sampling: ChatClient | None = None,
        approve_sampling: SamplingApproval | None = None,
        elicitation: ElicitationHandler | None = None,
        logger: Any = None,
    ) -> None:
        self._transport = transport
        self._label = label
        self._name = name
        self.timeout: float = _check_seconds(timeout, "timeout", allow_none=False) or DEFAULT_TIMEOUT
        self.call_timeout = _check_seconds(call_timeout, "call_timeout", allow_none=True)
        self._capture_stderr = capture_stderr
        self._stderr: _StderrTail | None = None
        self._sampling = sampling
        self._approve = approve_sampling
        if elicitation is not None and not callable(elicitation):
            raise TypeError("elicitation takes a function ask(request) -> ElicitationResponse (sync or async)")
        self._elicitation = elicitation
        self._subscriptions: dict[str, list[ResourceUpdateCallback]] = {}
        self._logger = logger if logger is not None else _server_logger()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: _LoopThread | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._session: ClientSession | None = None
        self._init: types.InitializeResult | None = None
        self._tools: tuple[types.Tool, ...] = ()
        self._tools_version = 0
        self._tools_refresh: asyncio.Task[None] | None = None
        self._lost: BaseException | None = None
        self._transport_error: McpError | None = None
        self._secrets: tuple[str, ...] = ()
        self._oauth: Any = None
        self._http_status: int | None = None

    # -- construction -----------------------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        name: str | None = None,
        sampling: ChatClient | None = None,
        approve_sampling: SamplingApproval | None = None,
        elicitation: ElicitationHandler | None = None,
        logger: Any = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> McpClient:
        """A server started as a subprocess speaking JSON-RPC on stdin/stdout.

        ``env`` is added to a minimal inherited environment (``PATH``, ``HOME``...), as the SDK does,
        so secrets in the parent's environment do not leak to the server unless passed here.
        ``max_message_bytes`` bounds one message (one stdout line, default 16 MiB): a longer one
        closes the connection and fails the pending calls with ``McpProtocolError``.
        """
        if not isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty string (the server executable)")
        if isinstance(args, str):
            raise TypeError("args must be a sequence of strings, not one string: use shlex.split(...)")
        argv = [str(a) for a in args]
        params = StdioServerParameters(
            command=command, args=argv, env=dict(env) if env else None, cwd=Path(cwd) if cwd is not None else None
        )
        limit = check_max_message_bytes(max_message_bytes)
        label = shlex.join([Path(command).name, *argv])[:200]

        def open_transport(errlog: Any) -> Any:
            return bounded_stdio_client(
                params, errlog, max_message_bytes=limit, label=label, on_error=client._transport_failed
            )

        client = cls(
            open_transport,
            label=label,
            name=name,
            timeout=timeout,
            call_timeout=call_timeout,
            capture_stderr=True,
            sampling=sampling,
            approve_sampling=approve_sampling,
            elicitation=elicitation,
            logger=logger,
        )
        return client

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        name: str | None = None,
        sampling: ChatClient | None = None,
        approve_sampling: SamplingApproval | None = None,
        elicitation: ElicitationHandler | None = None,
        auth: McpOAuth | None = None,
        logger: Any = None,
    ) -> McpClient:
        """A server at a streamable HTTP endpoint (``http://host:port/mcp``); ``headers`` e.g. a bearer token.

        ``auth`` signs in with OAuth 2.1 (``chatclient.mcp.oauth.OAuthClientCredentials`` or
        ``OAuthAuthorizationCode``): discovery, registration, tokens and refresh happen on the
        server's first ``401``; failures raise ``McpAuthError``.
        """
        _check_url(url)
        fixed = dict(headers or {})
        connect = float(timeout)
        read = call_timeout if call_timeout is not None else 3600.0
        if auth is not None and not hasattr(auth, "provider"):
            raise TypeError("auth takes OAuthClientCredentials or OAuthAuthorizationCode (chatclient.mcp.oauth)")
        provider = auth.provider(url) if auth is not None else None

        def open_transport(_errlog: Any) -> Any:
            import httpx2
            from mcp.shared._httpx_utils import create_mcp_http_client

            http_client = create_mcp_http_client(
                headers=fixed, timeout=httpx2.Timeout(connect, read=read), auth=provider
            )

            async def note_status(response: Any) -> None:
                # The SDK turns a refused request into a bare JSON-RPC error; remember the HTTP status
                # so a 401/403 can be reported as the sign-in failure it is.
                client._http_status = response.status_code

            http_client.event_hooks["response"].append(note_status)
            return _with_http_client(http_client, url)

        client = cls(
            open_transport,
            label=_url_label(url),
            name=name,
            timeout=timeout,
            call_timeout=call_timeout,
            sampling=sampling,
            approve_sampling=approve_sampling,
            elicitation=elicitation,
            logger=logger,
        )
        client._secrets = _secrets_of(url, fixed) + (auth.secrets() if auth is not None else ())
        client._oauth = provider
        return client

    @classmethod
    def sse(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
        name: str | None = None,
        sampling: ChatClient | None = None,
        approve_sampling: SamplingApproval | None = None,
        elicitation: ElicitationHandler | None = None,
        logger: Any = None,
    ) -> McpClient:
        """A server on the older HTTP+SSE transport (``http://host:port/sse``)."""
        _check_url(url)
        fixed = dict(headers or {})
        read = call_timeout if call_timeout is not None else 3600.0
        client = cls(
            lambda _errlog: sse_client(url, headers=fixed, timeout=float(timeout), sse_read_timeout=read),
            label=_url_label(url),
            name=name,
            timeout=timeout,
            call_timeout=call_timeout,
            sampling=sampling,
            approve_sampling=approve_sampling,
            elicitation=elicitation,
            logger=logger,
        )
        client._secrets = _secrets_of(url, fixed)
        return client

    # -- identity -----------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """A short name for this server: the one given, else the server's own name, else its command or host."""
        if self._name:
            return self._name
        if self._init is not None and self._init.server_info.name:
            return self._init.server_info.name
        return self._label

    @property
    def connected(self) -> bool:
        """True between a successful open and close, while the connection is not known to be lost."""
        return self._session is not None and self._lost is None

    @property
    def lost(self) -> bool:
        """True when the connection broke (the server died or hung up) while the client was open."""
        return self._lost is not None

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version from the handshake."""
        return self._init.server_info if self._init is not None else None

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol version."""
        return self._init.protocol_version if self._init is not None else None

    @property
    def instructions(self) -> str | None:
        """The server's usage instructions from the handshake, if it sent any."""
        return self._init.instructions if self._init is not None else None

    @property
    def tools_version(self) -> int:
        """Grows by one each time the cached tool list changes (after ``notifications/tools/list_changed``)."""
        return self._tools_version

    @property
    def cached_tools(self) -> tuple[types.Tool, ...]:
        """The tool list fetched at connect time and refreshed on ``list_changed``; never blocks."""
        return self._tools

    def stderr_tail(self) -> str:
        """The last lines a stdio server wrote to stderr ("" for HTTP servers)."""
        return self._stderr.text() if self._stderr is not None else ""

    def __repr__(self) -> str:
        state = "connected" if self.connected else "closed"
        return f"McpClient({self._label!r}, {state})"

    # -- lifecycle ----------------------------------------------------------------------------------

    def __enter__(self) -> McpClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> McpClient:
        await self.aconnect()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def connect(self) -> None:
        """Start (or reach) the server on a private loop thread and run the handshake."""
        if self._loop is not None:
            raise McpError(f"MCP client for {self._label} is already open; close it first", server=self._label)
        self._thread = _LoopThread(f"chatclient-mcp-{_slug(self._label)}")
        self._loop = self._thread.loop
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result()
        except BaseException:
            self._thread.stop()
            self._thread = None
            self._loop = None
            raise

    async def aconnect(self) -> None:
        """Start (or reach) the server on the running event loop and run the handshake."""
        if self._loop is not None:
            raise McpError(f"MCP client for {self._label} is already open; close it first", server=self._label)
        self._loop = asyncio.get_running_loop()
        try:
            await self._start()
        except BaseException:
            self._loop = None
            raise

    def close(self) -> None:
        """Stop the session (and a stdio server); safe to call twice."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        if thread is None and _running_loop() is loop:
            raise McpError("close() was called on the event loop that runs the session: use 'await client.aclose()'")
        try:
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(30.0)
        finally:
            if thread is not None:
                thread.stop()
            self._loop = None
            self._thread = None

    async def aclose(self) -> None:
        """Async twin of ``close``."""
        loop = self._loop
        if loop is None:
            return
        try:
            await self._hop(self._stop())
        finally:
            if self._thread is not None:
                self._thread.stop()
                self._thread = None
            self._loop = None

    async def _start(self) -> None:
        # A fresh stderr pipe per connection: the previous one closed with its server.
        self._stderr = _StderrTail() if self._capture_stderr else None
        self._closing = asyncio.Event()
        self._lost = None
        self._transport_error = None
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.get_running_loop().create_task(self._own(ready), name=f"mcp-{_slug(self._label)}")
        try:
            # The handshake has its own limit inside; this outer one catches a transport stuck opening.
            await asyncio.wait_for(asyncio.shield(ready), self.timeout + 10.0)
        except Exception as exc:
            await self._stop()
            raise self._translate(exc, "starting the server", self.timeout, starting=True) from None
        except BaseException:  # the caller was cancelled or interrupted: clean up, then let it through
            await asyncio.shield(self._stop())
            raise

    async def _own(self, ready: asyncio.Future[None]) -> None:
        """Owns the transport and the session: enters them, signals ready, waits for close, exits them."""
        assert self._closing is not None
        try:
            async with AsyncExitStack() as stack:
                errlog = self._stderr.writer if self._stderr is not None else None
                read, write = await stack.enter_async_context(self._transport(errlog))
                if self._stderr is not None:
                    self._stderr.release_writer()  # the child holds its own copy now
                session = ClientSession(
                    read,
                    write,
                    read_timeout_seconds=self.call_timeout,
                    sampling_callback=self._sampling_callback() if self._sampling is not None else None,
                    elicitation_callback=self._elicitation_callback() if self._elicitation is not None else None,
                    logging_callback=self._on_log,
                    message_handler=self._on_message,
                    client_info=types.Implementation(name="chatclient", version=_version()),
                )
                await stack.enter_async_context(session)
                with _fail_after(self.timeout):
                    self._init = await session.initialize()
                self._session = session
                if self._init.capabilities.tools is not None:
                    with _fail_after(self.timeout):
                        self._tools = await self._initial_tools(session)
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpConnectionError(repr(exc)))
            else:
                self._lost = exc
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None

    async def _stop(self) -> None:
        owner = self._owner
        if self._closing is not None:
            self._closing.set()
        if self._tools_refresh is not None:
            self._tools_refresh.cancel()
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), 15.0)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(BaseException):
                    await owner
        self._owner = None
        self._session = None
        if self._stderr is not None:
            self._stderr.release_writer()

    # -- running work on the session's loop -----------------------------------------------------------

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise McpError(
                f"MCP client for {self._label} is not open: use 'with client:' or client.connect() first",
                server=self._label,
            )
        if _running_loop() is loop:
            coro.close()
            raise McpError(
                "a blocking McpClient method was called on the event loop that runs the session; "
                "use the 'a'-prefixed coroutine instead (e.g. await client.acall_tool(...))",
                server=self._label,
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    async def _hop(self, coro: Coroutine[Any, Any, T]) -> T:
        loop = self._loop
        if loop is None:
            coro.close()
            raise McpError(
                f"MCP client for {self._label} is not open: use 'async with client:' first", server=self._label
            )
        if _running_loop() is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def _request(
        self, what: str, work: Callable[[ClientSession], Awaitable[T]], timeout: float | None = None
    ) -> T:
        session = self._session
        if session is None or self._lost is not None:
            raise self._translate(self._lost or ConnectionError("closed"), what, timeout)
        try:
            return await work(session)
        except McpError:
            raise
        except Exception as exc:
            error = self._translate(exc, what, timeout)
            if isinstance(error, McpConnectionError) and (self._capture_stderr or self._owner_done()):
                # A stdio pipe that closed is final: later calls fail fast with the same story. Over
                # HTTP one failed request (a refused or oversized response) does not end the session.
                self._lost = error
            raise error from exc

    def _translate(self, exc: BaseException, what: str, timeout: float | None, *, starting: bool = False) -> McpError:
        """The library's error for an SDK/transport failure, with the stderr tail for stdio servers."""
        error = self._classify(exc, what, timeout, starting=starting)
        if self._secrets and any(secret in str(error) for secret in self._secrets):
            text = str(error)
            for secret in self._secrets:
                text = text.replace(secret, "***")
            error.args = (text,)
        return error

    def _transport_failed(self, error: McpError) -> None:
        """The transport gave up on the connection (e.g. an oversized message): later failures report this."""
        self._transport_error = error
        self._lost = error

    def _owner_done(self) -> bool:
        return self._owner is None or self._owner.done()

    def _classify(self, exc: BaseException, what: str, timeout: float | None, *, starting: bool) -> McpError:
        while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        known = self._transport_error
        if known is not None and not (isinstance(exc, MCPError) and exc.code != types.CONNECTION_CLOSED):
            # The transport closed the connection on purpose: say why, in a fresh error per caller.
            return type(known)(str(known), server=known.server, code=known.code)
        if isinstance(exc, McpError):
            return exc
        server = self._label
        refused = _auth_failure(exc)
        if refused is None and isinstance(exc, MCPError) and self._http_status in (401, 403):
            refused = f"the server answered {self._http_status} (the token was refused or is missing)"
        if refused is not None:
            return McpAuthError(f"signing in to MCP server {server} failed while {what}: {refused}", server=server)
        if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
            isinstance(exc, MCPError) and exc.code == types.REQUEST_TIMEOUT
        ):
            limit = self.timeout if starting else (timeout if timeout is not None else self.call_timeout)
            return McpTimeoutError(
                f"MCP server {server} did not answer within {limit:g} s while {what}; raise "
                f"{'timeout' if starting else 'call_timeout'}= or check that the server is healthy",
                server=server,
                timeout=limit,
            )
        if isinstance(exc, MCPError) and exc.code != types.CONNECTION_CLOSED:
            return McpServerError(
                f"MCP server {server} answered an error while {what}: {exc.message[:500]} (code {exc.code})",
                server=server,
                code=exc.code,
            )
        if isinstance(exc, RuntimeError) and "protocol version" in str(exc).lower():
            return McpProtocolError(
                f"MCP server {server} speaks an unsupported protocol version ({exc}); this client supports "
                f"{', '.join(_supported_versions())}: update the server or the 'mcp' package",
                server=server,
            )
        if isinstance(exc, ValidationError):
            return McpProtocolError(
                f"MCP server {server} sent a malformed message while {what}: {str(exc)[:500]}", server=server
            )
        tail = self._stderr.text(wait=1.0) if self._stderr is not None else ""
        said = f"; its stderr ended with:\n{tail}" if tail else ""
        detail = exc.message if isinstance(exc, MCPError) else f"{type(exc).__name__}: {exc}"
        detail = detail[:300]
        if isinstance(exc, FileNotFoundError | PermissionError) and starting:
            message = f"could not start MCP server {server}: {exc.strerror or exc}; check the command and PATH"
        elif starting and self._capture_stderr:
            message = f"MCP server {server} did not start (it closed the connection during the handshake){said}"
        elif starting:
            message = (
                f"could not reach MCP server {server} ({detail}); check the URL, the headers and that the "
                "server is running"
            )
        elif self._capture_stderr:
            message = f"MCP server {server} went away while {what}{said or f' ({detail})'}"
        else:
            message = f"the connection to MCP server {server} failed while {what} ({detail})"
        if not said and not starting and self._capture_stderr:
            message += "; reconnect with a new McpClient"
        return McpConnectionError(message, server=server, stderr=tail)

    # -- notifications and server requests -----------------------------------------------------------

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._schedule_tools_refresh()
        elif isinstance(message, types.ResourceUpdatedNotification):
            await self._on_resource_updated(str(message.params.uri))
        elif isinstance(message, Exception):
            _log.debug("MCP transport of %s reported %r", self._label, message)

    def _schedule_tools_refresh(self) -> None:
        previous = self._tools_refresh
        if previous is not None and not previous.done():
            previous.cancel()
        self._tools_refresh = asyncio.get_running_loop().create_task(self._refresh_tools())

    async def _refresh_tools(self) -> None:
        session = self._session
        if session is None:
            return
        try:
            tools = await self._fetch_tools(session)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            _log.warning("could not refresh the tool list of MCP server %s: %s", self._label, exc)
            return
        self._tools = tools
        self._tools_version += 1

    async def settle_tools(self) -> None:
        """Wait (at most ``call_timeout``) for a tool-list refresh triggered by ``list_changed`` to finish."""
        await asyncio.sleep(0)  # let a just-delivered notification schedule its refresh
        task = self._tools_refresh
        if task is not None and not task.done():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), self.call_timeout or DEFAULT_CALL_TIMEOUT)

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        level = _LEVELS.get(params.level, logging.INFO)
        data = params.data if isinstance(params.data, str) else repr(params.data)[:2000]
        self._logger.log(level, "mcp.server_log", server=self.name, logger=params.logger, data=data[:2000])

    async def _on_resource_updated(self, uri: str) -> None:
        # Only URIs this client subscribed to reach a callback: a server cannot make the client call
        # anything with a URI of its choosing (nor log megabytes of one).
        for callback in list(self._subscriptions.get(uri, ())):
            try:
                if inspect.iscoroutinefunction(callback):
                    await callback(uri)
                else:
                    await asyncio.to_thread(callback, uri)  # a sync callback must not stall the session
            except Exception as exc:
                _log.warning("a resource-update callback for %s failed: %s", uri[:200], type(exc).__name__)

    def _elicitation_callback(self) -> Any:
        from chatclient.mcp.elicitation import answer_elicitation

        async def callback(context: ClientRequestContext, params: Any) -> types.ElicitResult | types.ErrorData:
            assert self._elicitation is not None
            return await answer_elicitation(self._elicitation, params, server=self.name)

        return callback

    def _sampling_callback(self) -> Any:
        from chatclient.mcp.sampling import answer_sampling

        async def callback(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            assert self._sampling is not None
            return await answer_sampling(self._sampling, params, self._approve, server=self.name)

        return callback

    # -- listings --------------------------------------------------------------------------------------

    async def _fetch_tools(self, session: ClientSession) -> tuple[types.Tool, ...]:
        async def page(cursor: str | None) -> tuple[list[types.Tool], str | None]:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            result = await session.list_tools(params=params)
            return list(result.tools), result.next_cursor

        return tuple(await _paginate(page))

    async def _initial_tools(self, session: ClientSession) -> tuple[types.Tool, ...]:
        # A server whose tools/list fails may still serve resources and prompts: warn, do not fail.
        try:
            return await self._fetch_tools(session)
        except MCPError as exc:
            if exc.code in (types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT):
                raise
            _log.warning("MCP server %s failed to list its tools: %s", self._label, exc.message[:300])
        except ValidationError as exc:
            _log.warning("MCP server %s sent a malformed tool list: %s", self._label, str(exc)[:300])
        return ()

    def list_tools(self) -> list[types.Tool]:
        """The server's tools (fresh from the server; also updates ``cached_tools``)."""
        return self._sync(self.alist_tools())

    async def alist_tools(self) -> list[types.Tool]:
        """Async twin of ``list_tools``."""

        async def work(session: ClientSession) -> list[types.Tool]:
            tools = await self._fetch_tools(session)
            if tools != self._tools:
                self._tools = tools
                self._tools_version += 1
            return list(tools)

        return await self._hop(self._request("listing tools", work))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> types.CallToolResult:
        """Call a tool and return the server's raw result (``isError`` results are returned, not raised).

        ``timeout`` (seconds) replaces ``call_timeout`` for this call; on expiry the SDK cancels the
        request on the server and ``McpTimeoutError`` is raised. ``progress(progress, total, message)``
        receives the server's progress notifications for this call.
        """
        return self._sync(self.acall_tool(name, arguments, timeout=timeout, progress=progress))

    async def acall_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
    ) -> types.CallToolResult:
        """Async twin of ``call_tool``."""
        limit = _check_seconds(timeout, "timeout", allow_none=True)
        on_progress = _progress_adapter(progress) if progress is not None else None

        async def work(session: ClientSession) -> types.CallToolResult:
            result = await session.call_tool(
                name, dict(arguments or {}), read_timeout_seconds=limit, progress_callback=on_progress
            )
            await self.settle_tools()
            return result

        return await self._hop(self._request(f"calling tool {name!r}", work, limit))

    def list_resources(self) -> list[types.Resource]:
        """The server's resources."""
        return self._sync(self.alist_resources())

    async def alist_resources(self) -> list[types.Resource]:
        """Async twin of ``list_resources``."""

        async def work(session: ClientSession) -> list[types.Resource]:
            async def page(cursor: str | None) -> tuple[list[types.Resource], str | None]:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await session.list_resources(params=params)
                return list(result.resources), result.next_cursor

            return await _paginate(page)

        return await self._hop(self._request("listing resources", work))

    def list_resource_templates(self) -> list[types.ResourceTemplate]:
        """The server's URI templates (RFC 6570), e.g. ``notes://{topic}``."""
        return self._sync(self.alist_resource_templates())

    async def alist_resource_templates(self) -> list[types.ResourceTemplate]:
        """Async twin of ``list_resource_templates``."""

        async def work(session: ClientSession) -> list[types.ResourceTemplate]:
            async def page(cursor: str | None) -> tuple[list[types.ResourceTemplate], str | None]:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await session.list_resource_templates(params=params)
                return list(result.resource_templates), result.next_cursor

            return await _paginate(page)

        return await self._hop(self._request("listing resource templates", work))

    def read_resource(self, uri: str, **template_values: str) -> list[Document]:
        """Read a resource as ``Document``s (one per text content; binary contents are skipped).

        With keyword arguments ``uri`` is a template and they fill it first:
        ``read_resource("notes://{topic}", topic="mcp")``. Metadata: ``source`` (the URI),
        ``mime_type``, ``server``.
        """
        return self._sync(self.aread_resource(uri, **template_values))

    async def aread_resource(self, uri: str, **template_values: str) -> list[Document]:
        """Async twin of ``read_resource``."""
        from chatclient.mcp.resources import expand_uri, to_documents

        target = expand_uri(uri, template_values) if template_values else uri

        async def work(session: ClientSession) -> types.ReadResourceResult:
            return await session.read_resource(target)

        result = await self._hop(self._request(f"reading resource {target!r}", work))
        return to_documents(result, server=self.name)

    def list_prompts(self) -> list[types.Prompt]:
        """The server's prompts with their arguments."""
        return self._sync(self.alist_prompts())

    async def alist_prompts(self) -> list[types.Prompt]:
        """Async twin of ``list_prompts``."""

        async def work(session: ClientSession) -> list[types.Prompt]:
            async def page(cursor: str | None) -> tuple[list[types.Prompt], str | None]:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                result = await session.list_prompts(params=params)
                return list(result.prompts), result.next_cursor

            return await _paginate(page)

        return await self._hop(self._request("listing prompts", work))

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> list[Message]:
        """A server prompt as chatclient messages, for ``client.prompt().messages(*msgs)``.

        ``arguments`` are checked against the prompt's declared arguments first: a missing required
        one or an unknown one raises ``ValueError`` naming them.
        """
        return self._sync(self.aget_prompt(name, arguments))

    async def aget_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> list[Message]:
        """Async twin of ``get_prompt``."""
        from chatclient.mcp.prompts import check_arguments, to_messages

        prompts = await self.alist_prompts()
        declared = next((p for p in prompts if p.name == name), None)
        if declared is None:
            known = ", ".join(sorted(p.name for p in prompts)) or "(none)"
            raise ValueError(f"MCP server {self.name} has no prompt named {name!r}; it offers: {known}")
        values = check_arguments(declared, arguments or {})

        async def work(session: ClientSession) -> types.GetPromptResult:
            return await session.get_prompt(name, values)

        result = await self._hop(self._request(f"getting prompt {name!r}", work))
        return to_messages(result)

    def subscribe(self, uri: str, callback: ResourceUpdateCallback) -> None:
        """Ask the server to report changes of resource ``uri``; each ``notifications/resources/updated``
        calls ``callback(uri)`` (sync callbacks run on a worker thread, async ones on the session's
        loop). Re-read the resource in the callback to get its new content. ``McpError`` when the
        server does not offer subscriptions."""
        self._sync(self.asubscribe(uri, callback))

    async def asubscribe(self, uri: str, callback: ResourceUpdateCallback) -> None:
        """Async twin of ``subscribe``."""
        if not callable(callback):
            raise TypeError("subscribe takes a callback(uri)")
        if not isinstance(uri, str) or "://" not in uri or len(uri) > MAX_URI_CHARS:
            raise ValueError(f"subscribe needs a resource URI with a scheme (at most {MAX_URI_CHARS} characters)")

        async def work(session: ClientSession) -> None:
            resources = self._init.capabilities.resources if self._init is not None else None
            if resources is None or not resources.subscribe:
                raise McpError(f"MCP server {self.name} does not offer resource subscriptions", server=self._label)
            if uri not in self._subscriptions:
                subscribe = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
                await session.send_request(subscribe, types.EmptyResult)
            self._subscriptions.setdefault(uri, []).append(callback)

        await self._hop(self._request(f"subscribing to {uri!r}", work))

    def unsubscribe(self, uri: str) -> None:
        """Stop the updates of ``uri`` (every callback registered for it); unknown URIs are ignored."""
        self._sync(self.aunsubscribe(uri))

    async def aunsubscribe(self, uri: str) -> None:
        """Async twin of ``unsubscribe``."""

        async def work(session: ClientSession) -> None:
            if self._subscriptions.pop(uri, None) is not None:
                unsubscribe = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
                await session.send_request(unsubscribe, types.EmptyResult)

        await self._hop(self._request(f"unsubscribing from {uri!r}", work))

    def complete(
        self,
        argument: str,
        value: str,
        *,
        prompt: str | None = None,
        template: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Values the server suggests for ``argument`` of ``prompt`` (a name) or ``template`` (a URI template)
        given what the user typed so far (``value``); ``context`` holds arguments already chosen."""
        return self._sync(self.acomplete(argument, value, prompt=prompt, template=template, context=context))

    async def acomplete(
        self,
        argument: str,
        value: str,
        *,
        prompt: str | None = None,
        template: str | None = None,
        context: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Async twin of ``complete``."""
        if (prompt is None) == (template is None):
            raise ValueError("complete needs exactly one of prompt= (a prompt name) or template= (a URI template)")
        ref: Any = (
            types.PromptReference(name=prompt)
            if prompt is not None
            else types.ResourceTemplateReference(uri=str(template))
        )

        async def work(session: ClientSession) -> list[str]:
            result = await session.complete(
                ref, {"name": argument, "value": value}, dict(context) if context is not None else None
            )
            return [str(v) for v in result.completion.values[:MAX_COMPLETION_VALUES]]

        return await self._hop(self._request(f"completing {argument!r}", work))

    def set_logging_level(self, level: str) -> None:
        """Ask the server to send only log messages at ``level`` or above (``logging/setLevel``)."""
        self._sync(self.aset_logging_level(level))

    async def aset_logging_level(self, level: str) -> None:
        """Async twin of ``set_logging_level``."""
        if level not in _LEVELS:
            raise ValueError(f"level must be one of {', '.join(_LEVELS)}, got {level!r}")

        async def work(session: ClientSession) -> None:
            # the typed request rather than the SDK's helper, which warns that the 2026-07-28
            # revision drops logging: the 2025 revisions servers speak today still have it
            request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=level))  # type: ignore[arg-type]
            await session.send_request(request, types.EmptyResult)

        await self._hop(self._request("setting the log level", work))

    def ping(self) -> None:
        """Round-trip a ``ping`` (raises when the server is gone)."""
        self._sync(self.aping())

    async def aping(self) -> None:
        """Async twin of ``ping``."""

        async def work(session: ClientSession) -> None:
            await session.send_ping()

        await self._hop(self._request("pinging", work))


# -- helpers ---------------------------------------------------------------------------------------------


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@contextlib.contextmanager
def _fail_after(seconds: float) -> Any:
    import anyio

    with anyio.fail_after(seconds):
        yield


async def _paginate(page: Callable[[str | None], Awaitable[tuple[list[T], str | None]]]) -> list[T]:
    items: list[T] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        got, cursor = await page(cursor)
        items.extend(got)
        if len(items) >= MAX_ITEMS:
            _log.warning("MCP listing cut at %d items", MAX_ITEMS)
            return items[:MAX_ITEMS]
        if not cursor:
            return items
    _log.warning("MCP listing cut after %d pages", MAX_PAGES)
    return items


def _progress_adapter(progress: ProgressCallback) -> Any:
    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if message is not None and len(message) > MAX_PROGRESS_MESSAGE_CHARS:
            message = message[:MAX_PROGRESS_MESSAGE_CHARS] + " [...]"  # a status line, not a payload
        try:
            outcome = progress(value, total, message)
            if asyncio.iscoroutine(outcome):
                await outcome
        except Exception:
            _log.exception("progress callback raised")

    return on_progress


@contextlib.asynccontextmanager
async def _with_http_client(http_client: Any, url: str) -> Any:
    async with http_client, streamable_http_client(url, http_client=http_client) as streams:
        yield streams


def _check_url(url: str) -> None:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"an MCP server URL must start with http:// or https://, got {str(url)[:100]!r}")


def _url_label(url: str) -> str:
    # Never echo credentials embedded in a URL (user:password@host).
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"[:200]


def _auth_failure(exc: BaseException) -> str | None:
    """Why OAuth failed, when ``exc`` is an OAuth failure: the SDK's flow errors, or the server's 401/403."""
    from mcp.client.auth import OAuthFlowError

    if isinstance(exc, OAuthFlowError):
        return f"{type(exc).__name__}: {str(exc)[:300]}"
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if status in (401, 403):
        return f"the server answered {status} (the token was refused or is missing)"
    return None


def _secrets_of(url: str, headers: Mapping[str, str]) -> tuple[str, ...]:
    """Values an error message must never show: URL credentials and header values (tokens)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    values = [parts.password or "", parts.username or ""]
    for value in headers.values():
        values.append(value)
        values.extend(piece for piece in str(value).split() if len(piece) >= 8)  # "Bearer <token>"
    return tuple(v for v in values if isinstance(v, str) and len(v) >= 4)


def _supported_versions() -> tuple[str, ...]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    return tuple(HANDSHAKE_PROTOCOL_VERSIONS)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("chatclient")
    except Exception:
        return "0"


__all__ = ["DEFAULT_CALL_TIMEOUT", "DEFAULT_TIMEOUT", "McpClient", "ProgressCallback"]
