"""MCP prompts as chatclient messages, with their arguments checked before the request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chatclient.mcp._sdk import types
from chatclient.messages import AssistantMessage, Media, Message, UserMessage

MAX_MEDIA_BYTES = 20_000_000


def check_arguments(prompt: types.Prompt, arguments: Mapping[str, Any]) -> dict[str, str]:
    """The arguments as strings (the protocol's type), after checking them against the prompt's declaration.

    Raises ``ValueError`` naming every missing required argument and every unknown one.
    """
    if not isinstance(arguments, Mapping):
        raise TypeError(f"prompt arguments must be a mapping of names to values, not {type(arguments).__name__}")
    declared = {a.name: a for a in prompt.arguments or ()}
    missing = sorted(n for n, a in declared.items() if a.required and n not in arguments)
    unknown = sorted(set(arguments) - set(declared))
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing required argument(s): {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown argument(s): {', '.join(unknown)}")
        accepted = ", ".join(declared) or "none"
        raise ValueError(f"prompt {prompt.name!r}: {'; '.join(parts)} (it accepts: {accepted})")
    values: dict[str, str] = {}
    for key, value in arguments.items():
        if value is None:
            continue
        values[key] = value if isinstance(value, str) else str(value)
    return values


def _text_of(content: Any) -> str | None:
    if isinstance(content, types.TextContent):
        return content.text
    if isinstance(content, types.EmbeddedResource) and isinstance(content.resource, types.TextResourceContents):
        return content.resource.text
    if isinstance(content, types.ResourceLink):
        return f"[resource: {content.uri}]"
    return None


def to_messages(result: types.GetPromptResult) -> list[Message]:
    """``user`` messages become ``UserMessage`` (images and audio as ``Media``), ``assistant`` ones ``AssistantMessage``."""
    from chatclient.mcp._blobs import decode_blob

    messages: list[Message] = []
    for item in result.messages:
        content = item.content
        text = _text_of(content)
        if item.role == "assistant":
            messages.append(AssistantMessage(text if text is not None else f"[{content.type} content]"))
        elif isinstance(content, (types.ImageContent, types.AudioContent)):
            media = Media(content.mime_type, decode_blob(content.data, MAX_MEDIA_BYTES))
            messages.append(UserMessage("", (media,)))
        else:
            messages.append(UserMessage(text if text is not None else f"[{content.type} content]"))
    return messages


__all__ = ["check_arguments", "to_messages"]
