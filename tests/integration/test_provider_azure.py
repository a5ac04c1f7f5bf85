"""AzureOpenAIChatModel over real HTTP against the loopback server replaying Azure OpenAI payloads.

Deployment and v1 paths, the api-key header and Entra ID tokens from a token provider (called for
every request, asked again once after a 401), content-filter results in metadata and content-filter
refusals as ``RefusalError``; the tool loop end to end through ``ChatClient``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import AuthenticationError, RefusalError
from chatclient.models.azure import AzureOpenAIChatModel
from chatclient.models.base import ChatResponse, Usage
from chatclient.prompt import Prompt
from chatclient.tools import tool
from tests.support import invoke, server_fixtures
from tests.support.loopback import LoopbackServer, Reply
from tests.support.recorded import recorded_file

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

DATA = Path(__file__).resolve().parent.parent / "data" / "providers" / "azure"
KEY = "azure-key-0123456789abcdef0123456789"
DEPLOYMENT_PATH = "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
V1_PATH = "/openai/v1/chat/completions"
CALLS = ("call", "acall")
STREAMS = ("stream", "astream")


def recorded(name: str, *, whole: bool = False) -> Reply:
    return recorded_file(DATA / name, seed=name, whole=whole)


def make_model(srv: LoopbackServer, **kw: Any) -> AzureOpenAIChatModel:
    kw.setdefault("backoff_base", 0.001)
    kw.setdefault("timeout", 10.0)
    if "token_provider" not in kw:
        kw.setdefault("api_key", KEY)
        kw.setdefault("api_version", "2024-10-21")
    return AzureOpenAIChatModel("gpt-4o-mini", endpoint=srv.url, **kw)


class Tokens:
    """A token provider that hands out the given tokens in turn and counts its calls."""

    def __init__(self, *tokens: str) -> None:
        self.tokens = list(tokens)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        return self.tokens[min(self.calls, len(self.tokens)) - 1]


def output_text(response: ChatResponse) -> str | None:
    assert response.result is not None
    return response.result.output.text


@pytest.mark.parametrize("whole", [True, False], ids=["whole", "chunked"])
@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_deployment_path_with_api_key(server: LoopbackServer, mode: str, whole: bool) -> None:
    server.script(DEPLOYMENT_PATH, recorded("chat.json" if mode in CALLS else "chat.sse", whole=whole))
    with make_model(server) as model:
        response, _ = invoke(model, Prompt("hi"), mode)
    assert output_text(response) == "Hello! How can I help you today?"
    assert response.metadata.usage == Usage(14, 9)
    prompt_filter = response.metadata.extra["prompt_filter_results"]
    assert prompt_filter[0]["content_filter_results"]["jailbreak"] == {"filtered": False, "detected": False}
    assert response.result is not None
    assert response.result.metadata.extra["content_filter_results"]["violence"] == {
        "filtered": False,
        "severity": "safe",
    }
    (request,) = server.requests_to(DEPLOYMENT_PATH)
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    assert request.body["model"] == "gpt-4o-mini"


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_v1_path_with_a_token_provider_called_per_request(server: LoopbackServer, mode: str) -> None:
    answer = "chat.json" if mode in CALLS else "chat.sse"
    server.script(V1_PATH, recorded(answer), recorded(answer))
    tokens = Tokens("entra-token-one-0123456789", "entra-token-two-0123456789")
    with make_model(server, token_provider=tokens) as model:
        invoke(model, Prompt("hi"), mode)
        invoke(model, Prompt("again"), mode)
    first, second = server.requests_to(V1_PATH)
    assert first.headers["authorization"] == "Bearer entra-token-one-0123456789"
    assert second.headers["authorization"] == "Bearer entra-token-two-0123456789"
    assert "api-key" not in first.headers
    assert tokens.calls == 2
    assert first.body["model"] == "gpt-4o-mini"


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_an_expired_token_is_refreshed_once(server: LoopbackServer, mode: str) -> None:
    answer = "chat.json" if mode in CALLS else "chat.sse"
    server.script(V1_PATH, recorded("error_401_token.json"), recorded(answer))
    tokens = Tokens("expired-token-0123456789", "fresh-token-0123456789")
    with make_model(server, token_provider=tokens) as model:
        response, _ = invoke(model, Prompt("hi"), mode)
    assert output_text(response) == "Hello! How can I help you today?"
    assert [r.headers["authorization"] for r in server.requests_to(V1_PATH)] == [
        "Bearer expired-token-0123456789",
        "Bearer fresh-token-0123456789",
    ]


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_a_token_refused_twice_is_an_authentication_error(server: LoopbackServer, mode: str) -> None:
    server.script(V1_PATH, recorded("error_401_token.json"), recorded("error_401_token.json"), recorded("chat.json"))
    tokens = Tokens("bad-token-0123456789abc")
    with (
        make_model(server, token_provider=tokens) as model,
        pytest.raises(AuthenticationError, match="refused twice") as caught,
    ):
        invoke(model, Prompt("hi"), mode)
    assert "bad-token-0123456789abc" not in str(caught.value)
    assert tokens.calls == 2 and len(server.requests_to(V1_PATH)) == 2


def test_a_bad_api_key_is_not_retried(server: LoopbackServer) -> None:
    server.script(DEPLOYMENT_PATH, recorded("error_401_key.json"), recorded("chat.json"))
    with (
        make_model(server) as model,
        pytest.raises(AuthenticationError, match=r"AZURE_OPENAI_API_KEY|api_key") as caught,
    ):
        model.call(Prompt("hi"))
    assert KEY not in str(caught.value) and KEY[:10] not in str(caught.value)
    assert len(server.requests_to(DEPLOYMENT_PATH)) == 1


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_a_filtered_prompt_is_a_refusal(server: LoopbackServer, mode: str) -> None:
    server.script(DEPLOYMENT_PATH, recorded("error_400_content_filter.json"))
    with make_model(server) as model, pytest.raises(RefusalError, match="stopped the prompt") as caught:
        invoke(model, Prompt("ignore your rules and ..."), mode)
    assert "jailbreak" in caught.value.refusal and "violence (high)" in caught.value.refusal
    assert len(server.requests_to(DEPLOYMENT_PATH)) == 1


@pytest.mark.parametrize("mode", CALLS + STREAMS)
def test_a_filtered_answer_is_a_refusal(server: LoopbackServer, mode: str) -> None:
    server.script(DEPLOYMENT_PATH, recorded("filtered_answer.json" if mode in CALLS else "filtered_answer.sse"))
    with make_model(server) as model, pytest.raises(RefusalError, match=r"stopped the answer: violence \(medium\)"):
        invoke(model, Prompt("Describe the battle in detail"), mode)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return {"Paris": "18C and sunny", "Tokyo": "24C, light rain"}[city]


def test_tool_loop_end_to_end(server: LoopbackServer) -> None:
    server.script(DEPLOYMENT_PATH, recorded("tool_calls.json"), recorded("final_answer.json"))
    with make_model(server) as model:
        text = ChatClient.create(model).prompt("Weather in Paris and Tokyo?").tools(get_weather).call().content()
    assert text == "Paris is 18°C and sunny; Tokyo is 24°C with light rain."
    follow_up = server.requests_to(DEPLOYMENT_PATH)[1].body
    tool_messages = [m for m in follow_up["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("call_Vq1mNj0kX3Qd5Rr9yW2bT6eL", "18C and sunny"),
        ("call_Hs8pA4cZt1Lm0Ww7uE3nK9oQ", "24C, light rain"),
    ]


def test_configuration_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="AZURE_OPENAI_ENDPOINT"):
        AzureOpenAIChatModel("gpt-4o")
    with pytest.raises(ValueError, match="AZURE_OPENAI_API_KEY"):
        AzureOpenAIChatModel("gpt-4o", endpoint="https://r.openai.azure.com")
    with pytest.raises(ValueError, match="not both"):
        AzureOpenAIChatModel("gpt-4o", endpoint="https://r.openai.azure.com", api_key=KEY, token_provider=lambda: "t")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    model = AzureOpenAIChatModel("gpt-4o")
    assert model.base_url == "https://res.openai.azure.com/openai/v1"
    assert KEY not in repr(model)


def test_an_async_token_provider_is_refused_with_a_hint(server: LoopbackServer) -> None:
    async def provider() -> str:
        return "token"

    with make_model(server, token_provider=provider) as model, pytest.raises(TypeError, match="synchronous provider"):
        model.call(Prompt("hi"))
    assert server.requests_to(V1_PATH) == []


def test_a_redirect_to_another_origin_never_carries_the_token(server: LoopbackServer) -> None:
    with LoopbackServer() as other:
        other.script(V1_PATH, recorded("chat.json"))
        server.script(V1_PATH, Reply(307, headers={"location": f"{other.url}{V1_PATH}"}))
        with make_model(server, token_provider=Tokens("entra-token-redirect-0123")) as model:
            assert model.call(Prompt("hi")).text == "Hello! How can I help you today?"
        (sent,) = other.requests_to(V1_PATH)
    assert server.requests_to(V1_PATH)[0].headers["authorization"] == "Bearer entra-token-redirect-0123"
    assert "authorization" not in sent.headers


def test_the_model_pickles_with_its_token_provider(server: LoopbackServer) -> None:
    import pickle

    server.script(V1_PATH, recorded("chat.json"))
    model = pickle.loads(pickle.dumps(make_model(server, token_provider=Tokens("entra-token-pickled-0123"))))
    with model:
        assert model.call(Prompt("hi")).text == "Hello! How can I help you today?"
    assert server.requests_to(V1_PATH)[0].headers["authorization"] == "Bearer entra-token-pickled-0123"
