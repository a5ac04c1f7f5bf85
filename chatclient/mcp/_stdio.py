"""A stdio transport for MCP servers that refuses oversized messages.

It does what the SDK's ``mcp.client.stdio.stdio_client`` does (start the server as a subprocess in
its own process group, bridge its stdin/stdout to the session's memory streams, stop it with the
spec's close-stdin / wait / terminate sequence) with one difference: stdout is read in chunks of
``READ_CHUNK_BYTES`` and a message (one line) longer than ``max_message_bytes`` is refused as soon
as the partial line passes the bound. The transport then drops what it buffered, reports an
``McpProtocolError`` (to ``on_error`` and, as the SDK does with transport faults, into the read
stream), closes the read stream so every pending request ends at once, and stops the server. At
most ``max_message_bytes`` plus one chunk is held for a message, whatever the server prints.

JSON-RPC parsing stays the SDK's: each complete line is validated with
``mcp_types.jsonrpc_message_adapter`` and wrapped in its ``SessionMessage``; a line that is not a
valid message is logged and passed on as the exception, like the SDK transport does.
"""

from __future__ import annotations

import codecs
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from chatclient.errors import McpError, McpProtocolError
from chatclient.mcp._sdk import StdioServerParameters, types

if sys.platform == "win32":  # pragma: no cover - the SDK's Windows process helpers
    from mcp.os.win32.utilities import (
        close_process_job,
        create_windows_process,
        get_windows_executable_command,
        terminate_windows_process_tree,
    )
else:
    from mcp.os.posix.utilities import terminate_posix_process_tree

from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest single message (one stdout line, in bytes) a stdio server may send: 16 MiB."""
READ_CHUNK_BYTES = 64 * 1024
"""How much of the server's stdout is read at a time."""

STOP_GRACE_SECONDS = 2.0
"""After closing the server's stdin, how long it may take to exit before it is terminated."""
KILL_GRACE_SECONDS = 2.0
"""After SIGTERM, how long before SIGKILL (POSIX); also how long to wait for a kill to be observed."""
FLUSH_SECONDS = 0.5
"""How long the writer may take to send already-accepted messages at shutdown."""
_POLL_SECONDS = 0.01

_log = logging.getLogger("chatclient.mcp.stdio")

ReadStream = MemoryObjectReceiveStream[SessionMessage | Exception]
WriteStream = MemoryObjectSendStream[SessionMessage]


def check_max_message_bytes(value: object) -> int:
    """``value`` as a message bound in bytes (a positive int), else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_message_bytes must be a positive number of bytes, got {value!r}")
    return value


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters,
    errlog: TextIO | None = None,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    label: str | None = None,
    on_error: Callable[[McpError], None] | None = None,
) -> AsyncIterator[tuple[ReadStream, WriteStream]]:
    """Start ``server`` and yield the SDK's ``(read_stream, write_stream)`` pair, like ``stdio_client``.

    ``errlog`` receives the server's stderr (default: this process's stderr). A message longer
    than ``max_message_bytes`` ends the connection with an ``McpProtocolError`` naming ``label``;
    ``on_error`` is called with it before any pending request is woken.
    """
    limit = check_max_message_bytes(max_message_bytes)
    name = label or server.command
    process = await _spawn(server, errlog if errlog is not None else sys.stderr)

    # No await between the spawn and entering the task group, or a cancellation there leaks the process.
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    stopping = False
    decode = _line_decoder(server.encoding, server.encoding_error_handler)

    async def refuse(size: int) -> None:
        error = McpProtocolError(
            f"MCP server {name} sent a message larger than {limit} bytes (at least {size} bytes on one "
            "line); the connection was closed. If the server really sends messages that large, raise "
            "max_message_bytes= on McpClient.stdio(...)",
            server=name,
        )
        _log.warning("closing the connection to MCP server %s: a message passed %d bytes", name, limit)
        if on_error is not None:
            on_error(error)
        with anyio.move_on_after(1.0), suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_writer.send(error)
        await read_writer.aclose()  # every pending request ends now
        await _terminate(process)  # a server that ignores the protocol is not asked twice

    async def stdout_reader() -> None:
        assert process.stdout is not None
        try:
            async with read_writer:
                try:
                    # The pieces of the current line: their total stays within the bound (no over-allocation).
                    pieces: list[bytes] = []
                    held = 0
                    while True:
                        try:
                            chunk = await process.stdout.receive(READ_CHUNK_BYTES)
                        except anyio.EndOfStream:
                            return  # an unfinished last line is dropped, as the SDK does
                        start = 0
                        while start < len(chunk):
                            end = chunk.find(b"\n", start)
                            stop = len(chunk) if end < 0 else end
                            if held + stop - start > limit:
                                size = held + stop - start
                                pieces, held, chunk = [], 0, b""  # let go of the partial message at once
                                await refuse(size)
                                return
                            if stop > start:
                                pieces.append(chunk if start == 0 and stop == len(chunk) else chunk[start:stop])
                                held += stop - start
                            if end < 0:
                                break
                            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                            pieces, held = [], 0
                            item = _parse_line(data, decode)
                            del data
                            start = end + 1
                            try:
                                await read_writer.send(item)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone; the drain below remains
                            del item  # do not pin the last message until the next one arrives
                finally:
                    await _drain(process)
        except anyio.ClosedResourceError:
            pass  # our shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not stopping:
                _log.exception("reading the stdout of MCP server %s failed mid-session", name)

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    text = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (text + "\n").encode(server.encoding, errors=server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()  # the session must see the end rather than wait forever
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()  # lets the reader fall into its drain, so a server stuck writing can exit
        write_stream.close()
        with anyio.move_on_after(FLUSH_SECONDS):
            await writer_done.wait()
        await _stop(process)
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(stdout_reader)
        group.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            stopping = True
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await shutdown()
            group.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


def _line_decoder(encoding: str, errors: str) -> Callable[[bytes], str] | None:
    """``None`` when pydantic can take the raw bytes (strict UTF-8), else a bytes-to-str decoder."""
    if codecs.lookup(encoding).name == "utf-8" and errors == "strict":
        return None
    return lambda line: line.decode(encoding, errors)


def _parse_line(line: bytes, decode: Callable[[bytes], str] | None) -> SessionMessage | Exception:
    """One stdout line as the SDK's ``SessionMessage``; an invalid line is logged and returned as the error."""
    try:
        data: bytes | str = line if decode is None else decode(line)
        message = types.jsonrpc_message_adapter.validate_json(data, by_name=False)
    except ValueError as exc:  # pydantic's ValidationError and UnicodeDecodeError are ValueErrors
        _log.exception("Failed to parse JSONRPC message from server")
        return exc
    return SessionMessage(message)


async def _spawn(server: StdioServerParameters, errlog: TextIO) -> Any:
    env = get_default_environment() | (server.env or {})
    if sys.platform == "win32":  # pragma: no cover
        command = await anyio.to_thread.run_sync(get_windows_executable_command, server.command, abandon_on_cancel=True)
        return await create_windows_process(command, server.args, env, errlog, server.cwd)
    return await anyio.open_process(
        [server.command, *server.args], env=env, stderr=errlog, cwd=server.cwd, start_new_session=True
    )


async def _drain(process: Any) -> None:
    """Read and discard the server's remaining stdout (so it can finish writing and exit); ends at EOF or close."""
    with (
        anyio.CancelScope(shield=True),
        suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError),
    ):
        while True:
            await process.stdout.receive(READ_CHUNK_BYTES)


async def _terminate(process: Any) -> None:
    """Stop the server's whole process tree now (SIGTERM, SIGKILL after a grace period on POSIX)."""
    if sys.platform == "win32":  # pragma: no cover
        await terminate_windows_process_tree(process)
    else:
        await terminate_posix_process_tree(process, KILL_GRACE_SECONDS)


async def _exited(process: Any, seconds: float) -> bool:
    # Polls returncode: process.wait() would also wait for pipe EOF, which a grandchild can hold open.
    deadline = anyio.current_time() + seconds
    while process.returncode is None:
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(_POLL_SECONDS)
    return True


async def _stop(process: Any) -> None:
    """The spec's shutdown: close stdin, wait, then terminate the process tree; every wait bounded."""
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, STOP_GRACE_SECONDS):
        await _terminate(process)
        if not await _exited(process, KILL_GRACE_SECONDS):
            _log.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    if sys.platform == "win32":  # pragma: no cover
        close_process_job(process)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    # The asyncio subprocess transport stays open (and warns when collected) while a survivor holds a pipe.
    close = getattr(getattr(getattr(process, "_process", None), "_transport", None), "close", None)
    if callable(close):
        with suppress(PermissionError):
            close()


__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "READ_CHUNK_BYTES", "bounded_stdio_client", "check_max_message_bytes"]
