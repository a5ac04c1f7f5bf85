"""examples/chat_ui over plain HTTP (no browser): the AI SDK UI message stream, input limits, and a client
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


def chunks(lines: Iterator[str]) -> Iterator[dict[str, object]]:
    for line in lines:
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[6:])


def ask(question: str) -> dict[str, object]:
    return {"id": "chat-1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": question}]}]}


def test_stream_chunks_in_order_and_disconnect_cancels_the_stream(url: str) -> None:
    before = httpx.get(url + "/api/stats").json()
    seen: list[dict[str, object]] = []
    with httpx.stream("POST", url + "/api/chat/", json=ask("When are you open?"), timeout=10) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        for chunk in chunks(response.iter_lines()):
            seen.append(chunk)
            if sum(c["type"] == "text-delta" for c in seen) == 5:
                break
    types = [c["type"] for c in seen]
    assert types[:3] == ["start", "start-step", "data-advisor"]
    assert seen[2]["data"] == {"name": "status", "message": "searching the library's pages…"}
    first_tool = types.index("tool-input-start")
    assert set(types[3:first_tool]) == {"source-document"}
    assert {c["sourceId"] for c in seen[3:first_tool]} >= {"hours"}
    output = next(c for c in seen if c["type"] == "tool-output-available")
    assert output["output"] == {"kind": "study", "free": 3}
    assert types.index("tool-output-available") < types.index("text-delta")

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
    bad = httpx.post(url + "/api/chat/", json={"id": "c", "messages": []})
    assert bad.status_code == 400 and bad.json()["type"] == "error" and "messages" in bad.json()["errorText"]
    not_json = httpx.post(url + "/api/chat/", content=b"{}", headers={"content-type": "text/plain"})
    assert not_json.status_code == 415
    huge = httpx.post(
        url + "/api/chat/", content=b"{" + b" " * 20_000 + b"}", headers={"content-type": "application/json"}
    )
    assert huge.status_code == 413
