"""examples/chat_ui over plain HTTP (no browser): the SSE wire format, input limits, and a client
disconnect that cancels the work server-side (read from the app's own counters)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "chat_ui" / "app.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CHATCLIENT_BASE_URL")}
    proc = subprocess.Popen(
        [sys.executable, str(APP), "--scripted", "--filler-words", "600", "--port", str(port), "--token-delay", "0.02"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/api/stats", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the chat app did not start: {proc.stderr.read() if proc.stderr else b''!r}")
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def frames(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, object]]]:
    kind, data = "message", ""
    for line in lines:
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = line[6:]
        elif line == "" and data:
            yield kind, json.loads(data)
            kind, data = "message", ""


def test_sse_frames_in_order_and_disconnect_cancels_the_stream(url: str) -> None:
    before = httpx.get(url + "/api/stats").json()
    seen: list[tuple[str, dict[str, object]]] = []
    with httpx.stream("POST", url + "/api/chat", json={"question": "When are you open?"}, timeout=10) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for kind, data in frames(response.iter_lines()):
            seen.append((kind, data))
            if sum(k == "text" for k, _ in seen) == 5:
                break
    kinds = [k for k, _ in seen]
    assert kinds[:4] == ["advisor", "documents_retrieved", "tool_call_started", "tool_call_finished"]
    assert seen[0][1]["message"] == "searching the library's pages…"
    assert seen[3][1]["result"] == '{"kind":"study","free":3}'
    docs = seen[1][1]["documents"]
    assert isinstance(docs, list) and {d["id"] for d in docs} >= {"hours"}

    def stats() -> dict[str, int]:
        return dict(httpx.get(url + "/api/stats").json())

    end = time.monotonic() + 5
    while stats()["streams_cancelled"] == before["streams_cancelled"] and time.monotonic() < end:
        time.sleep(0.05)
    after = stats()
    assert after["streams_cancelled"] == before["streams_cancelled"] + 1 and after["streams_open"] == 0
    time.sleep(0.3)  # fifteen word intervals
    assert stats()["tokens_generated"] == after["tokens_generated"]


def test_the_page_is_served_and_bad_input_is_refused_with_a_reason(url: str) -> None:
    assert httpx.get(url + "/").text.startswith("<!doctype html>")
    bad = httpx.post(url + "/api/chat", json={"question": "  "})
    assert bad.status_code == 400 and "question" in bad.json()["error"]
    too_long = httpx.post(url + "/api/chat", json={"question": "x" * 2001})
    assert too_long.status_code == 400
    huge = httpx.post(url + "/api/chat", content=b"{" + b" " * 20_000 + b"}")
    assert huge.status_code == 413
