"""McpClient's elicitation handler against a real serve() server (HTTP on loopback and stdio): accepted,
declined and cancelled answers, schema-checked answers, and hostile forms refused before the user sees them."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatclient.mcp import ElicitationRequest, ElicitationResponse, McpClient
from chatclient.mcp.elicitation import check_requested_schema

pytestmark = [pytest.mark.mcp, pytest.mark.integration]

SERVER = str(Path(__file__).with_name("mcp_feature_server.py"))


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    from tests.integration.test_mcp_serve_features import http_server

    with http_server() as started:
        yield started


def test_an_accepted_answer_reaches_the_tool(url: str) -> None:
    asked: list[ElicitationRequest] = []

    def ask(request: ElicitationRequest) -> ElicitationResponse:
        asked.append(request)
        return ElicitationResponse.accept({"name": "Ada", "age": 36})

    with McpClient.http(url, elicitation=ask) as client:
        result = client.call_tool("sign_up")
    assert result.content[0].text == "accept:{'name': 'Ada', 'age': 36}"  # type: ignore[union-attr]
    [request] = asked
    assert (request.server, request.message, request.mode) == ("features", "Who are you?", "form")
    assert request.requested_schema["required"] == ["name"]


@pytest.mark.parametrize("response", [ElicitationResponse.decline(), ElicitationResponse.cancel()])
def test_declined_and_cancelled_answers(url: str, response: ElicitationResponse) -> None:
    with McpClient.http(url, elicitation=lambda request: response) as client:
        result = client.call_tool("sign_up")
    assert result.content[0].text == f"{response.action}:None"  # type: ignore[union-attr]


def test_schema_defaults_fill_what_the_user_left_out(url: str) -> None:
    with McpClient.http(url, elicitation=lambda request: ElicitationResponse.accept({"size": 14})) as client:
        result = client.call_tool("preferences")
    assert result.content[0].text == "accept:{'theme': 'dark', 'size': 14}"  # type: ignore[union-attr]


def test_an_async_handler(url: str) -> None:
    async def ask(request: ElicitationRequest) -> ElicitationResponse:
        return ElicitationResponse.accept({"name": "Grace"})

    with McpClient.http(url, elicitation=ask) as client:
        assert client.call_tool("sign_up").content[0].text == "accept:{'name': 'Grace'}"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ({"age": 3}, "'name' is a required property"),
        ({"name": "", "age": 1}, "should be non-empty"),
        ({"name": "Bo", "age": -1}, "less than the minimum"),
        ({"name": "Bo", "age": "old"}, "not of type 'integer'"),
    ],
)
def test_an_answer_that_does_not_fit_the_schema_is_not_sent(
    url: str, content: dict[str, object], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.WARNING, "chatclient.mcp"),
        McpClient.http(url, elicitation=lambda request: ElicitationResponse.accept(content)) as client,
    ):
        result = client.call_tool("sign_up")
    assert result.is_error
    assert "does not fit the requested schema" in result.content[0].text  # type: ignore[union-attr]
    assert why in caplog.text


@pytest.mark.parametrize(
    ("kind", "why"),
    [("nested", "has type 'object'"), ("deep", "nests deeper than 32"), ("huge", "more than 65536")],
)
def test_hostile_forms_are_refused_before_the_user_sees_them(
    url: str, kind: str, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[ElicitationRequest] = []

    def ask(request: ElicitationRequest) -> ElicitationResponse:
        asked.append(request)
        return ElicitationResponse.accept({})

    with caplog.at_level(logging.WARNING, "chatclient.mcp"), McpClient.http(url, elicitation=ask) as client:
        result = client.call_tool("hostile_form", {"kind": kind})
    assert result.is_error
    assert "elicitation refused" in result.content[0].text  # type: ignore[union-attr]
    assert asked == []
    assert why in caplog.text


def test_a_failing_or_wrong_handler_answers_an_error_without_details(url: str) -> None:
    def explode(request: ElicitationRequest) -> ElicitationResponse:
        raise RuntimeError("secret-token-123 leaked?")

    with McpClient.http(url, elicitation=explode) as client:
        result = client.call_tool("sign_up")
    assert result.is_error and "could not ask its user" in result.content[0].text  # type: ignore[union-attr]
    assert "secret-token-123" not in result.content[0].text  # type: ignore[union-attr]
    with McpClient.http(url, elicitation=lambda request: {"action": "accept"}) as client:  # type: ignore[arg-type,return-value]
        assert client.call_tool("sign_up").is_error


def test_without_a_handler_the_capability_is_not_offered(url: str) -> None:
    with McpClient.http(url) as client:
        result = client.call_tool("sign_up")
    assert result.is_error


def test_the_handler_must_be_callable() -> None:
    with pytest.raises(TypeError, match="elicitation takes a function"):
        McpClient.http("http://127.0.0.1:9/mcp", elicitation="yes")  # type: ignore[arg-type]


def test_elicitation_over_stdio() -> None:
    answer = ElicitationResponse.accept({"name": "Linus"})
    with McpClient.stdio(sys.executable, [SERVER, "stdio"], elicitation=lambda request: answer) as client:
        assert client.call_tool("sign_up").content[0].text == "accept:{'name': 'Linus'}"  # type: ignore[union-attr]


def test_the_schema_check_allows_what_mcp_allows() -> None:
    form = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "x"},
            "n": {"type": "number"},
            "ok": {"type": "boolean"},
            "colour": {"type": "string", "enum": ["red", "blue"]},
            "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
        },
    }
    assert check_requested_schema(form) is None
    assert "not a JSON object" in str(check_requested_schema(["x"]))
    assert "root type is not 'object'" in str(check_requested_schema({"type": "string"}))
    assert "items are not a list of choices" in str(
        check_requested_schema({"type": "object", "properties": {"t": {"type": "array", "items": {"type": "string"}}}})
    )
    many = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(65)}}
    assert "65 properties, more than 64" in str(check_requested_schema(many))
