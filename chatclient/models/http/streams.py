"""Line streams: the text lines of one streamed answer (SSE or NDJSON), read with the transport's bounds.

Each line is bounded by ``ResponseLimits.max_line_bytes``, each SSE event by ``max_event_bytes`` and
the whole stream by ``max_response_bytes``. After the provider's end marker, ``finish()`` reads what
the server already sent (briefly) so the connection can be pooled, and closes it otherwise.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import httpx

from chatclient.errors import ModelResponseError
from chatclient.models.http.error_mapping import _transport_error
from chatclient.models.http.lane import _Answer, _AsyncAnswer, _SyncAnswer
from chatclient.models.http.limits import ResponseLimits, _Body
from chatclient.models.http.sse import LineDecoder
from chatclient.redaction import scrub

# After the end marker, what the server already sent is read for at most this long (so the
# connection can go back to the pool); anything slower is cut off by closing the connection.
_DRAIN_GRACE = 0.05
_DRAIN_BYTES = 64 * 1024


class _EventBound:
    """Bytes of one SSE event so far (non-comment lines since the last blank line)."""

    __slots__ = ("_limit", "_size")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._size = 0

    def check(self, line: str) -> None:
        if not line:
            self._size = 0
            return
        if line.startswith(":"):
            return
        self._size += len(line) + 1
        if self._size > self._limit:
            self._too_large()

    def check_all(self, lines: list[str]) -> None:
        """``check`` for each of ``lines`` (one call per read, not per line)."""
        size, limit = self._size, self._limit
        for line in lines:
            if not line:
                size = 0
            elif line[0] != ":":
                size += len(line) + 1
                if size > limit:
                    self._too_large()
        self._size = size

    def _too_large(self) -> None:
        raise ModelResponseError(
            f"a stream event is larger than {self._limit} bytes "
            "(raise ResponseLimits.max_event_bytes if such events are expected)"
        )


def _stream_checks(
    limits: ResponseLimits, provider: str, response: _Answer
) -> tuple[LineDecoder, _Body, _EventBound | None]:
    lines = LineDecoder(limits.max_line_bytes)
    total = _Body(limits.max_response_bytes, f"{provider} stream")
    sse = "text/event-stream" in response.headers.get("content-type", "")
    return lines, total, _EventBound(limits.max_event_bytes) if sse else None


class _BoundedStream:
    """What ``LineStream`` and ``AsyncLineStream`` share: the bounds, the cutting of reads into
    checked lines, and the typing of failures; they only drive the reads (sync or async)."""

    def __init__(self, provider: str, secrets: Sequence[str], limits: ResponseLimits, response: _Answer) -> None:
        self._provider = provider
        self._secrets = secrets
        self._lines, self._total, self._events = _stream_checks(limits, provider, response)
        self._answer = response

    def _typed(self) -> _TypedFailures:
        """Around a read loop: a connection failure becomes the provider's typed error, a bound
        that is passed a ``ModelResponseError`` naming the provider (secrets scrubbed)."""
        return _TypedFailures(self)

    def _batch(self, chunk: bytes) -> list[str]:
        """The lines one read completes, checked against the bounds."""
        self._total.add(chunk)
        lines = self._lines.feed(chunk)
        if lines and self._events is not None:
            self._events.check_all(lines)
        return lines

    def _tail(self) -> list[str]:
        """The lines left when the body ends (an SSE stream's last event dispatched)."""
        tail = self._lines.flush()
        if self._events is not None:
            self._events.check_all(tail)
            tail.append("")  # a last event without its blank line is still dispatched
        return tail


class _TypedFailures:
    __slots__ = ("_stream",)

    def __init__(self, stream: _BoundedStream) -> None:
        self._stream = stream

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        stream = self._stream
        if isinstance(exc, httpx.RequestError):
            raise _transport_error(stream._provider, exc, stream._secrets, str(stream._answer.url)) from None
        if isinstance(exc, ModelResponseError):
            raise ModelResponseError(scrub(f"{stream._provider}: {exc}", stream._secrets)) from None


class LineStream(_BoundedStream):
    """The text lines of one streamed answer, read lazily with the transport's bounds.

    ``finish()`` is for after the provider's end marker: whatever the server already sent is read
    so the connection can return to the pool, but nothing is waited for; a server that keeps the
    stream open (keep-alive comments after ``[DONE]``) gets its connection closed instead.
    """

    def __init__(self, provider: str, secrets: Sequence[str], limits: ResponseLimits, response: _SyncAnswer) -> None:
        super().__init__(provider, secrets, limits, response)
        self._response = response
        self._chunks = response.iter_bytes()

    def __iter__(self) -> Iterator[str]:
        with self._typed():
            for chunk in self._chunks:
                self._total.add(chunk)
                for line in self._lines.feed(chunk):
                    if self._events is not None:
                        self._events.check(line)
                    yield line
            for line in self._lines.flush():
                if self._events is not None:
                    self._events.check(line)
                yield line
            if self._events is not None:
                yield ""  # a last event without its blank line is still dispatched

    def batches(self) -> Iterator[list[str]]:
        """The same lines as iterating, grouped by the body reads that completed them (one step per
        read instead of one per line: a read usually holds several events)."""
        with self._typed():
            for chunk in self._chunks:
                lines = self._batch(chunk)
                if lines:
                    yield lines
            tail = self._tail()
            if tail:
                yield tail

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive, not cut into lines (binary streams: AWS event streams);
        bounded by ``max_response_bytes``, failures typed as for lines."""
        with self._typed():
            for chunk in self._chunks:
                self._total.add(chunk)
                yield chunk

    def finish(self) -> None:
        """Read what already arrived (briefly), then release the connection."""
        if isinstance(self._response, httpx.Response):
            self._finish_httpx(self._response)
            return
        # The socket lane: each read of the drain waits at most what is left of the grace period.
        limit_reads: Callable[[float], None] | None = getattr(self._response, "limit_reads", None)
        deadline = time.monotonic() + _DRAIN_GRACE
        try:
            drained = 0
            while limit_reads is not None and drained < _DRAIN_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                limit_reads(left)
                chunk = next(self._chunks, None)
                if chunk is None:
                    break
                drained += len(chunk)
        except (httpx.HTTPError, OSError):
            pass  # the answer is complete; trouble after it changes nothing
        finally:
            self.close()

    def _finish_httpx(self, response: httpx.Response) -> None:
        stream: Any = response.extensions.get("network_stream")
        read = getattr(stream, "read", None)
        if read is None:
            self.close()
            return
        deadline = time.monotonic() + _DRAIN_GRACE
        me = threading.get_ident()
        active = True

        # httpcore fixes the read timeout when the body starts; for the drain, reads on this
        # connection get what is left of the grace period instead. Only this thread, and only
        # while draining: once the body is complete the connection may serve another thread.
        def bounded(max_bytes: int, timeout: float | None = None) -> Any:
            if not active or threading.get_ident() != me:
                return read(max_bytes, timeout=timeout)
            left = max(deadline - time.monotonic(), 0.001)
            return read(max_bytes, timeout=left if timeout is None else min(timeout, left))

        try:
            stream.read = bounded
        except AttributeError:
            self.close()
            return
        try:
            drained = 0
            for chunk in self._chunks:
                drained += len(chunk)
                if drained >= _DRAIN_BYTES or time.monotonic() >= deadline:
                    break
        except (httpx.HTTPError, OSError):
            pass  # the answer is complete; trouble after it changes nothing
        finally:
            active = False
            try:
                del stream.read
            except AttributeError:
                pass
            self.close()

    def close(self) -> None:
        """Close the response (a connection with unread data is dropped, not pooled)."""
        self._response.close()


class AsyncLineStream(_BoundedStream):
    """Async ``LineStream``."""

    def __init__(self, provider: str, secrets: Sequence[str], limits: ResponseLimits, response: _AsyncAnswer) -> None:
        super().__init__(provider, secrets, limits, response)
        self._response = response
        self._chunks = response.aiter_bytes()

    async def __aiter__(self) -> AsyncIterator[str]:
        with self._typed():
            async for chunk in self._chunks:
                self._total.add(chunk)
                for line in self._lines.feed(chunk):
                    if self._events is not None:
                        self._events.check(line)
                    yield line
            for line in self._lines.flush():
                if self._events is not None:
                    self._events.check(line)
                yield line
            if self._events is not None:
                yield ""

    async def batches(self) -> AsyncIterator[list[str]]:
        """Async ``LineStream.batches``."""
        with self._typed():
            async for chunk in self._chunks:
                lines = self._batch(chunk)
                if lines:
                    yield lines
            tail = self._tail()
            if tail:
                yield tail

    async def chunks(self) -> AsyncIterator[bytes]:
        """Async ``LineStream.chunks``."""
        with self._typed():
            async for chunk in self._chunks:
                self._total.add(chunk)
                yield chunk

    async def finish(self) -> None:
        """Read what already arrived (briefly), then release the connection."""

        try:
            async with asyncio.timeout(_DRAIN_GRACE):
                drained = 0
                async for chunk in self._chunks:
                    drained += len(chunk)
                    if drained >= _DRAIN_BYTES:
                        break
        except (TimeoutError, httpx.HTTPError, OSError):
            pass
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Close the response."""
        await self._response.aclose()
