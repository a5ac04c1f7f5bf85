"""Sync POSTs over plain sockets: the fast lane for the non-streaming calls of a model's own pool.

httpx's sync client parses HTTP in pure Python (h11) behind a pool lock, about 330 µs of CPU per
request against a local server; even ``http.client`` spends about 100 µs, most of it parsing headers
with the ``email`` package. A chat call needs little of HTTP/1.1: one POST with headers that never
change, and an answer framed by Content-Length, chunked encoding or the end of the connection. This
module does exactly that (about 45 µs) with sockets, ``ssl`` and ``zlib`` from the standard library;
``HTTPTransport`` decides when it is used (streams, redirects, error answers, clients passed in by
the caller and proxy settings stay with httpx).

What ``post`` returns behaves like the response the HTTP layer reads from httpx: ``status_code``,
``headers`` (case-insensitive), ``encoding``, ``url``, ``iter_bytes()``, ``close()``, and
``as_httpx()`` for the answers that the ordinary code paths handle. Failures are raised as the httpx
exceptions they stand for (``ConnectTimeout``, ``ConnectError``, ``ReadTimeout``, ``ReadError``,
``RemoteProtocolError``, ``LocalProtocolError``, ``DecodingError``), so retries and error messages are
the same as on the httpx path. The server's answer is treated as hostile: status and header lines are
bounded like ``http.client``'s (64 KiB a line, 100 headers), chunk sizes and lengths are checked, and
the caller bounds the body.
"""

from __future__ import annotations

import socket
import ssl
import zlib
from collections import deque
from collections.abc import Iterator, Mapping
from io import BufferedReader
from urllib.parse import urlsplit

import httpx

# Asked for on every request, and decoded here with zlib.
ACCEPT_ENCODING = "gzip, deflate"
_READ_SIZE = 64 * 1024
_MAX_LINE = 64 * 1024
_MAX_HEADERS = 100
_MAX_INTERIM = 10  # 1xx answers (100 Continue, 103 Early Hints) skipped before the real one
_INFLATE_STEP = 1024 * 1024  # decoded bytes produced per step: a compressed bomb is cut off early
_ENCODING_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_NO_BODY = frozenset({204, 304})
_Origin = tuple[str, str, int]
_UNSAFE = frozenset("\r\n\0")


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
    __slots__ = ("rfile", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile: BufferedReader = sock.makefile("rb", buffering=_READ_SIZE)  # type: ignore[assignment]

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()


def _line(rfile: BufferedReader, what: str) -> bytes:
    line = rfile.readline(_MAX_LINE + 1)
    if len(line) > _MAX_LINE:
        raise httpx.RemoteProtocolError(f"the server sent a {what} longer than {_MAX_LINE} bytes")
    return line


def _read_head(rfile: BufferedReader) -> tuple[int, str, bool, list[tuple[str, str]]]:
    """Status, reason, HTTP/1.0 or not, and header pairs of the next final (non-1xx) answer."""
    for _ in range(_MAX_INTERIM + 1):
        line = _line(rfile, "status line")
        if not line:
            raise _Stale
        version, _, rest = line.rstrip(b"\r\n").partition(b" ")
        code, _, reason = rest.partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise httpx.RemoteProtocolError(f"the server did not answer with HTTP/1.x ({line[:40]!r})")
        pairs: list[tuple[str, str]] = []
        while True:
            line = _line(rfile, "header line")
            if line in (b"\r\n", b"\n"):
                break
            if not line.endswith(b"\n"):
                raise httpx.RemoteProtocolError("the connection closed in the middle of the response headers")
            if len(pairs) >= _MAX_HEADERS:
                raise httpx.RemoteProtocolError(f"the server sent more than {_MAX_HEADERS} headers")
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"malformed response header line {line[:40]!r}")
            pairs.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        status = int(code)
        if status >= 200 or status == 101:
            return status, reason.decode("latin-1"), version == b"HTTP/1.0", pairs
    raise httpx.RemoteProtocolError(f"the server sent more than {_MAX_INTERIM} interim (1xx) answers")


def _charset(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for param in content_type.split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip('"') or None
    return None


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


class StdlibResponse:
    """One answer with its body unread; ``close()`` returns the connection to the pool when the
    body was read to the end (and the server keeps it open), and closes it otherwise."""

    __slots__ = (
        "_conn",
        "_done",
        "_length",
        "_origin",
        "_pairs",
        "_poster",
        "_reason",
        "_will_close",
        "encoding",
        "headers",
        "status_code",
        "url",
    )

    def __init__(
        self,
        poster: StdlibPoster,
        origin: _Origin,
        conn: _Connection,
        head: tuple[int, str, bool, list[tuple[str, str]]],
        url: str,
    ) -> None:
        status, reason, http10, pairs = head
        headers = Headers()
        for name, value in pairs:
            key = name.lower()
            previous = dict.get(headers, key)
            dict.__setitem__(headers, key, value if previous is None else f"{previous}, {value}")
        self._poster = poster
        self._origin = origin
        self._conn: _Connection | None = conn
        self._pairs = pairs
        self._reason = reason
        self.status_code = status
        self.headers: Mapping[str, str] = headers
        self.encoding = _charset(headers.get("content-type"))
        self.url = url
        connection = (headers.get("connection") or "").lower()
        self._will_close = "close" in connection or (http10 and "keep-alive" not in connection)
        # Body framing: None = chunked, -1 = until the connection closes, else a byte count.
        self._length: int | None
        transfer = (headers.get("transfer-encoding") or "").lower()
        if status in _NO_BODY or status == 101:
            self._length = 0
        elif transfer:
            if transfer.rsplit(",", 1)[-1].strip() != "chunked":
                raise httpx.RemoteProtocolError(f"unsupported transfer-encoding {transfer[:40]!r}")
            self._length = None
        elif "content-length" in headers:
            values = {v.strip() for v in headers["content-length"].split(",")}
            value = values.pop() if len(values) == 1 else ""
            if not value.isdigit() or len(value) > 18:
                raise httpx.RemoteProtocolError(f"invalid content-length {headers['content-length'][:40]!r}")
            self._length = int(value)
        else:
            self._length = -1
            self._will_close = True
        self._done = self._length == 0

    def _raw_chunks(self) -> Iterator[bytes]:
        conn = self._conn
        if conn is None or self._done:
            return
        rfile = conn.rfile
        try:
            if self._length is None:
                yield from self._chunked(rfile)
            elif self._length < 0:
                while data := rfile.read1(_READ_SIZE):
                    yield data
            else:
                left = self._length
                while left:
                    data = rfile.read1(min(left, _READ_SIZE))
                    if not data:
                        raise httpx.RemoteProtocolError(
                            f"the connection closed {left} bytes before the end of the response body"
                        )
                    left -= len(data)
                    yield data
            self._done = True
        except TimeoutError as exc:
            self.close()
            raise httpx.ReadTimeout(str(exc) or "timed out reading the response") from None
        except OSError as exc:
            self.close()
            raise httpx.ReadError(str(exc) or type(exc).__name__) from None
        except httpx.HTTPError:
            self.close()
            raise

    @staticmethod
    def _chunked(rfile: BufferedReader) -> Iterator[bytes]:
        while True:
            line = _line(rfile, "chunk size line")
            size_text = line.split(b";", 1)[0].strip()
            if not line.endswith(b"\n") or not size_text or len(size_text) > 16:
                raise httpx.RemoteProtocolError("the chunked response body is cut off or malformed")
            try:
                size = int(size_text, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(f"invalid chunk size {size_text[:20]!r}") from None
            if size == 0:
                for _ in range(_MAX_HEADERS + 1):  # trailers, then the blank line
                    trailer = _line(rfile, "trailer line")
                    if trailer in (b"\r\n", b"\n"):
                        return
                    if not trailer.endswith(b"\n"):
                        break
                raise httpx.RemoteProtocolError("the chunked response body ends without its final blank line")
            while size:
                data = rfile.read1(min(size, _READ_SIZE))
                if not data:
                    raise httpx.RemoteProtocolError("the connection closed in the middle of a chunk")
                size -= len(data)
                yield data
            if _line(rfile, "chunk end") not in (b"\r\n", b"\n"):
                raise httpx.RemoteProtocolError("a chunk is longer than its announced size")

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
        if self._done and not self._will_close:
            self._poster._release(self._origin, conn)
        else:
            conn.close()

    def as_httpx(self, request: httpx.Request) -> httpx.Response:
        """The same answer as an ``httpx.Response`` whose (decoded) body is still unread."""
        return httpx.Response(
            self.status_code,
            headers=[(k, v) for k, v in self._pairs if k.lower() not in _ENCODING_HEADERS],
            stream=_Stream(self),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": self._reason.encode("latin-1")},
            request=request,
        )


class _Stream(httpx.SyncByteStream):
    def __init__(self, response: StdlibResponse) -> None:
        self._response = response

    def __iter__(self) -> Iterator[bytes]:
        yield from self._response.iter_bytes()

    def close(self) -> None:
        self._response.close()


def _header_bytes(text: str) -> bytes:
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        return text.encode("utf-8")


class StdlibPoster:
    """Keep-alive connections per origin, shared safely by threads (a deque each)."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None = None, max_idle: int = 100) -> None:
        self._ssl_context = ssl_context
        self._max_idle = max_idle
        self._idle: dict[_Origin, deque[_Connection]] = {}
        # url -> (origin, request head without Content-Length); headers are fixed per caller.
        self._heads: dict[tuple[str, int], tuple[_Origin, bytes, Mapping[str, str]]] = {}
        self._closed = False

    def _head(self, url: str, headers: Mapping[str, str]) -> tuple[_Origin, bytes]:
        key = (url, id(headers))
        found = self._heads.get(key)
        if found is None or found[2] is not headers:
            parts = urlsplit(url)
            host = parts.hostname or ""
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
            found = self._heads[key] = ((parts.scheme, host, port), _header_bytes(text), headers)
        return found[0], found[1]

    def _connect(self, origin: _Origin, timeout: httpx.Timeout) -> _Connection:
        scheme, host, port = origin
        try:
            sock = socket.create_connection((host, port), timeout=timeout.connect)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "timed out connecting") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
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
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from None
        return _Connection(sock)

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        idle = self._idle.get(origin)
        if self._closed or idle is None or len(idle) >= self._max_idle:
            conn.close()
        else:
            idle.append(conn)

    def post(self, url: str, headers: Mapping[str, str], content: bytes, timeout: httpx.Timeout) -> StdlibResponse:
        """POST ``content`` with exactly ``headers`` (plus Host and Content-Length)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        origin, head = self._head(url, headers)
        message = b"%sContent-Length: %d\r\n\r\n%s" % (head, len(content), content)
        idle = self._idle.setdefault(origin, deque())
        while True:
            try:
                conn, reused = idle.pop(), True
            except IndexError:
                conn, reused = self._connect(origin, timeout), False
            try:
                # Read and write timeouts apply per socket operation, as httpx's do.
                conn.sock.settimeout(timeout.read)
                try:
                    conn.sock.sendall(message)
                except (BrokenPipeError, ConnectionResetError) as exc:
                    raise _Stale from exc
                try:
                    head_parts = _read_head(conn.rfile)
                except ConnectionResetError as exc:
                    raise _Stale from exc
                return StdlibResponse(self, origin, conn, head_parts, url)
            except _Stale:
                conn.close()
                if reused:
                    continue  # the server had closed this idle connection: once more, on a new one
                raise httpx.RemoteProtocolError("the server closed the connection without answering") from None
            except TimeoutError as exc:
                conn.close()
                raise httpx.ReadTimeout(str(exc) or "timed out waiting for the answer") from None
            except OSError as exc:
                conn.close()
                raise httpx.ReadError(str(exc) or type(exc).__name__) from None
            except BaseException:
                conn.close()
                raise

    def close(self) -> None:
        """Close every idle connection; connections in use are closed when released."""
        self._closed = True
        for idle in list(self._idle.values()):
            while True:
                try:
                    idle.pop().close()
                except IndexError:
                    break


__all__ = ["ACCEPT_ENCODING", "Headers", "StdlibPoster", "StdlibResponse"]
