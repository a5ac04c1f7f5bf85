"""Issue 33 item 4: a cassette is committed to a repository, so no credential may reach it.

A server that echoes a key as JSON unicode escapes or with ``\\/`` escapes, a key in the URL's query
string and a credential in a header outside the HTTP layer's list are all probed over real HTTP
(the loopback server); the file must hold none of them and stay valid JSON. A tampered cassette
raises ``CassetteError`` naming the interaction, never a bare ``KeyError``/``TypeError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import CassetteError
from chatclient.models.openai import OpenAIChatModel
from chatclient.testing import Cassette
from tests.support import server_fixtures
from tests.support.loopback import SSE, LoopbackServer, Reply, openai_completion, openai_stream

pytestmark = pytest.mark.integration
loopback_server, server = server_fixtures()

KEY = "sk-live/abcdef/0123456789-secret"
QUERY_KEY = "AIzaQueryKey0123456789abcdef"
HEADER_KEY = "subscription-0123456789abcdef"
PATH = "/v1/chat/completions"
QUERIED = f"{PATH}?key={QUERY_KEY}"  # the loopback server routes on path and query


def _escaped(text: str) -> str:
    """``text`` as a JSON string body written with \\u escapes for letters and \\/ for slashes."""
    return "".join("\\/" if c == "/" else f"\\u{ord(c):04x}" if c.isalpha() else c for c in text)


def _echo_body(secret: str) -> str:
    template = json.dumps(openai_completion("ECHO"))
    return template.replace("ECHO", f"your key is {_escaped(secret)}, kept safe")


def _model(srv: LoopbackServer, cassette: Cassette) -> OpenAIChatModel:
    http = cassette.http_client(params={"key": QUERY_KEY}, headers={"Ocp-Apim-Subscription-Key": HEADER_KEY})
    return OpenAIChatModel("gpt-test", api_key=KEY, base_url=srv.url + "/v1", http_client=http, max_retries=0)


def _assert_clean(file: Path) -> dict[str, Any]:
    text = file.read_text(encoding="utf-8")
    data = json.loads(text)  # still valid JSON
    for secret in (KEY, QUERY_KEY, HEADER_KEY, *KEY.split("/")[1:], _escaped(KEY)):
        assert secret not in text
    assert "\\u0073\\u006b" not in text  # no escaped form either
    return dict(data)


def test_echoed_keys_in_escaped_json_query_and_odd_headers_are_not_recorded(server: LoopbackServer, tmp_path: Path) -> None:
    file = tmp_path / "c.json"
    server.script(QUERIED, Reply(body=_echo_body(KEY)))
    server.script(QUERIED, Reply(body=_echo_body(HEADER_KEY)))
    with Cassette(file, mode="record") as cassette:
        client = ChatClient.create(_model(server, cassette))
        first = client.prompt("what is my key?").call().content() or ""
        second = client.prompt("and the header?").call().content() or ""
    assert KEY not in first and "[REDACTED]" in first  # the caller sees what was stored
    assert HEADER_KEY not in second and "[REDACTED]" in second
    sent = {k.lower(): v for k, v in server.requests_to(QUERIED)[0].headers.items()}
    assert sent["ocp-apim-subscription-key"] == HEADER_KEY  # it did go out
    data = _assert_clean(file)
    url = data["interactions"][0]["request"]["url"]
    assert "key=[REDACTED]" in url and "/v1/chat/completions" in url

    with Cassette(file) as cassette:  # and the recording replays
        assert ChatClient.create(_model(server, cassette)).prompt("what is my key?").call().content() == first


def test_an_echoed_key_in_a_stream_is_not_recorded(server: LoopbackServer, tmp_path: Path) -> None:
    file = tmp_path / "s.json"
    events: list[Any] = [json.dumps(e) if "Your key" in json.dumps(e) else e for e in openai_stream(("Your key ", "is coming"))]
    events = [e.replace("Your key ", f"Your key {_escaped(KEY)} ") if isinstance(e, str) else e for e in events]
    assert any(isinstance(e, str) for e in events)
    server.script(QUERIED, SSE(events))
    with Cassette(file, mode="record") as cassette:
        text = "".join(ChatClient.create(_model(server, cassette)).prompt("stream it").stream().content())
    assert KEY not in text and "[REDACTED]" in text
    _assert_clean(file)


def _cassette(tmp_path: Path, interaction: Any) -> Path:
    file = tmp_path / "tampered.json"
    file.write_text(json.dumps({"format": "chatclient-cassette/1", "interactions": [interaction]}), encoding="utf-8")
    return file


GOOD_REQUEST = {"method": "POST", "path": PATH, "body": None}


@pytest.mark.parametrize(
    ("interaction", "complaint"),
    [
        ("just a string", "not an object"),
        ({"request": {"path": PATH}, "response": {}}, "method and a path"),
        ({"request": GOOD_REQUEST}, "no 'response'"),
        ({"request": GOOD_REQUEST, "response": {"status": "200"}}, "not an HTTP status"),
        ({"request": GOOD_REQUEST, "response": {"status": 200, "headers": ["content-type"]}}, "headers"),
        ({"request": GOOD_REQUEST, "response": {"status": 200, "headers": {"a": 1}}}, "headers"),
        ({"request": GOOD_REQUEST, "response": {"status": 200, "lines": [1, 2]}}, "'lines'"),
        ({"request": GOOD_REQUEST, "response": {"status": 200, "text": {"x": 1}}}, "'text'"),
    ],
)
def test_a_tampered_cassette_is_a_cassette_error_naming_the_interaction(
    tmp_path: Path, interaction: Any, complaint: str
) -> None:
    with pytest.raises(CassetteError, match=f"interaction 1 .*{complaint}"):
        Cassette(_cassette(tmp_path, interaction)).load()
