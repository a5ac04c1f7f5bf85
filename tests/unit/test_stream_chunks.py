"""The per-chunk fast paths of the stream parsers: same objects, same events, same errors as the plain paths."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatclient.errors import ModelHTTPError, ModelResponseError
from chatclient.messages import AssistantMessage, Reasoning
from chatclient.models import _chunks
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.base import ChatResponse, ChatResponseMetadata, Generation, GenerationMetadata
from chatclient.models.gemini import GeminiChatModel
from chatclient.models.http.sse import LineDecoder, SSEDecoder, parse_event_json, parse_json
from chatclient.models.openai import OpenAIChatModel
from chatclient.models.openai_responses import OpenAIResponsesModel
from chatclient.prompt import Prompt
from tests.support import LoopbackServer, server_fixtures
from tests.support.loopback import SSE, anthropic_stream

loopback_server, server = server_fixtures()

PATH = "/v1/messages"


def test_fast_constructors_build_what_the_constructors_build() -> None:
    assert _chunks._slots_match()  # the fast path is the one in use
    meta = ChatResponseMetadata("c1", "m")
    assert _chunks.text_chunk("hi", meta) == ChatResponse((Generation(AssistantMessage("hi")),), meta)
    message = AssistantMessage(None, reasoning=(Reasoning("think"),))
    built = _chunks.message_chunk((_chunks.message_generation(message),), meta)
    assert built == ChatResponse((Generation(message),), meta)
    assert built.result is not None and built.result.metadata == GenerationMetadata()
    with pytest.raises(AttributeError):  # still frozen
        built.result.output.text = "x"  # type: ignore[misc]


LINES = [
    ": comment",
    "event: message_start",
    "id: 7",
    'data: {"a": 1}',
    "",
    "",
    "data:no-space",
    "data:  two spaces",
    "",
    "retry: 10",
    "data: first",
    "data: second",
    "",
    "event: ping",
    "",
    "data",
    "",
]


def test_feed_data_gives_the_data_feed_gives() -> None:
    plain, fast = SSEDecoder(), SSEDecoder()
    expected = [e.data for e in map(plain.feed, LINES) if e is not None]
    got = [d for d in map(fast.feed_data, LINES) if d is not None]
    assert got == expected == ['{"a": 1}', "no-space\n two spaces", "first\nsecond", ""]


def test_feed_data_keeps_the_event_name_and_the_bound() -> None:
    sse = SSEDecoder(max_event_bytes=10)
    for line in ("event: delta", "data: x"):
        assert sse.feed_data(line) is None
    assert sse.feed_data("") == "x" and sse.last_event == "delta"
    sse.feed_data("data: 12345")
    with pytest.raises(ModelResponseError, match="larger than 10 bytes"):
        sse.feed_data("data: 67890")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, {"b": null}]}',
        ' {"a": 1}',
        '{"a": 1} ',
        '{"a": 1} x',
        '{"a":',
        "[1]",
        "",
        "{" * 600,
        '{"a": "\udcff"}',
    ],
)
def test_parse_event_json_matches_parse_json(text: str) -> None:
    def outcome(fn: Any) -> Any:
        try:
            return fn()
        except ModelResponseError as exc:
            return ("error", str(exc))

    assert outcome(lambda: parse_event_json(text)) == outcome(lambda: parse_json(text, what="stream event"))


def _model(srv: LoopbackServer) -> AnthropicChatModel:
    return AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url=srv.url, max_retries=1, backoff_base=0.0)


OVERLOADED = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


def _read(model: AnthropicChatModel, use_async: bool) -> tuple[list[str | None], BaseException | None]:
    got: list[str | None] = []

    async def collect() -> None:
        async for chunk in model.astream(Prompt("hi")):
            got.append(chunk.text)

    try:
        if use_async:
            asyncio.run(collect())
        else:
            got.extend(c.text for c in model.stream(Prompt("hi")))
    except (ModelHTTPError, ModelResponseError) as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("use_async", [False, True])
def test_an_error_event_after_a_chunk_of_the_same_read_is_raised_after_it(
    server: LoopbackServer, use_async: bool
) -> None:
    # The whole body arrives in one read: the chunk before the error still reaches the caller,
    # and the stream is not retried (a chunk was emitted).
    events = [*anthropic_stream(("Hi",), stop=False)[:4], OVERLOADED]
    server.script(PATH, SSE(events, done=False), SSE(anthropic_stream(("no",))))
    with _model(server) as model:
        got, error = _read(model, use_async)
    assert got == ["Hi"]
    assert isinstance(error, ModelHTTPError) and error.status == 529
    assert len(server.requests_to(PATH)) == 1


@pytest.mark.parametrize("use_async", [False, True])
def test_an_error_event_before_any_chunk_is_retried(server: LoopbackServer, use_async: bool) -> None:
    events = [*anthropic_stream(("Hi",), stop=False)[:2], OVERLOADED]
    server.script(PATH, SSE(events, done=False), SSE(anthropic_stream(("again",))))
    with _model(server) as model:
        got, error = _read(model, use_async)
    assert error is None
    assert [t for t in got if t] == ["again"]
    assert len(server.requests_to(PATH)) == 2


def _reference_lines(body: bytes) -> list[str]:
    """Lines at "\\r\\n", "\\r" or "\\n", each decoded alone, a leading byte-order mark dropped."""
    import re

    pieces = re.split(rb"\r\n|\r|\n", body)
    if not pieces[-1]:
        pieces.pop()  # the body ended with a terminator (or was empty)
    lines = [p.decode("utf-8", "replace") for p in pieces]
    if lines and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]
    return lines


@given(
    st.lists(
        st.sampled_from([b"data: x", b"\n", b"\r\n", b"\r", "é€😀".encode(), b"\xe2\x82", b"\xff", b"{}", b" "]),
        max_size=40,
    ),
    st.booleans(),
    st.integers(min_value=1, max_value=9),
)
def test_line_decoder_splits_as_the_sse_rules_say_whatever_the_reads(pieces: list[bytes], bom: bool, cut: int) -> None:
    body = ("\ufeff".encode() if bom else b"") + b"".join(pieces)
    decoder = LineDecoder(max_line_bytes=1 << 20)
    got: list[str] = []
    for i in range(0, len(body), cut):
        got += decoder.feed(body[i : i + cut])
    got += decoder.flush()
    assert got == _reference_lines(body)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(("where", "text"), [("delta", 5), ("delta", ["a"]), ("start", 5), ("start", {"a": 1})])
def test_an_anthropic_text_that_is_not_a_string_is_a_typed_error(
    server: LoopbackServer, use_async: bool, where: str, text: Any
) -> None:
    # The text of a block is joined only at the end: a non-string piece must fail where it arrives,
    # as a ModelResponseError, not as a bare TypeError from the last chunk (nor pass as a chunk).
    events = anthropic_stream(("Hi", "there"))
    if where == "delta":
        events[3] = (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        )
    else:
        events[2] = (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": text}},
        )
    server.script(PATH, SSE(events, done=False))
    with _model(server) as model:
        got, error = _read(model, use_async)
    assert isinstance(error, ModelResponseError), error
    assert "not a string" in str(error)
    assert all(t is None or isinstance(t, str) for t in got)


def _stream_error(model: Any, use_async: bool) -> BaseException | None:
    async def collect() -> None:
        async for _ in model.astream(Prompt("hi")):
            pass

    try:
        if use_async:
            asyncio.run(collect())
        else:
            for _ in model.stream(Prompt("hi")):
                pass
    except Exception as exc:  # the test checks the type
        return exc
    return None


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("index", [1000, -1, 10**20, 1e999, "x"])
@pytest.mark.parametrize("many", [False, True])
def test_an_openai_choice_index_out_of_bounds_is_a_typed_error(
    server: LoopbackServer, use_async: bool, index: Any, many: bool
) -> None:
    # Each index below the one named costs a placeholder generation: a hostile index must be refused
    # (before, 10**20 escaped as a bare OverflowError and 5*10**8 ran out of memory).
    choices = [{"index": index, "delta": {"content": "a"}, "finish_reason": None}]
    if many:
        choices.insert(0, {"index": 0, "delta": {"content": "b"}, "finish_reason": None})
    events = [{"id": "c1", "model": "m", "choices": choices}]
    server.script("/v1/chat/completions", SSE(events))
    with OpenAIChatModel("m", api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0) as model:
        error = _stream_error(model, use_async)
    assert isinstance(error, ModelResponseError), repr(error)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("index", [1000, -1, 10**20, 1e999, "x"])
def test_a_gemini_candidate_index_out_of_bounds_is_a_typed_error(
    server: LoopbackServer, use_async: bool, index: Any
) -> None:
    events = [{"candidates": [{"index": index, "content": {"parts": [{"text": "a"}]}, "finishReason": "STOP"}]}]
    path = "/v1beta/models/g:streamGenerateContent?alt=sse"
    server.script(path, SSE(events, done=False))
    with GeminiChatModel("g", api_key="AIza-test", base_url=server.url, max_retries=0) as model:
        error = _stream_error(model, use_async)
    assert isinstance(error, ModelResponseError), repr(error)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_malformed_event_after_a_chunk_of_the_same_read_is_raised_after_it(
    server: LoopbackServer, use_async: bool
) -> None:
    # As for an error event: the chunk that came before in the same read still reaches the caller
    # (one read holds many events; it used to be dropped with the read's other chunks).
    events = [*anthropic_stream(("Hi",), stop=False)[:4], "{not json"]
    server.script(PATH, SSE(events, done=False, split=(1 << 20,)))  # the whole body in one frame
    with _model(server) as model:
        got, error = _read(model, use_async)
    assert got == ["Hi"]
    assert isinstance(error, ModelResponseError) and "malformed JSON" in str(error)
    assert len(server.requests_to(PATH)) == 1


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("delta", [5, ["a"], {"a": 1}])
def test_a_responses_text_delta_that_is_not_a_string_is_a_typed_error(
    server: LoopbackServer, use_async: bool, delta: Any
) -> None:
    # A list or mapping passed on as a chunk's text (only a number failed, on len()).
    events = [
        {"type": "response.created", "response": {"id": "r1", "model": "m"}},
        {"type": "response.output_text.delta", "item_id": "i1", "content_index": 0, "delta": delta},
        {"type": "response.completed", "response": {"id": "r1", "model": "m", "status": "completed", "output": []}},
    ]
    server.script("/v1/responses", SSE(events, done=False))
    with OpenAIResponsesModel("m", api_key="sk-test", base_url=f"{server.url}/v1", max_retries=0) as model:
        error = _stream_error(model, use_async)
    assert isinstance(error, ModelResponseError) and "not a string" in str(error), repr(error)
