"""What the serving tests share: a real Uvicorn on a free loopback port, a fixture server in a child
process, the fault models every protocol is tried with, and the client-disconnect steps."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from advisors.memory import MessageChatMemoryAdvisor
from chatclient import ChatClient
from chatclient.errors import ModelHTTPError
from chatclient.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from chatclient.messages import AssistantMessage
from chatclient.models.base import BaseChatModel, ChatModel, ChatResponse, Generation
from chatclient.prompt import Prompt


@contextmanager
def serving(make_app: Callable[[str], Any]) -> Iterator[str]:
    """Serve ``make_app(url)`` on 127.0.0.1 (a free port); yields the base URL ``http://127.0.0.1:PORT``.

    The app is made once the URL is known (an A2A card names its own URL)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(make_app(url), log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the test server did not start"
        threading.Event().wait(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@contextmanager
def running(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port); yields the base URL, e.g. ``http://127.0.0.1:40123``."""
    with serving(lambda _url: app) as url:
        yield url


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now (for a child process to listen on)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def child_server(argv: Sequence[str], ports: Sequence[int], label: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``argv`` and wait (20 s each) until every one of ``ports`` on 127.0.0.1 accepts a
    connection; yields the process, then terminates it (killed when it does not stop in 10 s).

    ``RuntimeError`` naming ``label`` when the process exits first (with the end of its stderr) or a
    port is not listening in time."""
    process = subprocess.Popen(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for port in ports:
            deadline = time.monotonic() + 20
            while True:
                if process.poll() is not None:
                    assert process.stderr is not None
                    raise RuntimeError(f"{label} exited: {process.stderr.read().decode()[-2000:]}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{label} did not start listening on port {port}") from None
                    time.sleep(0.1)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
        if process.stderr is not None:
            process.stderr.close()


# -- fault models ------------------------------------------------------------------------------------


class FailsAfterFirstChunk(BaseChatModel):
    """Streams one chunk, then fails with an upstream error whose text carries a secret."""

    secret = "sk-live-1234567890abcdef"

    def call(self, prompt: Prompt) -> ChatResponse:
        raise ModelHTTPError(f"upstream said: bad key {self.secret}", status=500, body=self.secret)

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield ChatResponse((Generation(AssistantMessage("partial")),))
        raise ModelHTTPError(f"upstream said: bad key {self.secret}", status=500, body=self.secret)


class SlowAfterFirstChunk(BaseChatModel):
    """Streams one chunk, then waits (a model still thinking) and records when it was cancelled."""

    def __init__(self) -> None:
        self.cancelled_at: float | None = None

    def call(self, prompt: Prompt) -> ChatResponse:
        raise NotImplementedError

    async def _stall(self) -> None:
        """Wait long; note when the wait was cancelled."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled_at = time.monotonic()
            raise

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        yield ChatResponse((Generation(AssistantMessage("thinking...")),))
        await self._stall()
        yield ChatResponse((Generation(AssistantMessage("never")),))


class SlowBeforeFirstChunk(SlowAfterFirstChunk):
    """Streams nothing for a long while (a model still queueing); records when it was cancelled."""

    async def astream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        await self._stall()
        yield ChatResponse((Generation(AssistantMessage("never")),))


class SlowWholeAnswer(SlowAfterFirstChunk):
    """Answers whole, after a long wait; records when it was cancelled."""

    async def acall(self, prompt: Prompt) -> ChatResponse:
        await self._stall()
        return ChatResponse((Generation(AssistantMessage("never")),))


# -- client disconnects ------------------------------------------------------------------------------


def with_memory(model: ChatModel) -> tuple[ChatClient, MessageWindowChatMemory]:
    """A client over ``model`` that remembers conversations, and the memory it writes to."""
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    return ChatClient.builder(model).default_advisors(MessageChatMemoryAdvisor(memory)).build(), memory


def read_until_then_hang_up(url: str, body: Any, marker: str, headers: dict[str, str] | None = None) -> float:
    """POST ``body`` as a stream, read lines until ``marker`` shows, close the connection; returns when."""
    import httpx

    with httpx.Client(timeout=10) as http, http.stream("POST", url, json=body, headers=headers) as response:
        seen = ""
        lines = response.iter_lines()
        while marker not in seen:
            seen += next(lines)
        return time.monotonic()


def wait_until(done: Callable[[], object], seconds: float = 5) -> None:
    """Poll ``done`` until it is truthy or ``seconds`` pass (the caller asserts what it waited for)."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
