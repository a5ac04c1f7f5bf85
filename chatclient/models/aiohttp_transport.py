"""An httpx transport that sends async requests through aiohttp (extra ``aiohttp``).

httpx stays the public seam: models take an ``httpx.AsyncClient`` as before; only the wire work
underneath moves to aiohttp, whose connection pool does not serialise hundreds of concurrent
callers the way httpcore's does (measured in ``benchmarks/http_throughput.py``: at 256 concurrent
callers httpcore falls to about a sixth of aiohttp's throughput on the same server).

    >>> import httpx
    >>> from chatclient.models.aiohttp_transport import AiohttpTransport
    >>> client = httpx.AsyncClient(transport=AiohttpTransport())   # doctest: +SKIP
    >>> model = OpenAIChatModel(api_key=..., async_http_client=client)  # doctest: +SKIP

The transport never follows redirects (chatclient's HTTP layer does that itself, dropping
credentials across origins), leaves decompression to httpx, maps aiohttp's errors onto httpx's
(so retries and error messages stay the same) and keeps one aiohttp session per event loop, so one
client can serve several ``asyncio.run`` calls.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx

try:
    import aiohttp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "AiohttpTransport needs aiohttp: pip install 'chatclient[aiohttp]'"
    ) from exc

_CHUNK = 64 * 1024


class _Body(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out reading the response") from exc
        except aiohttp.ClientPayloadError as exc:
            raise httpx.RemoteProtocolError(str(exc)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        # release() would return the connection mid-body; close() drops it, which is what a
        # consumer that stops early (a cancelled stream) needs: no more bytes are read.
        if self._response.content.at_eof():
            self._response.release()
        else:
            self._response.close()


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

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=timeouts.get("connect"),
            sock_read=timeouts.get("read"),
        )
        body = await request.aread()
        session = self._session()
        try:
            response = await session.request(
                request.method,
                str(request.url),
                headers=list(request.headers.multi_items()),
                data=body or None,
                allow_redirects=False,
                timeout=timeout,
            )
        except aiohttp.ConnectionTimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting", request=request) from exc
        except TimeoutError as exc:  # aiohttp's SocketTimeoutError: no answer within the read timeout
            raise httpx.ReadTimeout(str(exc) or "timed out waiting for the answer", request=request) from exc
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError(str(exc) or "server disconnected", request=request) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        return httpx.Response(
            status_code=response.status,
            headers=[(k, v) for k, v in response.raw_headers],
            stream=_Body(response),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (response.reason or "").encode("latin-1")},
            request=request,
        )

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        for owner, session in list(self._sessions.items()):
            if owner is loop and not session.closed:
                await session.close()
        self._sessions.pop(loop, None)


__all__ = ["AiohttpTransport"]
