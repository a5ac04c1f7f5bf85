"""The async fast lane (``AsyncStdlibPoster``, asyncio streams) behaves like the httpx path it stands in for.

A model that owns its async client sends its non-streaming ``acall`` POSTs through
``AsyncStdlibPoster``; streams, models given an ``async_http_client=`` and processes with proxy
settings stay on httpx. Most tests run twice: on the lane (no client passed) and on httpx (a plain
``httpx.AsyncClient`` passed in, which rules the lane out). Spies on ``AsyncStdlibPoster.post`` and
``httpx.AsyncClient.send`` prove which path each run took, so a test that passes on both proves the
two paths agree. Every test drives its model from ``asyncio.run`` and closes it with ``aclose()``
on that loop, as an application would.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import ssl
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from chatclient.errors import (
    AuthenticationError,
    ChatClientError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from chatclient.models.http import ResponseLimits
from chatclient.models.http import transport as http_module
from chatclient.models.http.stdlib_http import AsyncStdlibPoster
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import SSE, Close, LoopbackServer, RawStream, Reply, openai_completion, openai_stream
from tests.support.raw_http import (
    ANSWER,
    OK,
    answer_with,
    certificates_fixture,
    gz,
    header_lines,
    keep_alive,
    raw_deflate,
    raw_server,
    read_request,
    server_context,
)

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()
certificates = certificates_fixture()

PATH = "/v1/chat/completions"
KEY = "sk-test-SECRET-0123456789abcdef"
PATHS = ("lane", "httpx")
T = TypeVar("T")

# The client passed to each model built by ``make_model`` (None: the model owns its clients).
_INJECTED: dict[int, httpx.AsyncClient | None] = {}


# -- helpers ------------------------------------------------------------------------------------------


@pytest.fixture
def make_model() -> Iterator[Callable[..., OpenAIChatModel]]:
    """Builds OpenAI models on a server (or URL).

    ``path="lane"`` passes no client (the fast lane); ``path="httpx"`` passes a plain
    ``httpx.AsyncClient``, which keeps every request on httpx. ``run`` closes both on the loop that
    used them; whatever a failing test left open is closed here.
    """
    made: list[OpenAIChatModel] = []

    def make(srv: LoopbackServer | str, path: str = "lane", base: str = "/v1", **kw: Any) -> OpenAIChatModel:
        url = srv if isinstance(srv, str) else srv.url
        if path == "httpx" and "async_http_client" not in kw:
            kw["async_http_client"] = httpx.AsyncClient()
        kw.setdefault("api_key", KEY)
        kw.setdefault("backoff_base", 0.001)
        model = OpenAIChatModel("gpt-test", base_url=url + base, **kw)
        _INJECTED[id(model)] = kw.get("async_http_client")
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()
        _INJECTED.pop(id(model), None)


def run(model: OpenAIChatModel, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` on a fresh event loop; then the model and its injected client are closed on that loop."""

    async def main() -> T:
        try:
            return await work()
        finally:
            await model.aclose()
            client = _INJECTED.get(id(model))
            if client is not None:
                await client.aclose()

    return asyncio.run(main())


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many requests went out through ``AsyncStdlibPoster.post`` and through ``httpx.AsyncClient.send``."""
    seen: Counter[str] = Counter()
    post = AsyncStdlibPoster.post
    send = httpx.AsyncClient.send

    async def spy_post(self: AsyncStdlibPoster, *args: Any, **kw: Any) -> Any:
        seen["lane"] += 1
        return await post(self, *args, **kw)

    async def spy_send(self: httpx.AsyncClient, *args: Any, **kw: Any) -> Any:
        seen["httpx"] += 1
        return await send(self, *args, **kw)

    monkeypatch.setattr(AsyncStdlibPoster, "post", spy_post)
    monkeypatch.setattr(httpx.AsyncClient, "send", spy_send)
    return seen


def took(calls: Counter[str], path: str, n: int = 1) -> bool:
    """``n`` requests went out, all by ``path``."""
    other = "httpx" if path == "lane" else "lane"
    return calls[path] == n and calls[other] == 0


async def text_of(model: OpenAIChatModel, prompt: str = "hi") -> str | None:
    return (await model.acall(Prompt(prompt))).text


def call_text(model: OpenAIChatModel, prompt: str = "hi") -> str | None:
    """One ``acall`` on its own loop, then the model is closed."""
    return run(model, lambda: text_of(model, prompt))


def call_fails(model: OpenAIChatModel, error: type[BaseException], match: str | None = None) -> BaseException:
    """One ``acall`` that must raise ``error``; returns the exception."""

    async def work() -> BaseException:
        with pytest.raises(error, match=match) as info:
            await text_of(model)
        return info.value

    return run(model, work)


def ports(srv: LoopbackServer) -> list[int]:
    return [r.client_port for r in srv.requests_to(PATH)]


# -- 1. which path is taken, and keep-alive -------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_sequential_calls_reuse_one_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.set_default(PATH, Reply(json=openai_completion("again")))
    model = make_model(server, path)

    async def work() -> list[str | None]:
        return [await text_of(model) for _ in range(4)]

    assert run(model, work) == ["again"] * 4
    assert len(ports(server)) == 4
    assert len(set(ports(server))) == 1  # one keep-alive connection served all four
    assert took(calls, path, 4)


@pytest.mark.parametrize("path", PATHS)
def test_streams_take_the_lane_and_keep_their_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.set_default(PATH, SSE(openai_stream(["str", "eam"]), split=(5, 1, 9)))
    model = make_model(server, path)

    async def work() -> list[str]:
        return ["".join([c.text or "" async for c in model.astream(Prompt("hi"))]) for _ in range(3)]

    assert run(model, work) == ["stream"] * 3
    assert took(calls, path, 3)
    assert len(set(ports(server))) == 1  # drained after [DONE], the connection went back to the pool


def test_proxy_in_the_environment_keeps_calls_on_httpx(
    server: LoopbackServer,
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackServer() as proxy:
        target = server.url + PATH
        proxy.script(target, Reply(json=openai_completion("via proxy")))
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        model = make_model(server)
        assert call_text(model) == "via proxy"
        assert [r.path for r in proxy.requests] == [target]  # httpx sent it through the proxy
    assert server.requests_to(PATH) == []
    assert took(calls, "httpx")


# -- 2. connections the server closes -----------------------------------------------------------------


def test_connection_close_answer_is_not_pooled(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.script(PATH, Reply(json=openai_completion("first"), headers={"connection": "close"}))
    server.script(PATH, Reply(json=openai_completion("second")))
    model = make_model(server, max_retries=0)

    async def work() -> list[str | None]:
        return [await text_of(model), await text_of(model)]

    assert run(model, work) == ["first", "second"]
    first, second = ports(server)
    assert first != second  # the second call had to open a new connection
    assert took(calls, "lane", 2)


@pytest.mark.parametrize("loop_saw_the_close", [True, False], ids=["loop-idle", "loop-busy"])
@pytest.mark.parametrize("path", PATHS)
def test_idle_connection_closed_by_the_server_is_replaced(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str, loop_saw_the_close: bool
) -> None:
    # Every connection answers one request as keep-alive, then the server closes it: the pooled
    # connection the next call picks up is dead and must be replaced without costing a retry
    # (max_retries=0) and without the request reaching the server twice. "loop-busy": the event
    # loop did not run between the server's close and the next call (a loop busy with other work),
    # so only the socket itself can tell that the connection is gone.
    closed = threading.Semaphore(0)

    def one_then_close(conn: socket.socket, heads: list[bytes]) -> None:
        head = read_request(conn)
        if head is None:
            return
        heads.append(head)
        conn.sendall(OK)
        conn.shutdown(socket.SHUT_RDWR)
        closed.release()

    with raw_server(one_then_close) as (url, heads):
        model = make_model(url, path, max_retries=0)

        async def work() -> None:
            for _ in range(3):
                assert await text_of(model) == "raw"
                if loop_saw_the_close:
                    assert await asyncio.to_thread(closed.acquire, True, 5.0)
                    await asyncio.sleep(0.02)
                else:
                    assert closed.acquire(timeout=5.0)  # blocks the loop on purpose
                    time.sleep(0.02)  # the FIN is in, but no loop iteration has seen it

        run(model, work)
    assert len(heads) == 3  # exactly one request per call reached the server
    assert took(calls, path, 3)


@pytest.mark.parametrize("path", PATHS)
def test_request_reset_on_a_reused_connection_is_not_resent_behind_max_retries(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # The server received the second POST, then reset the connection: with max_retries=0 that is a
    # connection error, as on httpx; sending the POST again would bill the caller twice.
    server.script(PATH, Reply(json=openai_completion("first")), Close(), Reply(json=openai_completion("resent")))
    model = make_model(server, path, max_retries=0)

    async def work() -> None:
        assert await text_of(model) == "first"
        with pytest.raises(ModelConnectionError):
            await text_of(model)

    run(model, work)
    assert len(server.requests_to(PATH)) == 2
    assert len(set(ports(server))) == 1  # the reset request went out on the pooled connection
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_reset_connection_is_retried_then_typed(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Close(), Close())
    model = make_model(server, path, max_retries=1)
    call_fails(model, ModelConnectionError)
    assert len(server.requests_to(PATH)) == 2  # one try and the one retry the policy allows
    assert took(calls, path, 2)


# -- 3. bodies ----------------------------------------------------------------------------------------

COMPLETION = openai_completion("decoded")
COMPLETION_BYTES = json.dumps(COMPLETION).encode()


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        pytest.param("gzip", gzip.compress(COMPLETION_BYTES), id="gzip"),
        pytest.param("deflate", zlib.compress(COMPLETION_BYTES), id="zlib-deflate"),
        pytest.param("deflate", raw_deflate(COMPLETION_BYTES), id="raw-deflate"),
    ],
)
def test_compressed_answer_is_decoded(
    server: LoopbackServer,
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    path: str,
    encoding: str,
    body: bytes,
) -> None:
    server.script(PATH, Reply(body=body, headers={"content-encoding": encoding}))
    model = make_model(server, path)
    assert call_text(model) == "decoded"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(json=COMPLETION, split=(1, 7, 3, 64)), id="reply-split"),
        pytest.param(
            RawStream([COMPLETION_BYTES[i : i + 50] for i in range(0, len(COMPLETION_BYTES), 50)], "application/json"),
            id="raw-chunks",
        ),
        pytest.param(
            Reply(body=gzip.compress(COMPLETION_BYTES), headers={"content-encoding": "gzip"}, split=(13,)),
            id="gzip-chunked",
        ),
    ],
)
def test_chunked_answer_is_decoded_and_its_connection_kept(
    server: LoopbackServer,
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    path: str,
    reply: Reply | RawStream,
) -> None:
    server.script(PATH, reply, Reply(json=openai_completion("next")))
    model = make_model(server, path)

    async def work() -> list[str | None]:
        return [await text_of(model), await text_of(model)]

    assert run(model, work) == ["decoded", "next"]
    assert len(set(ports(server))) == 1  # the chunked body was read to its end: the connection was pooled
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_unsupported_content_encoding_is_a_response_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(body=b"\x1b\x07\x00\xf8\xa5@\x03", headers={"content-encoding": "br"}))
    model = make_model(server, path, max_retries=0)
    call_fails(model, ModelResponseError)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_declared_charset_is_honoured(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    body = json.dumps(openai_completion("caf\u00e9"), ensure_ascii=False).encode("latin-1")
    server.script(PATH, Reply(body=body, headers={"content-type": "application/json; charset=iso-8859-1"}))
    model = make_model(server, path)
    assert call_text(model) == "caf\u00e9"
    assert took(calls, path)


BIG = openai_completion("x" * 5000)
BIG_BYTES = json.dumps(BIG).encode()
SMALL_LIMIT = ResponseLimits(max_response_bytes=1000)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(json=BIG), id="content-length"),
        pytest.param(Reply(json=BIG, split=(300,)), id="chunked-reply"),
        pytest.param(
            RawStream([BIG_BYTES[i : i + 400] for i in range(0, len(BIG_BYTES), 400)], "application/json"),
            id="chunked-raw",
        ),
        pytest.param(Reply(body=gz(BIG), headers={"content-encoding": "gzip"}), id="gzip-bomb"),
        pytest.param(Reply(body=zlib.compress(BIG_BYTES), headers={"content-encoding": "deflate"}), id="deflate-bomb"),
    ],
)
def test_body_over_the_limit_is_refused(
    server: LoopbackServer,
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    path: str,
    reply: Reply | RawStream,
) -> None:
    assert len(gz(BIG)) < SMALL_LIMIT.max_response_bytes < len(BIG_BYTES)  # the bombs fit compressed
    server.script(PATH, reply)
    model = make_model(server, path, response_limits=SMALL_LIMIT)
    call_fails(model, ModelResponseError, match="larger than 1000 bytes")
    assert took(calls, path)


def test_huge_gzip_bomb_is_cut_off(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    # 64 MB of decoded JSON in ~64 KB of gzip: refused after the limit, not after inflating it all.
    bomb = gzip.compress(b'{"pad": "' + b"0" * (64 * 1024 * 1024) + b'"}', compresslevel=9)
    assert len(bomb) < 200_000
    server.script(PATH, Reply(body=bomb, headers={"content-encoding": "gzip"}))
    model = make_model(server, response_limits=ResponseLimits(max_response_bytes=1024 * 1024))
    call_fails(model, ModelResponseError, match="larger than")
    assert took(calls, "lane")


# -- 4. errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_gzip_error_body_gives_the_servers_message(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    error = {"error": {"message": "bad temperature value", "type": "invalid_request_error", "code": "bad_temp"}}
    server.script(
        PATH, Reply(status=400, body=gz(error), headers={"content-encoding": "gzip", "x-request-id": "req-42"})
    )
    model = make_model(server, path)
    exc = call_fails(model, ModelHTTPError)
    assert isinstance(exc, ModelHTTPError)
    assert exc.status == 400
    assert "bad temperature value" in str(exc)
    assert exc.code == "bad_temp"
    assert exc.request_id == "req-42"
    assert took(calls, path)  # a 400 is not retried


@pytest.mark.parametrize("path", PATHS)
def test_401_is_an_authentication_error_without_the_key(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    model = make_model(server, path)
    exc = call_fails(model, AuthenticationError)
    assert isinstance(exc, AuthenticationError)
    assert exc.status == 401
    assert KEY not in str(exc) and KEY[-12:] not in str(exc)
    assert KEY not in (exc.body or "")
    assert took(calls, path)  # never retried


@pytest.mark.parametrize("path", PATHS)
def test_429_then_200_is_retried(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(
        PATH,
        Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0"}),
        Reply(json=openai_completion("after retry")),
    )
    model = make_model(server, path)
    assert call_text(model) == "after retry"
    assert len(server.requests_to(PATH)) == 2
    assert len(set(ports(server))) == 1  # the 429's body was read: its connection served the retry
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_slow_answer_is_a_timeout(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(json=openai_completion("late"), delay=0.6))
    model = make_model(server, path, timeout=0.2, max_retries=0)
    call_fails(model, ModelTimeoutError)  # the server would have answered (0.6 s) had the call waited
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_body_that_stalls_is_a_timeout(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # The status line and the first part arrive in time; the rest does not.
    server.script(PATH, SSE([openai_completion("a"), openai_completion("b")], stall_after=1, stall=0.6))
    model = make_model(server, path, timeout=0.2, max_retries=0)
    call_fails(model, ModelTimeoutError)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_refused_connection_is_typed(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there any more
    model = make_model(url, path, max_retries=0)
    # asyncio words it "Connect call failed"; the lane names the refusal as the sync paths do. httpx's
    # async client (anyio) only says "All connection attempts failed".
    hint = "connection refused - is the server running" if path == "lane" else "is the server running"
    call_fails(model, ModelConnectionError, match=f"could not connect.*{hint}")
    assert took(calls, path)


def _short_body(declared: int, sent: bytes, extra: bytes = b"") -> Callable[[socket.socket, list[bytes]], None]:
    return answer_with(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n\r\n%s" % (extra, declared, sent)
    )


@pytest.mark.parametrize("path", PATHS)
def test_body_shorter_than_its_content_length_is_a_connection_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    sent = json.dumps(openai_completion("cut")).encode()[:40]
    with raw_server(_short_body(1000, sent)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        call_fails(model, ModelConnectionError)
    assert len(heads) == 1
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_cut_body_that_parses_as_json_is_not_taken_for_a_whole_answer(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # The bytes that arrived form valid JSON on their own; only the content-length tells that the
    # answer is incomplete.
    sent = json.dumps(openai_completion("complete-looking")).encode()
    with raw_server(_short_body(len(sent) + 500, sent)) as (url, _):
        model = make_model(url, path, max_retries=0)
        call_fails(model, ChatClientError)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_cut_gzip_body_is_a_typed_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    packed = gz(openai_completion("zipped and cut"))
    assert len(packed) > 40
    with raw_server(_short_body(len(packed), packed[:40], b"content-encoding: gzip\r\n")) as (url, _):
        model = make_model(url, path, max_retries=0)
        call_fails(model, ChatClientError)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_unterminated_chunked_body_is_a_typed_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, RawStream([b'{"id": "chatcmpl-1", "choi'], "application/json", end=False))
    model = make_model(server, path, max_retries=0)
    call_fails(model, ChatClientError)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_no_content_answer_is_a_response_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(status=204, body=b""))
    model = make_model(server, path, max_retries=0)
    call_fails(model, ModelResponseError)
    assert took(calls, path)


# -- 5. protocol edges the lane parses itself ----------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n" + OK, id="100-continue-first"),
        pytest.param(b"HTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\n" + OK, id="103-early-hints-first"),
        pytest.param(b"HTTP/1.0 200 OK\r\ncontent-type: application/json\r\n\r\n" + ANSWER, id="http10-until-close"),
        pytest.param(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + ANSWER, id="http11-until-close"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nContent-Length: %d\r\n\r\n%s"
            % (len(ANSWER), len(ANSWER), ANSWER),
            id="repeated-equal-content-length",
        ),
    ],
)
def test_unusual_but_valid_framing_is_read(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str, raw: bytes
) -> None:
    with raw_server(answer_with(raw)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        assert call_text(model) == "raw"
    assert len(heads) == 1
    assert took(calls, path)


@pytest.mark.parametrize(
    "path",
    [
        "lane",
        "httpx",
    ],
)
def test_head_with_bare_lf_line_ends_is_read(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    raw = b"HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: %d\n\n%s" % (len(ANSWER), ANSWER)
    with raw_server(answer_with(raw)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        assert call_text(model) == "raw"
    assert len(heads) == 1
    assert took(calls, path)


HUGE_HEAD = b"".join(b"x-pad-%d: %s\r\n" % (n, b"a" * 60_000) for n in range(5))  # 300 KB in lines under 64 KiB


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\ncontent-length: 20\r\n\r\n" + ANSWER, id="conflicting-lengths"
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: -5\r\n\r\n" + ANSWER, id="negative-length"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", id="bad-chunk-size"
        ),
        pytest.param(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n", id="cut-in-the-headers"),
        pytest.param(b"NOT-HTTP garbage\r\n\r\n", id="garbage-status-line"),
        pytest.param(b"HTTP/1.1 200 OK\r\n" + HUGE_HEAD + b"\r\n" + ANSWER, id="head-over-256KiB"),
        pytest.param(b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * 200_000 + b"\r\n\r\n" + ANSWER, id="line-over-64KiB"),
    ],
)
def test_malformed_framing_is_a_connection_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str, raw: bytes
) -> None:
    with raw_server(answer_with(raw)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        call_fails(model, ModelConnectionError)
    assert len(heads) == 1  # not resent
    assert took(calls, path)


def test_more_than_100_headers_is_a_connection_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    # The lane bounds the header count as http.client does (httpx/h11 only bound the head's size).
    many = b"".join(b"x-h%d: v\r\n" % n for n in range(101))
    raw = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%s\r\n%s" % (len(ANSWER), many, ANSWER)
    with raw_server(answer_with(raw)) as (url, heads):
        model = make_model(url, max_retries=0)
        call_fails(model, ModelConnectionError, match="more than 100 headers")
    assert len(heads) == 1
    assert took(calls, "lane")


# -- 6. redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_same_origin_redirect_is_followed(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script("/v1/old/chat/completions", Reply(status=307, headers={"location": PATH}))
    server.script(PATH, Reply(json=openai_completion("moved")))
    model = make_model(server, path, base="/v1/old")
    assert call_text(model) == "moved"
    followed = server.requests_to(PATH)
    assert len(followed) == 1
    assert followed[0].headers["authorization"] == f"Bearer {KEY}"  # same origin: the key goes along
    assert followed[0].body["messages"][0]["content"] == "hi"
    # only the first hop can take the lane; the follow-up is an ordinary httpx send
    assert calls == (Counter(lane=1, httpx=1) if path == "lane" else Counter(httpx=2))


@pytest.mark.parametrize("path", PATHS)
def test_cross_origin_redirect_drops_credentials(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    with LoopbackServer() as other:
        other.script(PATH, Reply(json=openai_completion("elsewhere")))
        server.script(PATH, Reply(status=307, headers={"location": other.url + PATH}))
        model = make_model(server, path, headers={"x-api-key": KEY, "x-team": "a"})
        assert call_text(model) == "elsewhere"
        moved = other.requests_to(PATH)
    assert len(moved) == 1
    assert "authorization" not in moved[0].headers
    assert "x-api-key" not in moved[0].headers
    assert moved[0].headers["x-team"] == "a"  # plain headers still go along
    assert calls == (Counter(lane=1, httpx=1) if path == "lane" else Counter(httpx=2))


# -- 7. headers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_headers_reach_the_server(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(json=openai_completion("ok")))
    model = make_model(server, path, headers={"x-team": "a", "OpenAI-Organization": "org-1"})
    assert call_text(model) == "ok"
    sent = server.requests_to(PATH)[0].headers
    assert sent["user-agent"] == "chatclient"
    assert sent["accept-encoding"] == "gzip, deflate"
    assert sent["authorization"] == f"Bearer {KEY}"
    assert sent["x-team"] == "a"
    assert sent["openai-organization"] == "org-1"
    assert sent["content-type"] == "application/json"
    assert sent["accept"] == "application/json"
    assert sent["host"] == f"127.0.0.1:{server.port}"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_each_header_is_sent_once_whatever_its_case(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # Header names are case-insensitive: a caller's "User-Agent" replaces chatclient's own, as
    # httpx merges them, instead of going out next to it.
    custom = {"User-Agent": "my-app/1.0", "Accept": "application/json", "X-Team": "a", "Authorization": "Bearer other"}
    with raw_server(answer_with(OK)) as (url, heads):
        model = make_model(url, path, headers=custom)
        assert call_text(model) == "raw"
    names = [name for name, _ in header_lines(heads[0])]
    assert sorted(n for n, count in Counter(names).items() if count > 1) == []
    sent = dict(header_lines(heads[0]))
    assert sent["user-agent"] == "my-app/1.0"
    assert sent["x-team"] == "a"
    assert sent["authorization"] == f"Bearer {KEY}"  # the explicit api_key wins over the caller's header
    assert took(calls, path)


# -- 8. concurrency, cancellation, loops and close ------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_concurrent_calls_each_get_their_own_answer(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    concurrency = 200
    with LoopbackServer() as own:  # its own server, so that only this test's connections count
        own.set_default(PATH, lambda rec: Reply(json=openai_completion(rec.body["messages"][0]["content"])))
        model = make_model(own, path)

        async def work() -> tuple[list[str | None], list[str | None]]:
            crowd = await asyncio.gather(*(text_of(model, f"c{n}") for n in range(concurrency)))
            after = [await text_of(model, f"s{n}") for n in range(20)]
            return crowd, after

        crowd, after = run(model, work)
        opened = own.connections_opened
        first_round = {r.client_port for r in own.requests_to(PATH)[:concurrency]}
        all_ports = set(ports(own))
    assert crowd == [f"c{n}" for n in range(concurrency)]  # no answer went to another caller
    assert after == [f"s{n}" for n in range(20)]
    assert len(first_round) <= concurrency
    assert opened == len(all_ports) <= concurrency  # the sequential calls reused pooled connections
    assert took(calls, path, concurrency + 20)


@pytest.mark.parametrize("path", PATHS)
def test_cancelled_call_drops_its_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # The answer to the cancelled call arrives later on its connection: that connection must not go
    # back to the pool, or the next call would read the stale answer as its own.
    server.script(PATH, Reply(json=openai_completion("warm")))
    server.script(PATH, Reply(json=openai_completion("late"), delay=0.4))
    server.script(PATH, Reply(json=openai_completion("next")))
    model = make_model(server, path, max_retries=0)

    async def work() -> list[str | None]:
        first = await text_of(model)
        task = asyncio.create_task(text_of(model))
        while len(server.requests_to(PATH)) < 2:  # the server has the request and is delaying it
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.5)  # the late answer has been written to the cancelled connection by now
        return [first, await text_of(model)]

    assert run(model, work) == ["warm", "next"]
    warm, cancelled, last = ports(server)
    assert warm == cancelled  # the cancelled request went out on the pooled connection...
    assert last != cancelled  # ...which was dropped, not pooled again
    assert len(server.requests_to(PATH)) == 3
    assert took(calls, path, 3)


@pytest.mark.parametrize("path", PATHS)
def test_call_cancelled_while_reading_the_body_drops_its_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, SSE([openai_completion("a"), openai_completion("b")], stall_after=1, stall=0.4))
    server.script(PATH, Reply(json=openai_completion("next")))
    model = make_model(server, path, max_retries=0)

    async def work() -> str | None:
        task = asyncio.create_task(text_of(model))
        await asyncio.sleep(0.15)  # the head and the first event are in; the rest stalls
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await text_of(model)

    assert run(model, work) == "next"
    cancelled, last = ports(server)
    assert last != cancelled
    assert took(calls, path, 2)


def test_one_model_on_two_successive_event_loops(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    # Connections belong to the loop that opened them: the second asyncio.run gets a fresh lane.
    server.set_default(PATH, Reply(json=openai_completion("loop")))
    model = make_model(server)
    assert asyncio.run(text_of(model)) == "loop"
    assert asyncio.run(text_of(model)) == "loop"
    assert call_text(model) == "loop"
    assert len(set(ports(server))) == 3  # one connection per loop
    assert took(calls, "lane", 3)


def test_closed_model_refuses_calls_and_closes_its_connections(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    with LoopbackServer() as own:  # its own server, so that other tests' connections do not count
        own.set_default(PATH, Reply(json=openai_completion("open")))
        model = make_model(own)

        async def work() -> None:
            assert await text_of(model) == "open"
            assert own.open_connections == 1
            await model.aclose()
            with pytest.raises(RuntimeError, match="model is closed"):
                await text_of(model)

        run(model, work)
        assert own.wait_for_open_connections(0, timeout=5.0)  # the pooled connection was closed
        assert len(own.requests_to(PATH)) == 1
    assert took(calls, "lane")


# -- 9. TLS -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_https_answers_over_one_verified_connection(
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    certificates: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
) -> None:
    trusting = ssl.create_default_context(cafile=str(certificates["good"][0]))
    monkeypatch.setattr(http_module, "_ssl_context", lambda: trusting)  # the model's own pools trust the test CA
    client = {"async_http_client": httpx.AsyncClient(verify=trusting)} if path == "httpx" else {}
    connections: list[socket.socket] = []

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        connections.append(conn)
        keep_alive(conn, heads)

    with raw_server(serve, tls=server_context(certificates["good"])) as (url, heads):
        model = make_model(url, path, **client)

        async def work() -> list[str | None]:
            return [await text_of(model) for _ in range(3)]

        assert run(model, work) == ["raw"] * 3
    assert len(heads) == 3
    assert len(connections) == 1  # one TLS handshake, then keep-alive
    assert took(calls, path, 3)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cert", ["good", "wrong-host"])
def test_https_certificate_is_checked(
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    certificates: dict[str, tuple[Path, Path]],
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    cert: str,
) -> None:
    # "good" is not trusted (the default CA bundle); "wrong-host" is trusted but names another host.
    if cert == "wrong-host":
        trusting = ssl.create_default_context(cafile=str(certificates[cert][0]))
        monkeypatch.setattr(http_module, "_ssl_context", lambda: trusting)
    client = {"async_http_client": httpx.AsyncClient(verify=http_module._ssl_context())} if path == "httpx" else {}
    with raw_server(keep_alive, tls=server_context(certificates[cert])) as (url, heads):
        model = make_model(url, path, max_retries=0, **client)
        call_fails(model, ModelConnectionError, match=r"(?i)certificate")
    assert heads == []  # nothing was sent to a server that could not prove who it is
    assert took(calls, path)


# -- the cap on requests in flight ----------------------------------------------------------------------


def test_requests_in_flight_are_capped_and_slots_come_back(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion("ok"), delay=0.05))
    poster = AsyncStdlibPoster(max_connections=3)
    url, timeout = server.url + PATH, httpx.Timeout(5.0)
    headers = {"content-type": "application/json"}
    busy = 0
    most = 0

    async def one() -> int:
        nonlocal busy, most
        response = await poster.post(url, headers, b"{}", timeout)
        busy += 1
        most = max(most, busy)
        try:
            async for _ in response.aiter_bytes():
                pass
        finally:
            busy -= 1
            await response.aclose()
        return response.status_code

    async def main() -> None:
        assert await asyncio.gather(*(one() for _ in range(12))) == [200] * 12
        # Callers cancelled while waiting for a slot, or mid-request, do not keep one.
        tasks = [asyncio.ensure_future(one()) for _ in range(6)]
        await asyncio.sleep(0.02)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async with asyncio.timeout(5):  # with a leaked slot this would wait forever
            assert await asyncio.gather(*(one() for _ in range(3))) == [200] * 3
        poster.close()

    asyncio.run(main())
    assert most <= 3
    ports = {r.client_port for r in server.requests_to(PATH)}
    assert 1 <= len(ports) <= 3 + 6  # at most 3 at a time; cancelled requests drop their connection


def test_a_failed_request_gives_its_slot_back() -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}{PATH}"
    closed.close()
    poster = AsyncStdlibPoster(max_connections=1)

    async def main() -> None:
        for _ in range(3):
            async with asyncio.timeout(5):
                with pytest.raises(httpx.ConnectError, match="refused"):
                    await poster.post(url, {}, b"{}", httpx.Timeout(2.0))

    asyncio.run(main())


def test_max_connections_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        AsyncStdlibPoster(max_connections=0)
