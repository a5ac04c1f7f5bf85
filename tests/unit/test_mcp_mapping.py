"""Pure mappings of chatclient.mcp (no server): results, schemas, names, documents, prompts, sampling."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

import mcp_types as types

from chatclient import ChatClient
from chatclient.errors import McpProtocolError
from chatclient.mcp.prompts import check_arguments, to_messages
from chatclient.mcp.resources import expand_uri, to_documents
from chatclient.mcp.sampling import MAX_SAMPLING_TOKENS, answer_sampling, sampling_request
from chatclient.mcp.tools import check_input_schema, map_result, safe_tool_name
from chatclient.messages import AssistantMessage, Media, UserMessage
from chatclient.testing import ScriptedChatModel

pytestmark = pytest.mark.mcp

PNG = b"\x89PNG\r\n\x1a\n"


def test_text_is_joined_and_media_kept() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="first"),
            types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///a.txt", text="embedded")),
            types.ResourceLink(uri="file:///b.txt", name="b"),
            types.TextContent(text="last"),
        ]
    )
    mapped = map_result(result)
    assert mapped.text == "first\n[image/png attachment, 8 bytes]\nembedded\n[resource: file:///b.txt]\nlast"
    assert mapped.media == (Media("image/png", PNG),)
    assert not mapped.is_error and not mapped.truncated


def test_structured_content_is_json_when_there_is_no_text() -> None:
    mapped = map_result(types.CallToolResult(content=[], structured_content={"temp": 21, "city": "Lisbon"}))
    assert json.loads(mapped.text) == {"temp": 21, "city": "Lisbon"}
    assert mapped.structured == {"temp": 21, "city": "Lisbon"}
    # With text present, the text is what the model reads (servers send both forms).
    both = map_result(types.CallToolResult(content=[types.TextContent(text="21 C")], structured_content={"t": 21}))
    assert both.text == "21 C"


def test_long_results_are_cut_with_a_marker() -> None:
    mapped = map_result(types.CallToolResult(content=[types.TextContent(text="y" * 1000)]), max_chars=100)
    assert mapped.truncated
    assert mapped.text == "y" * 100 + "\n[... result truncated: 1000 characters, only the first 100 are shown]"


def test_error_flag_is_kept() -> None:
    assert map_result(types.CallToolResult(content=[types.TextContent(text="boom")], is_error=True)).is_error


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, None),
        ([], "not a JSON object"),
        ({"type": "array"}, "root type is not 'object'"),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "not valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"description": "x" * 70_000}}}, "more than 65536"),
    ],
)
def test_schema_checks(schema: object, problem: str | None) -> None:
    found = check_input_schema(schema)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_deep_schema_is_refused() -> None:
    deep: dict[str, object] = {"type": "string"}
    for _ in range(40):
        deep = {"type": "object", "properties": {"x": deep}}
    assert "deeper than 32" in str(check_input_schema(deep))


def test_safe_tool_names() -> None:
    assert safe_tool_name("files.read") == "files_read"
    assert safe_tool_name("ok-name_1") == "ok-name_1"
    assert len(safe_tool_name("x" * 100)) == 64


def test_text_and_textual_blob_resources_become_documents() -> None:
    result = types.ReadResourceResult(
        contents=[
            types.TextResourceContents(uri="docs://a", text="alpha", mime_type="text/markdown"),
            types.BlobResourceContents(uri="docs://b", blob=base64.b64encode(b"beta").decode(), mime_type="text/plain"),
            types.BlobResourceContents(uri="docs://c", blob=base64.b64encode(PNG).decode(), mime_type="image/png"),
        ]
    )
    docs = to_documents(result, server="s")
    assert [(d.text, d.metadata["source"], d.metadata["server"]) for d in docs] == [
        ("alpha", "docs://a", "s"),
        ("beta", "docs://b", "s"),
    ]
    assert docs[0].metadata["mime_type"] == "text/markdown"


def test_uri_templates() -> None:
    assert expand_uri("notes://{topic}/{page}", {"topic": "mcp", "page": 2}) == "notes://mcp/2"
    with pytest.raises(ValueError, match="missing: page"):
        expand_uri("notes://{topic}/{page}", {"topic": "mcp"})
    with pytest.raises(ValueError, match="unknown: other"):
        expand_uri("notes://{topic}", {"topic": "a", "other": "b"})


def test_prompt_arguments_are_validated() -> None:
    prompt = types.Prompt(
        name="review",
        arguments=[types.PromptArgument(name="code", required=True), types.PromptArgument(name="lang")],
    )
    assert check_arguments(prompt, {"code": "x", "lang": None}) == {"code": "x"}
    assert check_arguments(prompt, {"code": 12}) == {"code": "12"}
    with pytest.raises(ValueError, match=r"missing required argument\(s\): code; unknown argument\(s\): x"):
        check_arguments(prompt, {"x": "1"})


def test_prompt_messages() -> None:
    result = types.GetPromptResult(
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(text="hi")),
            types.PromptMessage(role="assistant", content=types.TextContent(text="hello")),
            types.PromptMessage(
                role="user", content=types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png")
            ),
        ]
    )
    assert to_messages(result) == [
        UserMessage("hi"),
        AssistantMessage("hello"),
        UserMessage("", (Media("image/png", PNG),)),
    ]


def test_invalid_base64_is_a_protocol_error() -> None:
    bad = types.CallToolResult(content=[types.ImageContent(data="%%%not base64", mime_type="image/png")])
    with pytest.raises(McpProtocolError, match="invalid base64"):
        map_result(bad)


def params(max_tokens: int = 100) -> types.CreateMessageRequestParams:
    return types.CreateMessageRequestParams(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(text="Summarise: cats purr.")),
        ],
        max_tokens=max_tokens,
        system_prompt="Be brief.",
        temperature=0.2,
        stop_sequences=["END"],
    )


def test_sampling_request_is_bounded() -> None:
    request = sampling_request(params(10**9), "srv")
    assert request.max_tokens == MAX_SAMPLING_TOKENS
    assert request.messages == (UserMessage("Summarise: cats purr."),)
    assert request.stop_sequences == ("END",)


def test_sampling_answer_and_refusal() -> None:
    model = ScriptedChatModel(["Cats purr."])
    client = ChatClient.create(model)
    answer = asyncio.run(answer_sampling(client, params(), None, server="srv"))
    assert isinstance(answer, types.CreateMessageResult)
    assert answer.content.text == "Cats purr."  # type: ignore[union-attr]
    assert model.last_prompt.options is not None
    assert (model.last_prompt.options.max_tokens, model.last_prompt.options.temperature) == (100, 0.2)
    assert list(model.last_prompt.options.stop or ()) == ["END"]

    async def deny(request: object) -> bool:
        return False

    refused = asyncio.run(answer_sampling(client, params(), deny, server="srv"))
    assert isinstance(refused, types.ErrorData) and "refused" in refused.message
    assert len(model.prompts) == 1


def test_errors_never_show_tokens_or_url_credentials() -> None:
    from mcp.shared.exceptions import MCPError

    from chatclient.mcp import McpClient

    client = McpClient.http("http://alice:pa55word@127.0.0.1:1/mcp", headers={"Authorization": "Bearer tok-123456789"})
    assert "pa55word" not in repr(client) and "alice" not in repr(client)
    echoed = MCPError(-32600, "bad request: header was Bearer tok-123456789, user alice:pa55word")
    error = client._translate(echoed, "calling tool 'x'", None)
    assert "tok-123456789" not in str(error)
    assert "pa55word" not in str(error)
    assert "***" in str(error)
