"""HTTP errors name the provider, the URL (without secrets) and the likely fix, and carry the provider's ids."""

from __future__ import annotations

import socket

import pytest

from chatclient.errors import AuthenticationError, ModelConnectionError, ModelHTTPError, RateLimitError
from chatclient.models.anthropic import AnthropicChatModel
from chatclient.models.http import RetryPolicy, error_for_status
from chatclient.models.ollama import OllamaChatModel
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply

loopback_server, server = server_fixtures()

KEY = "sk-msg-SECRET-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_refused_connection_names_host_port_and_asks_if_the_server_runs() -> None:
    port = free_port()
    model = OpenAIChatModel("m", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with model, pytest.raises(ModelConnectionError) as info:
        model.call(Prompt("x"))
    message = str(info.value)
    assert f"127.0.0.1:{port}" in message and "OpenAI" in message and "is the server running" in message


def test_404_without_v1_suggests_adding_it(server: LoopbackServer) -> None:
    server.set_default("/chat/completions", Reply(404, body="Not Found"))
    model = OpenAIChatModel("m", api_key=KEY, base_url=server.url, max_retries=0)
    with model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("x"))
    assert info.value.status == 404
    assert f"try base_url='{server.url}/v1'" in str(info.value)
    assert f"POST {server.url}/chat/completions" in str(info.value)


def test_404_with_v1_on_ollama_and_anthropic_suggests_dropping_it(server: LoopbackServer) -> None:
    server.set_default("/v1/api/chat", Reply(404, body="404 page not found"))
    server.set_default("/v1/v1/messages", Reply(404, json={"type": "error", "error": {"type": "not_found_error"}}))
    ollama = OllamaChatModel("llama", base_url=server.url + "/v1", max_retries=0)
    with ollama, pytest.raises(ModelHTTPError) as info:
        ollama.call(Prompt("x"))
    assert f"try base_url='{server.url}' (without /v1)" in str(info.value)
    anthropic = AnthropicChatModel("c", api_key=KEY, base_url=server.url + "/v1", max_retries=0)
    with anthropic, pytest.raises(ModelHTTPError) as info:
        anthropic.call(Prompt("x"))
    assert f"try base_url='{server.url}' (without /v1)" in str(info.value)


def test_404_for_an_unknown_model_is_not_blamed_on_the_path(server: LoopbackServer) -> None:
    server.set_default("/api/chat", Reply(404, json={"error": 'model "llama9" not found, try pulling it first'}))
    model = OllamaChatModel("llama9", base_url=server.url, max_retries=0)
    with model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("x"))
    assert "pulling it first" in str(info.value) and "base_url=" not in str(info.value)


def test_401_names_where_the_key_came_from_never_the_key(
    server: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.set_default(
        "/v1/chat/completions", Reply(401, json={"error": {"message": "bad", "code": "invalid_api_key"}})
    )
    model = OpenAIChatModel("m", base_url=server.url + "/v1")
    with model, pytest.raises(AuthenticationError) as info:
        model.call(Prompt("x"))
    assert "OPENAI_API_KEY environment variable" in str(info.value) and KEY not in str(info.value)
    assert info.value.code == "invalid_api_key"
    assert len(server.requests_to("/v1/chat/completions")) == 1  # a bad key is never retried


def test_openai_error_fields() -> None:
    body = '{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    err = error_for_status("OpenAI", 429, body, {"x-request-id": "req_abc", "retry-after": "2"})
    assert isinstance(err, RateLimitError)
    assert (err.code, err.type, err.request_id, err.retry_after) == ("rate_limit_exceeded", "requests", "req_abc", 2.0)
    assert "req_abc" in str(err) and "Rate limit reached" in str(err)


def test_anthropic_error_fields() -> None:
    body = '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    err = error_for_status("Anthropic", 529, body, {"request-id": "req_018"})
    assert type(err) is ModelHTTPError
    assert (err.status, err.type, err.code, err.request_id) == (529, "overloaded_error", None, "req_018")
    assert RetryPolicy().is_retryable(err)


def test_ollama_and_fastapi_error_bodies() -> None:
    err = error_for_status("Ollama", 500, '{"error": "llama runner process has terminated"}')
    assert "llama runner process has terminated" in str(err) and err.code is None
    detail = '{"detail": [{"loc": ["body", "response_format"], "msg": "Input should be json_object"}]}'
    assert "Input should be json_object" in str(error_for_status("llama.cpp", 422, detail))


def test_non_json_and_hostile_bodies_still_give_a_typed_error() -> None:
    deep = '{"error": ' * 5000 + "1" + "}" * 5000
    for body in ("<html>bad gateway</html>", "", deep, '{"error": {"message": 42, "code": {"x": 1}}}'):
        err = error_for_status("OpenAI", 502, body)
        assert isinstance(err, ModelHTTPError) and err.status == 502


# -- a server that speaks a vendor's API is named by its address (issue 27, item 5) ----------------


@pytest.mark.parametrize(
    ("provider", "base_url", "expected"),
    [
        ("OpenAI", "https://api.openai.com/v1", "OpenAI"),
        ("OpenAI", "https://eu.api.openai.com/v1", "OpenAI"),  # a vendor subdomain is still the vendor
        ("OpenAI", "http://127.0.0.1:8080/v1", "the server at 127.0.0.1:8080 (OpenAI API)"),
        ("OpenAI", "https://openrouter.ai/api/v1", "the server at openrouter.ai:443 (OpenAI API)"),
        (
            "OpenAI",
            "https://api.openai.com.evil.example/v1",
            "the server at api.openai.com.evil.example:443 (OpenAI API)",
        ),
        ("Anthropic", "https://api.anthropic.com", "Anthropic"),
        ("Anthropic", "http://localhost:4000", "the server at localhost:4000 (Anthropic API)"),
        ("Ollama", "http://gpu-box:11434", "Ollama"),  # Ollama is the server itself, wherever it runs
        ("OpenAI moderation", "http://10.0.0.5/v1", "the server at 10.0.0.5:80 (OpenAI moderation API)"),
    ],
)
def test_errors_name_the_server_unless_it_is_the_vendors(provider: str, base_url: str, expected: str) -> None:
    from chatclient.models.http.error_mapping import server_label

    assert server_label(provider, base_url) == expected


def test_an_openai_compatible_server_is_not_called_openai_in_its_errors(server: LoopbackServer) -> None:
    host_port = server.url.removeprefix("http://")
    server.set_default("/v1/chat/completions", Reply(404, json={"error": {"message": "no such model"}}))
    model = OpenAIChatModel("m", api_key=KEY, base_url=server.url + "/v1", max_retries=0)
    with model, pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("x"))
    message = str(info.value)
    assert message.startswith(f"the server at {host_port} (OpenAI API) returned HTTP 404")
    assert "OpenAI returned" not in message
    port = free_port()
    refused = OpenAIChatModel("m", api_key=KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with refused, pytest.raises(ModelConnectionError) as info:
        refused.call(Prompt("x"))
    assert str(info.value).startswith(f"could not connect to the server at 127.0.0.1:{port} (OpenAI API) (")


def test_the_vendor_itself_is_named_by_its_name() -> None:
    from chatclient.models.http import HTTPTransport

    transport = HTTPTransport(provider="OpenAI", base_url="https://api.openai.com/v1")
    assert transport.server == "OpenAI"
    assert HTTPTransport(provider="OpenAI", base_url="http://127.0.0.1:1/v1", vendor_hosts=()).server == "OpenAI"
