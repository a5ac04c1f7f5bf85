"""A serve() server using logging, progress, elicitation, completion, subscriptions and rich content.

Run as ``python mcp_feature_server.py stdio`` or ``python mcp_feature_server.py http PORT``; the
tests in test_mcp_serve_features.py and test_mcp_client_features.py reach it with McpClient.
"""

from __future__ import annotations

import enum
import sys
from typing import Literal

from chatclient.mcp import EmbeddedResource, ResourceChanges, mcp_server_context, serve
from chatclient.messages import Media
from chatclient.tools import ToolContext, ToolResult, tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
notes = {"todo": "buy milk"}
changes = ResourceChanges(max_subscriptions=50)


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


@tool
async def chatty(ctx: ToolContext) -> str:
    """Logs at every level from debug to error."""
    mcp = mcp_server_context(ctx)
    for level in ("debug", "info", "warning", "error"):
        await mcp.alog(level, f"{level} message", logger="chatty")  # type: ignore[arg-type]
    return "logged"


@tool
async def shout(ctx: ToolContext) -> str:
    """Logs one very long message."""
    await mcp_server_context(ctx).alog("error", "x" * 100_000)
    return "shouted"


@tool
async def steps(ctx: ToolContext) -> str:
    """Reports progress 1/3, 2/3, 3/3."""
    mcp = mcp_server_context(ctx)
    for step in (1, 2, 3):
        await mcp.aprogress(step, 3, f"step {step}")
    return "stepped"


@tool
async def flood(ctx: ToolContext) -> str:
    """Sends oversized notifications: a megabyte progress message and an update of a megabyte URI."""
    mcp = mcp_server_context(ctx)
    await mcp.aprogress(1, 1, "p" * 1_000_000)
    await changes.achanged("notes://" + "u" * 1_000_000)
    return "flooded"


@tool
def sync_steps(ctx: ToolContext) -> str:
    """A sync tool reporting progress and logging through the blocking methods."""
    mcp = mcp_server_context(ctx)
    mcp.progress(1, 2, "first half")
    mcp.log("warning", "from a thread")
    mcp.progress(2, 2)
    return "sync stepped"


@tool
async def wrong_mode(ctx: ToolContext) -> str:
    """Calls a blocking method from async code (a bug the context reports)."""
    mcp_server_context(ctx).log("info", "never sent")
    return "unreachable"


@tool
async def sign_up(ctx: ToolContext) -> str:
    """Asks the user for a name and an age."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "age": {"type": "integer", "minimum": 0}},
        "required": ["name"],
    }
    answer = await mcp_server_context(ctx).aelicit("Who are you?", schema)
    return f"{answer['action']}:{answer.get('content')}"


@tool
async def preferences(ctx: ToolContext) -> str:
    """Asks with defaults (SEP-1034): what the user leaves out takes the default."""
    schema = {
        "type": "object",
        "properties": {
            "theme": {"type": "string", "enum": ["light", "dark"], "default": "dark"},
            "size": {"type": "integer", "default": 12},
        },
    }
    answer = await mcp_server_context(ctx).aelicit("Preferences?", schema)
    return f"{answer['action']}:{answer.get('content')}"


@tool
async def hostile_form(kind: str, ctx: ToolContext) -> str:
    """Asks with a schema a client must refuse.

    Args:
        kind: nested, deep or huge.
    """
    if kind == "nested":
        schema: dict[str, object] = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    elif kind == "deep":
        inner: dict[str, object] = {"type": "string"}
        for _ in range(40):
            inner = {"anyOf": [inner]}
        schema = {"type": "object", "properties": {"a": inner}}
    else:
        schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5000)}}
    answer = await mcp_server_context(ctx).aelicit("Fill this", schema)
    return f"{answer['action']}"


@tool
def edit_note(name: str, text: str) -> str:
    """Changes a note and tells subscribed clients.

    Args:
        name: The note.
        text: Its new text.
    """
    notes[name] = text
    changes.changed(f"notes://{name}")
    return "saved"


@tool
def picture() -> Media:
    """An image."""
    return Media("image/png", PNG)


@tool
def report() -> ToolResult:
    """Text, an embedded text resource, an embedded binary resource and a link."""
    return ToolResult(
        "the report",
        (
            EmbeddedResource("text/markdown", b"# Report", uri="reports://1"),
            EmbeddedResource("application/octet-stream", b"\x00\x01\x02", uri="reports://1/raw"),
            Media("application/pdf", "https://example.com/report.pdf"),
        ),
    )


def review(code: str, language: Literal["python", "rust", "go"] = "python") -> str:
    """Review code."""
    return f"Review this {language}: {code}"


def paint(colour: Colour, shade: str) -> str:
    """Paint something."""
    return f"{colour} {shade}"


def note(name: str) -> str:
    """A note by name."""
    return notes.get(name, "")


def shades(value: str, context: dict[str, str]) -> list[str]:
    base = context.get("colour", "grey")
    return [f"{base}-{n}" for n in ("light", "dark") if f"{base}-{n}".startswith(value)]


def broken(value: str, context: dict[str, str]) -> list[str]:
    raise RuntimeError("completion backend down")


def main() -> None:
    transport = sys.argv[1]
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    tools = [
        chatty,
        shout,
        steps,
        flood,
        sync_steps,
        wrong_mode,
        sign_up,
        preferences,
        hostile_form,
        edit_note,
        picture,
        report,
    ]
    resources = {"notes://todo": lambda: notes["todo"], "notes://{name}": note, "docs://{topic}": note}
    completions = {
        "notes://{name}": {"name": lambda value, context: [n for n in notes if n.startswith(value)]},
        "paint": {"shade": shades},
        "docs://{topic}": {"topic": broken},
    }
    serve(
        tools,
        resources,
        [review, paint],
        name="features",
        transport=transport,  # type: ignore[arg-type]
        port=port,
        completions=completions,
        resource_changes=changes,
    )


if __name__ == "__main__":
    main()
