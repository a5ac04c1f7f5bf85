"""HTTP/1.1 POSTs over plain sockets and asyncio streams: the lane for a model's calls and streams.

httpx's clients parse HTTP in pure Python (h11) behind a pool lock, about 330 µs of CPU per request
against a local server; even ``http.client`` spends about 100 µs, most of it parsing headers with
the ``email`` package. A chat call needs little of HTTP/1.1: one POST whose headers never change,
and an answer framed by Content-Length, chunked encoding or the end of the connection. This module
does exactly that with ``socket``, ``asyncio``, ``ssl`` and ``zlib`` from the standard library:
``StdlibPoster`` (sync; threads share its pool) and ``AsyncStdlibPoster`` (one per event loop).
Both faces share the request head (built once per URL and headers), the pool of idle connections,
one sans-IO head parser (``_HeadParser``) and one sans-IO body framer (``_Framer``).
``HTTPTransport`` decides when the lane is used; redirects and error answers after the first
response, clients passed in by the caller, proxy settings and the off switch (``socket_lane=False``,
``CHATCLIENT_SOCKET_LANE=0``) stay with httpx.

What ``post`` returns behaves like the response the HTTP layer reads from httpx: ``status_code``,
``headers`` (case-insensitive), ``encoding``, ``url``, ``reason_phrase``, the body (``iter_bytes`` /
``aiter_bytes``), ``close`` / ``aclose``, and ``as_httpx()`` for the answers that the ordinary code
paths handle. Failures are raised as the httpx exceptions they stand for (``ConnectTimeout``,
``ConnectError``, ``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``, ``LocalProtocolError``,
``DecodingError``), so retries and error messages are the same as on the httpx path. The server's
answer is treated as hostile: head lines, header count and head size are bounded, chunk sizes and
lengths are checked (ASCII digits only), header names must be tokens and values free of control
characters, folded header lines are unfolded, compressed bodies are inflated in bounded steps, and
the caller bounds the body. A connection is pooled only when nothing past its answer is waiting on it
(no response desync), and an idle one is closed after ``keepalive_expiry`` seconds.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import ssl
import time
import zlib
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from io import BufferedReader
from typing import Generic, Protocol, TypeVar
from urllib.parse import urlsplit

import httpx

# Asked for on every request, and decoded here with zlib.
ACCEPT_ENCODING = "gzip, deflate"
_READ_SIZE = 64 * 1024
_MAX_LINE = 64 * 1024
_MAX_HEAD = 256 * 1024  # a whole response head (and the async reader's buffer limit)
_MAX_HEADERS = 100
_MAX_CACHED_HEADS = 64  # request heads kept per poster (one per URL and headers mapping)
_MAX_INTERIM = 10  # 1xx answers (100 Continue, 103 Early Hints) skipped before the real one
_INFLATE_STEP = 1024 * 1024  # decoded bytes produced per step: a compressed bomb is cut off early
# Headers that describe the body as it was sent; dropped when a decoded body is handed to httpx.
ENCODED_BODY_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_NO_BODY = frozenset({204, 304})
_Origin = tuple[str, str, int]
_Head = tuple[int, str, bool, list[tuple[str, str]]]  # status, reason, HTTP/1.0?, header pairs
_UNSAFE = frozenset("\r\n\0")
# RFC 9110 §5.6.2: the characters of a token (a header name); deleting them leaves nothing of a good name.
_TOKEN = b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# RFC 9110 §5.5: what a header value may hold (visible ASCII, space, tab, obs-text); deleting them
# leaves the control characters (NUL, CR, LF, the other C0 controls, DEL).
_VALUE_CHARS = b"\t" + bytes(range(0x20, 0x7F)) + bytes(range(0x80, 0x100))
# Idle keep-alive connections older than this are closed rather than reused: load balancers drop
# idle connections silently (often after 60 s or more), and a request sent on one fails.
KEEPALIVE_EXPIRY = 30.0
# An async connect tries the next address of a host once the previous one has not answered for this
# long (RFC 8305 "happy eyeballs"), so one black-holed address does not cost the whole connect timeout.
HAPPY_EYEBALLS_DELAY = 0.25


def _closed_while_idle(sock: socket.socket) -> bool:
    """Whether a pooled socket is readable before a request went out: the server closed it (or sent
    something unasked), so it cannot carry a request."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def _connect_error(exc: OSError) -> httpx.ConnectError:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, ConnectionRefusedError) and "refused" not in text.lower():
        text = f"connection refused ({text})"  # asyncio says "Connect call failed"
    return httpx.ConnectError(text)


def _read_error(exc: OSError, timed_out: str) -> httpx.TransportError:
    """The httpx error for a failed socket read or write: a timeout (``timed_out`` says while doing
    what) or a broken connection."""
    if isinstance(exc, TimeoutError):
        return httpx.ReadTimeout(str(exc) or timed_out)
    return httpx.ReadError(str(exc) or type(exc).__name__)


class _Stale(Exception):
    """A pooled connection turned out to be closed by the server before it answered."""


class Headers(dict[str, str]):
    """Response headers by lower-case name (repeated headers joined with ", "); lookups ignore case."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())


class _Connection:
    __slots__ = ("idle_since", "rfile", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile: BufferedReader = sock.makefile("rb", buffering=_READ_SIZE)  # type: ignore[assignment]
        self.idle_since = 0.0

    def clean(self) -> bool:
        """Whether nothing past the answer is waiting, buffered or in the socket (never blocks).

        A server that sends more than its answer (bytes after a Content-Length body, a body after a
        204) would otherwise have those bytes read as the answer to the next request on this connection.
        """
        try:
            self.sock.settimeout(0)
            return not self.rfile.peek(1)  # buffered bytes first; else one non-blocking read
        except ssl.SSLWantReadError:
            return True  # no TLS record waiting
        except (OSError, ValueError):
            return False

    def usable(self) -> bool:
        """Whether an idle connection can carry a request: the server has neither closed it nor sent
        anything unasked since (its buffer was empty when it went idle)."""
        return not _closed_while_idle(self.sock)

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


def _status_line(line: bytes) -> tuple[int, str, bool]:
    """Status, reason and whether the answer is HTTP/1.0; ``line`` without its line break."""
    version, _, rest = line.partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit() or code[:1] == b"0":
        raise httpx.RemoteProtocolError(f"the server did not answer with HTTP/1.x ({line[:40]!r})")
    return int(code), reason.decode("latin-1"), version == b"HTTP/1.0"


class _HeadParser:
    """Sans-IO reader of a response head, fed one line at a time (with its line break, as
    ``readline`` gives it; CRLF or bare LF). ``feed`` returns the head of the final (non-1xx)
    answer once its blank line arrives, else ``None``. Bounds: 64 KiB a line, 100 headers, 256 KiB
    a head, 10 interim answers."""

    __slots__ = ("_interim", "_pairs", "_size", "_status")

    def __init__(self) -> None:
        self._status: tuple[int, str, bool] | None = None
        self._pairs: list[tuple[str, str]] = []
        self._size = 0
        self._interim = 0

    def feed(self, line: bytes) -> _Head | None:
        self._size += len(line)
        if len(line) > _MAX_LINE:
            raise httpx.RemoteProtocolError(f"the server sent a head line longer than {_MAX_LINE} bytes")
        if self._size > _MAX_HEAD:
            raise httpx.RemoteProtocolError(f"the response head is larger than {_MAX_HEAD} bytes")
        if not line.endswith(b"\n"):
            if not line and self._status is None and not self._interim:
                raise _Stale  # not one byte of an answer: the connection was closed
            raise httpx.RemoteProtocolError("the connection closed in the middle of the response head")
        text = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        if self._status is None:
            self._status = _status_line(text)
            return None
        if text:
            if text[:1] in b" \t":
                self._unfold(text)
                return None
            if len(self._pairs) >= _MAX_HEADERS:
                raise httpx.RemoteProtocolError(f"the server sent more than {_MAX_HEADERS} headers")
            name, sep, value = text.partition(b":")
            if not sep or not name or name.translate(None, _TOKEN):
                raise httpx.RemoteProtocolError(f"malformed response header line {text[:40]!r} (not 'token: value')")
            value = value.strip(b" \t")
            if value.translate(None, _VALUE_CHARS):
                raise httpx.RemoteProtocolError(
                    f"the value of response header {name[:40].decode('latin-1')!r} contains a control character"
                )
            self._pairs.append((name.decode("latin-1"), value.decode("latin-1")))
            return None
        status, reason, http10 = self._status
        if status >= 200 or status == 101:
            return status, reason, http10, self._pairs
        # 100 Continue and 103 Early Hints come before the answer: skip them.
        self._interim += 1
        if self._interim > _MAX_INTERIM:
            raise httpx.RemoteProtocolError(f"the server sent more than {_MAX_INTERIM} interim (1xx) answers")
        self._status, self._pairs = None, []
        return None

    def _unfold(self, text: bytes) -> None:
        """A folded line (obs-fold, RFC 9112 §5.2) continues the previous header: joined with a space."""
        if not self._pairs:
            raise httpx.RemoteProtocolError("the response head has a continuation line before any header")
        more = text.strip(b" \t")
        if more.translate(None, _VALUE_CHARS):
            raise httpx.RemoteProtocolError(
                f"the value of response header {self._pairs[-1][0][:40]!r} contains a control character"
            )
        name, value = self._pairs[-1]
        if more:
            self._pairs[-1] = (name, f"{value} {more.decode('latin-1')}" if value else more.decode("latin-1"))


def _read_head(rfile: BufferedReader) -> _Head:
    """The head of the next final answer on a sync connection."""
    parser = _HeadParser()
    while True:
        head = parser.feed(rfile.readline(_MAX_LINE + 1))
        if head is not None:
            return head


async def _aread_head(reader: asyncio.StreamReader) -> _Head:
    """Async ``_read_head``."""
    parser = _HeadParser()
    while True:
        try:
            line = await reader.readline()
        except ValueError:  # longer than the reader's limit (_MAX_HEAD) without a line break
            raise httpx.RemoteProtocolError(f"the server sent a head line longer than {_MAX_LINE} bytes") from None
        head = parser.feed(line)
        if head is not None:
            return head


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"') or None
    return None


class _Framer:
    """Sans-IO body framing shared by both lanes: feed the raw bytes as they arrive, get the body's
    bytes back; ``done`` once the body is complete. ``length`` is a byte count, ``None`` for chunked
    transfer coding, or -1 for "until the server closes the connection"."""

    __slots__ = ("_buf", "_left", "_length", "_state", "_trailers", "done")

    _SIZE, _DATA, _DATA_END, _TRAILER = range(4)

    def __init__(self, length: int | None) -> None:
        self._length = length
        self._left = length if length is not None and length > 0 else 0
        self._buf = b""
        self._state = self._SIZE
        self._trailers = 0
        self.done = length == 0

    def want(self) -> int:
        """How many bytes to read next (never past a Content-Length body)."""
        return min(self._left, _READ_SIZE) if self._length is not None and self._length > 0 else _READ_SIZE

    def end(self) -> None:
        """The connection reached its end: fine only for a body framed by the close itself."""
        if self._length == -1:
            self.done = True
        elif not self.done:
            raise httpx.RemoteProtocolError("the connection closed before the end of the response body")

    def feed(self, data: bytes) -> list[bytes]:
        if self.done:
            if data:
                raise httpx.RemoteProtocolError("the server sent more bytes than the response body holds")
            return []
        if self._length == -1:
            return [data]
        if self._length is not None:
            if len(data) > self._left:
                raise httpx.RemoteProtocolError("the server sent more bytes than its Content-Length")
            self._left -= len(data)
            self.done = self._left == 0
            return [data]
        return self._chunked(data)

    def _chunked(self, data: bytes) -> list[bytes]:
        buf = self._buf + data if self._buf else data
        pos, out = 0, []
        while pos < len(buf) and not self.done:
            if self._state == self._DATA:
                piece = buf[pos : pos + self._left]
                pos += len(piece)
                self._left -= len(piece)
                out.append(piece)
                if not self._left:
                    self._state = self._DATA_END
                continue
            end = buf.find(b"\n", pos)
            if end < 0:
                if len(buf) - pos > _MAX_LINE:
                    raise httpx.RemoteProtocolError(f"a chunk size or trailer line is longer than {_MAX_LINE} bytes")
                break
            line = buf[pos:end].rstrip(b"\r")
            pos = end + 1
            if self._state == self._SIZE:
                size_text = line.split(b";", 1)[0].strip()
                if not size_text or len(size_text) > 16 or size_text.strip(b"0123456789abcdefABCDEF"):
                    raise httpx.RemoteProtocolError(f"invalid chunk size {size_text[:20]!r}")
                self._left = int(size_text, 16)
                self._state = self._DATA if self._left else self._TRAILER
            elif self._state == self._DATA_END:
                if line:
                    raise httpx.RemoteProtocolError("a chunk is longer than its announced size")
                self._state = self._SIZE
            elif not line:  # the blank line after the trailers ends the body
                self.done = True
            else:
                self._trailers += 1
                if self._trailers > _MAX_HEADERS:
                    raise httpx.RemoteProtocolError(f"the server sent more than {_MAX_HEADERS} trailers")
        if self.done and pos < len(buf):
            raise httpx.RemoteProtocolError("the server sent more bytes than the response body holds")
        self._buf = buf[pos:]
        return out


class _Inflater:
    """Decodes a gzip or deflate body in bounded steps."""

    def __init__(self, encoding: str) -> None:
        self._deflate = encoding == "deflate"
        self._decoder = zlib.decompressobj(zlib.MAX_WBITS if self._deflate else 16 + zlib.MAX_WBITS)
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


class _Response:
    """What both lanes know of an answer once its head is read: status, headers, body framing."""

    __slots__ = (
        "_framer",
        "_origin",
        "_pairs",
        "_reason",
        "_will_close",
        "encoding",
        "headers",
        "status_code",
        "url",
    )

    def __init__(self, origin: _Origin, head: _Head, url: str) -> None:
        status, reason, http10, pairs = head
        headers = Headers()
        for name, value in pairs:
            key = name.lower()
            previous = dict.get(headers, key)
            dict.__setitem__(headers, key, value if previous is None else f"{previous}, {value}")
        self._origin = origin
        self._pairs = pairs
        self._reason = reason
        self.status_code = status
        self.headers: Mapping[str, str] = headers
        self.encoding = _charset(headers.get("content-type"))
        self.url = url
        connection = (headers.get("connection") or "").lower()
        self._will_close = "close" in connection or (http10 and "keep-alive" not in connection)
        length: int | None  # None: chunked; -1: until the connection closes; else a byte count
        transfer = (headers.get("transfer-encoding") or "").lower()
        if status in _NO_BODY or status == 101:
            length = 0
        elif transfer:
            if transfer.rsplit(",", 1)[-1].strip() != "chunked":
                raise httpx.RemoteProtocolError(f"unsupported transfer-encoding {transfer[:40]!r}")
            length = None
        elif "content-length" in headers:
            values = {v.strip() for v in headers["content-length"].split(",")}
            value = values.pop() if len(values) == 1 else ""
            if not (value.isascii() and value.isdigit()) or len(value) > 18:
                raise httpx.RemoteProtocolError(f"invalid content-length {headers['content-length'][:40]!r}")
            length = int(value)
        else:
            length = -1
            self._will_close = True
        self._framer = _Framer(length)

    def _reusable(self) -> bool:
        return self._framer.done and not self._will_close

    def _decoded(self, inflater: _Inflater | None, pieces: list[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            if inflater is None:
                yield piece
            else:
                yield from inflater.feed(piece)

    @property
    def reason_phrase(self) -> str:
        """The status line's reason ("OK", "Too Many Requests"...), as the server sent it."""
        return self._reason

    def _inflater(self) -> _Inflater | None:
        """A decoder for the body's content-encoding (None for identity)."""
        encoding = (self.headers.get("content-encoding") or "identity").strip().lower()
        if encoding == "identity":
            return None
        if encoding not in ("gzip", "x-gzip", "deflate"):
            raise httpx.DecodingError(f"unsupported content-encoding {encoding[:40]!r} (asked for {ACCEPT_ENCODING})")
        return _Inflater(encoding)

    def _httpx(self, request: httpx.Request, stream: httpx.SyncByteStream | httpx.AsyncByteStream) -> httpx.Response:
        return httpx.Response(
            self.status_code,
            headers=[(k, v) for k, v in self._pairs if k.lower() not in ENCODED_BODY_HEADERS],
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": self._reason.encode("latin-1")},
            request=request,
        )


class StdlibResponse(_Response):
    """One answer with its body unread; ``close()`` returns the connection to the pool when the
    body was read to the end (and the server keeps it open), and closes it otherwise."""

    __slots__ = ("_conn", "_poster")

    def __init__(self, poster: StdlibPoster, origin: _Origin, conn: _Connection, head: _Head, url: str) -> None:
        super().__init__(origin, head, url)
        self._poster = poster
        self._conn: _Connection | None = conn

    def iter_bytes(self) -> Iterator[bytes]:
        """The decoded body as it arrives."""
        conn = self._conn
        if conn is None:
            return
        framer = self._framer
        try:
            inflater = self._inflater()
            while not framer.done:
                data = conn.rfile.read1(framer.want())
                if not data:
                    framer.end()
                    break
                yield from self._decoded(inflater, framer.feed(data))
            if inflater is not None and (tail := inflater.flush()):
                yield tail
        except OSError as exc:  # TimeoutError included
            self.close()
            raise _read_error(exc, "timed out reading the response") from None
        except BaseException:
            self.close()
            raise

    def limit_reads(self, seconds: float) -> None:
        """Let each further read of the body wait at most ``seconds`` (the drain after a stream's end marker)."""
        if self._conn is not None:
            self._conn.sock.settimeout(max(seconds, 0.001))

    def close(self) -> None:
        """Release the connection: back to the pool after a whole body, closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._reusable():
            self._poster._release(self._origin, conn)
        else:
            conn.close()

    def as_httpx(self, request: httpx.Request) -> httpx.Response:
        """The same answer as an ``httpx.Response`` whose (decoded) body is still unread."""
        return self._httpx(request, _Stream(self))


class _Stream(httpx.SyncByteStream):
    def __init__(self, response: StdlibResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_bytes()

    def close(self) -> None:
        self._response.close()


def _ascii_host(host: str) -> str:
    """``host`` as DNS, TLS (SNI) and the Host header spell it: IDNA (UTS #46) for a non-ASCII name."""
    if host.isascii():
        return host
    import idna  # httpx's own dependency; only needed for such names

    try:
        return str(idna.encode(host, uts46=True).decode("ascii"))
    except idna.IDNAError as exc:
        raise httpx.LocalProtocolError(f"the host name {host[:60]!r} is not a valid international domain name ({exc})") from None


def _header_bytes(text: str) -> bytes:
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        return text.encode("utf-8")


class _Closable(Protocol):
    idle_since: float

    def clean(self) -> bool: ...

    def usable(self) -> bool: ...

    def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


class _Poster(Generic[_C]):
    """What both lanes share: the request head per URL, and idle connections per origin (a deque
    each, so threads share a pool without a lock)."""

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = 100,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        if not keepalive_expiry > 0:
            raise ValueError(f"keepalive_expiry must be a positive number of seconds, got {keepalive_expiry!r}")
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._keepalive_expiry = keepalive_expiry
        self._idle: dict[_Origin, deque[_C]] = {}
        # (url, id(headers)) -> (origin, request head without Content-Length, headers); a caller's
        # headers are fixed, so the head is built once.
        self._heads: dict[tuple[str, int], tuple[_Origin, bytes, Mapping[str, str]]] = {}
        self._closed = False
        self._pid = os.getpid()

    def _head(self, url: str, headers: Mapping[str, str]) -> tuple[_Origin, bytes]:
        key = (url, id(headers))
        found = self._heads.get(key)
        if found is None or found[2] is not headers:
            parts = urlsplit(url)
            host = _ascii_host(parts.hostname or "")
            default = 443 if parts.scheme == "https" else 80
            port = parts.port or default
            shown = f"[{host}]" if ":" in host else host
            authority = shown if port == default else f"{shown}:{port}"
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            lines = [f"POST {target} HTTP/1.1", f"Host: {authority}"]
            for name, value in headers.items():
                if name.lower() in ("host", "content-length", "transfer-encoding"):
                    continue
                if _UNSAFE.intersection(name) or _UNSAFE.intersection(value) or ":" in name or not name.strip():
                    # Never quote the value: it may be a credential.
                    raise httpx.LocalProtocolError(f"header {name[:40]!r} cannot be sent (line break, NUL or bad name)")
                lines.append(f"{name}: {value}")
            if _UNSAFE.intersection(target) or " " in target:
                raise httpx.LocalProtocolError("the request path contains a space, line break or NUL")
            text = "\r\n".join(lines) + "\r\n"
            if len(self._heads) >= _MAX_CACHED_HEADS:
                # Headers built afresh for each request (signatures, fresh tokens) would otherwise
                # keep every request's head, and its headers, alive here.
                self._heads.clear()
            found = self._heads[key] = ((parts.scheme, host, port), _header_bytes(text), headers)
        return found[0], found[1]

    def _prepare(self, url: str, headers: Mapping[str, str], content: bytes) -> tuple[_Origin, bytes, deque[_C]]:
        """The origin, the whole request message, and the origin's idle connections."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        if os.getpid() != self._pid:
            # A forked child must not talk on its parent's sockets (answers would interleave): it
            # starts with an empty pool and leaves those connections to the parent.
            self._idle, self._pid = {}, os.getpid()
        origin, head = self._head(url, headers)
        message = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(content), content)
        return origin, message, self._idle.setdefault(origin, deque())

    def _release(self, origin: _Origin, conn: _C) -> None:
        """Pool a connection whose answer was read to the end, unless anything else is waiting on it."""
        idle = self._idle.get(origin)
        if self._closed or idle is None or len(idle) >= self._max_idle or not conn.clean():
            conn.close()
        else:
            conn.idle_since = time.monotonic()
            idle.append(conn)

    def _take(self, idle: deque[_C]) -> _C | None:
        """The most recently used idle connection that can carry a request (others are closed)."""
        while True:
            try:
                conn = idle.pop()
            except IndexError:
                return None
            if time.monotonic() - conn.idle_since <= self._keepalive_expiry and conn.usable():
                return conn
            conn.close()  # expired, or closed by the server while idle: nothing was sent on it

    def close(self) -> None:
        """Close every idle connection; connections in use are closed when released."""
        self._closed = True
        for idle in list(self._idle.values()):
            while True:
                try:
                    idle.pop().close()
                except IndexError:
                    break


class StdlibPoster(_Poster[_Connection]):
    """Sync POSTs over pooled keep-alive sockets, shared safely by threads."""

    def _connect(self, origin: _Origin, timeout: httpx.Timeout) -> _Connection:
        scheme, host, port = origin
        try:
            sock = socket.create_connection((host, port), timeout=timeout.connect)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting") from None
        except OSError as exc:
            raise _connect_error(exc) from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                context = self._ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=host)
        except TimeoutError as exc:
            sock.close()
            raise httpx.ConnectTimeout(str(exc) or "timed out in the TLS handshake") from None
        except OSError as exc:  # ssl.SSLError included
            sock.close()
            raise _connect_error(exc) from None
        return _Connection(sock)

    def post(self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout) -> StdlibResponse:
        """POST ``content`` with exactly ``headers`` (plus Host and Content-Length)."""
        origin, message, idle = self._prepare(url, headers, content)
        while True:
            pooled = self._take(idle)
            conn, reused = (pooled, True) if pooled is not None else (self._connect(origin, timeout), False)
            sent = False
            try:
                # Write and read timeouts apply per socket operation, as httpx's do.
                conn.sock.settimeout(timeout.write)
                try:
                    conn.sock.sendall(message)
                except (BrokenPipeError, ConnectionResetError) as exc:
                    raise _Stale from exc
                sent = True
                conn.sock.settimeout(timeout.read)
                try:
                    head_parts = _read_head(conn.rfile)
                except ConnectionResetError as exc:
                    raise _Stale from exc
                return StdlibResponse(self, origin, conn, head_parts, url)
            except _Stale:
                conn.close()
                if reused and not sent:
                    continue  # the request never left: once more, on another connection
                # Once sent, a request is never re-sent here (the server may have acted on it): the
                # caller's retry policy decides.
                raise httpx.RemoteProtocolError("the server closed the connection without answering") from None
            except OSError as exc:  # TimeoutError included
                conn.close()
                raise _read_error(exc, "timed out waiting for the answer") from None
            except BaseException:
                conn.close()
                raise


class _AsyncConnection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def usable(self) -> bool:
        """Whether the connection is open with nothing waiting on it (read by the loop or not)."""
        if self.reader.at_eof() or self.writer.is_closing():
            return False
        # Bytes the loop already read into the reader: asyncio has no public way to ask, so a reader
        # without the attribute counts as holding some (the connection is then not reused).
        if len(getattr(self.reader, "_buffer", b"?")):
            return False
        # The loop may not have run since the server's FIN (or more bytes) arrived: ask the socket too.
        sock = self.writer.get_extra_info("socket")
        return sock is None or not _closed_while_idle(sock)

    clean = usable

    def close(self) -> None:
        self.writer.close()


class AsyncStdlibResponse(_Response):
    """Async ``StdlibResponse``: ``aiter_bytes()`` and ``aclose()``."""

    __slots__ = ("_conn", "_poster", "_read_timeout")

    def __init__(
        self,
        poster: AsyncStdlibPoster,
        origin: _Origin,
        conn: _AsyncConnection,
        head: _Head,
        url: str,
        read_timeout: float | None,
    ) -> None:
        super().__init__(origin, head, url)
        self._poster = poster
        self._conn: _AsyncConnection | None = conn
        self._read_timeout = read_timeout

    async def _read(self, reader: asyncio.StreamReader, size: int) -> bytes:
        if self._read_timeout is None:
            return await reader.read(size)
        async with asyncio.timeout(self._read_timeout):  # per read, as httpx's read timeout
            return await reader.read(size)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The decoded body as it arrives."""
        conn = self._conn
        if conn is None:
            return
        framer = self._framer
        try:
            inflater = self._inflater()
            while not framer.done:
                data = await self._read(conn.reader, framer.want())
                if not data:
                    framer.end()
                    break
                for piece in self._decoded(inflater, framer.feed(data)):
                    yield piece
            if inflater is not None and (tail := inflater.flush()):
                yield tail
        except OSError as exc:  # TimeoutError included
            self._drop()
            raise _read_error(exc, "timed out reading the response") from None
        except BaseException:
            self._drop()
            raise

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            self._poster._in_flight.release()

    async def aclose(self) -> None:
        """Release the connection: back to the pool after a whole body, closed otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._reusable():
            self._poster._release(self._origin, conn)
        else:
            conn.close()
        self._poster._in_flight.release()

    def as_httpx(self, request: httpx.Request) -> httpx.Response:
        """The same answer as an ``httpx.Response`` whose (decoded) body is still unread."""
        return self._httpx(request, _AsyncStream(self))


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, response: AsyncStdlibResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_bytes():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()


class AsyncStdlibPoster(_Poster[_AsyncConnection]):
    """Async ``StdlibPoster`` over asyncio streams; one per event loop (its connections belong to it).

    At most ``max_connections`` requests are in flight at once (one connection each); further calls
    wait their turn, so thousands of concurrent calls do not run the process out of file descriptors.
    """

    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_idle: int = 100,
        max_connections: int = 512,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
    ) -> None:
        super().__init__(ssl_context=ssl_context, max_idle=max_idle, keepalive_expiry=keepalive_expiry)
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._in_flight = asyncio.Semaphore(max_connections)

    async def _connect(self, origin: _Origin, timeout: httpx.Timeout) -> _AsyncConnection:
        scheme, host, port = origin
        tls = scheme == "https"
        try:
            async with asyncio.timeout(timeout.connect):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=(self._ssl_context or ssl.create_default_context()) if tls else None,
                    server_hostname=host if tls else None,
                    limit=_MAX_HEAD,
                    happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                )
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting") from None
        except OSError as exc:  # ssl.SSLError included
            raise _connect_error(exc) from None
        return _AsyncConnection(reader, writer)

    async def post(
        self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout
    ) -> AsyncStdlibResponse:
        """POST ``content`` with exactly ``headers`` (plus Host and Content-Length)."""
        origin, message, idle = self._prepare(url, headers, content)
        await self._in_flight.acquire()  # given back when the answer is released (or on failure)
        try:
            return await self._post(origin, message, idle, url, timeout)
        except BaseException:
            self._in_flight.release()
            raise

    async def _post(
        self, origin: _Origin, message: bytes, idle: deque[_AsyncConnection], url: str, timeout: httpx.Timeout
    ) -> AsyncStdlibResponse:
        while True:
            conn = self._take(idle) or await self._connect(origin, timeout)
            try:
                conn.writer.write(message)
                if conn.writer.transport.get_write_buffer_size():  # a large body still going out
                    async with asyncio.timeout(timeout.write):
                        await conn.writer.drain()
                async with asyncio.timeout(timeout.read):
                    head = await _aread_head(conn.reader)
                return AsyncStdlibResponse(self, origin, conn, head, url, timeout.read)
            except _Stale:
                conn.close()
                # Once written, a request is never re-sent here (the server may have acted on it).
                raise httpx.RemoteProtocolError("the server closed the connection without answering") from None
            except OSError as exc:  # TimeoutError included
                conn.close()
                raise _read_error(exc, "timed out waiting for the answer") from None
            except BaseException:
                conn.close()
                raise


__all__ = [
    "ACCEPT_ENCODING",
    "ENCODED_BODY_HEADERS",
    "AsyncStdlibPoster",
    "AsyncStdlibResponse",
    "Headers",
    "StdlibPoster",
    "StdlibResponse",
]
