"""OAuth 2.1 for remote (HTTP) MCP servers: client credentials, and authorization code with PKCE.

Pass one to ``McpClient.http(url, auth=...)``. The flow is the MCP SDK's own ``OAuthClientProvider``
(the implementation the MCP conformance suite checks), configured here:

- on the server's first ``401`` the client discovers the authorization server from the server's
  protected resource metadata (RFC 9728: the ``resource_metadata`` of ``WWW-Authenticate``, then
  ``/.well-known/oauth-protected-resource``) and that server's metadata (RFC 8414 / OpenID
  discovery), then registers (RFC 7591, unless a ``client_id`` is given) and gets a token;
- authorization code always uses PKCE (S256), a random ``state`` checked on return, and the
  RFC 8707 ``resource`` parameter; tokens are refreshed with the refresh token when they expire;
- tokens live in memory (``InMemoryTokenStorage``) unless you pass a ``storage`` of your own.

Tokens and client secrets never appear in a ``repr``, a log line or an error message of ours.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from urllib.parse import parse_qs, urlsplit

from chatclient.errors import McpAuthError

if TYPE_CHECKING:
    from mcp.client.auth import TokenStorage
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

Authorize: TypeAlias = Callable[[str], "str | Awaitable[str]"]
"""``authorize(authorization_url) -> redirect_url``: show the URL to the user (open a browser) and return
the URL the authorization server redirected back to (it carries ``code`` and ``state``)."""

MAX_REDIRECT_URL_CHARS = 8_192


class InMemoryTokenStorage:
    """Tokens and client registration kept in this process only (the SDK's ``TokenStorage`` protocol).

    Its ``repr`` says whether a token is held, never the token.
    """

    def __init__(self) -> None:
        self._tokens: OAuthToken | None = None
        self._client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        """The current tokens, if any."""
        return self._tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep new tokens (after a grant or a refresh)."""
        self._tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        """The registered (or pre-registered) client."""
        return self._client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        """Keep the client registration."""
        self._client_info = client_info

    def __repr__(self) -> str:
        return f"InMemoryTokenStorage(has_token={self._tokens is not None})"


@dataclass(frozen=True)
class OAuthClientCredentials:
    """The ``client_credentials`` grant: a machine client with its own ``client_id`` and ``client_secret``.

    ``issuer`` pins the authorization server the credentials belong to (the flow stops if the MCP
    server points elsewhere); ``scope`` is space-separated. ``token_endpoint_auth_method`` is how the
    secret travels: HTTP Basic (default) or in the form body (``client_secret_post``).

    >>> OAuthClientCredentials("robot", "s3cret", issuer="https://auth.example.com")
    OAuthClientCredentials(client_id='robot', scope=None, issuer='https://auth.example.com')
    """

    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None
    issuer: str | None = None
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = field(
        default="client_secret_basic", repr=False
    )
    storage: TokenStorage | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.client_id or not self.client_secret:
            raise ValueError("OAuthClientCredentials needs a client_id and a client_secret")

    def secrets(self) -> tuple[str, ...]:
        """Values an error message must never show."""
        return (self.client_secret,)

    def provider(self, server_url: str) -> Any:
        """The SDK's ``httpx2.Auth`` for ``server_url`` (``McpClient.http`` calls this)."""
        import warnings

        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        with warnings.catch_warnings():
            # without an issuer the SDK warns that 3.0 will need one; the choice is the caller's
            warnings.simplefilter("ignore", DeprecationWarning)
            return ClientCredentialsOAuthProvider(
                server_url=server_url,
                storage=self.storage if self.storage is not None else InMemoryTokenStorage(),
                client_id=self.client_id,
                client_secret=self.client_secret,
                token_endpoint_auth_method=self.token_endpoint_auth_method,
                scope=self.scope,
                issuer=self.issuer,
            )


@dataclass(frozen=True)
class OAuthAuthorizationCode:
    """The ``authorization_code`` grant with PKCE: a user signs in and the client acts for them.

    ``authorize(url)`` (sync or async) shows the authorization URL to the user and returns the URL
    the browser came back to (``redirect_uri`` with ``code`` and ``state``); ``LoopbackRedirect``
    does both for a desktop app. Without ``client_id`` the client registers itself (RFC 7591) as
    ``client_name``, or uses ``client_metadata_url`` as its id when the server supports client ID
    metadata documents; with one (and ``client_secret`` for a confidential client, sent with HTTP
    Basic unless ``token_endpoint_auth_method="client_secret_post"``) it is pre-registered. ``scope`` is a default: the server's ``WWW-Authenticate`` scope wins.
    """

    authorize: Authorize = field(repr=False)
    redirect_uri: str = "http://127.0.0.1:33418/callback"
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_name: str = "chatclient"
    scope: str | None = None
    client_metadata_url: str | None = None
    storage: TokenStorage | None = field(default=None, repr=False, compare=False)
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post"] = field(
        default="client_secret_basic", repr=False
    )

    def __post_init__(self) -> None:
        if not callable(self.authorize):
            raise TypeError("authorize takes a function authorize(url) -> redirect_url (sync or async)")
        if urlsplit(self.redirect_uri).scheme not in ("http", "https"):
            raise ValueError(f"redirect_uri must be an http(s) URL, got {self.redirect_uri!r}")

    def secrets(self) -> tuple[str, ...]:
        """Values an error message must never show."""
        return (self.client_secret,) if self.client_secret else ()

    def provider(self, server_url: str) -> Any:
        """The SDK's ``httpx2.Auth`` for ``server_url`` (``McpClient.http`` calls this)."""
        from mcp.client.auth import OAuthClientProvider
        from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

        method: Literal["client_secret_basic", "client_secret_post", "none"] = (
            self.token_endpoint_auth_method if self.client_secret else "none"
        )
        metadata = OAuthClientMetadata(
            redirect_uris=[self.redirect_uri],  # type: ignore[list-item]
            client_name=self.client_name,
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method=method if self.client_id else None,
            scope=self.scope,
        )
        storage = self.storage if self.storage is not None else InMemoryTokenStorage()
        if self.client_id is not None:
            registered = OAuthClientInformationFull(
                client_id=self.client_id,
                client_secret=self.client_secret,
                redirect_uris=[self.redirect_uri],  # type: ignore[list-item]
                grant_types=["authorization_code", "refresh_token"],
                token_endpoint_auth_method=method,
                scope=self.scope,
            )
            storage = _PreRegistered(storage, registered)
        came_back: asyncio.Queue[str] = asyncio.Queue(maxsize=1)

        async def redirect_handler(authorization_url: str) -> None:
            if inspect.iscoroutinefunction(self.authorize):
                answer = await self.authorize(authorization_url)
            else:  # a sync authorize may wait for a person: keep it off the event loop
                answer = await asyncio.to_thread(self.authorize, authorization_url)
            if inspect.isawaitable(answer):
                answer = await answer
            if not isinstance(answer, str):
                raise McpAuthError("authorize(url) must return the redirect URL the user came back to")
            came_back.put_nowait(answer)

        async def callback_handler() -> AuthorizationCodeResult:
            code, state, iss = parse_redirect(await came_back.get())
            return AuthorizationCodeResult(code=code, state=state, iss=iss)

        return OAuthClientProvider(
            server_url=server_url,
            client_metadata=metadata,
            storage=storage,
            redirect_handler=redirect_handler,
            callback_handler=callback_handler,
            client_metadata_url=self.client_metadata_url,
        )


McpOAuth: TypeAlias = OAuthClientCredentials | OAuthAuthorizationCode
"""What ``McpClient.http(..., auth=...)`` takes."""


@dataclass(frozen=True)
class ProtectedResource:
    """What a served MCP endpoint tells OAuth clients about itself (RFC 9728 protected resource metadata).

    ``serve(..., auth=check_token, protected_resource=ProtectedResource(...))`` publishes it at
    ``/.well-known/oauth-protected-resource<path>`` (no sign-in needed) and answers every ``401``
    with ``WWW-Authenticate: Bearer resource_metadata="..."``, so a client can find the
    authorization server on its own. ``resource`` is the endpoint's public URL, as clients reach it.

    >>> ProtectedResource("https://tools.example.com/mcp", ["https://auth.example.com"]).metadata_path
    '/.well-known/oauth-protected-resource/mcp'
    """

    resource: str
    authorization_servers: tuple[str, ...] | list[str]
    scopes_supported: tuple[str, ...] | list[str] = ()

    def __post_init__(self) -> None:
        for url in (self.resource, *self.authorization_servers):
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
                raise ValueError(f"ProtectedResource needs absolute http(s) URLs, got {url!r}")
        if not self.authorization_servers:
            raise ValueError("ProtectedResource needs at least one authorization server")

    @property
    def metadata_path(self) -> str:
        """Where the metadata is served: the well-known prefix plus the resource's path (RFC 9728 section 3)."""
        return "/.well-known/oauth-protected-resource" + urlsplit(self.resource).path.rstrip("/")

    @property
    def metadata_url(self) -> str:
        """The metadata's absolute URL (what ``WWW-Authenticate`` points to)."""
        parts = urlsplit(self.resource)
        return f"{parts.scheme}://{parts.netloc}{self.metadata_path}"

    def metadata(self) -> dict[str, Any]:
        """The RFC 9728 document."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(self.authorization_servers),
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported:
            document["scopes_supported"] = list(self.scopes_supported)
        return document


class _PreRegistered:
    """A storage that starts with a pre-registered client (no dynamic registration)."""

    def __init__(self, inner: Any, client_info: Any) -> None:
        self._inner = inner
        self._client_info = client_info

    async def get_tokens(self) -> Any:
        return await self._inner.get_tokens()

    async def set_tokens(self, tokens: Any) -> None:
        await self._inner.set_tokens(tokens)

    async def get_client_info(self) -> Any:
        return await self._inner.get_client_info() or self._client_info

    async def set_client_info(self, client_info: Any) -> None:
        await self._inner.set_client_info(client_info)

    def __repr__(self) -> str:
        return f"_PreRegistered({self._inner!r})"


MAX_TOKEN_CHARS = 8_192
"""A bearer token longer than this is refused unread (a JWT access token is a few hundred bytes)."""


class JwtBearer:
    """An ``auth`` hook for ``serve()`` that accepts signed JWT access tokens (RFC 9068 style).

    ``keys`` is the authorization server's JWK Set (the JSON its ``jwks_uri`` serves, as a dict) or
    a single key; ``issuer`` and ``audience`` (the protected endpoint's URL, RFC 8707) must match the
    token's ``iss`` and ``aud``; ``exp`` is required (``leeway`` seconds of clock skew allowed) and
    every scope in ``required_scopes`` must be in the token's ``scope``. Anything else, or a token
    longer than 8 192 characters, answers ``False`` (so ``401``). Tokens are never logged.
    Needs the ``mcp-oauth`` extra (JOSE from ``authlib``'s ``joserfc``).
    """

    def __init__(
        self,
        keys: Mapping[str, Any] | Any,
        *,
        issuer: str,
        audience: str,
        required_scopes: tuple[str, ...] | list[str] = (),
        algorithms: tuple[str, ...] | list[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        leeway: int = 30,
    ) -> None:
        try:
            from joserfc import jwt
            from joserfc.jwk import KeySet
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise ImportError("JwtBearer needs JOSE support: pip install 'chatclient[mcp-oauth]'") from exc
        if not issuer or not audience:
            raise ValueError("JwtBearer needs the issuer and the audience (the endpoint's URL) to check")
        jwks = dict(keys) if isinstance(keys, Mapping) and "keys" in keys else None
        # a JWK Set as parsed JSON (its shape is checked by joserfc); anything else is one key
        self._keys: Any = KeySet.import_key_set(jwks) if jwks is not None else keys  # type: ignore[arg-type]
        self._algorithms = list(algorithms)
        self._claims = jwt.JWTClaimsRegistry(
            leeway=leeway,
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": audience},
            exp={"essential": True},
        )
        self._required = set(required_scopes)

    def __repr__(self) -> str:
        return f"JwtBearer(algorithms={self._algorithms!r}, required_scopes={sorted(self._required)!r})"

    def verify(self, token: str) -> Mapping[str, Any] | None:
        """The token's claims when it is valid, else ``None``."""
        from joserfc import jwt
        from joserfc.errors import JoseError

        if not token or len(token) > MAX_TOKEN_CHARS:
            return None
        try:
            decoded = jwt.decode(token, self._keys, algorithms=self._algorithms)
            self._claims.validate(decoded.claims)
        except (JoseError, ValueError, TypeError):  # bad signature, claim, shape or encoding
            return None
        granted = decoded.claims.get("scope", "")
        if not isinstance(granted, str) or not self._required <= set(granted.split()):
            return None
        return decoded.claims

    def __call__(self, request: Any) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and self.verify(token.strip()) is not None


def parse_redirect(url: str) -> tuple[str, str | None, str | None]:
    """``(code, state, iss)`` from the URL the authorization server redirected to.

    An ``error`` in the redirect (the user refused, the server failed) raises ``McpAuthError`` with
    the server's error code and description.
    """
    if not isinstance(url, str) or len(url) > MAX_REDIRECT_URL_CHARS:
        raise McpAuthError(f"the redirect URL is missing or longer than {MAX_REDIRECT_URL_CHARS} characters")
    query = parse_qs(urlsplit(url).query, max_num_fields=32)
    first = {k: v[0] for k, v in query.items() if v}
    if "error" in first:
        description = first.get("error_description", "")[:300]
        raise McpAuthError(f"the authorization server refused: {first['error'][:100]} {description}".strip())
    if "code" not in first:
        raise McpAuthError("the redirect URL carries no authorization code")
    return first["code"], first.get("state"), first.get("iss")


class LoopbackRedirect:
    """Sign a user in from a desktop app: open the browser, receive the redirect on 127.0.0.1.

    Use it as ``authorize``: ``OAuthAuthorizationCode(LoopbackRedirect(port=33418))`` (the
    ``redirect_uri`` must then be ``http://127.0.0.1:33418/callback``). It waits ``timeout``
    seconds for the browser to come back. ``open_browser(url)`` defaults to ``webbrowser.open``.
    """

    def __init__(
        self,
        port: int = 33418,
        *,
        path: str = "/callback",
        timeout: float = 300.0,
        open_browser: Callable[[str], object] | None = None,
    ) -> None:
        self.port = port
        self.path = path
        self.timeout = timeout
        self.open_browser = open_browser

    def __call__(self, authorization_url: str) -> str:
        import http.server
        import threading
        import webbrowser

        received: list[str] = []
        done = threading.Event()
        expected_path = self.path

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if urlsplit(self.path).path != expected_path:
                    self.send_error(404)
                    return
                received.append(f"http://127.0.0.1{self.path}")
                body = b"Signed in. You can close this window."
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                done.set()

            def log_message(self, format: str, *args: Any) -> None:  # the query holds the code: never log it
                return

        with http.server.HTTPServer(("127.0.0.1", self.port), Handler) as server:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            try:
                (self.open_browser or webbrowser.open)(authorization_url)
                if not done.wait(self.timeout):
                    raise McpAuthError(f"nobody came back to the loopback redirect within {self.timeout:g} s")
            finally:
                server.shutdown()
        return received[0]


__all__ = [
    "Authorize",
    "InMemoryTokenStorage",
    "JwtBearer",
    "LoopbackRedirect",
    "McpOAuth",
    "OAuthAuthorizationCode",
    "OAuthClientCredentials",
    "ProtectedResource",
    "parse_redirect",
]
