"""RateLimiter against a loopback server that enforces its own limit: 1,000 async calls, no 429."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

from chatclient import Prompt
from chatclient.errors import RateLimitError
from chatclient.models.openai import OpenAIChatModel
from chatclient.resilience import RateLimiter
from tests.support import server_fixtures
from tests.support.loopback import SSE, LoopbackServer, Recorded, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"


class ServerLimit:
    """The server's own limiter: a token bucket of ``per_second`` with a small burst for network jitter."""

    def __init__(self, per_second: float, burst: float) -> None:
        self.rate, self.capacity = per_second, burst
        self.level, self.stamp = burst, time.monotonic()
        self.lock = threading.Lock()
        self.accepted: list[float] = []
        self.rejected = 0

    def __call__(self, rec: Recorded) -> Any:
        with self.lock:
            now = time.monotonic()
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.level < 1:
                self.rejected += 1
                return Reply(429, json={"error": {"message": "rate limited"}}, headers={"retry-after": "1"})
            self.level -= 1
            self.accepted.append(now)
        return Reply(json=openai_completion("ok", usage=(5, 1)))


def make_model(srv: LoopbackServer) -> OpenAIChatModel:
    # No transport retries: a 429 must surface as an error, not be hidden by a retry.
    return OpenAIChatModel("gpt-test", api_key="sk-test-0123456789abcdef", base_url=srv.url + "/v1", max_retries=0)


# The limited server runs in its own process, so the client's 1,000 tasks never starve its
# threads of the GIL (which would bunch arrivals up and measure the test, not the limiter).
LIMITED_SERVER = r"""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RATE, BURST = float(sys.argv[1]), float(sys.argv[2])
lock = threading.Lock()
state = {"level": BURST, "stamp": time.monotonic(), "rejected": 0, "accepted": []}
ANSWER = json.dumps({
    "id": "c", "object": "chat.completion", "created": 0, "model": "gpt-test",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        with lock:
            body = json.dumps({"rejected": state["rejected"], "accepted": state["accepted"]}).encode()
        self._send(200, body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        with lock:
            now = time.monotonic()
            state["level"] = min(BURST, state["level"] + (now - state["stamp"]) * RATE)
            state["stamp"] = now
            ok = state["level"] >= 1
            if ok:
                state["level"] -= 1
                state["accepted"].append(now)
            else:
                state["rejected"] += 1
        if ok:
            self._send(200, ANSWER)
        else:
            self._send(429, b'{"error": {"message": "rate limited"}}', {"retry-after": "1"})

    def _send(self, status, body, headers=None):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


ThreadingHTTPServer.daemon_threads = True
httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(httpd.server_address[1], flush=True)
httpd.serve_forever()
"""


def test_thousand_async_calls_never_see_a_429_and_keep_the_rate() -> None:
    # burst 10 = 100 ms of tolerance: the limiter spaces its releases exactly (see the unit tests),
    # but on a loaded 2-core machine the client's event loop may take a while to put a released
    # request on the wire, so a few arrive closer together than they were released.
    per_second, burst = 100.0, 10.0
    proc = subprocess.Popen(
        [sys.executable, "-c", LIMITED_SERVER, str(per_second), str(burst)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        url = f"http://127.0.0.1:{port}"
        limiter = RateLimiter(requests_per_minute=per_second * 60)
        model = limiter.wrap(
            OpenAIChatModel("gpt-test", api_key="sk-test-0123456789abcdef", base_url=url + "/v1", max_retries=0)
        )

        async def main() -> list[str | None]:
            prompts = [Prompt(f"question {i}") for i in range(1000)]
            return [r.text for r in await asyncio.gather(*(model.acall(p) for p in prompts))]

        texts = asyncio.run(main())
        stats = httpx.get(url + "/stats", timeout=10).json()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert texts == ["ok"] * 1000
    assert stats["rejected"] == 0
    accepted = stats["accepted"]
    span = accepted[-1] - accepted[0]
    rate = (len(accepted) - 1) / span
    print(f"rate limiter: {len(accepted)} calls, {rate:.1f} requests/s over {span:.2f} s, 0 rejected")
    assert abs(rate - per_second) / per_second < 0.10, f"measured {rate:.1f} requests/s over {span:.2f} s"
    # No one-second window holds more than the limit plus the server's burst.
    j = 0
    for i, t in enumerate(accepted):
        while accepted[j] <= t - 1.0:
            j += 1
        assert i - j + 1 <= per_second + burst


def test_remaining_zero_header_holds_callers_until_the_reset(server: LoopbackServer) -> None:
    server.script(
        PATH,
        Reply(
            json=openai_completion("first"),
            headers={"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "800ms"},
        ),
        Reply(json=openai_completion("second")),
    )
    model = RateLimiter(requests_per_minute=6000).wrap(make_model(server))
    assert model.call(Prompt("a")).text == "first"
    start = time.monotonic()
    assert model.call(Prompt("b")).text == "second"
    assert 0.7 < time.monotonic() - start < 2.0


def test_anthropic_style_headers_and_streams_adapt_too(server: LoopbackServer) -> None:
    server.script(
        PATH,
        SSE(openai_stream(["he", "llo"]), delay=0.0),
        Reply(json=openai_completion("after")),
    )
    # The stream's response carries no headers we script here; pause through the 429 path instead.
    limiter = RateLimiter(requests_per_minute=6000)
    model = limiter.wrap(make_model(server))
    assert "".join(c.text or "" for c in model.stream(Prompt("s"))) == "hello"
    limiter.observe(200, {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": "0.5"})
    start = time.monotonic()
    assert model.call(Prompt("b")).text == "after"
    assert 0.4 < time.monotonic() - start < 1.5


def test_a_429_that_gets_through_pauses_the_limiter(server: LoopbackServer) -> None:
    server.script(
        PATH,
        Reply(429, json={"error": {"message": "slow"}}, headers={"retry-after": "0.6"}),
        Reply(json=openai_completion("ok")),
    )
    model = RateLimiter(requests_per_minute=6000).wrap(make_model(server))
    with pytest.raises(RateLimitError):
        model.call(Prompt("a"))
    start = time.monotonic()
    assert model.call(Prompt("b")).text == "ok"
    assert 0.5 < time.monotonic() - start < 1.5
