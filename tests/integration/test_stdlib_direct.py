"""The sync fast lane (``StdlibPoster``, ``http.client``) behaves like the httpx path it stands in for.

A model that owns its sync connections sends its non-streaming POSTs through ``StdlibPoster``;
streams, models given an ``http_client=`` and processes with proxy settings stay on httpx. Most
tests run twice: on the fast lane (no client passed) and on httpx (a plain ``httpx.Client`` passed
in, which rules the fast lane out). Spies on ``StdlibPoster.post`` and ``httpx.Client.send`` prove
which path each run took, so a test that passes on both proves the two paths agree.
"""

from __future__ import annotations

import gzip
import json
import socket
import ssl
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
from chatclient.models.http.stdlib_http import StdlibPoster
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
PATHS = ("stdlib", "httpx")


# -- helpers ------------------------------------------------------------------------------------------


@pytest.fixture
def make_model() -> Iterator[Callable[..., OpenAIChatModel]]:
    """Builds OpenAI models on a server (or URL); every model and injected client is closed afterwards.

    ``path="stdlib"`` passes no client (the fast lane); ``path="httpx"`` passes a plain
    ``httpx.Client``, which keeps every request on httpx.
    """
    made: list[OpenAIChatModel] = []
    clients: list[httpx.Client] = []

    def make(srv: LoopbackServer | str, path: str = "stdlib", base: str = "/v1", **kw: Any) -> OpenAIChatModel:
        url = srv if isinstance(srv, str) else srv.url
        if path == "httpx" and "http_client" not in kw:
            kw["http_client"] = httpx.Client()
        if kw.get("http_client") is not None:
            clients.append(kw["http_client"])
        kw.setdefault("api_key", KEY)
        kw.setdefault("backoff_base", 0.001)
        model = OpenAIChatModel("gpt-test", base_url=url + base, **kw)
        made.append(model)
        return model

    yield make
    for model in made:
        model.close()
    for client in clients:
        client.close()


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many requests went out through ``StdlibPoster.post`` and through ``httpx.Client.send``."""
    seen: Counter[str] = Counter()
    post = StdlibPoster.post
    send = httpx.Client.send

    def spy_post(self: StdlibPoster, *args: Any, **kw: Any) -> Any:
        seen["stdlib"] += 1
        return post(self, *args, **kw)

    def spy_send(self: httpx.Client, *args: Any, **kw: Any) -> Any:
        seen["httpx"] += 1
        return send(self, *args, **kw)

    monkeypatch.setattr(StdlibPoster, "post", spy_post)
    monkeypatch.setattr(httpx.Client, "send", spy_send)
    return seen


def took(calls: Counter[str], path: str, n: int = 1) -> bool:
    """``n`` requests went out, all by ``path``."""
    other = "httpx" if path == "stdlib" else "stdlib"
    return calls[path] == n and calls[other] == 0


def text_of(model: OpenAIChatModel, prompt: str = "hi") -> str | None:
    return model.call(Prompt(prompt)).result.output.text


def ports(srv: LoopbackServer) -> list[int]:
    return [r.client_port for r in srv.requests_to(PATH)]


# -- 1. which path is taken, and keep-alive -------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_sequential_calls_reuse_one_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.set_default(PATH, Reply(json=openai_completion("again")))
    model = make_model(server, path)
    assert [text_of(model) for _ in range(4)] == ["again"] * 4
    assert len(set(ports(server))) == 1  # one keep-alive connection served all four
    assert len(ports(server)) == 4
    assert took(calls, path, 4)


@pytest.mark.parametrize("path", PATHS)
def test_streams_take_the_lane_and_keep_their_connection(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.set_default(PATH, SSE(openai_stream(["str", "eam"]), split=(5, 1, 9)))
    model = make_model(server, path)
    for _ in range(3):
        assert "".join(c.result.output.text or "" for c in model.stream(Prompt("hi"))) == "stream"
    assert took(calls, path, 3)
    assert len(set(ports(server))) == 1  # drained after [DONE], the connection went back to the pool


def test_injected_client_with_a_hook_stays_on_httpx(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    hooked: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda request: hooked.append(str(request.url))]})
    server.script(PATH, Reply(json=openai_completion("hooked")))
    model = make_model(server, http_client=client)
    assert text_of(model) == "hooked"
    assert hooked == [server.url + PATH]
    assert took(calls, "httpx")


# -- 2. connections the server closes -----------------------------------------------------------------


def test_connection_close_answer_is_not_pooled(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.script(PATH, Reply(json=openai_completion("first"), headers={"connection": "close"}))
    server.script(PATH, Reply(json=openai_completion("second")))
    model = make_model(server, max_retries=0)
    assert text_of(model) == "first"
    assert text_of(model) == "second"
    first, second = ports(server)
    assert first != second  # the second call had to open a new connection
    assert took(calls, "stdlib", 2)


@pytest.mark.parametrize("path", PATHS)
def test_idle_connection_closed_by_the_server_is_replaced(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # Every connection answers one request as keep-alive, then the server closes it: the pooled
    # connection the next call picks up is dead, and must be replaced without costing a retry.
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
        for _ in range(3):
            assert text_of(model) == "raw"
            # The server has closed the connection this call left in the pool (and the FIN is in
            # flight on loopback) before the next call picks it up.
            assert closed.acquire(timeout=5.0)
            time.sleep(0.01)
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
    assert text_of(model) == "first"
    with pytest.raises(ModelConnectionError):
        text_of(model)
    assert len(server.requests_to(PATH)) == 2


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
    assert text_of(model) == "decoded"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_unsupported_content_encoding_is_a_response_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(body=b"\x1b\x07\x00\xf8\xa5@\x03", headers={"content-encoding": "br"}))
    model = make_model(server, path, max_retries=0)
    with pytest.raises(ModelResponseError):
        text_of(model)
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
    assert text_of(model) == "decoded"
    assert text_of(model) == "next"
    assert len(set(ports(server))) == 1  # the chunked body was read to its end: the connection was pooled
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_unknown_charset_falls_back_like_httpx(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(
        PATH, Reply(json=openai_completion("charset"), headers={"content-type": "application/json; charset=bogus"})
    )
    model = make_model(server, path, max_retries=0)
    assert text_of(model) == "charset"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_declared_charset_is_honoured(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    body = json.dumps(openai_completion("caf\u00e9"), ensure_ascii=False).encode("latin-1")
    server.script(PATH, Reply(body=body, headers={"content-type": "application/json; charset=iso-8859-1"}))
    model = make_model(server, path)
    assert text_of(model) == "caf\u00e9"
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
    with pytest.raises(ModelResponseError, match="larger than 1000 bytes"):
        text_of(model)
    assert took(calls, path)


def test_huge_gzip_bomb_is_cut_off(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    # 64 MB of decoded JSON in ~64 KB of gzip: refused after the limit, not after inflating it all.
    bomb = gzip.compress(b'{"pad": "' + b"0" * (64 * 1024 * 1024) + b'"}', compresslevel=9)
    assert len(bomb) < 200_000
    server.script(PATH, Reply(body=bomb, headers={"content-encoding": "gzip"}))
    model = make_model(server, response_limits=ResponseLimits(max_response_bytes=1024 * 1024))
    with pytest.raises(ModelResponseError, match="larger than"):
        text_of(model)
    assert took(calls, "stdlib")


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
    with pytest.raises(ModelHTTPError) as info:
        text_of(model)
    assert info.value.status == 400
    assert "bad temperature value" in str(info.value)
    assert info.value.code == "bad_temp"
    assert info.value.request_id == "req-42"
    assert took(calls, path)  # a 400 is not retried


@pytest.mark.parametrize("path", PATHS)
def test_401_is_an_authentication_error_without_the_key(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(status=401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    model = make_model(server, path)
    with pytest.raises(AuthenticationError) as info:
        text_of(model)
    assert info.value.status == 401
    assert KEY not in str(info.value) and KEY[-12:] not in str(info.value)
    assert KEY not in (info.value.body or "")
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
    assert text_of(model) == "after retry"
    assert len(server.requests_to(PATH)) == 2
    assert len(set(ports(server))) == 1  # the 429's body was read: its connection served the retry
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_reset_connection_is_retried_then_typed(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Close(), Close())
    model = make_model(server, path, max_retries=1)
    with pytest.raises(ModelConnectionError):
        text_of(model)
    assert len(server.requests_to(PATH)) == 2
    assert took(calls, path, 2)


@pytest.mark.parametrize("path", PATHS)
def test_slow_answer_is_a_timeout(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(json=openai_completion("late"), delay=0.6))
    model = make_model(server, path, timeout=0.2, max_retries=0)
    with pytest.raises(ModelTimeoutError):
        text_of(model)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_body_that_stalls_is_a_timeout(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # The status line and the first part arrive in time; the rest does not.
    server.script(PATH, SSE([openai_completion("a"), openai_completion("b")], stall_after=1, stall=0.6))
    model = make_model(server, path, timeout=0.2, max_retries=0)
    with pytest.raises(ModelTimeoutError):
        text_of(model)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_refused_connection_is_typed(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    closed.close()  # nothing listens there any more
    model = make_model(url, path, max_retries=0)
    with pytest.raises(ModelConnectionError, match="refused"):
        text_of(model)
    assert took(calls, path)


def _short_body(declared: int, sent: bytes) -> Callable[[socket.socket, list[bytes]], None]:
    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        head = read_request(conn)
        if head is None:
            return
        heads.append(head)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (declared, sent)
        )

    return serve


@pytest.mark.parametrize("path", PATHS)
def test_body_shorter_than_its_content_length_is_a_connection_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    sent = json.dumps(openai_completion("cut")).encode()[:40]
    with raw_server(_short_body(1000, sent)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        with pytest.raises(ModelConnectionError):
            text_of(model)
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
        with pytest.raises(ChatClientError):
            text_of(model)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_cut_gzip_body_is_a_typed_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    packed = gz(openai_completion("zipped and cut"))
    assert len(packed) > 40

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        head = read_request(conn)
        if head is None:
            return
        heads.append(head)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(packed), packed[:40])
        )

    with raw_server(serve) as (url, _):
        model = make_model(url, path, max_retries=0)
        with pytest.raises(ChatClientError):
            text_of(model)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_unterminated_chunked_body_is_a_typed_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, RawStream([b'{"id": "chatcmpl-1", "choi'], "application/json", end=False))
    model = make_model(server, path, max_retries=0)
    with pytest.raises(ChatClientError):
        text_of(model)
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_garbage_status_line_is_a_typed_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        if read_request(conn) is not None:
            conn.sendall(b"NOT-HTTP garbage\r\n\r\n")

    with raw_server(serve) as (url, _):
        model = make_model(url, path, max_retries=0)
        with pytest.raises(ModelConnectionError):
            text_of(model)
    assert took(calls, path)


# -- 5. redirects -------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
def test_same_origin_redirect_is_followed(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script("/v1/old/chat/completions", Reply(status=307, headers={"location": PATH}))
    server.script(PATH, Reply(json=openai_completion("moved")))
    model = make_model(server, path, base="/v1/old")
    assert text_of(model) == "moved"
    followed = server.requests_to(PATH)
    assert len(followed) == 1
    assert followed[0].headers["authorization"] == f"Bearer {KEY}"  # same origin: the key goes along
    assert followed[0].body["messages"][0]["content"] == "hi"
    # only the first hop can take the fast lane; the follow-up is an ordinary httpx send
    assert calls == (Counter(stdlib=1, httpx=1) if path == "stdlib" else Counter(httpx=2))


@pytest.mark.parametrize("path", PATHS)
def test_cross_origin_redirect_drops_credentials(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    with LoopbackServer() as other:
        other.script(PATH, Reply(json=openai_completion("elsewhere")))
        server.script(PATH, Reply(status=307, headers={"location": other.url + PATH}))
        model = make_model(server, path, headers={"x-api-key": KEY, "x-team": "a"})
        assert text_of(model) == "elsewhere"
        moved = other.requests_to(PATH)
    assert len(moved) == 1
    assert "authorization" not in moved[0].headers
    assert "x-api-key" not in moved[0].headers
    assert moved[0].headers["x-team"] == "a"  # plain headers still go along
    assert calls == (Counter(stdlib=1, httpx=1) if path == "stdlib" else Counter(httpx=2))


# -- 6. headers ---------------------------------------------------------------------------------------


def test_headers_reach_the_server(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.script(PATH, Reply(json=openai_completion("ok")))
    model = make_model(server, headers={"x-team": "a", "OpenAI-Organization": "org-1"})
    assert text_of(model) == "ok"
    sent = server.requests_to(PATH)[0].headers
    assert sent["user-agent"] == "chatclient"
    assert sent["accept-encoding"] == "gzip, deflate"
    assert sent["authorization"] == f"Bearer {KEY}"
    assert sent["x-team"] == "a"
    assert sent["openai-organization"] == "org-1"
    assert sent["content-type"] == "application/json"
    assert sent["accept"] == "application/json"
    assert sent["host"] == f"127.0.0.1:{server.port}"
    assert took(calls, "stdlib")


def _answer_and_close(conn: socket.socket, heads: list[bytes]) -> None:
    head = read_request(conn)
    if head is not None:
        heads.append(head)
        conn.sendall(OK)


@pytest.mark.parametrize("path", PATHS)
def test_each_header_is_sent_once_whatever_its_case(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    # Header names are case-insensitive: a caller's "User-Agent" replaces chatclient's own, as
    # httpx merges them, instead of going out next to it.
    with raw_server(_answer_and_close) as (url, heads):
        model = make_model(url, path, headers={"User-Agent": "my-app/1.0", "Accept": "application/json"})
        assert text_of(model) == "raw"
    names = [name for name, _ in header_lines(heads[0])]
    assert sorted(n for n, count in Counter(names).items() if count > 1) == []
    assert dict(header_lines(heads[0]))["user-agent"] == "my-app/1.0"
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_model_accept_encoding_is_kept(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(json=openai_completion("plain")))
    model = make_model(server, path, headers={"accept-encoding": "identity"})
    assert text_of(model) == "plain"
    assert server.requests_to(PATH)[0].headers["accept-encoding"] == "identity"
    assert took(calls, path)


# -- 7. threads and close -----------------------------------------------------------------------------


def test_threads_share_a_pool_of_connections(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    server.set_default(PATH, lambda rec: Reply(json=openai_completion(rec.body["messages"][0]["content"])))
    model = make_model(server)

    def worker(n: int) -> list[str | None]:
        return [text_of(model, f"t{n}-{i}") for i in range(20)]

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(worker, range(16)))
    assert answers == [[f"t{n}-{i}" for i in range(20)] for n in range(16)]  # no answer went to another caller
    assert len(server.requests_to(PATH)) == 320
    assert len(set(ports(server))) <= 20  # pooled: about one connection per thread, not one per call
    assert took(calls, "stdlib", 320)


def test_closed_model_refuses_calls_and_closes_its_connections(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel]
) -> None:
    with LoopbackServer() as own:  # its own server, so that other tests' connections do not count
        own.set_default(PATH, Reply(json=openai_completion("open")))
        model = make_model(own)
        assert text_of(model) == "open"
        assert own.open_connections == 1
        model.close()
        with pytest.raises(RuntimeError, match="model is closed"):
            text_of(model)
        assert own.wait_for_open_connections(0, timeout=5.0)  # the pooled connection was closed
        assert len(own.requests_to(PATH)) == 1
    assert took(calls, "stdlib")


# -- 8. proxy settings --------------------------------------------------------------------------------


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
        assert text_of(model) == "via proxy"
        assert [r.path for r in proxy.requests] == [target]  # httpx sent it through the proxy
    assert server.requests_to(PATH) == []
    assert took(calls, "httpx")


def test_no_proxy_alone_keeps_the_fast_lane(
    server: LoopbackServer,
    calls: Counter[str],
    make_model: Callable[..., OpenAIChatModel],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # NO_PROXY without any proxy (common in company environments) routes nothing through a proxy.
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    server.script(PATH, Reply(json=openai_completion("direct")))
    model = make_model(server)
    assert text_of(model) == "direct"
    assert took(calls, "stdlib")


# -- 9. protocol edges the fast lane parses itself -------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"HTTP/1.1 100 Continue\r\n\r\n" + OK, id="100-continue-first"),
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
        assert text_of(model) == "raw"
    assert len(heads) == 1
    assert took(calls, path)


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
        pytest.param(b"HTTP/1.1 200 OK\r\nx-long: " + b"a" * 200_000 + b"\r\n\r\n", id="huge-header"),
    ],
)
def test_malformed_framing_is_a_connection_error(
    calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str, raw: bytes
) -> None:
    with raw_server(answer_with(raw)) as (url, heads):
        model = make_model(url, path, max_retries=0)
        with pytest.raises(ModelConnectionError):
            text_of(model)
    assert len(heads) == 1  # not resent
    assert took(calls, path)


@pytest.mark.parametrize("path", PATHS)
def test_no_content_answer_is_a_response_error(
    server: LoopbackServer, calls: Counter[str], make_model: Callable[..., OpenAIChatModel], path: str
) -> None:
    server.script(PATH, Reply(status=204, body=b""))
    model = make_model(server, path, max_retries=0)
    with pytest.raises(ModelResponseError):
        text_of(model)
    assert took(calls, path)


# -- 10. TLS ------------------------------------------------------------------------------------------


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
    client = {"http_client": httpx.Client(verify=trusting)} if path == "httpx" else {}
    connections: list[socket.socket] = []

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        connections.append(conn)
        keep_alive(conn, heads)

    with raw_server(serve, tls=server_context(certificates["good"])) as (url, heads):
        model = make_model(url, path, **client)
        assert [text_of(model) for _ in range(3)] == ["raw"] * 3
        model.close()
        if "http_client" in client:
            client["http_client"].close()  # an injected client is the caller's to close
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
    client = {"http_client": httpx.Client(verify=http_module._ssl_context())} if path == "httpx" else {}
    with raw_server(keep_alive, tls=server_context(certificates[cert])) as (url, heads):
        model = make_model(url, path, max_retries=0, **client)
        with pytest.raises(ModelConnectionError, match=r"(?i)certificate"):
            text_of(model)
    assert heads == []  # nothing was sent to a server that could not prove who it is
    assert took(calls, path)


def test_a_forked_child_opens_its_own_connections(server: LoopbackServer) -> None:
    import os

    server.set_default(PATH, Reply(json=openai_completion("ok")))
    model = OpenAIChatModel("gpt-test", base_url=server.url + "/v1", api_key=KEY, max_retries=0)
    try:
        assert text_of(model) == "ok"  # the parent now has a pooled connection
        pid = os.fork()
        if pid == 0:  # the child: its call must not go out on the parent's socket
            code = 0
            try:
                code = 0 if text_of(model) == "ok" else 1
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert text_of(model) == "ok"  # and the parent's connection is still good
        ports = [r.client_port for r in server.requests_to(PATH)]
        assert len(ports) == 3 and ports[0] == ports[2] != ports[1]
    finally:
        model.close()
