"""Streams and bodies are bounded: line, event and total size, JSON depth, and time after the end marker."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatclient.errors import ModelHTTPError, ModelResponseError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.base import aggregate
from chatclient.models.http import HTTPChatModel, ResponseLimits
from chatclient.models.http.sse import LineDecoder, SSEDecoder, SSEEvent
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import (
    SSE,
    LoopbackServer,
    RawStream,
    Reply,
    anthropic_stream,
    ollama_stream,
    openai_completion,
    openai_stream,
)

loopback_server, server = server_fixtures()

KEY = "sk-bounds-SECRET-0123456789"
PATH = "/v1/chat/completions"


def sse_bytes(events: list[Any]) -> bytes:
    out = b""
    for event in events:
        if isinstance(event, tuple):
            out += f"event: {event[0]}\ndata: {json.dumps(event[1])}\n\n".encode()
        else:
            out += f"data: {json.dumps(event)}\n\n".encode()
    return out


def openai(srv: LoopbackServer, **kw: Any) -> OpenAIChatModel:
    return OpenAIChatModel("m", api_key=KEY, base_url=srv.url + "/v1", backoff_base=0.001, timeout=20.0, **kw)


def stream_text(model: HTTPChatModel, mode: str) -> str:
    if mode == "stream":
        return aggregate(list(model.stream(Prompt("x")))).text or ""

    async def collect() -> str:
        return aggregate([c async for c in model.astream(Prompt("x"))]).text or ""

    return asyncio.run(collect())


# -- the end marker ends the stream at once ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
def test_stream_ends_at_the_marker_even_if_the_server_keeps_it_open(
    server: LoopbackServer, mode: str, provider: str
) -> None:
    # After the end marker the server keeps sending keep-alive comments and never ends the body.
    model: HTTPChatModel
    if provider == "openai":
        path, body = PATH, sse_bytes(openai_stream(["a", "b"])) + b"data: [DONE]\n\n"
        model, content_type = openai(server), "text/event-stream"
    elif provider == "anthropic":
        path, body = "/v1/messages", sse_bytes(anthropic_stream(["a", "b"]))
        model, content_type = AnthropicChatModel("c", api_key=KEY, base_url=server.url), "text/event-stream"
    else:
        path = "/api/chat"
        body = b"".join(json.dumps(line).encode() + b"\n" for line in ollama_stream(["a", "b"]))
        model, content_type = OllamaChatModel("l", base_url=server.url), "application/x-ndjson"
    server.set_default(path, RawStream([body], content_type=content_type, keepalive=0.05, hold=30.0))
    with model:
        started = time.perf_counter()
        assert stream_text(model, mode) == "ab"
        elapsed = time.perf_counter() - started
    assert elapsed < 2.0, f"the stream waited {elapsed:.2f}s for a server that never closes"


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_final_event_without_blank_line_is_delivered(server: LoopbackServer, mode: str) -> None:
    body = sse_bytes(openai_stream(["a", "b"])) + b"data: [DONE]"  # no trailing blank line
    server.set_default(PATH, RawStream([body]))
    with openai(server) as model:
        assert stream_text(model, mode) == "ab"


def test_finished_streams_still_reuse_their_connection(server: LoopbackServer) -> None:
    server.set_default(PATH, SSE(openai_stream(["a"])))
    with openai(server) as model:
        assert [stream_text(model, "stream") for _ in range(3)] == ["a", "a", "a"]
    ports = {r.client_port for r in server.requests_to(PATH)}
    assert len(ports) == 1


# -- size bounds --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_oversized_line_is_a_typed_error(server: LoopbackServer, mode: str) -> None:
    # One "line" of 64 KiB that never ends, sent in pieces, against a 4 KiB bound.
    server.set_default(PATH, RawStream([b"data: " + b"x" * 4096] * 16, end=False))
    model = openai(server, response_limits=ResponseLimits(max_line_bytes=4096))
    with model, pytest.raises(ModelResponseError, match="longer than 4096 bytes"):
        stream_text(model, mode)


def test_oversized_event_is_a_typed_error(server: LoopbackServer) -> None:
    # Many short data lines that never close the event.
    server.set_default(PATH, RawStream([b"data: " + b"y" * 100 + b"\n"] * 100))
    model = openai(server, response_limits=ResponseLimits(max_event_bytes=5000))
    with model, pytest.raises(ModelResponseError, match="event is larger than 5000 bytes"):
        stream_text(model, "stream")


def test_total_stream_size_is_bounded(server: LoopbackServer) -> None:
    server.set_default(PATH, SSE(openai_stream(["chunk"] * 500)))
    model = openai(server, response_limits=ResponseLimits(max_response_bytes=20_000))
    with model, pytest.raises(ModelResponseError, match="larger than 20000 bytes"):
        stream_text(model, "stream")


@pytest.mark.parametrize("announced", [True, False])
def test_non_streamed_body_size_is_bounded(server: LoopbackServer, announced: bool) -> None:
    big = openai_completion("z" * 50_000)
    server.set_default(PATH, Reply(json=big) if announced else Reply(json=big, split=(4096,)))
    model = openai(server, response_limits=ResponseLimits(max_response_bytes=10_000))
    with model, pytest.raises(ModelResponseError, match="larger than 10000 bytes"):
        model.call(Prompt("x"))


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="max_line_bytes"):
        ResponseLimits(max_line_bytes=0)


# -- JSON depth ---------------------------------------------------------------------------------------------


def test_deeply_nested_bodies_and_events_are_typed_errors(server: LoopbackServer) -> None:
    deep = "[" * 20_000 + "]" * 20_000
    server.script(PATH, Reply(body=deep), RawStream([b"data: " + deep.encode() + b"\n\n"]))
    with openai(server, max_retries=0) as model:
        with pytest.raises(ModelResponseError, match="nested too deeply"):
            model.call(Prompt("x"))
        with pytest.raises(ModelResponseError, match="nested too deeply"):
            stream_text(model, "stream")


# -- mid-stream provider errors -----------------------------------------------------------------------------

OVERLOADED = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_overloaded_event_before_any_output_is_retried(server: LoopbackServer, mode: str) -> None:
    first = [*anthropic_stream([], stop=False)[:1], OVERLOADED]
    server.script("/v1/messages", SSE(first, done=False), SSE(anthropic_stream(["ok"]), done=False))
    with AnthropicChatModel("c", api_key=KEY, base_url=server.url, backoff_base=0.001) as model:
        assert stream_text(model, mode) == "ok"
    assert len(server.requests_to("/v1/messages")) == 2


def test_overloaded_event_after_output_is_raised_typed(server: LoopbackServer) -> None:
    events = [*anthropic_stream(["partial"], stop=False)[:4], OVERLOADED]
    server.script("/v1/messages", SSE(events, done=False))
    seen: list[str] = []
    model = AnthropicChatModel("c", api_key=KEY, base_url=server.url, backoff_base=0.001)
    with model, pytest.raises(ModelHTTPError) as info:
        for chunk in model.stream(Prompt("x")):
            seen.append(chunk.text or "")
    assert "partial" in "".join(seen)
    assert info.value.status == 529 and info.value.type == "overloaded_error"
    assert len(server.requests_to("/v1/messages")) == 1


# -- decoders under random splits and garbage ----------------------------------------------------------------

EVENT = st.fixed_dictionaries(
    {"event": st.one_of(st.none(), st.sampled_from(["delta", "ping"])), "data": st.text(max_size=40)}
)


def decode(chunks: list[bytes], **limits: int) -> list[SSEEvent]:
    lines = LineDecoder(limits.get("line", 1 << 20))
    events = SSEDecoder(limits.get("event", 1 << 20))
    out = []
    for chunk in chunks:
        for line in lines.feed(chunk):
            if (event := events.feed(line)) is not None:
                out.append(event)
    for line in [*lines.flush(), ""]:
        if (event := events.feed(line)) is not None:
            out.append(event)
    return out


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(EVENT, max_size=8),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
def test_sse_decoding_is_independent_of_network_splits(
    events: list[dict[str, Any]], newline: str, cuts: list[int]
) -> None:
    text = ""
    expected = []
    for e in events:
        data_lines = e["data"].replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if e["event"]:
            text += f"event: {e['event']}{newline}"
        text += "".join(f"data: {d}{newline}" for d in data_lines) + newline
        expected.append(SSEEvent("\n".join(data_lines), e["event"]))
    data = text.encode()
    assert decode(split(data, cuts)) == expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 5000), max_size=10))
def test_sse_decoder_on_garbage_gives_events_or_library_errors_quickly(garbage: bytes, cuts: list[int]) -> None:
    started = time.perf_counter()
    try:
        for event in decode(split(garbage, cuts), line=512, event=1024):
            assert isinstance(event.data, str)
            try:
                event.json()
            except ModelResponseError:
                pass
    except ModelResponseError:
        pass
    assert time.perf_counter() - started < 1.0


def test_long_line_in_many_small_reads_is_linear() -> None:
    decoder = LineDecoder(8 * 1024 * 1024)
    started = time.perf_counter()
    for _ in range(2000):
        assert decoder.feed(b"x" * 2048) == []
    assert decoder.feed(b"\n") == ["x" * 4_096_000]
    assert time.perf_counter() - started < 1.0
