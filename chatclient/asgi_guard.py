"""The one gate in front of everything chatclient serves over HTTP (MCP, A2A, the serving apps).

A server on a loopback address is still reachable from any web page the user visits, through DNS
rebinding: the page's own name resolves to 127.0.0.1 and its scripts post to the server. The gate
refuses such requests by their headers before any application code runs:

* ``Host`` must name the machine the server is reached as: on a loopback bind only ``localhost``,
  ``127.0.0.1``, ``[::1]`` (any port) and the bound address itself, plus ``allowed_hosts``
  (``"api.example.com"``, ``"api.example.com:8443"``, or ``"api.example.com:*"`` for any port);
  anything else is answered 421 (Misdirected Request).
* ``Origin``, when a browser sends one, must be a loopback origin or one of ``allowed_origins``
  (``"https://app.example.com"``, or ``"http://localhost:*"`` for any port); otherwise 403.
  Requests without ``Origin`` (curl, SDKs, servers) are not browser requests and pass.
* A request carrying two ``Host`` (or two ``Origin``) headers is refused the same way: a proxy in
  front and this server might each read a different one.
* ``auth`` (sync or async, gets a Starlette ``Request``) runs after the headers pass; what it
  returns is the *principal*: ``None`` or ``False`` refuse with 401, anything else lets the request in.

Each surface renders a refusal in its own protocol's shape (``Refusal`` carries status and text);
the decision is made here once. The module imports nothing outside the standard library until an
app is wrapped, so the low rooms (``mcp``, ``a2a``) can use it without importing the serving room.
"""

from __future__ import annotations

import inspect
import ipaddress
import warnings
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

AuthHook = Callable[[Any], Any]
"""``auth(request) -> principal | None`` (sync or async) with a Starlette ``Request``: ``None`` or
``False`` refuses the request with 401; any other value is the principal (``True`` for hooks that only
say yes or no)."""

_LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
_MAX_HEADER_CHARS = 1024  # a Host or Origin longer than this is not a name anyone serves under


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was refused: the HTTP status (401, 403, 421) and a short text safe to show."""

    status: int
    message: str


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, IPv6 with or without brackets) is this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_pattern(host: str) -> str:
    return f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host.lower()


def _matches(value: str, patterns: Iterable[str], *, default_port_ok: bool) -> bool:
    value = value.lower()
    for pattern in patterns:
        pattern = pattern.lower()
        if value == pattern:
            return True
        if pattern.endswith(":*"):
            base = pattern[:-2]
            port = value[len(base) + 1 :]
            if value.startswith(base + ":") and port.isascii() and port.isdigit():
                return True
            if default_port_ok and value == base:  # "localhost:*" admits "localhost" (the default port)
                return True
    return False


@dataclass(frozen=True, slots=True)
class HostOriginGuard:
    """The Host/Origin policy of one server: which ``Host`` headers and browser ``Origin``s may call it.

    ``hosts=None`` accepts any ``Host`` (a non-loopback server given no names, whose ``auth`` hook or
    proxy decides); ``origins=None`` accepts any ``Origin`` likewise.
    """

    hosts: tuple[str, ...] | None
    origins: tuple[str, ...] | None

    @classmethod
    def for_bind(
        cls,
        host: str | None = None,
        allowed_hosts: Sequence[str] | None = None,
        allowed_origins: Sequence[str] | None = None,
        *,
        has_auth: bool = False,
        surface: str = "this server",
        guide: str = "docs/guide/security.md",
        strict: bool = True,
    ) -> HostOriginGuard:
        """The policy for a server bound to ``host`` (``None``: not known yet, treated as loopback).

        A non-loopback bind with neither ``allowed_hosts`` nor ``auth`` is refused with ``ValueError``
        when ``strict`` (MCP), or allowed with a ``UserWarning`` otherwise (A2A and the serving apps,
        which may sit behind a proxy that checks): any web page could reach it through DNS rebinding.
        """
        hosts = list(allowed_hosts or ())
        origins = list(allowed_origins or ())
        for value in (*hosts, *origins):
            if not isinstance(value, str) or not value.strip():
                raise TypeError("allowed_hosts / allowed_origins take non-empty strings such as 'api.example.com:*'")
        if host is None or is_loopback(host):
            names = dict.fromkeys((*_LOOPBACK_NAMES, *(() if host is None else (_host_pattern(host),))))
            hosts.extend(f"{name}:*" for name in names)
            origins.extend(f"{scheme}://{name}:*" for name in names for scheme in ("http", "https"))
            return cls(tuple(hosts), tuple(origins))
        if not hosts:
            problem = (
                f"serving {surface} on the non-loopback address {host!r} without allowed_hosts or auth lets any "
                "web page a user visits reach it (DNS rebinding): pass allowed_hosts=[...] (and "
                f"allowed_origins=[...] for browser clients) or auth=<hook>; see {guide}"
            )
            if not has_auth:
                if strict:
                    raise ValueError(problem)
                warnings.warn(problem, UserWarning, stacklevel=3)
            return cls(None, tuple(origins) if origins else None)
        return cls(tuple(hosts), tuple(origins))

    def check(self, headers: Iterable[tuple[bytes, bytes]]) -> Refusal | None:
        """The refusal for a request with these raw ASGI headers, or ``None`` when they pass."""
        hosts: list[str] = []
        origins: list[str] = []
        for name, value in headers:
            if name == b"host":
                hosts.append(value.decode("latin-1").strip())
            elif name == b"origin":
                origins.append(value.decode("latin-1").strip())
        # Two Host (or Origin) headers are refused: a proxy and this server might each read another one.
        if self.hosts is not None and (
            len(hosts) != 1
            or not hosts[0]
            or len(hosts[0]) > _MAX_HEADER_CHARS
            or not _matches(hosts[0], self.hosts, default_port_ok=True)
        ):
            return Refusal(421, "Invalid Host header: this server does not answer to that name")
        if origins and (len(origins) != 1 or not self.allows_origin(origins[0])):
            return Refusal(403, "Invalid Origin header: this origin may not call this server")
        return None

    def allows_origin(self, origin: str) -> bool:
        """Whether a browser with this ``Origin`` may call the server (the gate's rule, also CORS's)."""
        if self.origins is None:
            return True
        # "null" (sandboxed frames, file:// pages) is never a trusted browser origin
        return origin != "null" and len(origin) <= _MAX_HEADER_CHARS and _matches(origin, self.origins, default_port_ok=True)


async def call_auth(auth: AuthHook, request: Any) -> Any:
    """Run an ``auth`` hook (sync or async) and return its principal (``None`` when it refused)."""
    principal = auth(request)
    if inspect.isawaitable(principal):
        principal = await principal
    return None if principal is None or principal is False else principal


RenderRefusal = Callable[[Refusal], Any]
"""Turns a refusal into an ASGI response (a Starlette ``Response``) in the surface's own shape."""


def _plain(refusal: Refusal) -> Any:
    from starlette.responses import PlainTextResponse

    headers = {"WWW-Authenticate": "Bearer"} if refusal.status == 401 else None
    return PlainTextResponse(refusal.message, status_code=refusal.status, headers=headers)


def guarded(
    app: Any,
    guard: HostOriginGuard,
    auth: AuthHook | None = None,
    *,
    render: RenderRefusal = _plain,
    on_principal: Callable[[dict[str, Any], Any], None] | None = None,
) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """``app`` behind ``guard`` and ``auth``, for every HTTP request and websocket handshake (a refused
    websocket is closed with code 1008; its ``auth`` hook gets a Starlette ``HTTPConnection``).

    The principal an ``auth`` hook returns is stored in the ASGI scope under ``"chatclient.principal"``
    (and handed to ``on_principal(scope, principal)`` when given) for the app to pass on.
    """
    if auth is not None and not callable(auth):
        raise TypeError("auth takes a function auth(request) -> principal | None (sync or async)")

    async def gate(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = guard.check(scope.get("headers") or ())
            if refusal is None and auth is not None:
                from starlette.requests import HTTPConnection, Request

                # A websocket handshake has no body to read: its hook gets the connection (headers, URL).
                request = Request(scope, receive) if scope["type"] == "http" else HTTPConnection(scope)
                principal = await call_auth(auth, request)
                if principal is None:
                    refusal = Refusal(401, "Unauthorized: missing or invalid credentials")
                else:
                    scope = {**scope, "chatclient.principal": principal}
                    if on_principal is not None:
                        on_principal(scope, principal)
            if refusal is not None:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                await render(refusal)(scope, receive, send)
                return
        await app(scope, receive, send)

    return gate


__all__ = ["AuthHook", "HostOriginGuard", "Refusal", "call_auth", "guarded", "is_loopback"]
