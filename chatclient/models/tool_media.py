"""The portable way to give a model the media a tool returned: a user message after the tool messages.

Chat Completions and Ollama take only text in a tool message, so a tool's media (``ToolResult``)
follow the turn's tool messages in one user message that says which tool they came from.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatclient.messages import ToolResponse

__all__ = ["media_note", "tool_text"]


def tool_text(r: ToolResponse) -> str:
    """A tool message's text: the result text, or a pointer to the media when there is none."""
    if r.response_data or not r.media:
        return r.response_data
    return f"[{len(r.media)} attachment(s) follow in the next message]"


def media_note(responses: Sequence[ToolResponse]) -> str:
    """The text of the user message that carries the tools' media."""
    names = ", ".join(f"{r.name} (call {r.id})" for r in responses if r.media)
    return f"Media returned by the tool call(s) {names}:"
