"""Media in tool results: ToolResult, the cap, each provider's mapping, memory, MCP, Media.from_path/from_url."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import pytest

from chatclient import ChatClient
from chatclient.errors import UnsupportedFeatureError
from chatclient.memory.serialization import message_from_json, message_to_json
from chatclient.messages import AssistantMessage, Media, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from chatclient.models.anthropic import anthropic_messages
from chatclient.models.ollama import ollama_messages
from chatclient.models.openai import openai_messages
from chatclient.models.openai_responses import responses_input
from chatclient.prompt import Prompt
from chatclient.testing import ScriptedChatModel
from chatclient.tools import ToolCallingManager, ToolMediaTooLargeError, ToolResult, tool

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
CHART = Media("image/png", PNG)


@tool
def chart(city: str) -> ToolResult:
    """A chart of a city's weather."""
    return ToolResult(f"chart of {city}", media=(CHART,))


@tool
def photo() -> Media:
    """A photo."""
    return CHART


@tool
def huge() -> Media:
    """Too big."""
    return Media("image/png", b"\x00" * 2048)


def turn(*calls: ToolCall) -> Any:
    from chatclient.models.base import ChatResponse, Generation

    return ChatResponse((Generation(AssistantMessage(None, calls)),))


def test_manager_keeps_the_media_of_a_tool_result() -> None:
    result = ToolCallingManager().execute(
        Prompt("hi"),
        turn(ToolCall("c1", "chart", '{"city": "Oslo"}'), ToolCall("c2", "photo", "{}")),
        tools=[chart, photo],
    )
    one, two = result.tool_response_message.responses
    assert (one.response_data, one.media) == ("chart of Oslo", (CHART,))
    assert (two.response_data, two.media) == ("", (CHART,))
    assert result.executions[0].result == "chart of Oslo"


@pytest.mark.parametrize("run", ["sync", "async"])
def test_media_over_the_cap_is_an_error_naming_the_tool(run: str) -> None:
    manager = ToolCallingManager(max_media_bytes=1024)
    response = turn(ToolCall("c1", "huge", "{}"))
    with pytest.raises(ToolMediaTooLargeError) as info:
        if run == "sync":
            manager.execute(Prompt("hi"), response, tools=[huge])
        else:
            asyncio.run(manager.aexecute(Prompt("hi"), response, tools=[huge]))
    assert info.value.tool_name == "huge"
    assert "'huge'" in str(info.value) and "2048 bytes" in str(info.value) and "1024" in str(info.value)


def test_tool_result_validates_its_parts() -> None:
    assert ToolResult("x", media=CHART).media == (CHART,)
    with pytest.raises(TypeError):
        ToolResult("x", media=("not media",))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ToolResult(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ToolCallingManager(max_media_bytes=-1)


EXCHANGE = [
    UserMessage("weather?"),
    AssistantMessage(None, (ToolCall("c1", "chart", '{"city":"Oslo"}'), ToolCall("c2", "lookup", "{}"))),
    ToolResponseMessage(
        (ToolResponse("c1", "chart", "chart of Oslo", media=(CHART,)), ToolResponse("c2", "lookup", "12C"))
    ),
]


def test_anthropic_gets_image_blocks_inside_the_tool_result() -> None:
    _, messages = anthropic_messages(EXCHANGE)
    results = messages[2]["content"]
    assert results[0]["content"] == [
        {"type": "text", "text": "chart of Oslo"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
        },
    ]
    assert results[1]["content"] == "12C"


def test_anthropic_refuses_audio_in_a_tool_result_before_http() -> None:
    bad = ToolResponseMessage((ToolResponse("c1", "say", "", media=(Media("audio/wav", b"RIFF"),)),))
    with pytest.raises(UnsupportedFeatureError, match="'say'"):
        anthropic_messages([UserMessage("x"), AssistantMessage(None, (ToolCall("c1", "say", "{}"),)), bad])


def test_responses_puts_the_media_inside_the_function_call_output() -> None:
    items = responses_input(EXCHANGE)
    assert items[3]["output"][0] == {"type": "input_text", "text": "chart of Oslo"}
    assert items[3]["output"][1]["image_url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert items[4] == {"type": "function_call_output", "call_id": "c2", "output": "12C"}


def test_chat_completions_sends_the_media_in_a_following_user_message() -> None:
    messages = openai_messages(EXCHANGE)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user"]
    assert messages[2]["content"] == "chart of Oslo"
    note, image = messages[4]["content"]
    assert note["type"] == "text" and "chart (call c1)" in note["text"] and "lookup" not in note["text"]
    assert image == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }


def test_ollama_sends_the_media_in_a_following_user_message() -> None:
    only_media = ToolResponseMessage((ToolResponse("c1", "photo", "", media=(CHART,)),))
    messages = ollama_messages([UserMessage("x"), AssistantMessage(None, (ToolCall("c1", "photo", "{}"),)), only_media])
    assert messages[2]["role"] == "tool" and "attachment" in messages[2]["content"]
    assert messages[3]["role"] == "user" and messages[3]["images"] == [base64.b64encode(PNG).decode()]


def test_media_of_tool_responses_survive_memory_serialization() -> None:
    message = EXCHANGE[2]
    again = message_from_json(message_to_json(message))
    assert again == message and again.responses[0].media == (CHART,)
    url = ToolResponseMessage((ToolResponse("c", "t", "x", media=(Media.from_url("https://x.org/a.png"),)),))
    assert message_from_json(message_to_json(url)) == url


def test_a_tool_returning_media_reaches_the_next_model_turn() -> None:
    model = ScriptedChatModel([AssistantMessage(None, (ToolCall("c1", "chart", '{"city":"Oslo"}'),)), "It is sunny."])
    assert ChatClient.create(model).prompt("weather?").tools(chart).call().content() == "It is sunny."
    sent = model.prompts[1].messages[-1]
    assert isinstance(sent, ToolResponseMessage) and sent.responses[0].media == (CHART,)


def test_mcp_image_and_audio_results_pass_through() -> None:
    pytest.importorskip("mcp")
    from chatclient.mcp._sdk import types
    from chatclient.mcp.tools import McpToolCallback

    callback = McpToolCallback.__new__(McpToolCallback)
    callback._definition = type("D", (), {"name": "snap"})()  # type: ignore[attr-defined]
    callback.max_result_chars = 10_000
    result = types.CallToolResult(
        content=[
            types.TextContent(text="a snapshot"),
            types.ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
            types.AudioContent(data=base64.b64encode(b"RIFF....").decode(), mime_type="audio/wav"),
        ]
    )
    out = callback._text(result)
    assert isinstance(out, ToolResult)
    assert out.media == (CHART, Media("audio/wav", b"RIFF...."))
    assert out.text.startswith("a snapshot")
    text_only = callback._text(types.CallToolResult(content=[types.TextContent(text="plain")]))
    assert text_only == "plain"


def test_media_from_path_guesses_the_type_and_bounds_the_size(tmp_path: Path) -> None:
    png = tmp_path / "chart.png"
    png.write_bytes(PNG)
    assert Media.from_path(png) == CHART
    assert Media.from_path(str(png), "image/x-custom").mime_type == "image/x-custom"
    pdf = tmp_path / "doc.pdf"
    pdf.write_bytes(b"%PDF-1.7 ...")
    assert Media.from_path(pdf).mime_type == "application/pdf"
    with pytest.raises(ValueError, match="max_bytes"):
        Media.from_path(png, max_bytes=8)
    odd = tmp_path / "blob.unknownext"
    odd.write_bytes(b"x")
    with pytest.raises(ValueError, match="mime_type"):
        Media.from_path(odd)


def test_media_from_url() -> None:
    assert Media.from_url("https://x.org/a/cat.jpeg?size=2#top") == Media(
        "image/jpeg", "https://x.org/a/cat.jpeg?size=2#top"
    )
    assert Media.from_url("data:image/gif;base64,R0lGOD").mime_type == "image/gif"
    assert Media.from_url("https://x.org/report", "application/pdf").mime_type == "application/pdf"
    with pytest.raises(ValueError, match="mime_type"):
        Media.from_url("https://x.org/report")
    with pytest.raises(ValueError):
        Media.from_url("")


def test_hosted_tool_calls_and_citations_are_written_as_version_3() -> None:
    import json

    from chatclient.memory.serialization import FORMAT_VERSION, message_from_dict, message_to_dict
    from chatclient.messages import Citation, HostedToolCall

    call = HostedToolCall(
        "ws_1",
        "web_search",
        {"query": "q"},
        {"sources": [{"url": "https://a.org"}]},
        "completed",
        "openai-responses",
        ({"type": "web_search_call", "id": "ws_1", "action": {"query": "q"}},),
    )
    message = AssistantMessage(
        "see a.org", hosted_tool_calls=(call,), citations=(Citation("https://a.org", "A", None, 4, 9),)
    )
    data = json.loads(json.dumps(message_to_dict(message)))
    assert data["v"] == 3 == FORMAT_VERSION
    again = message_from_dict(data)
    assert again == message and again.hosted_tool_calls[0].raw == call.raw
    media = message_to_dict(EXCHANGE[2])
    assert media["v"] == 3
    with pytest.raises(ValueError, match="version"):
        message_from_dict({**data, "v": 4})


def test_served_tools_return_their_media_as_mcp_content() -> None:
    pytest.importorskip("mcp")
    from chatclient.mcp._sdk import types
    from chatclient.mcp.server import _result_content

    content = _result_content(
        ToolResult("a chart", media=(CHART, Media("audio/wav", b"RIFF"), Media.from_url("https://x.org/a.pdf")))
    )
    assert isinstance(content[0], types.TextContent) and content[0].text == "a chart"
    assert isinstance(content[1], types.ImageContent) and base64.b64decode(content[1].data) == PNG
    assert isinstance(content[2], types.AudioContent) and content[2].mime_type == "audio/wav"
    # media by URL travel as a resource link the client can fetch (not as text naming the URL)
    assert isinstance(content[3], types.ResourceLink)
    assert str(content[3].uri) == "https://x.org/a.pdf" and content[3].mime_type == "application/pdf"
    assert [c.text for c in _result_content("plain")] == ["plain"]


def test_responses_refuses_audio_in_a_tool_output_before_http() -> None:
    bad = ToolResponseMessage((ToolResponse("c1", "say", "", media=(Media("audio/wav", b"RIFF"),)),))
    with pytest.raises(UnsupportedFeatureError, match="'say'"):
        responses_input([bad])
