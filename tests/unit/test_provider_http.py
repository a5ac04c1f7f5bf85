"""The shared HTTP layer's pure parts: retry decisions, Retry-After, error typing, scrubbing, SSE."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import AsyncIterator

import pytest

from chatclient.errors import (
    AuthenticationError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
    RateLimitError,
)
from chatclient.models.http import HTTPTransport, RetryPolicy, error_for_status, parse_retry_after, scrub
from chatclient.models.http.sse import SSEEvent, aiter_ndjson, aiter_sse, iter_ndjson, iter_sse, parse_json


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": future}) or 0) <= 31
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_retryable_statuses_and_errors() -> None:
    def http(status: int) -> ModelHTTPError:
        return error_for_status("X", status, "", {})

    for status in (408, 409, 429, 500, 502, 503, 529):
        assert RetryPolicy.is_retryable(http(status)), status
    for status in (400, 401, 403, 404, 422):
        assert not RetryPolicy.is_retryable(http(status)), status
    assert RetryPolicy.is_retryable(ModelConnectionError("x"))
    assert RetryPolicy.is_retryable(ModelTimeoutError("x"))
    assert not RetryPolicy.is_retryable(ModelResponseError("x"))
    assert not RetryPolicy.is_retryable(http(500), {"x-should-retry": "false"})
    assert RetryPolicy.is_retryable(http(400), {"x-should-retry": "true"})


def test_backoff_grows_exponentially_with_jitter_and_stops() -> None:
    policy = RetryPolicy(max_retries=3, backoff_base=1.0, backoff_max=3.0)
    err = ModelConnectionError("x")
    for retries_done, full in [(0, 1.0), (1, 2.0), (2, 3.0)]:  # capped at backoff_max
        for _ in range(20):
            delay = policy.delay(retries_done, err)
            assert delay is not None and full / 2 <= delay <= full
    assert policy.delay(3, err) is None  # retries used up
    assert policy.delay(0, ModelResponseError("x")) is None


def test_server_retry_after_wins_within_limit() -> None:
    policy = RetryPolicy(max_retries=2, backoff_base=10.0, max_retry_after=60)
    err = error_for_status("X", 429, "", {"retry-after": "0.5"})
    assert policy.delay(0, err, {"retry-after": "0.5"}) == 0.5
    assert policy.delay(0, err, {"retry-after": "120"}) is None


def test_error_types_and_messages() -> None:
    body = '{"error": {"message": "Invalid key sk-abcdef123456", "type": "auth"}}'
    err = error_for_status("OpenAI", 401, body, {}, ["sk-abcdef123456"])
    assert isinstance(err, AuthenticationError) and err.status == 401
    assert "sk-abcdef123456" not in str(err) and "sk-abcdef123456" not in (err.body or "")
    assert "Invalid key [REDACTED]" in str(err)
    limited = error_for_status("OpenAI", 429, "{}", {"retry-after": "7"})
    assert isinstance(limited, RateLimitError) and limited.retry_after == 7.0
    other = error_for_status("Ollama", 404, '{"error": "model not found"}', {})
    assert type(other) is ModelHTTPError and "model not found" in str(other)
    long = error_for_status("X", 500, "x" * 5000, {})
    assert long.body is not None and len(long.body) == 1000


def test_scrub_and_repr_hide_secrets() -> None:
    assert scrub("a KEY123456 b KEY123456", ["KEY123456"]) == "a [REDACTED] b [REDACTED]"
    transport = HTTPTransport(
        provider="X", base_url="http://h/", headers={"x-api-key": "KEY123456"}, secrets=["KEY123456"]
    )
    assert "KEY123456" not in repr(transport)
    assert "KEY123456" not in repr(vars(transport))  # headers dict repr is redacted too
    assert transport.base_url == "http://h"


def test_sse_parsing_rules() -> None:
    lines = [": comment", "event: delta", "data: line one", "data:line two", "id: 7", "", "", "data: tail"]
    assert list(iter_sse(lines)) == [
        SSEEvent("line one\nline two", "delta", "7"),
        SSEEvent("tail", None, "7"),  # the last event id persists, as the standard says
    ]


async def test_async_sse_and_ndjson() -> None:
    async def agen(items: list[str]) -> AsyncIterator[str]:
        for item in items:
            yield item

    events = [e async for e in aiter_sse(agen(['data: {"a": 1}', ""]))]
    assert [e.json() for e in events] == [{"a": 1}]
    objs = [o async for o in aiter_ndjson(agen(['{"a": 1}', "", '{"b": 2}']))]
    assert objs == [{"a": 1}, {"b": 2}]
    assert list(iter_ndjson(['{"c": 3}', "  "])) == [{"c": 3}]
    await asyncio.sleep(0)


def test_malformed_json_is_a_response_error() -> None:
    with pytest.raises(ModelResponseError, match="malformed JSON in stream event"):
        SSEEvent("{oops").json()
    with pytest.raises(ModelResponseError):
        parse_json("[1,")


def test_base_url_needs_a_scheme() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        HTTPTransport(provider="X", base_url="localhost:8080")
