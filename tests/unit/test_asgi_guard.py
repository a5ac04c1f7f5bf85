"""chatclient.asgi_guard: the Host/Origin/auth gate in front of everything served over HTTP.

The policy (``HostOriginGuard``) is checked on raw ASGI headers; the gate (``guarded``) is driven with
real ASGI messages, the way uvicorn drives it, so a refusal is seen as the status a client would get.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest

from chatclient.asgi_guard import HostOriginGuard, Refusal, call_auth, guarded, is_loopback

pytest.importorskip("starlette")


def headers(**values: str | list[str]) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            out.append((name.encode(), item.encode("latin-1")))
    return out


def status(guard: HostOriginGuard, **values: str | list[str]) -> int:
    refusal = guard.check(headers(**values))
    return 200 if refusal is None else refusal.status


LOOPBACK = HostOriginGuard.for_bind("127.0.0.1")


# -- Host ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST:1", "localhost", "[::1]:9000", "127.0.0.1"]
)
def test_loopback_names_pass_on_any_port(host: str) -> None:
    assert status(LOOPBACK, host=host) == 200


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "localhost.evil.example",
        "127.0.0.1.evil.example:80",
        "evil@localhost:80",
        "localhost:80abc",
        "localhost:",
        "[::1]x:80",
        "::1",
        "",
        "127.0.0.2:8000",  # another loopback address is not this server's name unless bound to it
    ],
)
def test_foreign_or_malformed_hosts_are_refused_with_421(host: str) -> None:
    assert status(LOOPBACK, host=host) == 421


def test_a_missing_host_is_refused() -> None:
    assert status(LOOPBACK) == 421


def test_two_host_headers_are_refused_even_when_both_look_local() -> None:
    assert status(LOOPBACK, host=["localhost:80", "evil.example"]) == 421
    assert status(LOOPBACK, host=["localhost:80", "localhost:80"]) == 421


def test_an_oversize_host_is_refused_before_matching() -> None:
    assert status(LOOPBACK, host="localhost:" + "1" * 2000) == 421
    wide = HostOriginGuard.for_bind("127.0.0.1", ["a" * 1500 + ":*"])
    assert status(wide, host="a" * 1500 + ":80") == 421


def test_the_bound_address_itself_passes() -> None:
    other = HostOriginGuard.for_bind("127.0.0.2")
    assert status(other, host="127.0.0.2:8000") == 200
    assert status(other, host="evil.example") == 421
    six = HostOriginGuard.for_bind("::1")
    assert status(six, host="[::1]:8000") == 200
    assert status(six, host="[::2]:8000") == 421


def test_allowed_hosts_with_exact_port_or_port_wildcard() -> None:
    guard = HostOriginGuard.for_bind("127.0.0.1", ["api.example.com:8443", "any.example.com:*", "bare.example.com"])
    assert status(guard, host="api.example.com:8443") == 200
    assert status(guard, host="api.example.com:8444") == 421
    assert status(guard, host="api.example.com") == 421
    assert status(guard, host="any.example.com:1") == 200
    assert status(guard, host="any.example.com") == 200  # the default port
    assert status(guard, host="any.example.com:x") == 421
    assert status(guard, host="bare.example.com") == 200
    assert status(guard, host="bare.example.com:80") == 421
    assert status(guard, host="localhost:80") == 200  # the loopback names stay


# -- Origin ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "https://127.0.0.1:8443", "http://[::1]:80", "http://localhost"]
)
def test_loopback_origins_pass(origin: str) -> None:
    assert status(LOOPBACK, host="localhost:80", origin=origin) == 200


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "null",
        "http://localhost.evil.example",
        "http://localhost:3000/path",
        "ftp://localhost:21",
        "",
        "http://localhost:" + "1" * 2000,
    ],
)
def test_foreign_null_or_malformed_origins_are_refused_with_403(origin: str) -> None:
    assert status(LOOPBACK, host="localhost:80", origin=origin) == 403


def test_a_request_without_origin_is_not_a_browser_request_and_passes() -> None:
    assert status(LOOPBACK, host="localhost:80") == 200


def test_two_origin_headers_are_refused() -> None:
    assert status(LOOPBACK, host="localhost:80", origin=["http://localhost:1", "http://evil.example"]) == 403


def test_allowed_origins_with_port_wildcard() -> None:
    guard = HostOriginGuard.for_bind("127.0.0.1", allowed_origins=["https://app.example.com", "http://dev.example:*"])
    assert status(guard, host="localhost", origin="https://app.example.com") == 200
    assert status(guard, host="localhost", origin="https://app.example.com:444") == 403
    assert status(guard, host="localhost", origin="http://dev.example:5173") == 200
    assert status(guard, host="localhost", origin="https://dev.example:5173") == 403


def test_a_foreign_host_is_reported_before_a_foreign_origin() -> None:
    assert status(LOOPBACK, host="evil.example", origin="http://evil.example") == 421


# -- binds -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loop"),
    [("localhost", True), ("127.0.0.5", True), ("::1", True), ("[::1]", True), ("0.0.0.0", False), ("::", False),
     ("192.168.1.2", False), ("example.com", False)],
)
def test_is_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_a_strict_non_loopback_bind_without_names_or_auth_is_refused() -> None:
    with pytest.raises(ValueError, match=r"allowed_hosts=\[\.\.\.\].*auth=<hook>.*docs/guide/mcp.md"):
        HostOriginGuard.for_bind("0.0.0.0", surface="MCP", guide="docs/guide/mcp.md")


def test_a_lenient_non_loopback_bind_warns_naming_the_fix_and_accepts_any_host() -> None:
    with pytest.warns(UserWarning, match=r"0\.0\.0\.0.*allowed_hosts.*auth"):
        guard = HostOriginGuard.for_bind("0.0.0.0", surface="A2A", strict=False)
    assert guard.hosts is None and guard.origins is None
    assert status(guard, host="anything.example", origin="http://anything.example") == 200


def test_a_non_loopback_bind_with_auth_or_names_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with_auth = HostOriginGuard.for_bind("0.0.0.0", has_auth=True)
        named = HostOriginGuard.for_bind("0.0.0.0", ["api.example.com"], strict=True)
    assert status(with_auth, host="x.example") == 200
    assert status(named, host="api.example.com") == 200
    assert status(named, host="localhost:80") == 421  # a public bind does not add the loopback names
    assert status(named, host="api.example.com", origin="http://localhost:3000") == 403  # nor loopback origins
    origin_ok = HostOriginGuard.for_bind("0.0.0.0", has_auth=True, allowed_origins=["https://app.example.com"])
    assert status(origin_ok, host="x", origin="https://app.example.com") == 200
    assert status(origin_ok, host="x", origin="https://evil.example") == 403


@pytest.mark.parametrize("bad", [[""], ["  "], [3]])
def test_allowed_names_must_be_non_empty_strings(bad: list[Any]) -> None:
    with pytest.raises(TypeError, match="non-empty strings"):
        HostOriginGuard.for_bind("127.0.0.1", bad)


# -- auth and the gate -----------------------------------------------------------------------------


async def drive(app: Any, scope_headers: list[tuple[bytes, bytes]], kind: str = "http") -> tuple[int | None, Any]:
    """One request through ``app`` as uvicorn would send it: the status (or websocket close code) and
    the scope the inner app saw (None when it was not reached)."""
    sent: list[dict[str, Any]] = []
    scope = {"type": kind, "method": "GET", "path": "/", "headers": scope_headers, "query_string": b"",
             "scheme": "http", "server": ("127.0.0.1", 80), "root_path": ""}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    for message in sent:
        if message["type"] == "http.response.start":
            return message["status"], getattr(app, "seen", None)
        if message["type"] == "websocket.close":
            return message["code"], None
    return None, None


class Inner:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.seen.append(scope)
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept"})
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def token_hook(request: Any) -> Any:
    token = request.headers.get("authorization")
    return {"user": "alice"} if token == "Bearer right" else None


async def async_hook(request: Any) -> Any:
    await asyncio.sleep(0)
    return token_hook(request)


@pytest.mark.parametrize("hook", [token_hook, async_hook])
def test_the_auth_hook_sync_or_async_refuses_with_401_and_hands_on_the_principal(hook: Any) -> None:
    inner = Inner()
    seen_by_callback: list[Any] = []
    app = guarded(inner, LOOPBACK, hook, on_principal=lambda scope, who: seen_by_callback.append(who))
    local = [(b"host", b"localhost:80")]
    assert asyncio.run(drive(app, local))[0] == 401
    assert inner.seen == []
    assert asyncio.run(drive(app, [*local, (b"authorization", b"Bearer wrong")]))[0] == 401
    assert asyncio.run(drive(app, [*local, (b"authorization", b"Bearer right")]))[0] == 200
    assert inner.seen[0]["chatclient.principal"] == {"user": "alice"}
    assert seen_by_callback == [{"user": "alice"}]


def test_the_headers_are_checked_before_the_hook_runs() -> None:
    calls: list[Any] = []

    def hook(request: Any) -> bool:
        calls.append(request)
        return True

    app = guarded(Inner(), LOOPBACK, hook)
    assert asyncio.run(drive(app, [(b"host", b"evil.example")]))[0] == 421
    assert asyncio.run(drive(app, [(b"host", b"localhost"), (b"origin", b"http://evil.example")]))[0] == 403
    assert calls == []


def test_a_401_asks_for_bearer_credentials_and_says_nothing_else() -> None:
    sent: list[dict[str, Any]] = []
    app = guarded(Inner(), LOOPBACK, lambda request: False)

    async def go() -> None:
        scope = {"type": "http", "method": "GET", "path": "/", "headers": [(b"host", b"localhost")],
                 "query_string": b""}

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(scope, receive, send)

    asyncio.run(go())
    start = sent[0]
    assert start["status"] == 401
    assert (b"www-authenticate", b"Bearer") in start["headers"]


@pytest.mark.parametrize(("value", "principal"), [(True, True), ("alice", "alice"), (0, 0), (None, None), (False, None)])
def test_call_auth_maps_none_and_false_to_refusal(value: Any, principal: Any) -> None:
    assert asyncio.run(call_auth(lambda request: value, object())) == principal


def test_a_websocket_handshake_meets_the_same_checks_and_the_hook() -> None:
    inner = Inner()
    app = guarded(inner, LOOPBACK, token_hook)
    assert asyncio.run(drive(app, [(b"host", b"evil.example")], "websocket"))[0] == 1008
    assert asyncio.run(drive(app, [(b"host", b"localhost")], "websocket"))[0] == 1008  # no credentials
    assert inner.seen == []
    asyncio.run(drive(app, [(b"host", b"localhost"), (b"authorization", b"Bearer right")], "websocket"))
    assert inner.seen[0]["chatclient.principal"] == {"user": "alice"}


def test_lifespan_and_other_scopes_go_straight_through() -> None:
    inner = Inner()
    app = guarded(inner, LOOPBACK, lambda request: False)

    async def go() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "lifespan.startup"}

        async def send(message: dict[str, Any]) -> None:
            pass

        await app({"type": "lifespan"}, receive, send)

    asyncio.run(go())
    assert inner.seen == [{"type": "lifespan"}]


def test_a_custom_renderer_shapes_the_refusal() -> None:
    from starlette.responses import JSONResponse

    def render(refusal: Refusal) -> Any:
        return JSONResponse({"error": {"message": refusal.message, "code": refusal.status}}, status_code=refusal.status)

    app = guarded(Inner(), LOOPBACK, render=render)
    assert asyncio.run(drive(app, [(b"host", b"evil.example")]))[0] == 421


def test_a_hook_that_is_not_callable_is_refused_when_wrapping() -> None:
    with pytest.raises(TypeError, match="auth takes a function"):
        guarded(Inner(), LOOPBACK, "secret")  # type: ignore[arg-type]


def test_a_port_wildcard_takes_ascii_digits_only() -> None:
    guard = HostOriginGuard.for_bind("127.0.0.1")
    assert guard.check([(b"host", b"localhost:8000")]) is None
    refusal = guard.check([(b"host", "localhost:\u00b2".encode("latin-1"))])  # a superscript two
    assert refusal is not None and refusal.status == 421
    assert not guard.allows_origin("http://localhost:\u00b2")


def test_allows_origin_is_the_rule_check_applies() -> None:
    guard = HostOriginGuard.for_bind("127.0.0.1", allowed_origins=["https://app.example.com"])
    for origin, allowed in [
        ("https://app.example.com", True),
        ("HTTPS://APP.EXAMPLE.COM", True),
        ("http://localhost:5173", True),
        ("null", False),
        ("https://evil.example", False),
        ("https://app.example.com." + "a" * 2000, False),
    ]:
        assert guard.allows_origin(origin) is allowed, origin
        headers = [(b"host", b"127.0.0.1:8000"), (b"origin", origin.encode())]
        assert (guard.check(headers) is None) is allowed, origin
