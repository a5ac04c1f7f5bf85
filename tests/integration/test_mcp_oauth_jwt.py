"""serve() as an OAuth resource server that accepts JWT access tokens (JwtBearer), reached by McpClient
over real HTTP on loopback; tokens are signed here with joserfc (authlib's JOSE library)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from joserfc import jwt
from joserfc.jwk import RSAKey

from chatclient.errors import McpAuthError
from chatclient.mcp import McpClient, ProtectedResource, build_server
from chatclient.mcp.oauth import JwtBearer
from chatclient.mcp.server import http_app
from chatclient.tools import tool

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

ISSUER = "https://auth.example.com"
SIGNING_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
OTHER_KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
JWKS = {"keys": [SIGNING_KEY.as_dict(private=False)]}


@tool
def hello() -> str:
    """Greets a signed-in caller."""
    return "hello, token holder"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    endpoint = f"http://127.0.0.1:{port}/mcp"
    verifier = JwtBearer(JWKS, issuer=ISSUER, audience=endpoint, required_scopes=["tools"])
    app = http_app(build_server([hello]), auth=verifier, protected_resource=ProtectedResource(endpoint, [ISSUER]))
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield endpoint
    server.should_exit = True
    thread.join(10)


def token(url: str, key: Any = SIGNING_KEY, **claims: Any) -> str:
    body = {"iss": ISSUER, "aud": url, "exp": int(time.time()) + 300, "scope": "tools read", **claims}
    return jwt.encode({"alg": "RS256", "kid": "k1"}, {k: v for k, v in body.items() if v is not None}, key)


def connect(url: str, bearer: str) -> McpClient:
    return McpClient.http(url, headers={"Authorization": f"Bearer {bearer}"}, timeout=5)


def test_a_valid_token_gets_in(url: str) -> None:
    with connect(url, token(url)) as client:
        assert client.call_tool("hello").content[0].text == "hello, token holder"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "bad",
    [
        {"exp": int(time.time()) - 3600},  # expired
        {"exp": None},  # no expiry at all
        {"aud": "http://127.0.0.1:1/other"},  # meant for another resource
        {"iss": "https://evil.example.com"},  # another issuer
        {"scope": "read"},  # lacks the required scope
    ],
    ids=["expired", "no-exp", "wrong-audience", "wrong-issuer", "missing-scope"],
)
def test_bad_claims_are_refused_without_echoing_the_token(url: str, bad: dict[str, Any]) -> None:
    sent = token(url, **bad)
    with pytest.raises(McpAuthError, match="answered 401") as refused:
        connect(url, sent).connect()
    assert sent not in str(refused.value)


@pytest.mark.parametrize(
    "bearer",
    ["not-a-jwt", "a.b.c", "x" * 10_000],
    ids=["garbage", "three-garbage-parts", "oversized"],
)
def test_malformed_tokens_are_refused(url: str, bearer: str) -> None:
    with pytest.raises(McpAuthError):
        connect(url, bearer).connect()


def test_a_token_signed_by_another_key_is_refused(url: str) -> None:
    with pytest.raises(McpAuthError):
        connect(url, token(url, key=OTHER_KEY)).connect()


def test_the_verifier_directly() -> None:
    verifier = JwtBearer(JWKS, issuer=ISSUER, audience="http://x/mcp")
    claims = verifier.verify(token("http://x/mcp"))
    assert claims is not None and claims["scope"] == "tools read"
    assert verifier.verify("") is None
    assert "k1" not in repr(verifier) and "RS256" in repr(verifier)
    with pytest.raises(ValueError, match="issuer and the audience"):
        JwtBearer(JWKS, issuer="", audience="http://x/mcp")
