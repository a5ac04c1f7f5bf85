"""The MCP conformance suite's "everything server", written with chatclient's ``serve()``.

The suite (github.com/modelcontextprotocol/conformance) calls tools, resources and prompts by fixed
names (``test_simple_text``, ``test://static-text``, ...); this script offers them, built only from
chatclient's public API, so the suite's server scenarios measure ``serve()``. Run it, then the suite:

    python scripts/mcp_conformance_server.py 3001 &
    npx @modelcontextprotocol/conformance server --url http://127.0.0.1:3001/mcp --requirements 2025-11-25

See docs/guide/mcp.md ("Conformance") for the whole procedure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from chatclient.mcp import EmbeddedResource, ResourceChanges, mcp_server_context, serve
from chatclient.messages import Media, UserMessage
from chatclient.tools import ToolContext, ToolResult, tool

# a 1x1 red PNG and a short silent WAV, the same kind of payload the suite's reference server sends
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"


@tool
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@tool
def test_image_content() -> Media:
    """Tests image content response."""
    return Media("image/png", PNG)


@tool
def test_audio_content() -> Media:
    """Tests audio content response."""
    return Media("audio/wav", WAV)


@tool
def test_embedded_resource() -> EmbeddedResource:
    """Tests embedded resource content response."""
    return EmbeddedResource("text/plain", b"This is an embedded resource content.", uri="test://embedded-resource")


@tool
def test_multiple_content_types() -> ToolResult:
    """Tests response with multiple content types (text, image, resource)."""
    data = json.dumps({"test": "data", "value": 123}).encode()
    resource = EmbeddedResource("application/json", data, uri="test://mixed-content-resource")
    return ToolResult("Multiple content types test:", (Media("image/png", PNG), resource))


@tool
async def test_tool_with_logging(ctx: ToolContext) -> str:
    """Tests tool that emits log messages during execution."""
    mcp = mcp_server_context(ctx)
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await mcp.alog("info", message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@tool
async def test_tool_with_progress(ctx: ToolContext) -> str:
    """Tests tool that reports progress notifications."""
    mcp = mcp_server_context(ctx)
    for step in (0, 50, 100):
        await mcp.aprogress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return "progress reported"


@tool
def test_error_handling() -> str:
    """Tests error response handling."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool
async def test_sampling(prompt: str, ctx: ToolContext) -> str:
    """Tests server-initiated sampling (LLM completion request).

    Args:
        prompt: The prompt to send to the LLM.
    """
    answer = await mcp_server_context(ctx).asample(prompt, max_tokens=100)
    return f"LLM response: {answer}"


async def _elicit(ctx: ToolContext, message: str, schema: Mapping[str, Any], label: str) -> str:
    result = await mcp_server_context(ctx).aelicit(message, schema)
    return f"{label}: action={result['action']}, content={json.dumps(result.get('content') or {})}"


@tool
async def test_elicitation(message: str, ctx: ToolContext) -> str:
    """Tests server-initiated elicitation (user input request).

    Args:
        message: The message to show the user.
    """
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return await _elicit(ctx, message, schema, "User response")


@tool
async def test_elicitation_sep1034_defaults(ctx: ToolContext) -> str:
    """Tests elicitation with default values per SEP-1034."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    return await _elicit(ctx, "Please review and update the form fields with defaults", schema, "Elicitation completed")


@tool
async def test_elicitation_sep1330_enums(ctx: ToolContext) -> str:
    """Tests elicitation with enum schema improvements per SEP-1330."""
    titled = [{"const": f"value{i}", "title": t} for i, t in ((1, "First"), (2, "Second"), (3, "Third"))]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [{**t, "title": f"{t['title']} Option"} for t in titled]},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"anyOf": [{**t, "title": f"{t['title']} Choice"} for t in titled]},
            },
        },
        "required": [],
    }
    return await _elicit(ctx, "Please select options from the enum fields", schema, "Elicitation completed")


watched = {"text": "Watched resource content"}


def template_data(id: str) -> Media:
    """A resource template with parameter substitution."""
    return Media("application/json", json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}))


RESOURCES = {
    "test://static-text": "This is the content of the static text resource.",
    "test://static-binary": Media("image/png", PNG),
    "test://template/{id}/data": template_data,
    "test://watched-resource": lambda: watched["text"],
}


def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    """A prompt that includes an embedded resource."""
    resource = EmbeddedResource("text/plain", b"Embedded resource content for testing.", uri=resourceUri)
    return [UserMessage("Please process the embedded resource above.", (resource,))]


def test_prompt_with_image() -> list[UserMessage]:
    """A prompt that includes an image."""
    return [UserMessage("Please analyze the image above.", (Media("image/png", PNG),))]


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 3001
    changes = ResourceChanges()

    def keep_changing() -> None:  # the suite's watched resource changes every 3 s
        stop, version = threading.Event(), 0
        while not stop.wait(3):
            version += 1
            watched["text"] = f"Watched resource content, version {version}"
            changes.changed("test://watched-resource")

    threading.Thread(target=keep_changing, daemon=True).start()
    tools = [
        test_simple_text,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
        test_tool_with_logging,
        test_tool_with_progress,
        test_error_handling,
        test_sampling,
        test_elicitation,
        test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums,
    ]
    prompts: list[Callable[..., Any]] = [
        test_simple_prompt,
        test_prompt_with_arguments,
        test_prompt_with_embedded_resource,
        test_prompt_with_image,
    ]
    completions = {"test_prompt_with_arguments": {"arg1": ["paris", "park", "party"], "arg2": ["alpha", "beta"]}}
    serve(
        tools,
        RESOURCES,
        prompts,
        name="mcp-conformance-test-server",
        transport="http",
        port=port,
        completions=completions,
        resource_changes=changes,
    )


if __name__ == "__main__":
    main()
