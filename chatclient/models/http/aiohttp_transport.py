"""An httpx transport that sends async requests through aiohttp (extra ``aiohttp``).

httpx stays the public seam: models take an ``httpx.AsyncClient`` as before; only the wire work
underneath moves to aiohttp, whose connection pool does not serialise hundreds of concurrent
callers the way httpcore's does (measured in ``benchmarks/http_throughput.py``: at 256 concurrent
callers httpcore falls to about a sixth of aiohttp's throughput on the same server).

    >>> import httpx
    >>> from chatclient.models.http.aiohttp_transport import AiohttpTransport
    >>> client = httpx.AsyncClient(transport=AiohttpTransport())   # doctest: +SKIP
    >>> model = OpenAIChatModel(api_key=..., async_http_client=client)  # doctest: +SKIP

When the ``AsyncClient`` adds nothing of its own to a request (no auth, event hooks, cookies, query
parameters or mounted transports), chatclient's HTTP layer hands the POST straight to
``direct_post`` and skips httpx's request and response objects, which cost more CPU per call than
the whole aiohttp exchange; anything but a 2xx answer is turned into an ``httpx.Response`` and
handled exactly as on the ordinary path.

The transport never follows redirects (chatclient's HTTP layer does that itself, dropping
credentials across origins), maps aiohttp's errors onto httpx's (so retries and error messages stay
the same) and keeps one aiohttp session per event loop, so one client can serve several
``asyncio.run`` calls.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, NoReturn

import httpx

from chatclient.models.http.stdlib_http import ENCODED_BODY_HEADERS

try:
    import aiohttp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("AiohttpTransport needs aiohttp: pip install 'chatclient[aiohttp]'") from exc


def _raise_send_error(exc: BaseException, request: httpx.Request | None) -> NoReturn:
    """Re-raise an aiohttp failure to send or get an answer as the httpx error it stands for."""
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        raise httpx.ConnectTimeout(str(exc) or "timed out connecting", request=request) from exc
    if isinstance(exc, TimeoutError):  # aiohttp's SocketTimeoutError: no answer within the read timeout
        raise httpx.ReadTimeout(str(exc) or "timed out waiting for the answer", request=request) from exc
    if isinstance(exc, aiohttp.ClientConnectorError):
        raise httpx.ConnectError(str(exc), request=request) from exc
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        raise httpx.RemoteProtocolError(str(exc) or "server disconnected", request=request) from exc
    raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc


async def _body_chunks(response: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
    """The body as it arrives, with aiohttp's read errors as httpx's."""
    content = response.content
    try:
        while chunk := await content.readany():  # b"" at the end of the body
            yield chunk
    except TimeoutError as exc:
        raise httpx.ReadTimeout(str(exc) or "timed out reading the response") from exc
    except aiohttp.ClientPayloadError as exc:
        raise httpx.RemoteProtocolError(str(exc)) from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise httpx.ReadError(str(exc) or type(exc).__name__) from exc


def _finish(response: aiohttp.ClientResponse) -> None:
    # release() would return the connection mid-body; close() drops it, which is what a consumer
    # that stops early (a cancelled stream) needs: no more bytes are read.
    if response.content.at_eof():
        response.release()
    else:
        response.close()


def _header_pairs(response: aiohttp.ClientResponse, drop: frozenset[str] = frozenset()) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in response.raw_headers if k.decode("latin-1").lower() not in drop]


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in _body_chunks(self._response):
            yield chunk

    async def aclose(self) -> None:
        _finish(self._response)


class DirectResponse:
    """An answer read straight from aiohttp, without httpx's objects in between.

    Offers what chatclient's HTTP layer reads of a response: ``status_code``, ``headers``
    (case-insensitive), ``encoding``, ``url``, ``aiter_bytes()`` and ``aclose()``. The body arrives
    already decoded (gzip/deflate); ``as_httpx`` wraps it in an ``httpx.Response`` for the code
    paths that need one (redirects, error statuses).
    """

    __slots__ = ("_response", "encoding", "headers", "status_code", "url")

    def __init__(self, response: aiohttp.ClientResponse, url: str) -> None:
        self._response = response
        self.status_code: int = response.status
        self.headers: Mapping[str, str] = response.headers
        self.encoding: str | None = response.charset
        self.url = url

    @property
    def reason_phrase(self) -> str:
        """The status line's reason ("OK", "Too Many Requests"...)."""
        return self._response.reason or ""

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The (decoded) body as it arrives."""
        return _body_chunks(self._response)

    async def aclose(self) -> None:
        """Give the connection back (or drop it when the body was not read to the end)."""
        _finish(self._response)

    def as_httpx(self, request: httpx.Request) -> httpx.Response:
        """The same answer as an ``httpx.Response`` whose body is still unread."""
        return httpx.Response(
            status_code=self.status_code,
            headers=_header_pairs(self._response, ENCODED_BODY_HEADERS),  # the body is decoded already
            stream=_Body(self._response),
            extensions=_extensions(self._response),
            request=request,
        )


def _extensions(response: aiohttp.ClientResponse) -> dict[str, Any]:
    return {"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode("latin-1")}


class AiohttpTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncBaseTransport`` over ``aiohttp.ClientSession`` (one session per event loop).

    ``limit`` caps open connections in all (aiohttp's ``TCPConnector(limit=)``; 0 means no cap),
    ``keepalive_timeout`` is how long an idle connection stays pooled.
    """

    def __init__(self, *, limit: int = 1000, keepalive_timeout: float = 30.0) -> None:
        if not isinstance(limit, int) or limit < 0:
            raise ValueError(f"limit must be an int >= 0, got {limit!r}")
        self.limit = limit
        self.keepalive_timeout = keepalive_timeout
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        self._timeouts: dict[tuple[float | None, float | None], aiohttp.ClientTimeout] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            connector = aiohttp.TCPConnector(limit=self.limit, keepalive_timeout=self.keepalive_timeout)
            session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # httpx decodes by Content-Encoding, as with its own transport
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
                cookie_jar=aiohttp.DummyCookieJar(),  # no cookies kept between calls (httpx's client does that)
            )
            self._sessions[loop] = session
        return session

    def _timeout(self, connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
        key = (connect, read)
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read)
        return timeout

    async def _open(
        self,
        url: str,
        headers: Iterable[tuple[str, str]] | Mapping[str, str],
        body: bytes,
        timeout: aiohttp.ClientTimeout,
        *,
        method: str = "POST",
        decompress: bool,
        request: httpx.Request | None = None,
    ) -> aiohttp.ClientResponse:
        try:
            return await self._session().request(
                method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
                auto_decompress=decompress,
            )
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            _raise_send_error(exc, request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        response = await self._open(
            str(request.url),
            list(request.headers.multi_items()),
            await request.aread(),
            self._timeout(timeouts.get("connect"), timeouts.get("read")),
            method=request.method,
            decompress=False,
            request=request,
        )
        return httpx.Response(
            status_code=response.status,
            headers=_header_pairs(response),
            stream=_Body(response),
            extensions=_extensions(response),
            request=request,
        )

    async def direct_post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout
    ) -> DirectResponse:
        """POST ``content`` to ``url`` with exactly ``headers``; the answer's body is still unread.

        Send failures raise the same httpx errors as ``handle_async_request``. The caller sets
        ``accept-encoding`` (aiohttp decodes gzip and deflate here, the lane's
        ``stdlib_http.ACCEPT_ENCODING``).
        """
        response = await self._open(
            url, headers, content, self._timeout(timeout.connect, timeout.read), decompress=True
        )
        return DirectResponse(response, url)

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for owner, session in list(self._sessions.items()):
            if owner is loop and not session.closed:
                await session.close()
        self._sessions.pop(loop, None)


__all__ = ["AiohttpTransport", "DirectResponse"]
