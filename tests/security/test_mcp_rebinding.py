"""Issue 33 item 1: ``serve(transport="sse")`` had no DNS-rebinding protection.

The probe of the finding (``Host: evil.example`` / ``Origin: http://evil.example`` opening the
stream and posting a tool call) now meets 421 / 403 on the SSE transport as on streamable HTTP,
against a real ``serve`` subprocess; a non-loopback bind needs allowed hosts or an auth hook.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import httpx
import pytest

pytest.importorskip("mcp")

from chatclient.mcp.server import build_server, http_app
from chatclient.tools import tool
from tests.integration.test_mcp_http import serving

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

EVIL = {"Host": "evil.example", "Origin": "http://evil.example"}


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    with serving("sse") as url:
        yield url


@pytest.mark.parametrize(
    ("headers", "status"),
    [({"Host": "evil.example"}, 421), ({"Origin": "http://evil.example"}, 403), (EVIL, 421)],
)
def test_a_foreign_host_or_origin_cannot_open_the_sse_stream(sse_url: str, headers: dict[str, str], status: int) -> None:
    response = httpx.get(sse_url, headers=headers, timeout=5)
    assert response.status_code == status


def test_a_foreign_host_cannot_post_into_an_open_session(sse_url: str) -> None:
    with httpx.Client(timeout=5) as client, client.stream("GET", sse_url) as stream:
        assert stream.status_code == 200  # a loopback Host and no Origin: the stream opens
        endpoint = ""
        lines = stream.iter_lines()  # kept referenced: a dropped iterator closes the stream (and the session)
        for line in lines:
            if line.startswith("data:"):
                endpoint = line[5:].strip()
                break
        assert re.fullmatch(r"/messages/\?session_id=[0-9a-f]{32}", endpoint)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        base = sse_url.rsplit("/sse", 1)[0]
        refused = client.post(base + endpoint, json=call, headers=EVIL)
        assert refused.status_code == 421
        allowed = client.post(base + endpoint, json=call, headers={"Origin": base})
        assert allowed.status_code == 202  # the same session, from the page's own origin


def _get(app: object, path: str, headers: dict[str, str]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://mcp.example.com") as client:
            return await client.post(path, headers=headers, json={})

    return asyncio.run(go())


@pytest.mark.parametrize("transport", ["http", "sse"])
def test_a_non_loopback_bind_needs_allowed_hosts_or_an_auth_hook(transport: str) -> None:
    server = build_server([add])
    with pytest.raises(ValueError, match="allowed_hosts"):
        http_app(server, transport=transport, host="0.0.0.0")  # type: ignore[arg-type]
    guarded = http_app(server, transport=transport, host="0.0.0.0", allowed_hosts=["mcp.example.com"])  # type: ignore[arg-type]
    assert _get(guarded, "/messages/", {"Host": "evil.example"}).status_code == 421
    assert _get(guarded, "/messages/", {"Host": "mcp.example.com", "Origin": "http://evil.example"}).status_code == 403


def test_the_auth_hook_sees_every_request_and_refuses_with_401() -> None:
    seen: list[str] = []

    def auth(request: object) -> bool:
        token = request.headers.get("authorization")  # type: ignore[attr-defined]
        seen.append(str(token))
        return bool(token == "Bearer right")

    app = http_app(build_server([add]), transport="sse", host="0.0.0.0", auth=auth)
    assert _get(app, "/messages/", {"Authorization": "Bearer wrong"}).status_code == 401
    passed = _get(app, "/messages/", {"Authorization": "Bearer right"})
    assert passed.status_code == 400  # past the hook: the SDK now wants a session id
    assert seen == ["Bearer wrong", "Bearer right"]


def test_loopback_serving_still_refuses_foreign_names_in_process() -> None:
    app = http_app(build_server([add]), transport="sse")
    assert _get(app, "/messages/", {"Host": "evil.example"}).status_code == 421
    assert _get(app, "/messages/", {"Host": "localhost:8000", "Origin": "http://evil.example"}).status_code == 403
    assert _get(app, "/messages/", {"Host": "localhost:8000"}).status_code == 400  # past the guard
    other_loopback = http_app(build_server([add]), transport="sse", host="127.0.0.2")
    assert _get(other_loopback, "/messages/", {"Host": "127.0.0.2:8000"}).status_code == 400  # its own name passes
    assert _get(other_loopback, "/messages/", {"Host": "evil.example"}).status_code == 421


def test_the_mcp_gate_is_the_shared_asgi_guard() -> None:
    """Issue 36: MCP serving uses chatclient.asgi_guard, so what the shared gate refuses MCP refuses too
    (two Host headers, which the SDK's own check read as the first one only), while its yes-or-no
    ``auth`` contract holds: only ``True`` lets a request in."""
    app = http_app(build_server([add]), transport="sse")
    doubled = [("Host", "localhost:8000"), ("Host", "evil.example")]
    assert _get(app, "/messages/", doubled).status_code == 421  # type: ignore[arg-type]
    assert _get(app, "/messages/", {"Host": "localhost:8000", "Origin": "null"}).status_code == 403
    for answer, status in ((True, 400), ("yes", 401), (1, 401), (None, 401), (False, 401)):
        hooked = http_app(build_server([add]), transport="sse", auth=lambda request, answer=answer: answer)
        assert _get(hooked, "/messages/", {"Host": "localhost:8000"}).status_code == status, answer
