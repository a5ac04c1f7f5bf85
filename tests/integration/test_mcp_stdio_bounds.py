"""The stdio transport's message bound: a server that prints a huge line cannot make the client hold it.

Every test starts a real subprocess (``mcp_oversized_server.py``) and talks to it through
``McpClient.stdio``; memory is measured with ``tracemalloc``, which sees every thread of this
process (the client's loop thread included).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types import CallToolResult, TextContent

from chatclient.errors import McpProtocolError
from chatclient.mcp import McpClient
from chatclient.mcp._stdio import DEFAULT_MAX_MESSAGE_BYTES, READ_CHUNK_BYTES

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVER = str(Path(__file__).with_name("mcp_oversized_server.py"))
PY = sys.executable
BOUND = 64 * 1024
TWENTY_MB = 20_000_000
MiB = 1024 * 1024
SLACK = 512 * 1024
"""Allowed beyond bound + one chunk: asyncio's pipe buffer (up to 2 x 64 KiB plus a pipe read) and bookkeeping."""


def oversized(pidfile: Path, *extra: str, **kwargs: object) -> McpClient:
    kwargs.setdefault("max_message_bytes", BOUND)
    kwargs.setdefault("call_timeout", 30.0)
    return McpClient.stdio(PY, [SERVER, str(pidfile), *extra], **kwargs)  # type: ignore[arg-type]


def text_of(result: CallToolResult) -> str:
    """The text of a result's first content block."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def server_gone(pidfile: Path, within: float = 5.0) -> bool:
    """True once the server's pid no longer exists (it was terminated and reaped)."""
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pidfile(tmp_path: Path) -> Path:
    return tmp_path / "server.pid"


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def refused_call(client: McpClient, tool: str, arguments: dict[str, int] | None = None) -> tuple[str, float, int]:
    """Call a tool that must be refused; return the error text, the seconds it took and the traced growth.

    The growth is the traced peak during the call minus what was allocated before it.
    """
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    started = time.monotonic()
    with pytest.raises(McpProtocolError) as info:
        client.call_tool(tool, arguments)
    elapsed = time.monotonic() - started
    growth = tracemalloc.get_traced_memory()[1] - before
    print(f"{tool}: refused in {elapsed:.2f} s, peak growth {growth} bytes")
    return str(info.value), elapsed, growth


def test_a_message_of_exactly_the_bound_works_and_one_byte_more_closes_the_connection(pidfile: Path) -> None:
    with oversized(pidfile) as client:
        result = client.call_tool("exact", {"total": BOUND})
        assert not result.is_error
        assert len(text_of(result)) > BOUND - 200  # the whole 64 KiB line arrived
        text = text_of(client.call_tool("exact", {"total": BOUND - 1}))
        assert len(text) == len(text_of(result)) - 1

        with pytest.raises(McpProtocolError) as info:
            client.call_tool("exact", {"total": BOUND + 1})
        assert f"larger than {BOUND} bytes" in str(info.value)
        assert "max_message_bytes=" in str(info.value)
        assert info.value.server is not None and "mcp_oversized_server.py" in info.value.server
        assert client.lost and not client.connected
        assert server_gone(pidfile), "the server is stopped once it broke the bound"
        # Later calls fail fast with the same story, not a generic "connection closed".
        started = time.monotonic()
        with pytest.raises(McpProtocolError, match="larger than"):
            client.list_tools()
        assert time.monotonic() - started < 2.0


def test_a_20_mb_line_fails_fast_and_memory_stays_near_the_bound(pidfile: Path, traced: None) -> None:
    with oversized(pidfile) as client:
        message, elapsed, peak = refused_call(client, "flood", {"size": TWENTY_MB})
        assert "larger than 65536 bytes" in message
        assert elapsed < 5.0, f"took {elapsed:.1f} s; the call timeout is 30 s"
        # bound + one read chunk, plus asyncio's pipe buffer and the error's bookkeeping; the SDK
        # transport would hold the whole 20 MB line (and its decoded copy) here.
        assert peak < BOUND + READ_CHUNK_BYTES + SLACK, f"peak {peak} bytes"
        assert server_gone(pidfile)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 3.0  # the server is already gone: no stop grace to wait out


def test_a_line_that_never_ends_is_cut_and_the_endless_writer_stopped(pidfile: Path, traced: None) -> None:
    client = oversized(pidfile)
    client.connect()
    try:
        message, elapsed, peak = refused_call(client, "endless")
        assert "larger than 65536 bytes" in message
        assert elapsed < 5.0
        assert peak < BOUND + READ_CHUNK_BYTES + SLACK, f"peak {peak} bytes"
        assert server_gone(pidfile), "a server printing forever must not be left running"
    finally:
        started = time.monotonic()
        client.close()
        assert time.monotonic() - started < 5.0


def test_the_default_bound_is_16_mib(pidfile: Path, traced: None) -> None:
    assert DEFAULT_MAX_MESSAGE_BYTES == 16_777_216
    with McpClient.stdio(PY, [SERVER, str(pidfile)], call_timeout=30.0) as client:
        big = client.call_tool("flood", {"size": 12_000_000})  # larger than 10 MB is still fine
        assert len(text_of(big)) > 11_999_000
        del big
        message, elapsed, peak = refused_call(client, "flood", {"size": TWENTY_MB})
        assert f"larger than {16 * MiB} bytes" in message
        assert elapsed < 10.0
        assert peak < 16 * MiB + READ_CHUNK_BYTES + SLACK, f"peak {peak} bytes"


def test_an_oversized_handshake_answer_fails_connect_with_the_protocol_error(pidfile: Path) -> None:
    client = oversized(pidfile, "huge-init", timeout=30.0)
    started = time.monotonic()
    with pytest.raises(McpProtocolError, match="larger than 65536 bytes"):
        client.connect()
    assert time.monotonic() - started < 5.0
    assert server_gone(pidfile)
    assert not client.connected


def test_every_pending_call_gets_the_error_on_the_callers_loop(pidfile: Path) -> None:
    async def main() -> tuple[CallToolResult | BaseException, ...]:
        async with oversized(pidfile) as client:
            # The server starts printing forever on the first call and never reads the second.
            endless = asyncio.ensure_future(client.acall_tool("endless"))
            await asyncio.sleep(0)
            waiting = asyncio.ensure_future(client.acall_tool("exact", {"total": 100}))
            return await asyncio.wait_for(asyncio.gather(endless, waiting, return_exceptions=True), 10.0)

    outcomes = asyncio.run(main())
    assert all(isinstance(o, McpProtocolError) for o in outcomes), outcomes
    assert server_gone(pidfile)


def test_a_line_that_is_not_json_is_logged_and_skipped_as_the_sdk_does(
    pidfile: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="chatclient.mcp.stdio"), oversized(pidfile) as client:
        result = client.call_tool("noisy")
        assert text_of(result) == "ok"
        assert client.connected
        assert text_of(client.call_tool("exact", {"total": 500})).startswith("y")
    assert any("Failed to parse JSONRPC message" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16"])
def test_the_bound_must_be_a_positive_int(bad: object, pidfile: Path) -> None:
    with pytest.raises(ValueError, match="max_message_bytes"):
        McpClient.stdio(PY, [SERVER, str(pidfile)], max_message_bytes=bad)  # type: ignore[arg-type]
