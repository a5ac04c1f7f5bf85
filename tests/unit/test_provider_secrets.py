"""Keys never show: every provider built with an explicit key keeps it out of repr, str and vars()
(``_init_call`` included), pickles still carry it, and per-request credentials (Entra ID tokens,
botocore's chain) are known to the scrubber before a server can echo them."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path
from typing import Any

import pytest

import chatclient.models
from chatclient._pickling import _rebuild
from chatclient.errors import ModelHTTPError
from chatclient.models.http._pooled import PooledHTTPResource
from chatclient.prompt import Prompt
from chatclient.redaction import MaskedMapping, Secret, masked_copy, reveal
from tests.support import server_fixtures
from tests.support.loopback import LoopbackServer, Reply

loopback_server, server = server_fixtures()

KEY = "sk-never-show-me-0123456789abcdef"
AWS_SECRET = "aws-secret-never-show-0123456789"
AWS_TOKEN = "aws-session-token-never-show-0123456789"


def _provider_classes() -> list[type[Any]]:
    for info in pkgutil.walk_packages(chatclient.models.__path__, "chatclient.models."):
        importlib.import_module(info.name)
    found: list[type[Any]] = []
    todo = list(PooledHTTPResource.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "api_key" in inspect.signature(cls.__init__).parameters and not inspect.isabstract(cls):
            found.append(cls)
    return sorted(set(found), key=lambda c: c.__qualname__)


CLASSES = _provider_classes()


def _build(cls: type[Any]) -> Any:
    params = inspect.signature(cls.__init__).parameters
    kwargs: dict[str, Any] = {"api_key": KEY, "headers": {"x-extra-token": KEY + "-header"}}
    for name, value in (("base_url", "http://127.0.0.1:9/v1"), ("endpoint", "http://127.0.0.1:9")):
        if name in params:
            kwargs[name] = value
    if "api_version" in params:
        kwargs["api_version"] = "2024-10-21"
    if "headers" not in params:
        kwargs.pop("headers")
    required = [
        p
        for p in list(params.values())[1:]
        if p.default is inspect.Parameter.empty and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    ]
    return cls(*["some-model"] * len(required), **kwargs)


def _all_vars_texts(obj: Any, depth: int = 6) -> list[str]:
    """repr() and str() of vars() of the object and of every object reachable through attributes."""
    seen: set[int] = set()
    texts: list[str] = []

    def walk(o: Any, left: int) -> None:
        if left < 0 or id(o) in seen or isinstance(o, type) or inspect.ismodule(o):
            return
        seen.add(id(o))
        try:
            attrs = vars(o)
        except TypeError:
            return
        texts.extend([repr(attrs), str(attrs)])
        for value in list(attrs.values()):
            walk(value, left - 1)

    walk(obj, depth)
    texts += [repr(obj), str(obj)]
    return texts


def test_every_provider_class_is_covered() -> None:
    names = {c.__name__ for c in CLASSES}
    assert {"OpenAIChatModel", "AnthropicChatModel", "GeminiChatModel", "AzureOpenAIChatModel"} <= names
    assert {"OllamaChatModel", "OpenAIResponsesModel", "OpenAIEmbeddingModel", "OpenAIModerationModel"} <= names


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_an_explicit_key_never_shows_in_repr_str_or_vars(cls: type[Any]) -> None:
    model = _build(cls)
    assert "_init_call" in vars(model)
    for text in _all_vars_texts(model):
        assert KEY not in text
    # the pickle carries the explicit key (documented), and the rebuilt model sends it
    data = pickle.dumps(model)
    assert KEY.encode() in data
    again = pickle.loads(data)
    assert again == model
    assert any(KEY in v for v in again._http._headers.values())
    for text in _all_vars_texts(again):
        assert KEY not in text


def test_bedrock_credentials_never_show() -> None:
    from chatclient.models.bedrock import BedrockChatModel

    model = BedrockChatModel(
        "amazon.nova-lite-v1:0", region="us-east-1", credentials=("AKIDEXAMPLE0001", AWS_SECRET, AWS_TOKEN)
    )
    for text in _all_vars_texts(model):
        assert AWS_SECRET not in text and AWS_TOKEN not in text
    again = pickle.loads(pickle.dumps(model))
    assert again.credentials.fixed.secret_access_key == AWS_SECRET


def test_a_pickle_made_before_the_wrapping_still_loads() -> None:
    from chatclient.models.openai import OpenAIChatModel

    # what the old layout recorded: the plain key in the constructor's keyword arguments
    old = _rebuild(OpenAIChatModel, ("gpt-x",), {"api_key": KEY, "base_url": "http://127.0.0.1:9/v1"})
    assert old == OpenAIChatModel("gpt-x", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    assert KEY not in repr(vars(old))


def test_secret_wrapper() -> None:
    secret = Secret(KEY)
    assert KEY not in repr(secret) + str(secret) + f"{secret}" + repr([secret]) + "{}".format(secret)  # noqa: UP032
    assert secret.reveal() == KEY and reveal(secret) == KEY and reveal("plain") == "plain"
    assert secret == Secret(KEY) and secret != Secret("other-key-000") and hash(secret) == hash(Secret(KEY))
    assert Secret(secret).reveal() == KEY
    assert pickle.loads(pickle.dumps(secret)) == secret
    headers = masked_copy({"authorization": KEY})
    assert isinstance(headers, MaskedMapping) and KEY not in repr(headers) + str(headers)
    assert headers["authorization"] == KEY
    from chatclient.models.http.credentials import validate_api_key

    assert validate_api_key(Secret(f" {KEY} ")) == KEY


def test_an_echoed_entra_id_token_never_shows_in_the_error(server: LoopbackServer) -> None:
    from chatclient.models.azure import AzureOpenAIChatModel

    token = "eyJ0eXAiOiJKV1QiLCJhbGciOi.entra-token-0123456789"
    server.script(
        "/openai/v1/chat/completions",
        Reply(400, json={"error": {"message": f"bad request for token {token} (Bearer {token})", "code": "x"}}),
    )
    model = AzureOpenAIChatModel("gpt-4o-mini", endpoint=server.url, token_provider=lambda: token, max_retries=0)
    with pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("hi"))
    assert "bad request" in str(info.value)
    assert token not in str(info.value) and token[:20] not in str(info.value)
    assert token not in repr(info.value.args)


def test_credentials_from_botocores_chain_never_show_in_the_error(
    server: LoopbackServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatclient.models.bedrock import BedrockChatModel

    shared = tmp_path / "credentials"
    shared.write_text(
        f"[probe]\naws_access_key_id = AKIDCHAIN0000001\naws_secret_access_key = {AWS_SECRET}\n"
        f"aws_session_token = {AWS_TOKEN}\n"
    )
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(shared))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    path = "/model/amazon.nova-lite-v1%3A0/converse"
    server.script(path, Reply(403, json={"message": f"token {AWS_TOKEN} is not valid; secret {AWS_SECRET}"}))
    model = BedrockChatModel(
        "amazon.nova-lite-v1:0", region="us-east-1", profile="probe", base_url=server.url, max_retries=0
    )
    with pytest.raises(ModelHTTPError) as info:
        model.call(Prompt("hi"))
    assert server.requests_to(path)[0].headers["x-amz-security-token"] == AWS_TOKEN  # the chain was used
    text = str(info.value)
    assert "is not valid" in text
    assert AWS_TOKEN not in text and AWS_SECRET not in text
