"""A real HTTP server on 127.0.0.1 that speaks the OpenAI, Anthropic and Ollama wire formats.

Tests script what each path answers (a queue of actions per path, then a default responder) and
read back every request (method, path, headers, JSON body). Actions can misbehave on purpose: an
error status with headers (429 + Retry-After), a slow answer, malformed JSON, an SSE/NDJSON stream
that is cut by a TCP reset or that ends without its end marker, a connection closed before any
answer.

    with LoopbackServer() as server:
        server.script("/v1/chat/completions", Reply(500), Reply(json=openai_completion("hi")))
        ...
        assert len(server.requests_to("/v1/chat/completions")) == 2

``main()`` serves instant OpenAI answers from a minimal asyncio responder in a separate process
(the throughput benchmark runs it); it prints the port on its first line.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import socket
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "NDJSON",
    "SSE",
    "Close",
    "LoopbackServer",
    "RawStream",
    "Recorded",
    "Reply",
    "anthropic_message",
    "anthropic_stream",
    "ollama_chat",
    "ollama_stream",
    "openai_completion",
    "openai_stream",
]


# -- actions ------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """A plain answer: ``json`` (serialised) or raw ``body``; ``delay`` seconds before it."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0
    split: Sequence[int] = ()


@dataclass
class SSE:
    """A Server-Sent Events answer.

    ``events`` are dicts (sent as ``data: <json>``), ``(event_name, dict)`` pairs (sent with an
    ``event:`` line) or raw strings (sent as data). ``done`` appends ``data: [DONE]``.
    ``reset_after`` sends that many events, then resets the TCP connection mid-stream;
    ``stall_after`` sends that many events, then waits ``stall`` seconds before the rest.
    ``split`` (on ``Reply``, ``SSE`` and ``NDJSON``) re-cuts the whole body into HTTP chunks of these
    sizes, cycled (e.g. ``(1, 7, 3, 64)``), so the client's decoder sees frames and even UTF-8
    characters split across irregular network reads, as real servers and proxies deliver them.
    """

    events: Sequence[Any]
    done: bool = True
    reset_after: int | None = None
    delay: float = 0.0
    stall_after: int | None = None
    stall: float = 0.0
    split: Sequence[int] = ()


@dataclass
class NDJSON:
    """A newline-delimited JSON answer; ``reset_after`` cuts the connection after that many lines."""

    lines: Sequence[Any]
    reset_after: int | None = None
    delay: float = 0.0
    split: Sequence[int] = ()


@dataclass
class Close:
    """Read the request, then reset the connection without answering."""


@dataclass
class RawStream:
    """A chunked answer of raw ``frames`` (bytes sent as they are, one HTTP chunk each).

    ``keepalive`` > 0: after the frames, send ``: keep-alive`` SSE comments every ``keepalive``
    seconds and never end the body (until the server stops or ``hold`` seconds pass), like a proxy
    that holds a finished stream open. ``end=False`` leaves the body unterminated and closes the
    connection. ``status``/``headers`` as in ``Reply``.
    """

    frames: Sequence[bytes]
    content_type: str = "text/event-stream"
    keepalive: float = 0.0
    hold: float = 30.0
    end: bool = True
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


Action = Reply | SSE | NDJSON | Close | RawStream
Responder = Callable[["Recorded"], Action]


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    client_port: int = 0

    @property
    def body(self) -> Any:
        return json.loads(self.raw) if self.raw else None


# -- wire-format builders -------------------------------------------------------------------------------


def openai_completion(
    text: str | None = "Hello!",
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    finish_reason: str | None = None,
    model: str = "gpt-test",
    usage: tuple[int, int] = (7, 3),
    id: str = "chatcmpl-1",
) -> dict[str, Any]:
    """A ``chat.completion`` object; ``tool_calls`` are (id, name, arguments) triples."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in tool_calls
        ]
    return {
        "id": id,
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason or ("tool_calls" if tool_calls else "stop"),
            }
        ],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def openai_stream(
    pieces: Sequence[str] = ("Hel", "lo", "!"),
    *,
    tool_calls: Sequence[tuple[str, str, Sequence[str]]] = (),
    finish_reason: str | None = None,
    model: str = "gpt-test",
    usage: tuple[int, int] | None = (7, 3),
    id: str = "chatcmpl-1",
) -> list[dict[str, Any]]:
    """``chat.completion.chunk`` events; tool calls are (id, name, argument fragments)."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": id,
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    events = [chunk({"role": "assistant", "content": "" if not tool_calls else None})]
    events.extend(chunk({"content": p}) for p in pieces)
    for index, (call_id, name, fragments) in enumerate(tool_calls):
        events.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                    ]
                }
            )
        )
        events.extend(chunk({"tool_calls": [{"index": index, "function": {"arguments": frag}}]}) for frag in fragments)
    events.append(chunk({}, finish_reason or ("tool_calls" if tool_calls else "stop")))
    if usage is not None:
        events.append(
            {
                "id": id,
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": model,
                "system_fingerprint": "fp_test",
                "choices": [],
                "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
            }
        )
    return events


def anthropic_message(
    text: str | None = "Hello!",
    *,
    tool_uses: Sequence[tuple[str, str, Mapping[str, Any]]] = (),
    stop_reason: str | None = None,
    model: str = "claude-test",
    usage: tuple[int, int] = (9, 4),
    id: str = "msg_1",
) -> dict[str, Any]:
    """A Messages API ``message``; ``tool_uses`` are (id, name, input) triples."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    content.extend({"type": "tool_use", "id": i, "name": n, "input": dict(inp)} for i, n, inp in tool_uses)
    return {
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def anthropic_stream(
    pieces: Sequence[str] = ("Hel", "lo", "!"),
    *,
    tool_uses: Sequence[tuple[str, str, Sequence[str]]] = (),
    stop_reason: str | None = None,
    model: str = "claude-test",
    usage: tuple[int, int] = (9, 4),
    id: str = "msg_1",
    stop: bool = True,
) -> list[tuple[str, dict[str, Any]]]:
    """Messages API stream events; tool uses are (id, name, partial_json fragments)."""
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": usage[0], "output_tokens": 1},
                },
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    index = 0
    if pieces:
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            )
        )
        events.extend(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            )
            for p in pieces
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": 0}))
        index = 1
    for call_id, name, fragments in tool_uses:
        events.append(
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
                },
            )
        )
        events.extend(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": f},
                },
            )
            for f in fragments
        )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_reason or ("tool_use" if tool_uses else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": usage[1]},
            },
        )
    )
    if stop:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def ollama_chat(
    text: str = "Hello!",
    *,
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]] = (),
    done_reason: str = "stop",
    model: str = "llama-test",
    usage: tuple[int, int] = (11, 5),
) -> dict[str, Any]:
    """A final ``/api/chat`` answer; ``tool_calls`` are (name, arguments) pairs."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [{"function": {"name": n, "arguments": dict(a)}} for n, a in tool_calls]
    return {
        "model": model,
        "created_at": "2024-01-01T00:00:00Z",
        "message": message,
        "done": True,
        "done_reason": done_reason,
        "total_duration": 1000,
        "prompt_eval_count": usage[0],
        "eval_count": usage[1],
    }


def ollama_stream(
    pieces: Sequence[str] = ("Hel", "lo", "!"),
    *,
    tool_calls: Sequence[tuple[str, Mapping[str, Any]]] = (),
    model: str = "llama-test",
    usage: tuple[int, int] = (11, 5),
    done: bool = True,
) -> list[dict[str, Any]]:
    """``/api/chat`` NDJSON lines: text pieces, tool calls in one line, then the ``done`` line."""
    lines: list[dict[str, Any]] = [
        {
            "model": model,
            "created_at": "2024-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": p},
            "done": False,
        }
        for p in pieces
    ]
    if tool_calls:
        lines.append(
            {
                "model": model,
                "created_at": "2024-01-01T00:00:00Z",
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": n, "arguments": dict(a)}} for n, a in tool_calls],
                },
                "done": False,
            }
        )
    if done:
        final = ollama_chat("", model=model, usage=usage)
        lines.append(final)
    return lines


# -- server ---------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # many concurrent connects in the benchmark must not overflow the backlog
    owner: LoopbackServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that drop connections (timeouts, early stream exits) are part of the tests.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request stderr lines
        return

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle plus the client's
        # delayed ACK would add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.owner._connection_opened()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        rec = Recorded(self.command, self.path, headers, raw, int(self.client_address[1]))
        owner = self.server.owner
        action = owner._next_action(rec)
        owner._response_started()
        try:
            self._perform(action, owner)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        finally:
            owner._response_ended()

    do_POST = _handle
    do_GET = _handle

    def _perform(self, action: Action, owner: LoopbackServer) -> None:
        delay = getattr(action, "delay", 0.0)
        if delay and owner._stopping.wait(delay):
            self.close_connection = True
            return
        if isinstance(action, Close):
            self._reset()
        elif isinstance(action, RawStream):
            self._raw_stream(action, owner)
        elif isinstance(action, Reply):
            self._reply(action)
        elif isinstance(action, SSE):
            frames = [_sse_frame(e) for e in action.events]
            if action.done and action.reset_after is None:
                frames.append(b"data: [DONE]\n\n")
            if action.split:
                frames = _resplit(frames, action.split)
            self._chunked("text/event-stream", frames, action.reset_after, action.stall_after, action.stall)
        else:
            lines = [(json.dumps(x) if not isinstance(x, str) else x).encode() + b"\n" for x in action.lines]
            if action.split:
                lines = _resplit(lines, action.split)
            self._chunked("application/x-ndjson", lines, action.reset_after)

    def _raw_stream(self, action: RawStream, owner: LoopbackServer) -> None:
        self.send_response(action.status)
        for k, v in {"content-type": action.content_type, **action.headers}.items():
            self.send_header(k, v)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for frame in action.frames:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        if action.keepalive > 0:
            waited = 0.0
            while waited < action.hold and not owner._stopping.wait(action.keepalive):
                waited += action.keepalive
                comment = b": keep-alive\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(comment), comment))
                self.wfile.flush()
            self.close_connection = True
            return
        if action.end:
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.close_connection = True

    def _reply(self, action: Reply) -> None:
        if action.body is not None:
            payload = action.body.encode() if isinstance(action.body, str) else action.body
        else:
            payload = json.dumps(action.json if action.json is not None else {}).encode()
        if action.split:
            self.send_response(action.status)
            for k, v in {"content-type": "application/json", **action.headers}.items():
                self.send_header(k, v)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for piece in _resplit([payload], action.split):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(action.status)
        headers = {"content-type": "application/json", **action.headers}
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _chunked(
        self,
        content_type: str,
        frames: Iterable[bytes],
        reset_after: int | None,
        stall_after: int | None = None,
        stall: float = 0.0,
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", content_type)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for n, frame in enumerate(frames):
            if stall_after is not None and n == stall_after and self.server.owner._stopping.wait(stall):
                self.close_connection = True
                return
            if reset_after is not None and n >= reset_after:
                self.wfile.flush()
                self._reset()
                return
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            self.wfile.flush()
        if reset_after is not None:
            self._reset()
            return
        self.wfile.write(b"0\r\n\r\n")

    def _reset(self) -> None:
        """Abort the TCP connection with a RST (SO_LINGER 0) instead of an orderly close."""
        self.close_connection = True
        try:
            self.wfile.flush()
        except OSError:
            pass
        sock = self.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        finally:
            self.server.owner._connection_closed()


def _resplit(frames: Sequence[bytes], sizes: Sequence[int]) -> list[bytes]:
    """The bytes of ``frames`` re-cut into pieces of ``sizes`` (cycled; each at least one byte)."""
    data = b"".join(frames)
    pieces: list[bytes] = []
    pos = n = 0
    while pos < len(data):
        size = max(1, sizes[n % len(sizes)])
        pieces.append(data[pos : pos + size])
        pos += size
        n += 1
    return pieces


def _sse_frame(event: Any) -> bytes:
    if isinstance(event, tuple):
        name, data = event
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
    if isinstance(event, str):
        return f"data: {event}\n\n".encode()
    return f"data: {json.dumps(event)}\n\n".encode()


class LoopbackServer:
    """The scriptable server; use as a context manager or call ``start``/``stop``."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._scripts: dict[str, collections.deque[Action]] = collections.defaultdict(collections.deque)
        self._defaults: dict[str, Responder] = {}
        self._stopping = threading.Event()
        self.requests: list[Recorded] = []
        self.record = True
        self._open = 0
        self._active = 0
        self.connections_opened = 0
        self._connections_changed = threading.Condition(self._lock)

    @property
    def open_connections(self) -> int:
        """Connections the server still serves (a handler ends when the client closes and a write fails)."""
        with self._lock:
            return self._open

    @property
    def active_responses(self) -> int:
        """Responses being written right now (a stream whose client went away ends at its next write)."""
        with self._lock:
            return self._active

    def wait_for_active_responses(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until exactly ``count`` responses are being written; False when ``timeout`` passes first."""
        with self._connections_changed:
            return self._connections_changed.wait_for(lambda: self._active == count, timeout)

    def _response_started(self) -> None:
        with self._connections_changed:
            self._active += 1
            self._connections_changed.notify_all()

    def _response_ended(self) -> None:
        with self._connections_changed:
            self._active -= 1
            self._connections_changed.notify_all()

    def wait_for_open_connections(self, count: int, timeout: float = 5.0) -> bool:
        """Wait until exactly ``count`` connections are open; False when ``timeout`` passes first."""
        with self._connections_changed:
            return self._connections_changed.wait_for(lambda: self._open == count, timeout)

    def _connection_opened(self) -> None:
        with self._connections_changed:
            self._open += 1
            self.connections_opened += 1
            self._connections_changed.notify_all()

    def _connection_closed(self) -> None:
        with self._connections_changed:
            self._open -= 1
            self._connections_changed.notify_all()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> LoopbackServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="loopback-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, path: str, *actions: Action) -> None:
        """Answer the next requests to ``path`` with ``actions``, in order."""
        with self._lock:
            self._scripts[path].extend(actions)

    def set_default(self, path: str, responder: Responder | Action) -> None:
        """Answer ``path`` with this once its script is used up (a fixed action or a function)."""
        self._defaults[path] = responder if callable(responder) else (lambda _rec: responder)

    def requests_to(self, path: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def reset(self) -> None:
        """Forget recorded requests, scripts and default responders."""
        with self._lock:
            self.requests.clear()
            self._scripts.clear()
            self._defaults.clear()

    def _next_action(self, rec: Recorded) -> Action:
        with self._lock:
            if self.record:
                self.requests.append(rec)
            queue = self._scripts.get(rec.path)
            if queue:
                return queue.popleft()
        responder = self._defaults.get(rec.path)
        if responder is not None:
            return responder(rec)
        return Reply(404, json={"error": {"message": f"no script for {rec.path}"}})


class _InstantProtocol(asyncio.Protocol):
    """Minimal HTTP/1.1 keep-alive responder: every request gets the same canned answer.

    Used for throughput benchmarks, where the server must cost as little as possible so that the
    clients' own overhead is what gets measured.
    """

    def __init__(self, response: bytes) -> None:
        self._response = response
        self._buffer = b""
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self._buffer[:end].decode("latin-1").lower()
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip() == "content-length":
                    length = int(value.strip())
            total = end + 4 + length
            if len(self._buffer) < total:
                return
            self._buffer = self._buffer[total:]
            assert self._transport is not None
            self._transport.write(self._response)


async def serve_instant(payload: bytes, port: int = 0) -> asyncio.Server:
    """Start the instant responder on 127.0.0.1 (``port`` 0 picks a free one)."""
    response = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(payload),
        payload,
    )
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: _InstantProtocol(response), "127.0.0.1", port, backlog=2048)


def main(argv: Sequence[str] | None = None) -> None:
    """Serve instant OpenAI chat completions until killed; print the port first."""
    parser = argparse.ArgumentParser(description="instant OpenAI-format responder for benchmarks")
    parser.parse_args(argv)
    payload = json.dumps(openai_completion("Hello!")).encode()

    async def run() -> None:
        server = await serve_instant(payload)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
