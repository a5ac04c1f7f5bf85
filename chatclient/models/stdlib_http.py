"""Sync POSTs over the standard library's ``http.client``: the fast lane for a model's own pool.

httpx's sync client parses HTTP in pure Python (h11) behind a pool lock: about 330 µs of CPU per
request against a local server, where ``http.client`` (C-accelerated header parsing, no pool lock)
needs about 95 µs. A model that owns its sync connections therefore sends its non-streaming POSTs
through ``StdlibPoster`` (``HTTPTransport`` decides when; streams, redirects and clients passed in by
the caller stay on httpx). What it returns behaves like the response the HTTP layer reads from
httpx: ``status_code``, ``headers``, ``encoding``, ``url``, ``iter_bytes()``, ``close()``, and
``as_httpx()`` for the answers (redirects, error statuses) that the ordinary code paths handle.

Failures are raised as the httpx exceptions they stand for (``ConnectTimeout``, ``ConnectError``,
``ReadTimeout``, ``RemoteProtocolError``, ``LocalProtocolError``...), so retries and error messages
are the same as on the httpx path. A pooled connection the server has closed meanwhile is replaced
once, before anything of the answer was read, as httpcore does.
"""

from __future__ import annotations

import http.client
import ssl
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

# Asked for on every request, and decoded here with zlib (both are in the standard library).
ACCEPT_ENCODING = "gzip, deflate"
_READ_SIZE = 64 * 1024
_INFLATE_STEP = 1024 * 1024  # decoded bytes produced per step: a compressed bomb is cut off early
_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
# What a dead pooled connection looks like when it is reused: worth one more try on a fresh one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_Origin = tuple[str, str, int]


def _send_error(exc: BaseException, *, connecting: bool) -> httpx.RequestError:
    """The httpx error an ``http.client`` / socket failure stands for."""
    text = str(exc) or type(exc).__name__
    if isinstance(exc, TimeoutError):
        return httpx.ConnectTimeout(text) if connecting else httpx.ReadTimeout(text)
    if connecting and isinstance(exc, OSError):
        return httpx.ConnectError(text)
    if isinstance(exc, http.client.HTTPException | ssl.SSLError):
        return httpx.RemoteProtocolError(text)
    return httpx.ReadError(text)


class _Inflater:
    """Decodes a gzip or deflate body in bounded steps."""

    def __init__(self, encoding: str) -> None:
        self._raw_deflate = False
        self._decoder = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS)
        self._deflate = encoding == "deflate"
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        try:
            if self._deflate and not self._started:
                self._started = True
                try:
                    yield from self._steps(data)
                    return
                except zlib.error:  # "deflate" sent without its zlib header: raw deflate
                    self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
            yield from self._steps(data)
        except zlib.error as exc:
            raise httpx.DecodingError(f"the response body could not be decoded ({exc})") from None

    def _steps(self, data: bytes) -> Iterator[bytes]:
        while data:
            out = self._decoder.decompress(data, _INFLATE_STEP)
            data = self._decoder.unconsumed_tail
            if out:
                yield out

    def flush(self) -> bytes:
        try:
            return self._decoder.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"the response body could not be decoded ({exc})") from None


class StdlibResponse:
    """One answer with its body unread; ``close()`` returns the connection to the pool when the
    body was read to the end, and drops it otherwise."""

    __slots__ = ("_conn", "_origin", "_poster", "_raw", "encoding", "headers", "status_code", "url")

    def __init__(
        self, poster: StdlibPoster, origin: _Origin, conn: http.client.HTTPConnection, raw: http.client.HTTPResponse, url: str
    ) -> None:
        self._poster = poster
        self._origin = origin
        self._conn: http.client.HTTPConnection | None = conn
        self._raw = raw
        self.status_code: int = raw.status
        self.headers: Mapping[str, str] = raw.headers  # type: ignore[assignment]  # case-insensitive .get
        self.encoding: str | None = raw.headers.get_content_charset()
        self.url = url

    def _raw_chunks(self) -> Iterator[bytes]:
        try:
            while chunk := self._raw.read1(_READ_SIZE):
                yield chunk
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise _send_error(exc, connecting=False) from None

    def iter_bytes(self) -> Iterator[bytes]:
        """The decoded body as it arrives."""
        encoding = (self.headers.get("content-encoding") or "identity").strip().lower()
        if encoding == "identity":
            yield from self._raw_chunks()
            return
        if encoding not in ("gzip", "x-gzip", "deflate"):
            self.close()
            raise httpx.DecodingError(f"unsupported content-encoding {encoding[:40]!r} (asked for {ACCEPT_ENCODING})")
        inflater = _Inflater(encoding)
        for chunk in self._raw_chunks():
            yield from inflater.feed(chunk)
        if tail := inflater.flush():
            yield tail

    def close(self) -> None:
        """Release the connection: back to the pool after a whole body, closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        raw = self._raw
        if raw.length == 0 and not raw.isclosed():
            raw.close()  # the whole body was read (read1 leaves a spent content-length response open)
        if raw.isclosed() and not raw.will_close:
            self._poster._release(self._origin, conn)
        else:
            raw.close()
            conn.close()

    def as_httpx(self, request: httpx.Request) -> httpx.Response:
        """The same answer as an ``httpx.Response`` whose (decoded) body is still unread."""
        headers = [(k, v) for k, v in self._raw.getheaders() if k.lower() not in _ENCODING_HEADERS]
        return httpx.Response(
            self.status_code,
            headers=headers,
            stream=_Stream(self),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": self._raw.reason.encode("latin-1", "replace")},
            request=request,
        )


class _Stream(httpx.SyncByteStream):
    def __init__(self, response: StdlibResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_bytes()

    def close(self) -> None:
        self._response.close()


class StdlibPoster:
    """Pooled keep-alive connections per origin, shared safely by threads (a deque each)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, max_idle: int = 100) -> None:
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._idle: dict[_Origin, deque[http.client.HTTPConnection]] = {}
        self._targets: dict[str, tuple[_Origin, str]] = {}
        self._closed = False

    def _target(self, url: str) -> tuple[_Origin, str]:
        found = self._targets.get(url)
        if found is None:
            parts = urlsplit(url)
            host = parts.hostname or ""
            port = parts.port or (443 if parts.scheme == "https" else 80)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            found = self._targets[url] = ((parts.scheme, host, port), path)
        return found

    def _connect(self, origin: _Origin, timeout: httpx.Timeout) -> http.client.HTTPConnection:
        scheme, host, port = origin
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=timeout.connect, context=self._ssl_context)
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout.connect)
        try:
            conn.connect()
        except BaseException as exc:
            conn.close()
            if isinstance(exc, OSError):
                raise _send_error(exc, connecting=True) from None
            raise
        return conn

    def _release(self, origin: _Origin, conn: http.client.HTTPConnection) -> None:
        idle = self._idle.get(origin)
        if self._closed or idle is None or len(idle) >= self._max_idle:
            conn.close()
        else:
            idle.append(conn)

    def post(self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout) -> StdlibResponse:
        """POST ``content`` with exactly ``headers`` (plus Host and Content-Length)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        origin, path = self._target(url)
        idle = self._idle.setdefault(origin, deque())
        while True:
            try:
                conn, reused = idle.pop(), True
            except IndexError:
                conn, reused = self._connect(origin, timeout), False
            sock: Any = conn.sock
            if sock is not None:
                # Read and write timeouts apply per socket operation, as httpx's do.
                sock.settimeout(timeout.read)
            try:
                conn.request("POST", path, body=content, headers=headers)
                raw = conn.getresponse()
            except _STALE as exc:
                conn.close()
                if reused:
                    continue  # the server closed this idle connection: once more, on a new one
                raise _send_error(exc, connecting=False) from None
            except ValueError as exc:  # http.client refuses a header or URL it cannot send
                conn.close()
                raise httpx.LocalProtocolError(type(exc).__name__) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise _send_error(exc, connecting=False) from None
            except BaseException:
                conn.close()
                raise
            return StdlibResponse(self, origin, conn, raw, url)

    def close(self) -> None:
        """Close every idle connection; connections in use are closed when released."""
        self._closed = True
        for idle in list(self._idle.values()):
            while idle:
                try:
                    idle.pop().close()
                except IndexError:
                    break


__all__ = ["ACCEPT_ENCODING", "StdlibPoster", "StdlibResponse"]
