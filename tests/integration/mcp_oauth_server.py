"""A loopback OAuth 2.1 authorization server and an OAuth-protected serve() MCP server, in one process.

``python mcp_oauth_server.py AS_PORT MCP_PORT [TOKEN_SECONDS]``. The authorization server publishes
RFC 8414 metadata, registers clients (RFC 7591), authorizes with PKCE (S256 checked with authlib)
and auto-approves (no person in a test), and grants authorization_code, refresh_token and
client_credentials. The MCP server publishes RFC 9728 metadata and accepts only the bearer tokens
this authorization server issued. ``GET /stats`` on the authorization server counts the grants.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import sys
import time
from typing import Any
from urllib.parse import urlencode

import uvicorn
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from chatclient.mcp.oauth import ProtectedResource
from chatclient.mcp.server import build_server, http_app
from chatclient.tools import tool

CLIENTS: dict[str, dict[str, Any]] = {
    "robot": {"secret": "robot-secret-9f8e7d", "redirect_uris": []},
    "webapp": {"secret": "web-secret-1a2b3c", "redirect_uris": ["http://127.0.0.1:1/callback"]},
}
codes: dict[str, dict[str, Any]] = {}
access_tokens: dict[str, float] = {}
refresh_tokens: dict[str, str] = {}
stats = {"authorization_code": 0, "refresh_token": 0, "client_credentials": 0, "register": 0, "refused": 0}


def error(code: str, status: int = 400) -> JSONResponse:
    stats["refused"] += 1
    return JSONResponse({"error": code}, status_code=status)


def make_app(issuer: str, token_seconds: int) -> Starlette:
    async def metadata(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "issuer": issuer,
                "authorization_endpoint": f"{issuer}/authorize",
                "token_endpoint": f"{issuer}/token",
                "registration_endpoint": f"{issuer}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
            }
        )

    async def register(request: Request) -> JSONResponse:
        body = await request.json()
        client_id = "dyn-" + secrets.token_hex(4)
        CLIENTS[client_id] = {"secret": None, "redirect_uris": list(body.get("redirect_uris") or [])}
        stats["register"] += 1
        return JSONResponse(
            {**body, "client_id": client_id, "token_endpoint_auth_method": "none", "client_id_issued_at": 0},
            status_code=201,
        )

    async def authorize(request: Request) -> Response:
        q = request.query_params
        client = CLIENTS.get(q.get("client_id", ""))
        if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
            return error("invalid_client")
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return error("invalid_request")  # OAuth 2.1: PKCE is not optional
        code = secrets.token_urlsafe(16)
        codes[code] = {"client": q["client_id"], "challenge": q["code_challenge"], "redirect_uri": q["redirect_uri"]}
        query = urlencode({"code": code, "state": q.get("state", ""), "iss": issuer})
        return RedirectResponse(f"{q['redirect_uri']}?{query}", status_code=302)

    def issue(grant: str) -> JSONResponse:
        stats[grant] += 1
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        access_tokens[access] = time.monotonic() + token_seconds
        refresh_tokens[refresh] = access
        answer = {"access_token": access, "token_type": "Bearer", "expires_in": token_seconds}
        if grant != "client_credentials":
            answer["refresh_token"] = refresh
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    def client_of(request: Request, form: Any) -> str | None:
        header = request.headers.get("authorization", "")
        if header.startswith("Basic "):
            client_id, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret")
        client = CLIENTS.get(client_id)
        if client is None or (client["secret"] is not None and secret != client["secret"]):
            return None
        return str(client_id)

    async def token(request: Request) -> JSONResponse:
        form = await request.form()
        client_id = client_of(request, form)
        if client_id is None:
            return error("invalid_client", 401)
        grant = form.get("grant_type")
        if grant == "client_credentials":
            return issue("client_credentials")
        if grant == "authorization_code":
            entry = codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier") or "")
            if entry is None or entry["client"] != client_id or entry["redirect_uri"] != form.get("redirect_uri"):
                return error("invalid_grant")
            if not verifier or create_s256_code_challenge(verifier) != entry["challenge"]:
                return error("invalid_grant")
            return issue("authorization_code")
        if grant == "refresh_token":
            old = refresh_tokens.pop(str(form.get("refresh_token")), None)
            if old is None:
                return error("invalid_grant")
            access_tokens.pop(old, None)
            return issue("refresh_token")
        return error("unsupported_grant_type")

    async def show_stats(request: Request) -> JSONResponse:
        return JSONResponse(stats)

    async def expire_all(request: Request) -> JSONResponse:
        for key in access_tokens:
            access_tokens[key] = 0.0
        return JSONResponse({"expired": len(access_tokens)})

    return Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", metadata),
            Route("/register", register, methods=["POST"]),
            Route("/authorize", authorize),
            Route("/token", token, methods=["POST"]),
            Route("/stats", show_stats),
            Route("/expire", expire_all, methods=["POST"]),
        ]
    )


@tool
def whoami() -> str:
    """Says that the caller got in."""
    return "a signed-in client"


def check_token(request: Any) -> bool:
    header = request.headers.get("authorization", "")
    expiry = access_tokens.get(header[7:]) if header.startswith("Bearer ") else None
    return expiry is not None and expiry > time.monotonic()


async def main() -> None:
    as_port, mcp_port = int(sys.argv[1]), int(sys.argv[2])
    token_seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 3600
    issuer = f"http://127.0.0.1:{as_port}"
    for client in CLIENTS.values():
        if client["redirect_uris"]:
            client["redirect_uris"] = ["http://127.0.0.1:1/callback"]
    resource = ProtectedResource(f"http://127.0.0.1:{mcp_port}/mcp", [issuer], ["tools"])
    mcp_app = http_app(build_server([whoami], name="protected"), auth=check_token, protected_resource=resource)
    servers = [
        uvicorn.Server(uvicorn.Config(make_app(issuer, token_seconds), port=as_port, log_level="warning")),
        uvicorn.Server(uvicorn.Config(mcp_app, port=mcp_port, log_level="warning", lifespan="on")),
    ]
    await asyncio.gather(*(server.serve() for server in servers))


if __name__ == "__main__":
    asyncio.run(main())
