"""FallbackChatModel over real HTTP: every fallback trigger from the loopback fault server."""

from __future__ import annotations

from typing import Any

import pytest

from chatclient import ChatClient, Prompt
from chatclient.errors import ModelConnectionError, ModelHTTPError
from chatclient.models.openai import OpenAIChatModel
from chatclient.resilience import CircuitBreaker, CircuitState, FallbackChatModel
from tests.conftest import run_spec
from tests.support import server_fixtures
from tests.support.loopback import SSE, Close, LoopbackServer, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

PRIMARY = "/primary/v1/chat/completions"
BACKUP = "/backup/v1/chat/completions"


def model(srv: LoopbackServer, prefix: str, name: str, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("max_retries", 0)  # the fallback decides, not the transport's retries
    kw.setdefault("timeout", 5.0)
    return OpenAIChatModel(name, api_key="sk-test-0123456789abcdef", base_url=f"{srv.url}/{prefix}/v1", **kw)


def backup_answer(srv: LoopbackServer, mode: str) -> None:
    if mode.endswith("stream"):
        srv.script(BACKUP, SSE(openai_stream(["from ", "backup"], model="backup-model")))
    else:
        srv.script(BACKUP, Reply(json=openai_completion("from backup", model="backup-model")))


FAULTS: list[tuple[str, Any]] = [
    ("rate_limit", Reply(429, json={"error": {"message": "rate limited", "type": "requests"}})),
    ("server_error", Reply(500, json={"error": {"message": "internal"}})),
    ("server_error", Reply(503, body="upstream unavailable")),
    ("overloaded", Reply(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    ("connection", Close()),
    (
        "context_length",
        Reply(
            400,
            json={
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "code": "context_length_exceeded",
                    "type": "invalid_request_error",
                }
            },
        ),
    ),
]


@pytest.mark.parametrize(("trigger", "fault"), FAULTS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(FAULTS)])
def test_http_faults_fall_back_to_the_next_model(server: LoopbackServer, mode: str, trigger: str, fault: Any) -> None:
    server.script(PRIMARY, fault)
    backup_answer(server, mode)
    fallback = FallbackChatModel(model(server, "primary", "primary-model"), model(server, "backup", "backup-model"))
    response = run_spec(ChatClient.create(fallback).prompt("hi"), mode).chat_response
    assert response is not None and response.text == "from backup"
    assert response.metadata.extra["fallback_model"] == "backup-model"
    assert len(server.requests_to(PRIMARY)) == 1 and len(server.requests_to(BACKUP)) == 1


def test_timeout_falls_back(server: LoopbackServer) -> None:
    server.script(PRIMARY, Reply(json=openai_completion("too late"), delay=1.5))
    backup_answer(server, "call")
    slow = model(server, "primary", "primary-model", timeout=0.3)
    r = FallbackChatModel(slow, model(server, "backup", "backup-model")).call(Prompt("hi"))
    assert r.text == "from backup"
    assert r.metadata.extra["fallback_failed"] == ("primary-model: ModelTimeoutError",)


def test_retry_after_header_opens_the_breaker_for_that_long(server: LoopbackServer) -> None:
    server.script(PRIMARY, Reply(429, json={"error": {"message": "slow down"}}, headers={"Retry-After": "20"}))
    for _ in range(2):
        backup_answer(server, "call")
    fallback = FallbackChatModel(model(server, "primary", "primary-model"), model(server, "backup", "backup-model"))
    fallback.call(Prompt("one"))
    assert fallback.breakers[0].state is CircuitState.OPEN
    assert 19.0 < fallback.breakers[0].retry_in <= 20.0
    fallback.call(Prompt("two"))
    assert len(server.requests_to(PRIMARY)) == 1  # skipped while open


def test_bad_request_is_not_a_fallback_trigger(server: LoopbackServer) -> None:
    server.script(PRIMARY, Reply(400, json={"error": {"message": "unknown parameter 'foo'"}}))
    fallback = FallbackChatModel(model(server, "primary", "primary-model"), model(server, "backup", "backup-model"))
    with pytest.raises(ModelHTTPError) as info:
        fallback.call(Prompt("hi"))
    assert info.value.status == 400 and server.requests_to(BACKUP) == []


def test_stream_cut_after_the_first_chunk_is_not_retried_elsewhere(server: LoopbackServer) -> None:
    server.script(PRIMARY, SSE(openai_stream(["par", "tial", " answer"]), reset_after=2))
    fallback = FallbackChatModel(
        model(server, "primary", "primary-model"),
        model(server, "backup", "backup-model"),
        breaker=CircuitBreaker(failure_threshold=1),
    )
    texts: list[str | None] = []
    with pytest.raises(ModelConnectionError):
        for chunk in fallback.stream(Prompt("hi")):
            texts.append(chunk.text)
    assert "".join(t or "" for t in texts).startswith("par")
    assert server.requests_to(BACKUP) == []
