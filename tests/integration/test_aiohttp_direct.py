"""The direct path of AiohttpTransport (past httpx's client layer) behaves like the ordinary one.

Most tests run twice: once with a plain ``AsyncClient(transport=AiohttpTransport())`` (the direct
path) and once with the same kind of client plus a do-nothing response hook (which makes chatclient
go through ``client.send`` and ``handle_async_request``). Spies on the transport's two entry points
prove which path each run took, so a test that passes on both proves the paths agree.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from chatclient.models.http import ResponseLimits
from chatclient.models.http.aiohttp_transport import AiohttpTransport
from chatclient.models.http.response_headers import listen_to_responses
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import SSE, Close, LoopbackServer, RawStream, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
KEY = "sk-test-SECRET-0123456789abcdef"
PATHS = ("direct", "ordinary")

TRANSPORTS: dict[int, AiohttpTransport] = {}  # by id of the client, then of the model


async def _noop_hook(_: Any) -> None:
    return None


def make_client(path: str = "direct", **client_kw: Any) -> httpx.AsyncClient:
    """An AsyncClient over a fresh AiohttpTransport; ``ordinary`` adds a hook that rules out the direct path."""
    if path == "ordinary":
        client_kw.setdefault("event_hooks", {"response": [_noop_hook]})
    transport = AiohttpTransport()
    client = httpx.AsyncClient(transport=transport, **client_kw)
    TRANSPORTS[id(client)] = transport
    return client


def make_model(
    srv: LoopbackServer | str, client: httpx.AsyncClient | str = "direct", base: str = "/v1", **kw: Any
) -> OpenAIChatModel:
    """An OpenAI model on ``srv`` (a server or its URL) over ``client`` (or a fresh client for that path)."""
    url = srv if isinstance(srv, str) else srv.url
    if isinstance(client, str):
        client = make_client(client)
    kw.setdefault("api_key", KEY)
    model = OpenAIChatModel("gpt-test", base_url=url + base, backoff_base=0.001, async_http_client=client, **kw)
    TRANSPORTS[id(model)] = TRANSPORTS[id(client)]
    return model


def run(model: OpenAIChatModel, coro: Any) -> Any:
    """Run ``coro`` on a fresh loop, then close the transport's aiohttp session of that loop."""

    async def main() -> Any:
        try:
            return await coro
        finally:
            await TRANSPORTS[id(model)].aclose()

    return asyncio.run(main())


async def text_of(model: OpenAIChatModel) -> str | None:
    return (await model.acall(Prompt("hi"))).text


async def streamed_text(model: OpenAIChatModel) -> str:
    return "".join([c.text or "" async for c in model.astream(Prompt("hi"))])


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each entry point of AiohttpTransport was used."""
    seen: Counter[str] = Counter()
    direct_post = AiohttpTransport.direct_post
    handle = AiohttpTransport.handle_async_request

    async def spy_direct(self: AiohttpTransport, *args: Any, **kw: Any) -> Any:
        seen["direct"] += 1
        return await direct_post(self, *args, **kw)

    async def spy_handle(self: AiohttpTransport, request: httpx.Request) -> httpx.Response:
        seen["ordinary"] += 1
        return await handle(self, request)

    monkeypatch.setattr(AiohttpTransport, "direct_post", spy_direct)
    monkeypatch.setattr(AiohttpTransport, "handle_async_request", spy_handle)
    return seen


def took(calls: Counter[str], path: str, n: int = 1) -> bool:
    """``n`` requests went out, all by ``path``."""
    other = "ordinary" if path == "direct" else "direct"
    return calls[path] == n and calls[other] == 0


def gz(payload: Any) -> bytes:
    return gzip.compress(json.dumps(payload).encode())


@contextmanager
def short_body_server(declared: int, sent: bytes) -> Iterator[str]:
    """A one-shot server whose answer declares ``declared`` body bytes, sends ``sent``, then closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5.0)

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (declared, sent)
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        thread.join(5.0)


# -- 1. which path is taken ---------------------------------------------------------------------------


def test_plain_client_goes_direct(server: LoopbackServer, calls: Counter[str]) -> None:
    server.script(PATH, Reply(json=openai_completion("direct")))
    model = make_model(server)
    assert run(model, text_of(model)) == "direct"
    assert took(calls, "direct")


def test_event_hook_takes_the_ordinary_path(server: LoopbackServer, calls: Counter[str]) -> None:
    seen: list[str] = []

    async def hook(request: httpx.Request) -> None:
        seen.append(str(request.url))

    server.script(PATH, Reply(json=openai_completion("hooked")))
    model = make_model(server, make_client(event_hooks={"request": [hook]}))
    assert run(model, text_of(model)) == "hooked"
    assert seen == [server.url + PATH]
    assert took(calls, "ordinary")


def test_client_auth_takes_the_ordinary_path(server: LoopbackServer, calls: Counter[str]) -> None:
    server.script(PATH, Reply(json=openai_completion("auth")))
    model = make_model(server, make_client(auth=("u", "p")))
    assert run(model, text_of(model)) == "auth"
    assert server.requests_to(PATH)[0].headers["authorization"] == "Basic dTpw"  # base64("u:p")
    assert took(calls, "ordinary")


def test_client_cookies_take_the_ordinary_path(server: LoopbackServer, calls: Counter[str]) -> None:
    server.script(PATH, Reply(json=openai_completion("cookie")))
    model = make_model(server, make_client(cookies={"session": "abc"}))
    assert run(model, text_of(model)) == "cookie"
    assert server.requests_to(PATH)[0].headers["cookie"] == "session=abc"
    assert took(calls, "ordinary")


def test_client_params_take_the_ordinary_path(server: LoopbackServer, calls: Counter[str]) -> None:
    server.script(PATH + "?a=1", Reply(json=openai_completion("params")))
    model = make_model(server, make_client(params={"a": "1"}))
    assert run(model, text_of(model)) == "params"
    assert [r.path for r in server.requests] == [PATH + "?a=1"]
    assert took(calls, "ordinary")


# -- 2. headers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_headers_merge_like_httpx(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, Reply(json=openai_completion("ok")))
    client = make_client(path, headers={"x-team": "a", "user-agent": "client-ua", "x-clash": "client"})
    model = make_model(server, client, headers={"x-clash": "model"})
    assert run(model, text_of(model)) == "ok"
    assert took(calls, path)
    sent = server.requests_to(PATH)[0].headers
    assert sent["x-team"] == "a"  # the client's own default reaches the server
    assert sent["x-clash"] == "model"  # the model's header wins a clash
    assert sent["user-agent"] == "chatclient"
    assert sent["authorization"] == f"Bearer {KEY}"
    assert sent["content-type"] == "application/json"
    assert sent["accept"] == "application/json"
    if path == "direct":
        assert sent["accept-encoding"] == "gzip, deflate"  # only what aiohttp decodes


def test_direct_and_ordinary_send_the_same_headers(server: LoopbackServer, calls: Counter[str]) -> None:
    server.set_default(PATH, Reply(json=openai_completion("ok")))
    for path in PATHS:
        model = make_model(server, make_client(path, headers={"x-team": "a"}))
        run(model, text_of(model))
    direct, ordinary = (r.headers for r in server.requests_to(PATH))
    # accept-encoding is httpx's default on the ordinary path (it may offer br/zstd when installed)
    assert {k: v for k, v in direct.items() if k != "accept-encoding"} == {
        k: v for k, v in ordinary.items() if k != "accept-encoding"
    }
    assert calls == Counter(direct=1, ordinary=1)


def test_accept_encoding_is_what_the_direct_path_decodes(server: LoopbackServer, calls: Counter[str]) -> None:
    # A client default that asks for something aiohttp might not decode is replaced by gzip/deflate;
    # a model header is the caller's explicit choice and is sent as given.
    server.set_default(PATH, Reply(json=openai_completion("plain")))
    for model in (
        make_model(server, make_client(headers={"accept-encoding": "br"})),
        make_model(server, headers={"accept-encoding": "identity"}),
    ):
        assert run(model, text_of(model)) == "plain"
    assert [r.headers["accept-encoding"] for r in server.requests_to(PATH)] == ["gzip, deflate", "identity"]
    assert took(calls, "direct", 2)


# -- 3. compressed bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_gzip_answer_is_decoded(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, Reply(body=gz(openai_completion("zipped")), headers={"content-encoding": "gzip"}))
    model = make_model(server, path)
    assert run(model, text_of(model)) == "zipped"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_gzip_error_body_gives_the_servers_message(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    error = {"error": {"message": "bad temperature value", "type": "invalid_request_error", "code": "bad_temp"}}
    server.script(PATH, Reply(status=400, body=gz(error), headers={"content-encoding": "gzip"}))
    model = make_model(server, path)
    with pytest.raises(ModelHTTPError) as info:
        run(model, text_of(model))
    assert info.value.status == 400
    assert "bad temperature value" in str(info.value)
    assert info.value.code == "bad_temp"
    assert took(calls, path)


# -- 4. size limits -----------------------------------------------------------------------------------

BIG = openai_completion("x" * 5000)
BIG_BYTES = json.dumps(BIG).encode()  # cut into frames of 400 bytes (none empty: that would end the body)
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
    ],
)
def test_body_over_the_limit_is_refused(
    server: LoopbackServer, calls: Counter[str], path: str, reply: Reply | RawStream
) -> None:
    assert len(gz(BIG)) < SMALL_LIMIT.max_response_bytes < len(json.dumps(BIG))  # the bomb fits compressed
    server.script(PATH, reply)
    model = make_model(server, path, response_limits=SMALL_LIMIT)
    with pytest.raises(ModelResponseError, match="larger than 1000 bytes"):
        run(model, text_of(model))
    assert took(calls, path)


# -- 5. errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_429_then_200_is_retried(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(
        PATH,
        Reply(status=429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0"}),
        Reply(json=openai_completion("after retry")),
    )
    model = make_model(server, path)
    assert run(model, text_of(model)) == "after retry"
    assert len(server.requests_to(PATH)) == 2
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_401_is_an_authentication_error_without_the_key(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    model = make_model(server, path)
    with pytest.raises(AuthenticationError) as info:
        run(model, text_of(model))
    assert info.value.status == 401
    assert KEY not in str(info.value) and KEY[-12:] not in str(info.value)
    assert KEY not in (info.value.body or "")
    assert took(calls, path)  # never retried


@pytest.mark.parametrize("path", PATHS)
def test_reset_connection_is_retried_then_typed(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, Close(), Close())
    model = make_model(server, path, max_retries=1)
    with pytest.raises(ModelConnectionError):
        run(model, text_of(model))
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_slow_answer_is_a_timeout(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, Reply(json=openai_completion("late"), delay=0.6))
    model = make_model(server, path, timeout=0.2, max_retries=0)
    with pytest.raises(ModelTimeoutError):
        run(model, text_of(model))
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_body_shorter_than_its_content_length_is_a_typed_error(calls: Counter[str], path: str) -> None:
    sent = json.dumps(openai_completion("cut")).encode()[:40]
    with short_body_server(declared=1000, sent=sent) as url:
        model = make_model(url, path, max_retries=0)
        with pytest.raises(ModelConnectionError, match="RemoteProtocolError"):
            run(model, text_of(model))
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_unterminated_chunked_body_is_a_typed_error(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, RawStream([b'{"id": "chatcmpl-1", "choi'], "application/json", end=False))
    model = make_model(server, path, max_retries=0)
    with pytest.raises(ModelConnectionError, match="RemoteProtocolError"):
        run(model, text_of(model))
    assert took(calls, path)


# -- 6. redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_same_origin_redirect_is_followed(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script("/v1/old/chat/completions", Reply(status=307, headers={"location": PATH}))
    server.script(PATH, Reply(json=openai_completion("moved")))
    model = make_model(server, path, base="/v1/old")
    assert run(model, text_of(model)) == "moved"
    followed = server.requests_to(PATH)
    assert len(followed) == 1
    assert followed[0].headers["authorization"] == f"Bearer {KEY}"  # same origin: the key goes along
    assert followed[0].body["messages"][0]["content"] == "hi"
    # the first hop is the only one that can go direct; the follow-up is an ordinary send
    assert calls == (Counter(direct=1, ordinary=1) if path == "direct" else Counter(ordinary=2))


@pytest.mark.parametrize("path", PATHS)
def test_cross_origin_redirect_drops_credentials(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    with LoopbackServer() as other:
        other.script(PATH, Reply(json=openai_completion("elsewhere")))
        server.script(PATH, Reply(status=307, headers={"location": other.url + PATH}))
        model = make_model(server, make_client(path, headers={"x-team": "a"}), headers={"x-api-key": KEY})
        assert run(model, text_of(model)) == "elsewhere"
        moved = other.requests_to(PATH)
    assert len(moved) == 1
    assert "authorization" not in moved[0].headers
    assert "x-api-key" not in moved[0].headers
    assert moved[0].headers["x-team"] == "a"  # plain headers still go along
    assert server.requests_to(PATH)[0].headers["authorization"] == f"Bearer {KEY}"
    assert calls == (Counter(direct=1, ordinary=1) if path == "direct" else Counter(ordinary=2))


# -- 7. streams ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_stream_split_in_odd_chunks(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, SSE(openai_stream(["Hé", "llo ", "wörld ✓"]), split=(1, 7, 3, 2, 64)))
    model = make_model(server, path)
    assert run(model, streamed_text(model)) == "Héllo wörld ✓"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_stream_error_status_is_retried_before_it_starts(
    server: LoopbackServer, calls: Counter[str], path: str
) -> None:
    server.script(PATH, Reply(status=503, json={"error": {"message": "busy"}}), SSE(openai_stream(["fine"])))
    model = make_model(server, path)
    assert run(model, streamed_text(model)) == "fine"
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_leaving_a_stream_early_closes_its_connection(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, SSE(openai_stream(["a"] * 50), stall_after=2, stall=0.3))
    model = make_model(server, path)

    async def leave_early() -> bool:
        stream = model.astream(Prompt("hi"))
        async for _ in stream:
            break
        await stream.aclose()  # type: ignore[attr-defined]
        # Checked before run() closes the aiohttp session, which would close any pooled connection
        # too: the connection must be gone because the stream dropped it.
        return await asyncio.to_thread(server.wait_for_open_connections, 0, 3.0)

    assert run(model, leave_early())
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_stream_cut_by_reset_is_typed(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(PATH, SSE(openai_stream(["a", "b", "c", "d"]), reset_after=3))
    model = make_model(server, path, max_retries=0)
    got: list[str] = []

    async def read() -> None:
        async for chunk in model.astream(Prompt("hi")):
            got.append(chunk.text or "")

    with pytest.raises(ModelConnectionError):
        run(model, read())
    assert "".join(got) == "ab"  # what arrived before the reset was handed out
    assert took(calls, path)


# -- 8. observability ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_listeners_see_status_and_headers(server: LoopbackServer, calls: Counter[str], path: str) -> None:
    server.script(
        PATH,
        Reply(status=429, json={"error": {"message": "slow"}}, headers={"retry-after": "0"}),
        Reply(json=openai_completion("ok"), headers={"X-RateLimit-Remaining-Requests": "42"}),
        SSE(openai_stream(["s"])),
    )
    model = make_model(server, path)
    seen: list[tuple[int, str | None]] = []

    def listener(status: int, headers: Any) -> None:
        seen.append((status, headers.get("x-ratelimit-remaining-requests")))

    async def both() -> tuple[str | None, str]:
        with listen_to_responses(listener):
            return await text_of(model), await streamed_text(model)

    assert run(model, both()) == ("ok", "s")
    assert seen == [(429, None), (200, "42"), (200, None)]
    assert took(calls, path, 3)
