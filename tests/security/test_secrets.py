"""No API key or URL credential leaks, whole or in part, into errors, reprs, logs or spans."""

from __future__ import annotations

import base64
import json
import logging
import socket
from collections.abc import Iterator
from urllib.parse import quote, quote_plus

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chatclient.errors import AuthenticationError, ModelConnectionError, ModelError, ModelRequestError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.http import REDACTED, HTTPTransport, RetryPolicy, error_for_status, scrub
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel, OpenAIEmbeddingModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply, openai_completion

loopback_server, server = server_fixtures()

PATH = "/v1/chat/completions"
KEY = "sk-live-Zq8WvR2mN5xK7pL3"


def fragments(secret: str, width: int = 6) -> set[str]:
    """Every run of ``width`` consecutive characters of ``secret`` (the leak unit we promise against)."""
    secret = secret.strip()
    if len(secret) < width:
        return {secret} if secret else set()
    return {secret[i : i + width] for i in range(len(secret) - width + 1)}


def assert_no_leak(text: str, secret: str) -> None:
    leaked = [f for f in fragments(secret) if f in text and f not in REDACTED]
    assert not leaked, f"secret fragment(s) {leaked!r} leaked into {text!r}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def no_env_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OLLAMA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    yield


# -- validation at construction -------------------------------------------------------------------------


def test_key_read_from_a_file_is_stripped_and_sent_clean(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion("ok")))
    with OpenAIChatModel("m", api_key=f"  {KEY}\n", base_url=server.url + "/v1", max_retries=0) as model:
        assert model.call(Prompt("x")).text == "ok"
    assert server.requests_to(PATH)[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    "bad", [f"{KEY[:8]}\n{KEY[8:]}", f"{KEY}\x00", f"{KEY[:5]}\x7f{KEY[5:]}", f"{KEY}é", "sk-€uro-key"]
)
def test_malformed_keys_are_rejected_without_echo(bad: str) -> None:
    for make in (
        lambda: OpenAIChatModel("m", api_key=bad, base_url="http://127.0.0.1:9/v1"),
        lambda: AnthropicChatModel("m", api_key=bad),
        lambda: OllamaChatModel("m", api_key=bad),
        lambda: OpenAIEmbeddingModel("e", api_key=bad),
    ):
        with pytest.raises(ValueError) as info:
            make()
        message = str(info.value)
        assert "API key" in message and "position" in message
        assert_no_leak(message, bad)


def test_missing_key_fails_at_construction_naming_the_variable(no_env_keys: None) -> None:
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini", api_key="   ")
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIEmbeddingModel("text-embedding-3-small")
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        AnthropicChatModel("claude-test")


def test_local_servers_keep_the_key_optional(no_env_keys: None) -> None:
    # llama.cpp / vLLM / Ollama behind an OpenAI-compatible base_url need no key.
    OpenAIChatModel("local", base_url="http://127.0.0.1:8080/v1").close()
    AnthropicChatModel("local", base_url="http://127.0.0.1:8080").close()
    OllamaChatModel("llama").close()


def test_custom_header_values_are_validated_without_echo() -> None:
    with pytest.raises(ValueError) as info:
        OpenAIChatModel("m", api_key=KEY, headers={"api-key": KEY + "\r\nx-evil: 1"}, base_url="http://127.0.0.1:9/v1")
    assert "api-key" in str(info.value)
    assert_no_leak(str(info.value), KEY)


# -- the scrubber -----------------------------------------------------------------------------------------


def representations(key: str) -> list[str]:
    return [
        key,
        f"Bearer {key}",
        repr(key),
        repr(key.encode("utf-8", "surrogatepass")),
        json.dumps(key),
        quote(key, safe=""),
        quote_plus(key),
        repr(f"Bearer {key}\n".encode("utf-8", "surrogatepass")),
    ]


KEYS = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="[]"), min_size=8, max_size=64
)
FILLER = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x7E), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=KEYS, before=FILLER, after=FILLER, which=st.integers(0, 7), cut=st.integers(0, 200))
def test_scrub_removes_every_representation_and_part(key: str, before: str, after: str, which: int, cut: int) -> None:
    assume(not any(f in REDACTED for f in fragments(key)))
    text = before + representations(key)[which] + after
    assert_no_leak(scrub(text, [key]), key)
    # Scrubbing before cutting: whatever the cut, no fragment survives in the excerpt.
    assert_no_leak(scrub(text, [key])[:cut], key)


@settings(max_examples=60, deadline=None)
@given(key=KEYS, cut=st.integers(1, 60), status=st.sampled_from([400, 401, 404, 429, 500, 529]))
def test_error_excerpts_never_hold_part_of_a_key(key: str, cut: int, status: int) -> None:
    assume(not any(f in REDACTED for f in fragments(key)))
    # A key that shares 6 characters with the error's own wording ("request id", ...) is not a leak.
    wording = str(
        error_for_status("OpenAI", status, '{"error": {"message": "bad key"}}', {"x-request-id": "req_1"}, [])
    )
    assume(not any(f in wording + " invalid_request_error" for f in fragments(key)))
    # The key straddles the 1000-character excerpt cut and is echoed in the message field too.
    body = json.dumps({"error": {"message": f"bad key {key}", "type": "invalid_request_error", "code": key}})
    body = "x" * (1000 - cut) + key + body
    err = error_for_status("OpenAI", status, body, {"x-request-id": "req_1"}, [key])
    for text in (str(err), repr(err), err.body or "", err.code or "", repr(vars(err))):
        assert_no_leak(text, key)


# -- the HTTP layer end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 500])
def test_echoed_keys_never_reach_errors_or_retry_logs(
    server: LoopbackServer, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    echo = " | ".join(representations(KEY)) + " " + base64.b64encode(KEY.encode()).decode()
    server.set_default(PATH, Reply(status, json={"error": {"message": f"Incorrect API key provided: {echo}"}}))
    caplog.set_level(logging.DEBUG)
    model = OpenAIChatModel("m", api_key=KEY, base_url=server.url + "/v1", max_retries=2, backoff_base=0.001)
    with model, pytest.raises(ModelError) as info:
        model.call(Prompt("x"))
    err = info.value
    for text in (str(err), repr(err), getattr(err, "body", "") or "", repr(model), caplog.text):
        assert_no_leak(text, KEY)
    expected_attempts = 3 if status == 500 else 1  # 401/400 can never succeed: not retried
    assert len(server.requests_to(PATH)) == expected_attempts
    if status == 401:
        assert isinstance(err, AuthenticationError) and "api_key argument" in str(err)


def test_a_header_httpx_refuses_is_not_retried_and_not_echoed(server: LoopbackServer) -> None:
    transport = HTTPTransport(
        provider="OpenAI", base_url=server.url + "/v1", headers={"authorization": f"Bearer {KEY}"}, secrets=[KEY]
    )
    # Bypass construction-time validation, as a header corrupted later would: h11 then refuses it.
    transport._headers["authorization"] = f"Bearer {KEY}\n"
    try:
        with pytest.raises(ModelRequestError) as info:
            transport.post("/chat/completions", {"x": 1})
    finally:
        transport.close()
    assert "api_key" in str(info.value)
    assert_no_leak(str(info.value), KEY)
    assert not RetryPolicy().is_retryable(info.value)
    assert server.requests_to(PATH) == []


# -- credentials in base_url --------------------------------------------------------------------------------


def test_userinfo_in_base_url_is_sent_as_basic_auth_and_shown_nowhere(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(json=openai_completion("ok")))
    url = server.url.replace("http://", "http://alice:s3cr3t-pa55word@") + "/v1"
    with OpenAIChatModel("m", base_url=url, api_key="") as model:
        assert model.call(Prompt("x")).text == "ok"
        for text in (repr(model), model.base_url, repr(model._http), repr(vars(model._http))):
            assert "s3cr3t" not in text and "alice" not in text
    expected = "Basic " + base64.b64encode(b"alice:s3cr3t-pa55word").decode()
    assert server.requests_to(PATH)[0].headers["authorization"] == expected


def test_userinfo_never_in_connection_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"http://bob:hunter2-very-secret@127.0.0.1:{free_port()}/v1"
    model = OpenAIChatModel("m", base_url=url, max_retries=1, backoff_base=0.001)
    with model, pytest.raises(ModelConnectionError) as info:
        model.call(Prompt("x"))
    for text in (str(info.value), caplog.text):
        assert "hunter2" not in text and "bob:" not in text
    assert "127.0.0.1" in str(info.value)


def test_url_full_span_attribute_drops_userinfo(server: LoopbackServer) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from chatclient.observability.otel import instrument, uninstrument

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observer = instrument(provider)
    try:
        server.script(PATH, Reply(500, json={"error": {"message": f"no {KEY}"}}), Reply(json=openai_completion()))
        url = server.url.replace("http://", "http://carol:topsecretpw@") + "/v1"
        with OpenAIChatModel("m", base_url=url, api_key=KEY, backoff_base=0.001) as model:
            model.call(Prompt("x"))
        # The observer also strips userinfo for URLs that reach it from elsewhere.
        observer.start_http_attempt("X", "POST", "https://u:pw-secret@h.example/v1", 1).finish()
    finally:
        uninstrument()
    spans = exporter.get_finished_spans()
    http_spans = [s for s in spans if (s.attributes or {}).get("url.full")]
    assert len(http_spans) == 3
    for span in spans:
        dump = json.dumps({k: str(v) for k, v in (span.attributes or {}).items()})
        dump += " ".join(str(e.attributes) for e in span.events) + str(span.status.description)
        assert "topsecretpw" not in dump and "carol" not in dump and "pw-secret" not in dump
        assert_no_leak(dump, KEY)
    assert {str((s.attributes or {})["url.full"]) for s in http_spans} == {
        server.url + PATH,
        "https://h.example/v1",
    }


def test_transport_repr_and_locals_hide_header_values() -> None:
    transport = HTTPTransport(
        provider="X",
        base_url="http://h/",
        headers={"api-key": "azure-style-key-0123", "x-custom-token": "tok-987654321"},
        secrets=[],
    )
    # Credential-like headers count as secrets even when not declared.
    assert "azure-style" not in transport.scrub("echo azure-style-key-0123")
    assert "987654321" not in transport.scrub("echo tok-987654321")
    for text in (repr(transport), repr(vars(transport))):
        assert "azure" not in text and "987654321" not in text
    transport.close()


def test_injected_client_errors_are_scrubbed(server: LoopbackServer) -> None:
    server.set_default(PATH, Reply(403, body=f"forbidden for key {KEY}", headers={"request-id": "req_42"}))
    with httpx.Client() as client:
        model = OpenAIChatModel("m", api_key=KEY, base_url=server.url + "/v1", http_client=client)
        with pytest.raises(AuthenticationError) as info:
            model.call(Prompt("x"))
    assert info.value.request_id == "req_42"
    assert_no_leak(str(info.value) + (info.value.body or ""), KEY)


def test_shared_redis_state_keeps_its_url_password_out_of_vars() -> None:
    # RedisState (behind RateLimiter/Budget redis_url=) kept the URL and its password in plain
    # attributes: repr(vars(limiter)) or a traceback's locals showed them.
    import pickle

    from chatclient.resilience.redis_state import RedisState

    url = "redis://:hunter2-fleet-password@127.0.0.1:6379/0"
    state = RedisState(url)
    assert "hunter2-fleet-password" not in repr(vars(state))
    assert "hunter2-fleet-password" not in repr(state)
    assert state.url == url and pickle.loads(pickle.dumps(state)).url == url
    error = state.error("rate", ConnectionError(f"cannot reach {url}"))
    assert "hunter2-fleet-password" not in str(error)
