"""chatclient's McpClient as the client under test of the MCP conformance suite's client scenarios.

The suite starts a test server per scenario and runs this script with the server's URL as the last
argument, the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` and, for some auth scenarios,
credentials in ``MCP_CONFORMANCE_CONTEXT`` (JSON). Only chatclient's public API is used:

    npx @modelcontextprotocol/conformance client --command "python scripts/mcp_conformance_client.py" \\
        --requirements 2025-11-25

See docs/guide/mcp.md ("Conformance") for the whole procedure.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

from chatclient.mcp import ElicitationRequest, ElicitationResponse, McpClient
from chatclient.mcp.oauth import OAuthAuthorizationCode, OAuthClientCredentials

REDIRECT_URI = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def follow_redirect(authorization_url: str) -> str:
    """The suite's authorization server approves at once: read its redirect instead of opening a browser."""

    class Stop(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        urllib.request.build_opener(Stop).open(authorization_url, timeout=10)
    except urllib.error.HTTPError as answer:
        if answer.code in (301, 302, 303, 307, 308):
            return str(answer.headers["Location"])
        raise
    raise RuntimeError("the authorization server did not redirect")


def basic(url: str) -> None:
    with McpClient.http(url) as client:
        for tool in client.list_tools():
            client.call_tool(tool.name, {"a": 2, "b": 3})


def elicitation_defaults(url: str) -> None:
    def accept_empty(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept({})  # the client fills in the schema's defaults

    with McpClient.http(url, elicitation=accept_empty) as client:
        client.call_tool("test_client_elicitation_defaults", {})


def oauth(url: str, scenario: str) -> None:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    auth: OAuthAuthorizationCode | OAuthClientCredentials
    if scenario == "auth/client-credentials-basic":
        auth = OAuthClientCredentials(context["client_id"], context["client_secret"])
    elif scenario == "auth/pre-registration":
        auth = OAuthAuthorizationCode(
            follow_redirect,
            redirect_uri=REDIRECT_URI,
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    else:
        auth = OAuthAuthorizationCode(
            follow_redirect, redirect_uri=REDIRECT_URI, client_metadata_url=CLIENT_METADATA_URL
        )
    with McpClient.http(url, auth=auth) as client:
        client.list_tools()
        client.call_tool("test-tool", {})


def main() -> None:
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    if scenario.startswith("auth/"):
        oauth(url, scenario)
    elif scenario.startswith("elicitation"):
        elicitation_defaults(url)
    else:
        basic(url)


if __name__ == "__main__":
    main()
