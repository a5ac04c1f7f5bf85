"""OAuth 2.1 for remote MCP servers: McpClient against a loopback authorization server and an
OAuth-protected serve() endpoint (both real HTTP on 127.0.0.1, see mcp_oauth_server.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient.errors import McpAuthError, McpConnectionError
from chatclient.mcp import McpClient
from chatclient.mcp.oauth import (
    InMemoryTokenStorage,
    LoopbackRedirect,
    OAuthAuthorizationCode,
    OAuthClientCredentials,
    ProtectedResource,
    parse_redirect,
)
from tests.support.serving import child_server, free_port

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVER = str(Path(__file__).with_name("mcp_oauth_server.py"))
ROBOT_SECRET = "robot-secret-9f8e7d"
REDIRECT = "http://127.0.0.1:1/callback"


class Servers:
    def __init__(self, as_port: int, mcp_port: int) -> None:
        self.issuer = f"http://127.0.0.1:{as_port}"
        self.mcp = f"http://127.0.0.1:{mcp_port}/mcp"

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.issuer}/stats", timeout=5) as response:
            return dict(json.load(response))

    def expire_tokens(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.issuer}/expire", method="POST"), timeout=5).close()


@contextlib.contextmanager
def oauth_servers(token_seconds: int = 3600) -> Iterator[Servers]:
    as_port, mcp_port = free_port(), free_port()
    argv = [sys.executable, SERVER, str(as_port), str(mcp_port), str(token_seconds)]
    with child_server(argv, [as_port, mcp_port], "the OAuth fixture"):
        yield Servers(as_port, mcp_port)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    with oauth_servers() as started:
        yield started


def follow_without_a_person(authorization_url: str) -> str:
    """Stands in for the browser: the test server approves at once and redirects with the code."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(authorization_url, timeout=5)
    except urllib.error.HTTPError as redirect:
        if redirect.code == 302:
            return str(redirect.headers["Location"])
        raise
    raise AssertionError("the authorization server did not redirect")


# -- protected resource ----------------------------------------------------------------------------


def test_the_server_refuses_without_a_token_and_says_where_to_sign_in(servers: Servers) -> None:
    request = urllib.request.Request(
        servers.mcp, data=b"{}", method="POST", headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 401
    metadata_url = servers.mcp.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert refused.value.headers["WWW-Authenticate"] == f'Bearer resource_metadata="{metadata_url}"'
    with urllib.request.urlopen(metadata_url, timeout=5) as response:
        assert json.load(response) == {
            "resource": servers.mcp,
            "authorization_servers": [servers.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["tools"],
        }


def test_a_bad_token_is_refused_with_a_typed_error_that_does_not_echo_it(servers: Servers) -> None:
    token = "at-forged-token-0123456789"
    with pytest.raises(McpAuthError, match="answered 401") as failed:
        McpClient.http(servers.mcp, headers={"Authorization": f"Bearer {token}"}, timeout=5).connect()
    assert token not in str(failed.value)
    assert isinstance(failed.value, McpConnectionError)  # code catching connection failures still does


def test_protected_resource_needs_an_auth_hook_and_absolute_urls() -> None:
    from chatclient.mcp.server import build_server, http_app

    resource = ProtectedResource("http://127.0.0.1:1/mcp", ["http://127.0.0.1:2"])
    with pytest.raises(ValueError, match="needs an auth hook"):
        http_app(build_server(), protected_resource=resource)
    with pytest.raises(ValueError, match="absolute http"):
        ProtectedResource("/mcp", ["http://127.0.0.1:2"])
    with pytest.raises(ValueError, match="at least one authorization server"):
        ProtectedResource("http://127.0.0.1:1/mcp", [])


def test_the_metadata_document_is_public_but_behind_the_host_and_origin_gate() -> None:
    import asyncio

    import httpx

    from chatclient.mcp.server import build_server, http_app

    resource = ProtectedResource("http://127.0.0.1:1/mcp", ["http://127.0.0.1:2"])
    app = http_app(build_server(), auth=lambda request: False, protected_resource=resource)

    async def get(host: str, origin: str | None = None) -> httpx.Response:
        headers = {"host": host} | ({"origin": origin} if origin else {})
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            return await client.get("/.well-known/oauth-protected-resource", headers=headers)

    ok = asyncio.run(get("127.0.0.1:1"))
    assert ok.status_code == 200 and ok.json()["resource"] == "http://127.0.0.1:1/mcp"  # no token needed
    assert asyncio.run(get("evil.example")).status_code == 421
    assert asyncio.run(get("127.0.0.1:1", "https://evil.example")).status_code == 403


# -- client credentials ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post"])
def test_client_credentials_discovers_and_signs_in(servers: Servers, method: str) -> None:
    before = servers.stats()["client_credentials"]
    auth = OAuthClientCredentials("robot", ROBOT_SECRET, issuer=servers.issuer, token_endpoint_auth_method=method)  # type: ignore[arg-type]
    with McpClient.http(servers.mcp, auth=auth) as client:
        assert client.call_tool("whoami").content[0].text == "a signed-in client"  # type: ignore[union-attr]
        client.call_tool("whoami")
    assert servers.stats()["client_credentials"] == before + 1  # one token, reused


def test_a_wrong_client_secret_is_an_auth_error_without_the_secret(servers: Servers) -> None:
    auth = OAuthClientCredentials("robot", "wrong-secret-value-77", issuer=servers.issuer)
    with pytest.raises(McpAuthError) as failed:
        McpClient.http(servers.mcp, auth=auth, timeout=10).connect()
    assert "wrong-secret-value-77" not in str(failed.value)
    assert "signing in to MCP server" in str(failed.value)


def test_a_pinned_issuer_that_does_not_match_stops_the_flow(servers: Servers) -> None:
    auth = OAuthClientCredentials("robot", ROBOT_SECRET, issuer="http://127.0.0.1:9/other")
    with pytest.raises(McpAuthError):
        McpClient.http(servers.mcp, auth=auth, timeout=10).connect()


def test_secrets_stay_out_of_reprs() -> None:
    auth = OAuthClientCredentials("robot", ROBOT_SECRET)
    assert ROBOT_SECRET not in repr(auth)
    code = OAuthAuthorizationCode(follow_without_a_person, client_id="webapp", client_secret="web-secret-1a2b3c")
    assert "web-secret-1a2b3c" not in repr(code)
    assert repr(InMemoryTokenStorage()) == "InMemoryTokenStorage(has_token=False)"
    with pytest.raises(ValueError, match="client_id and a client_secret"):
        OAuthClientCredentials("robot", "")


# -- authorization code + PKCE -------------------------------------------------------------------------


def test_authorization_code_with_dynamic_registration_and_pkce(servers: Servers) -> None:
    seen: list[str] = []

    def authorize(url: str) -> str:
        seen.append(url)
        return follow_without_a_person(url)

    before = servers.stats()
    storage = InMemoryTokenStorage()
    auth = OAuthAuthorizationCode(authorize, redirect_uri=REDIRECT, storage=storage)
    with McpClient.http(servers.mcp, auth=auth) as client:
        assert client.call_tool("whoami").content[0].text == "a signed-in client"  # type: ignore[union-attr]
    after = servers.stats()
    assert after["register"] == before["register"] + 1
    assert after["authorization_code"] == before["authorization_code"] + 1
    [url] = seen
    assert "code_challenge_method=S256" in url and "code_challenge=" in url and "state=" in url
    assert "resource=" in url and "scope=tools" in url
    assert repr(storage) == "InMemoryTokenStorage(has_token=True)"


def test_a_pre_registered_confidential_client(servers: Servers) -> None:
    auth = OAuthAuthorizationCode(
        follow_without_a_person, redirect_uri=REDIRECT, client_id="webapp", client_secret="web-secret-1a2b3c"
    )
    before = servers.stats()["register"]
    with McpClient.http(servers.mcp, auth=auth) as client:
        client.ping()
    assert servers.stats()["register"] == before


def test_an_async_authorize_function(servers: Servers) -> None:
    import asyncio

    async def authorize(url: str) -> str:
        return await asyncio.to_thread(follow_without_a_person, url)

    with McpClient.http(servers.mcp, auth=OAuthAuthorizationCode(authorize, redirect_uri=REDIRECT)) as client:
        client.ping()


def test_loopback_redirect_receives_the_browser() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    redirect = f"http://127.0.0.1:{port}/callback"
    with oauth_servers() as servers:
        # the "browser" follows the authorization server's redirect to the loopback listener, as a real one would
        def browser(url: str) -> None:
            threading.Thread(target=lambda: urllib.request.urlopen(url, timeout=10).read(), daemon=True).start()

        auth = OAuthAuthorizationCode(LoopbackRedirect(port, timeout=10, open_browser=browser), redirect_uri=redirect)
        with McpClient.http(servers.mcp, auth=auth) as client:
            assert client.call_tool("whoami").content[0].text == "a signed-in client"  # type: ignore[union-attr]


def test_loopback_redirect_gives_up_when_nobody_comes_back() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    with pytest.raises(McpAuthError, match="nobody came back"):
        LoopbackRedirect(port, timeout=0.3, open_browser=lambda url: None)("http://127.0.0.1:1/authorize")


def test_expired_tokens_are_refreshed(servers: Servers) -> None:
    auth = OAuthAuthorizationCode(follow_without_a_person, redirect_uri=REDIRECT)
    with McpClient.http(servers.mcp, auth=auth) as client:
        client.ping()
        before = servers.stats()
        servers.expire_tokens()  # the server now refuses the token the client holds
        assert client.call_tool("whoami").content[0].text == "a signed-in client"  # type: ignore[union-attr]
    after = servers.stats()
    # refused, then a fresh grant: the SDK refreshes when it knows the token expired, and
    # re-authorizes when the server refuses one it thought valid
    assert after["authorization_code"] + after["refresh_token"] > before["authorization_code"] + before["refresh_token"]


def test_short_lived_tokens_are_refreshed_with_the_refresh_token() -> None:
    with oauth_servers(token_seconds=1) as servers:
        auth = OAuthAuthorizationCode(follow_without_a_person, redirect_uri=REDIRECT)
        with McpClient.http(servers.mcp, auth=auth) as client:
            client.ping()
            time.sleep(1.5)
            client.ping()
        stats = servers.stats()
    assert stats["authorization_code"] == 1
    assert stats["refresh_token"] >= 1


def test_a_state_mismatch_is_refused(servers: Servers) -> None:
    def tampered(url: str) -> str:
        return follow_without_a_person(url).replace("state=", "state=evil")

    with pytest.raises(McpAuthError, match="State parameter mismatch"):
        McpClient.http(servers.mcp, auth=OAuthAuthorizationCode(tampered, redirect_uri=REDIRECT), timeout=10).connect()


def test_a_user_who_refuses(servers: Servers) -> None:
    def refuse(url: str) -> str:
        return f"{REDIRECT}?error=access_denied&error_description=the+user+said+no"

    with pytest.raises(McpAuthError, match="access_denied the user said no"):
        McpClient.http(servers.mcp, auth=OAuthAuthorizationCode(refuse, redirect_uri=REDIRECT), timeout=10).connect()


def test_tokens_never_reach_the_logs(servers: Servers, caplog: pytest.LogCaptureFixture) -> None:
    storage = InMemoryTokenStorage()
    with caplog.at_level(logging.DEBUG):
        auth = OAuthAuthorizationCode(follow_without_a_person, redirect_uri=REDIRECT, storage=storage)
        with McpClient.http(servers.mcp, auth=auth) as client:
            client.ping()
    import asyncio

    tokens = asyncio.run(storage.get_tokens())
    assert tokens is not None
    assert tokens.access_token not in caplog.text
    assert str(tokens.refresh_token) not in caplog.text


def test_parse_redirect_bad_inputs() -> None:
    assert parse_redirect(f"{REDIRECT}?code=abc&state=s&iss=http://as") == ("abc", "s", "http://as")
    with pytest.raises(McpAuthError, match="no authorization code"):
        parse_redirect(f"{REDIRECT}?state=s")
    with pytest.raises(McpAuthError, match="longer than 8192"):
        parse_redirect(f"{REDIRECT}?code=" + "x" * 9000)
    with pytest.raises(McpAuthError, match="missing"):
        parse_redirect(None)  # type: ignore[arg-type]


def test_bad_auth_arguments() -> None:
    with pytest.raises(TypeError, match="auth takes OAuthClientCredentials"):
        McpClient.http("http://127.0.0.1:9/mcp", auth="token")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="authorize takes a function"):
        OAuthAuthorizationCode("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="redirect_uri must be an http"):
        OAuthAuthorizationCode(follow_without_a_person, redirect_uri="myapp:/cb")
