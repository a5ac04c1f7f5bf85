"""Issue 36 item 1: ``serve_a2a`` / ``a2a_app`` behind the Host/Origin/auth gate (DNS rebinding).

Real HTTP requests (httpx, and the a2a SDK's own client) against servers on 127.0.0.1: a request
naming a foreign ``Host`` or sent from a foreign ``Origin`` never reaches the agent; an ``auth`` hook
refuses with 401 and its principal owns the conversations; a wildcard bind warns at start.
"""

from __future__ import annotations

import asyncio
import uuid
import warnings
from typing import Any

import httpx
import pytest

pytest.importorskip("a2a", reason="needs the a2a extra: pip install 'chatclient[a2a]'")

from chatclient.a2a import a2a_agent, a2a_app, serve_a2a
from chatclient.agents import agent_function, sequence
from chatclient.errors import A2AError
from tests.integration.test_a2a import SHOUTER, running

RUNS: list[str] = []


@agent_function(output_key="answer")
def record(request: str) -> str:
    """Records that it ran."""
    RUNS.append(request)
    return f"ran {request}"


RECORDER = sequence(record, name="recorder", description="Records each run")


def send_message(text: str) -> dict[str, Any]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


def post(url: str, text: str, **headers: str) -> httpx.Response:
    """A JSON-RPC ``SendMessage`` as an A2A 1.0 client sends it; a refusal is an HTTP status, and a
    request that passed is answered 200 with a result (the agent ran), never a JSON-RPC error."""
    answer = httpx.post(url, json=send_message(text), headers={"A2A-Version": "1.0", **headers}, timeout=10)
    if answer.status_code == 200:
        assert "result" in answer.json(), answer.text
    return answer


def test_a_foreign_host_or_origin_never_reaches_the_agent() -> None:
    RUNS.clear()
    with serve_a2a(RECORDER) as server:
        assert post(server.url, "rebound", Host="evil.example").status_code == 421
        assert post(server.url, "rebound", Host="evil.example:80", Origin="http://evil.example").status_code == 421
        assert post(server.url, "cross-site", Origin="http://evil.example").status_code == 403
        assert post(server.url, "sandboxed", Origin="null").status_code == 403
        card = httpx.get(server.url + ".well-known/agent-card.json", headers={"Host": "evil.example"})
        assert card.status_code == 421
        assert RUNS == []
        # Loopback names and loopback pages pass; so does the SDK's client (no Origin).
        port = server.url.rsplit(":", 1)[1].strip("/")
        assert post(server.url, "local", Host=f"localhost:{port}", Origin="http://localhost:3000").status_code == 200
        assert a2a_agent(server.url).run(request="sdk").output == "ran sdk"
    assert RUNS == ["local", "sdk"]


def test_the_sdk_client_gets_the_same_refusal() -> None:
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import Message, Part, Role, SendMessageRequest

    RUNS.clear()

    async def call(server_url: str, card: Any, headers: dict[str, str]) -> list[Any]:
        async with httpx.AsyncClient(headers=headers, timeout=10) as http:
            client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
            message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="via sdk")])
            return [event async for event in client.send_message(SendMessageRequest(message=message))]

    with serve_a2a(RECORDER) as server:
        assert len(asyncio.run(call(server.url, server.card, {}))) == 1
        with pytest.raises(Exception, match="403"):
            asyncio.run(call(server.url, server.card, {"Origin": "http://evil.example"}))
    assert RUNS == ["via sdk"]


def test_a_card_url_on_a_public_name_admits_that_name_and_its_origin_only() -> None:
    RUNS.clear()
    with running(lambda url: a2a_app(RECORDER, url="https://agents.example.com/")) as url:
        assert post(url, "named", Host="agents.example.com").status_code == 200
        assert post(url, "named", Host="agents.example.com", Origin="https://agents.example.com").status_code == 200
        assert post(url, "evil", Host="evil.example").status_code == 421
        assert post(url, "evil", Host="agents.example.com", Origin="https://evil.example").status_code == 403
        assert post(url, "mounted-elsewhere", Host="proxy.internal").status_code == 421
    with running(lambda url: a2a_app(RECORDER, url="https://agents.example.com/", allowed_hosts=["proxy.internal"])) as url:
        assert post(url, "mounted-elsewhere", Host="proxy.internal").status_code == 200
    assert RUNS == ["named", "named", "mounted-elsewhere"]


def token_auth(request: Any) -> str | None:
    token = request.headers.get("authorization", "")
    return {"Bearer alice-token": "alice", "Bearer mallory-token": "mallory"}.get(token)


async def async_token_auth(request: Any) -> str | None:
    await asyncio.sleep(0)
    return token_auth(request)


@pytest.mark.parametrize("hook", [token_auth, async_token_auth])
def test_the_auth_hook_refuses_with_401_and_its_principal_owns_the_conversation(hook: Any) -> None:
    with serve_a2a(SHOUTER, auth=hook) as server:
        refused = post(server.url, "no token")
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert post(server.url, "wrong", Authorization="Bearer guess").status_code == 401
        # The card stays public (clients read it to learn how to call), still behind the Host check.
        assert httpx.get(server.url + ".well-known/agent-card.json").status_code == 200
        with pytest.raises(A2AError) as caught:
            a2a_agent(server.url).run(request="anonymous")
        assert caught.value.reason == "connection" and "401" in str(caught.value)
        alice = a2a_agent(server.url, headers={"Authorization": "Bearer alice-token"})
        mallory = a2a_agent(server.url, headers={"Authorization": "Bearer mallory-token"})
        first = alice.run(request="hi")
        context_id = first.scope.read("shouter_context_id")
        assert mallory.run(request="peek", shouter_context_id=context_id).output == "PEEK (turn 1)"
        assert alice.run(request="again", shouter_context_id=context_id).output == "AGAIN (turn 2)"


def test_a_hook_that_says_false_refuses_and_true_lets_in() -> None:
    with serve_a2a(RECORDER, auth=lambda request: request.headers.get("x-key") == "k") as server:
        assert post(server.url, "no").status_code == 401
        assert post(server.url, "yes", **{"X-Key": "k"}).status_code == 200


def test_a_wildcard_bind_warns_at_start_naming_the_fix() -> None:
    with pytest.warns(UserWarning, match=r"non-loopback address '0\.0\.0\.0'.*allowed_hosts=\[\.\.\.\].*auth=<hook>") as said:
        server = serve_a2a(RECORDER, host="0.0.0.0")
    assert [w.filename for w in said] == [__file__]  # shown at the caller's line, once
    with server:
        port = server.url.rsplit(":", 1)[1].strip("/")
        # Nothing to check Host against: that is what the warning is about.
        assert post(f"http://127.0.0.1:{port}/", "lan", Host="whatever.lan").status_code == 200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with serve_a2a(RECORDER, host="0.0.0.0", auth=lambda request: True):
            pass
        with serve_a2a(RECORDER, host="0.0.0.0", allowed_hosts=["agents.lan:*"]) as named:
            port = named.url.rsplit(":", 1)[1].strip("/")
            assert post(f"http://127.0.0.1:{port}/", "x", Host="evil.example").status_code == 421
            assert post(f"http://127.0.0.1:{port}/", "x", Host=f"agents.lan:{port}").status_code == 200


def test_bad_guard_arguments_are_refused_when_building() -> None:
    with pytest.raises(TypeError, match="non-empty strings"):
        a2a_app(RECORDER, url="http://127.0.0.1:8000/", allowed_hosts=[""])
    with pytest.raises(TypeError, match="auth takes a function"):
        a2a_app(RECORDER, url="http://127.0.0.1:8000/", auth="secret")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid port"):
        a2a_app(RECORDER, url="http://127.0.0.1:notaport/")


def test_mounted_under_a_prefix_the_card_stays_public_and_the_rest_needs_auth() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    def make(url: str) -> Any:
        inner = a2a_app(RECORDER, url=url, auth=lambda request: request.headers.get("x-key") == "k")
        return Starlette(routes=[Mount("/agents", app=inner)])

    with running(make) as url:
        assert httpx.get(url + "agents/.well-known/agent-card.json").status_code == 200
        assert post(url + "agents/", "no key").status_code == 401
        assert post(url + "agents/", "with key", **{"X-Key": "k"}).status_code == 200
        assert httpx.get(url + "agents/.well-known/agent-card.json", headers={"Host": "evil.example"}).status_code == 421


def test_an_outer_middleware_that_authenticated_nobody_leaves_the_hooks_principal_the_owner() -> None:
    # Starlette's AuthenticationMiddleware sets scope["user"] on every request, an UnauthenticatedUser
    # when its backend knows nobody: the hook's principals must still own their conversations apart.
    from starlette.authentication import AuthenticationBackend
    from starlette.middleware.authentication import AuthenticationMiddleware

    class NobodyBackend(AuthenticationBackend):
        async def authenticate(self, conn: Any) -> None:
            return None

    def make(url: str) -> Any:
        return AuthenticationMiddleware(a2a_app(SHOUTER, url=url, auth=token_auth), backend=NobodyBackend())

    with running(make) as url:
        alice = a2a_agent(url, headers={"Authorization": "Bearer alice-token"})
        mallory = a2a_agent(url, headers={"Authorization": "Bearer mallory-token"})
        context_id = alice.run(request="hi").scope.read("shouter_context_id")
        assert mallory.run(request="peek", shouter_context_id=context_id).output == "PEEK (turn 1)"
        assert alice.run(request="again", shouter_context_id=context_id).output == "AGAIN (turn 2)"
