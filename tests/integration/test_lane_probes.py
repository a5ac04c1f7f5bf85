"""The socket lane against hostile and unlucky servers (issue 26): every probe on both faces.

Each probe is a raw server that writes its answers byte for byte. A test runs it through a model's
sync ``call`` and through its async ``acall`` (``face``), and asserts the typed error, or the right
answer, on the probed call and on every later call: a server that sends more than its answer
must never have the extra bytes read as the next answer (response desync), a malformed head is a
``ModelConnectionError`` and never a builtin exception, and so on.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from chatclient.errors import ModelConnectionError, ModelHTTPError, ModelResponseError
from chatclient.models.http.lane import LANE_ENV
from chatclient.models.http.response_headers import listen_to_responses
from chatclient.models.http.stdlib_http import AsyncStdlibPoster, StdlibPoster
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support.loopback import openai_completion
from tests.support.raw_http import raw_server, read_request

pytestmark = pytest.mark.integration

FACES = ("sync", "async")
KEY = "sk-test-SECRET-0123456789abcdef"


def answer(text: str, *, extra_headers: bytes = b"") -> bytes:
    body = json.dumps(openai_completion(text)).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n%scontent-length: %d\r\n\r\n%s" % (
        extra_headers,
        len(body),
        body,
    )


# What a desynchronised connection would hand to the next call: a whole, valid answer.
DESYNC = answer("WRONG: the previous call's leftovers")


def scripted(*replies: bytes) -> Callable[[socket.socket, list[bytes]], None]:
    """Answers the n-th request (over all connections) with ``replies[n]`` (the last one repeats),
    keeping every connection open for more requests."""
    lock = threading.Lock()
    count = [0]

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        while (head := read_request(conn)) is not None:
            with lock:
                heads.append(head)
                reply = replies[min(count[0], len(replies) - 1)]
                count[0] += 1
            conn.sendall(reply)

    return serve


def run_calls(url: str, face: str, n: int, pause: float = 0.0, **kw: Any) -> list[str | Exception]:
    """``n`` calls of one model (``face``: sync ``call`` or async ``acall`` on one loop): each answer's
    text, or the exception it raised."""
    kw.setdefault("max_retries", 0)
    model = OpenAIChatModel("gpt-test", base_url=url + "/v1", api_key=KEY, **kw)
    results: list[str | Exception] = []
    prompt = Prompt("hi")
    if face == "sync":
        with model:
            for i in range(n):
                if i and pause:
                    time.sleep(pause)
                try:
                    results.append(model.call(prompt).result.output.text or "")  # type: ignore[union-attr]
                except Exception as exc:
                    results.append(exc)
        return results

    async def main() -> None:
        async with model:
            for i in range(n):
                if i and pause:
                    await asyncio.sleep(pause)
                try:
                    results.append((await model.acall(prompt)).result.output.text or "")  # type: ignore[union-attr]
                except Exception as exc:
                    results.append(exc)

    asyncio.run(main())
    return results


@pytest.fixture
def lane_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every request: "lane" (either face of the socket lane) or "httpx"."""
    seen: list[str] = []
    post, apost = StdlibPoster.post, AsyncStdlibPoster.post
    send, asend = httpx.Client.send, httpx.AsyncClient.send

    def spy_post(self: StdlibPoster, *a: Any, **kw: Any) -> Any:
        seen.append("lane")
        return post(self, *a, **kw)

    async def spy_apost(self: AsyncStdlibPoster, *a: Any, **kw: Any) -> Any:
        seen.append("lane")
        return await apost(self, *a, **kw)

    def spy_send(self: httpx.Client, *a: Any, **kw: Any) -> Any:
        seen.append("httpx")
        return send(self, *a, **kw)

    async def spy_asend(self: httpx.AsyncClient, *a: Any, **kw: Any) -> Any:
        seen.append("httpx")
        return await asend(self, *a, **kw)

    monkeypatch.setattr(StdlibPoster, "post", spy_post)
    monkeypatch.setattr(AsyncStdlibPoster, "post", spy_apost)
    monkeypatch.setattr(httpx.Client, "send", spy_send)
    monkeypatch.setattr(httpx.AsyncClient, "send", spy_asend)
    return seen


# -- 1. response desync ---------------------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    "first",
    [
        pytest.param(answer("first") + DESYNC, id="bytes-after-a-content-length-body"),
        pytest.param(answer("first") + b"\r\n", id="a-stray-line-break-after-the-body"),
        pytest.param(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n0\r\n\r\n"
            % (len(json.dumps(openai_completion("first"))), json.dumps(openai_completion("first")).encode()),
            id="chunked-answer-then-nothing",
        ),
    ],
)
def test_bytes_past_an_answer_never_reach_the_next_call(face: str, first: bytes, lane_calls: list[str]) -> None:
    with raw_server(scripted(first, answer("second"), answer("third"))) as (url, _):
        results = run_calls(url, face, 3)
    assert results == ["first", "second", "third"]
    assert lane_calls == ["lane"] * 3


@pytest.mark.parametrize("face", FACES)
def test_a_body_after_a_no_content_answer_is_not_read_as_the_next_answer(face: str) -> None:
    with raw_server(scripted(b"HTTP/1.1 204 No Content\r\n\r\n" + DESYNC, answer("second"))) as (url, _):
        results = run_calls(url, face, 3)
    assert isinstance(results[0], ModelResponseError)  # an empty body is no chat completion
    assert results[1:] == ["second", "second"]


@pytest.mark.parametrize("face", FACES)
def test_a_body_after_a_not_modified_answer_is_not_read_as_the_next_answer(face: str) -> None:
    with raw_server(scripted(b"HTTP/1.1 304 Not Modified\r\n\r\n" + DESYNC, answer("second"))) as (url, _):
        results = run_calls(url, face, 2)
    assert isinstance(results[0], ModelHTTPError) and results[0].status == 304
    assert results[1:] == ["second"]


@pytest.mark.parametrize("face", FACES)
def test_leftovers_arriving_while_idle_are_not_read_as_the_next_answer(face: str) -> None:
    # The extra answer comes a moment after the real one: the connection is idle in the pool by then.
    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        n = 0
        while (head := read_request(conn)) is not None:
            heads.append(head)
            n += 1
            conn.sendall(answer(f"answer {n}"))
            if n == 1:
                time.sleep(0.1)
                conn.sendall(DESYNC)

    with raw_server(serve) as (url, _):
        results = run_calls(url, face, 2, pause=0.3)
    assert results == ["answer 1", "answer 1"]  # the second call went out on a new connection


# -- 2-4. response heads --------------------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    "digits",
    [
        pytest.param("\u00b2".encode("latin-1"), id="superscript-two"),  # "²" once the head is read as latin-1
        pytest.param("1\u00b9".encode("latin-1"), id="superscript-one-after-a-digit"),
        pytest.param("\u0663".encode(), id="arabic-indic-three"),
    ],
)
def test_non_ascii_content_length_digits_are_a_typed_error(face: str, digits: bytes) -> None:
    bad = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %s\r\n\r\n{}" % digits
    with raw_server(scripted(bad, answer("fine"))) as (url, _):
        results = run_calls(url, face, 2)
    assert isinstance(results[0], ModelConnectionError)
    assert "content-length" in str(results[0])
    assert results[1] == "fine"


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    "header",
    [
        pytest.param(b"x-note: a\x00b", id="nul-in-a-value"),
        pytest.param(b"x-note: a\x01b", id="c0-control-in-a-value"),
        pytest.param(b"x-note: a\x7fb", id="del-in-a-value"),
        pytest.param(b"x-note: a\rb", id="bare-cr-in-a-value"),
        pytest.param(b"x note: a", id="space-in-a-name"),
        pytest.param(b"x-note : a", id="space-before-the-colon"),
        pytest.param(b"x(note): a", id="separator-in-a-name"),
        pytest.param(b"x-n\xc3\xb6te: a", id="non-ascii-name"),
        pytest.param(b": a", id="empty-name"),
    ],
)
def test_control_characters_and_bad_header_names_are_a_typed_error(face: str, header: bytes) -> None:
    with raw_server(scripted(answer("bad", extra_headers=header + b"\r\n"), answer("fine"))) as (url, _):
        results = run_calls(url, face, 2)
    assert isinstance(results[0], ModelConnectionError), results[0]
    assert results[1] == "fine"


@pytest.mark.parametrize("face", FACES)
def test_tabs_and_obs_text_in_values_are_accepted(face: str) -> None:
    seen: list[str | None] = []
    headers = b"x-note:\ta\tb\t\r\nx-latin: caf\xe9\r\n"
    with (
        raw_server(scripted(answer("fine", extra_headers=headers))) as (url, _),
        listen_to_responses(lambda status, h: seen.extend([h.get("x-note"), h.get("x-latin")])),
    ):
        results = run_calls(url, face, 1)
    assert results == ["fine"]
    assert seen == ["a\tb", "caf\u00e9"]


@pytest.mark.parametrize("face", FACES)
def test_folded_header_lines_are_unfolded(face: str) -> None:
    seen: list[str | None] = []
    headers = b"x-folded: first\r\n  second\r\n\tthird\r\n"
    with (
        raw_server(scripted(answer("fine", extra_headers=headers))) as (url, _),
        listen_to_responses(lambda status, h: seen.append(h.get("x-folded"))),
    ):
        results = run_calls(url, face, 2)
    assert results == ["fine", "fine"]
    assert seen == ["first second third"] * 2


@pytest.mark.parametrize("face", FACES)
def test_a_folded_line_before_any_header_is_a_typed_error(face: str) -> None:
    body = json.dumps(openai_completion("x")).encode()
    bad = b"HTTP/1.1 200 OK\r\n  folded\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
    with raw_server(scripted(bad, answer("fine"))) as (url, _):
        results = run_calls(url, face, 2)
    assert isinstance(results[0], ModelConnectionError)
    assert results[1] == "fine"


# -- 5. international host names ------------------------------------------------------------------


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Callable[[dict[str, list[tuple[str, int]]]], list[str]]:
    """``resolver({name: [(ip, port), ...]})`` makes those names resolve to those addresses (in that
    order, each with its own port); returns the list of names looked up."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def install(table: dict[str, list[tuple[str, int]]]) -> list[str]:
        def fake(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
            name = host.decode() if isinstance(host, bytes) else host
            asked.append(name)
            if name in table:
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", addr) for addr in table[name]]
            return real(host, port, *args, **kw)

        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return asked

    return install


@pytest.mark.parametrize("face", FACES)
def test_international_host_names_are_sent_as_idna(
    face: str, resolver: Callable[[dict[str, list[tuple[str, int]]]], list[str]], lane_calls: list[str]
) -> None:
    with raw_server(scripted(answer("fine"))) as (url, heads):
        port = int(url.rsplit(":", 1)[1])
        asked = resolver({"xn--bcher-kva.example": [("127.0.0.1", port)]})
        results = run_calls(f"http://B\u00fccher.example:{port}", face, 1)
    assert results == ["fine"]
    assert lane_calls == ["lane"]
    assert "xn--bcher-kva.example" in asked and not any("\u00fc" in name for name in asked)
    host = [line for line in heads[0].split(b"\r\n") if line.lower().startswith(b"host:")]
    assert host == [b"Host: xn--bcher-kva.example:%d" % port]


@pytest.mark.parametrize("face", FACES)
def test_a_host_name_idna_cannot_encode_is_a_typed_error_before_any_connection(
    face: str, resolver: Callable[[dict[str, list[tuple[str, int]]]], list[str]]
) -> None:
    from chatclient.errors import ModelRequestError

    asked = resolver({})
    results = run_calls("http://" + "\u00e9" * 70 + ".example:9", face, 1)  # a label longer than DNS allows
    assert isinstance(results[0], ModelRequestError)
    assert asked == []


# -- 6. happy eyeballs ----------------------------------------------------------------------------


@pytest.fixture
def black_hole() -> Iterator[int]:
    """A port on 127.0.0.1 whose connects hang: a listener with a full accept queue drops new SYNs."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port))
    probe = socket.socket()
    probe.settimeout(0.2)
    try:
        probe.connect(("127.0.0.1", port))
        hangs = False
    except TimeoutError:
        hangs = True
    finally:
        probe.close()
    if not hangs:
        filler.close()
        listener.close()
        pytest.fail("this kernel accepts connections past a full backlog: no black hole to test with")
    yield port
    filler.close()
    listener.close()


def test_async_connect_falls_back_to_the_next_address_when_the_first_is_black_holed(
    black_hole: int, resolver: Callable[[dict[str, list[tuple[str, int]]]], list[str]]
) -> None:
    with raw_server(scripted(answer("fine"))) as (url, heads):
        port = int(url.rsplit(":", 1)[1])
        resolver({"two.example": [("127.0.0.1", black_hole), ("127.0.0.1", port)]})
        start = time.monotonic()
        results = run_calls(f"http://two.example:{port}", "async", 1, timeout=httpx.Timeout(10.0, connect=3.0))
        elapsed = time.monotonic() - start
    assert results == ["fine"]
    assert elapsed < 2.5  # not the whole connect timeout: the second address was tried after 0.25 s
    assert len(heads) == 1


# -- 7. idle keep-alive expiry --------------------------------------------------------------------


def connections_seen() -> tuple[Callable[[socket.socket, list[bytes]], None], list[int]]:
    opened: list[int] = []

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        opened.append(conn.getpeername()[1])
        while (head := read_request(conn)) is not None:
            heads.append(head)
            conn.sendall(answer("fine"))

    return serve, opened


@pytest.mark.parametrize("face", FACES)
def test_idle_connections_expire_after_the_keep_alive_bound(face: str) -> None:
    serve, opened = connections_seen()
    with raw_server(serve) as (url, _):
        assert run_calls(url, face, 3, pause=0.25, keepalive_expiry=0.1) == ["fine"] * 3
    assert len(opened) == 3  # each call found its idle connection expired


@pytest.mark.parametrize("face", FACES)
def test_idle_connections_within_the_bound_are_reused(face: str) -> None:
    serve, opened = connections_seen()
    with raw_server(serve) as (url, _):
        assert run_calls(url, face, 3, pause=0.25) == ["fine"] * 3  # the default bound: 30 s
    assert len(opened) == 1


def test_keepalive_expiry_must_be_positive() -> None:
    with pytest.raises(ValueError, match="keepalive_expiry"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", keepalive_expiry=0)


# -- 8. the off switch ----------------------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    ("keyword", "env", "expected"),
    [
        pytest.param(None, None, "lane", id="default-on"),
        pytest.param(False, None, "httpx", id="keyword-off"),
        pytest.param(None, "0", "httpx", id="env-off"),
        pytest.param(None, "off", "httpx", id="env-off-word"),
        pytest.param(True, "0", "lane", id="keyword-on-wins-over-env"),
        pytest.param(None, "1", "lane", id="env-on"),
    ],
)
def test_the_lane_has_an_off_switch(
    face: str,
    keyword: bool | None,
    env: str | None,
    expected: str,
    lane_calls: list[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if env is None:
        monkeypatch.delenv(LANE_ENV, raising=False)
    else:
        monkeypatch.setenv(LANE_ENV, env)
    with raw_server(scripted(answer("fine"))) as (url, _):
        assert run_calls(url, face, 2, socket_lane=keyword) == ["fine", "fine"]
    assert lane_calls == [expected] * 2


def test_the_switch_and_the_expiry_travel_with_a_pickled_model() -> None:
    import pickle

    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", api_key="", socket_lane=False, keepalive_expiry=5)
    copy = pickle.loads(pickle.dumps(model))
    assert copy._http._socket_lane is False and copy._http._keepalive_expiry == 5.0
    assert not copy._http._fast_lane()


def test_an_unknown_switch_value_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LANE_ENV, "maybe")
    with pytest.raises(ValueError, match=LANE_ENV):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1")


# -- 9. streams over the lane ---------------------------------------------------------------------

from chatclient.errors import RateLimitError  # noqa: E402
from chatclient.models.anthropic import AnthropicChatModel  # noqa: E402
from chatclient.models.ollama import OllamaChatModel  # noqa: E402
from chatclient.models.openai import OpenAIChatModel as _OpenAI  # noqa: E402
from tests.support import server_fixtures  # noqa: E402
from tests.support.loopback import (  # noqa: E402
    NDJSON,
    SSE,
    LoopbackServer,
    RawStream,
    Reply,
    anthropic_stream,
    ollama_stream,
    openai_stream,
)

loopback_server, server = server_fixtures()

# (model factory, path, stream action) for each provider's stream format
FORMATS: dict[str, tuple[Callable[[str, dict[str, Any]], Any], str, Callable[[list[str]], Any]]] = {
    "openai-sse": (
        lambda url, kw: _OpenAI("gpt-test", base_url=url + "/v1", api_key=KEY, **kw),
        "/v1/chat/completions",
        lambda pieces: SSE(openai_stream(pieces), split=(7, 1, 30)),
    ),
    "anthropic-sse": (
        lambda url, kw: AnthropicChatModel("claude-test", base_url=url, api_key=KEY, **kw),
        "/v1/messages",
        lambda pieces: SSE(anthropic_stream(pieces), done=False, split=(7, 1, 30)),
    ),
    "ollama-ndjson": (
        lambda url, kw: OllamaChatModel("llama-test", base_url=url, **kw),
        "/api/chat",
        lambda pieces: NDJSON(ollama_stream(pieces), split=(7, 1, 30)),
    ),
}


def stream_text(model: Any, face: str, times: int = 1) -> list[str]:
    """The streamed text of ``times`` streams of one model (async: on one loop), then the model closed."""
    prompt = Prompt("hi")
    if face == "sync":
        with model:
            return ["".join(c.result.output.text or "" for c in model.stream(prompt) if c.result) for _ in range(times)]

    async def main() -> list[str]:
        async with model:
            out = []
            for _ in range(times):
                out.append("".join([c.result.output.text or "" async for c in model.astream(prompt) if c.result]))
            return out

    return asyncio.run(main())


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_every_stream_format_takes_the_lane_and_pools_its_connection(
    server: LoopbackServer, lane_calls: list[str], face: str, fmt: str
) -> None:
    make, path, action = FORMATS[fmt]
    server.set_default(path, action(["Hel", "lo ", "wörld"]))
    assert stream_text(make(server.url, {"max_retries": 0}), face, times=3) == ["Hello wörld"] * 3
    assert lane_calls == ["lane"] * 3
    assert len({r.client_port for r in server.requests_to(path)}) == 1  # drained and reused


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize("fmt", FORMATS)
def test_an_error_status_before_the_first_chunk_is_retried_on_the_lane(
    server: LoopbackServer, lane_calls: list[str], face: str, fmt: str
) -> None:
    make, path, action = FORMATS[fmt]
    server.script(path, Reply(503, json={"error": {"message": "busy"}}), action(["ok"]))
    model = make(server.url, {"max_retries": 1, "backoff_base": 0.001})
    assert stream_text(model, face) == ["ok"]
    assert lane_calls == ["lane"] * 2


@pytest.mark.parametrize("face", FACES)
def test_a_rate_limit_on_a_stream_is_typed_on_the_lane(server: LoopbackServer, face: str) -> None:
    make, path, _ = FORMATS["openai-sse"]
    server.script(path, Reply(429, json={"error": {"message": "slow down"}}, headers={"retry-after": "0"}))
    with pytest.raises(RateLimitError):
        stream_text(make(server.url, {"max_retries": 0}), face)


@pytest.mark.parametrize("face", FACES)
def test_a_line_over_the_limit_is_a_response_error_on_the_lane(server: LoopbackServer, face: str) -> None:
    from chatclient.models.http import ResponseLimits

    make, path, _ = FORMATS["openai-sse"]
    server.script(path, SSE(openai_stream(["x" * 5000])))
    model = make(server.url, {"max_retries": 0, "response_limits": ResponseLimits(max_line_bytes=1024)})
    with pytest.raises(ModelResponseError, match="longer than 1024 bytes"):
        stream_text(model, face)


@pytest.mark.parametrize("face", FACES)
def test_a_stream_held_open_after_its_end_marker_ends_at_once(server: LoopbackServer, face: str) -> None:
    make, path, _ = FORMATS["openai-sse"]
    frames = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in openai_stream(["held"])] + [b"data: [DONE]\n\n"]
    server.script(path, RawStream(frames, keepalive=0.02, hold=10.0))
    start = time.monotonic()
    assert stream_text(make(server.url, {"max_retries": 0}), face) == ["held"]
    assert time.monotonic() - start < 2.0  # the drain gave up after its grace period; no 10 s wait


def test_cancelling_an_async_stream_closes_its_socket_at_once(server: LoopbackServer, lane_calls: list[str]) -> None:
    make, path, _ = FORMATS["openai-sse"]
    # Two events, then keep-alive comments every 50 ms and no end: the server notices a closed
    # client at its next write.
    frames = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in openai_stream(["a", "b"])[:2]]
    server.script(path, RawStream(frames, keepalive=0.05, hold=10.0))
    model = make(server.url, {"max_retries": 0})

    async def main() -> bool:
        async with model:
            stream = model.astream(Prompt("hi"))
            while True:  # read up to the stall: the first read that has not finished after 0.2 s
                task = asyncio.create_task(stream.__anext__())
                done, _ = await asyncio.wait({task}, timeout=0.2)
                if not done:
                    break
                assert task.result().result is not None
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await stream.aclose()
            # Still inside the model's lifetime: the cancelled stream's own socket is already gone.
            return await asyncio.to_thread(server.wait_for_open_connections, 0, 1.0)

    assert asyncio.run(main())
    assert lane_calls == ["lane"]
