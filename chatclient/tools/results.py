"""Turning a tool's return value into the text (and media) sent back to the model."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from chatclient.errors import ToolExecutionError
from chatclient.messages import Media

DONE = "Done"
"""What a tool that returns ``None`` reports to the model."""

MAX_TOOL_RESULT_MEDIA_BYTES = 10 * 1024 * 1024
"""The most inline media bytes one tool result may carry (all its media together), unless the
``ToolCallingManager`` is given another ``max_media_bytes``: providers reject larger requests."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer with media: ``text`` for the model plus images, audio or documents.

    Return it (or a bare ``Media``) from a tool; the media reach the model the way its provider
    takes them (Anthropic ``tool_result`` blocks, Responses ``function_call_output`` parts, a
    following user message for Chat Completions and Ollama).

    >>> ToolResult("the chart", media=Media("image/png", b"...")).media[0].mime_type
    'image/png'
    """

    text: str = ""
    media: tuple[Media, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError(f"ToolResult text must be a str, not {type(self.text).__name__}")
        media: Iterable[Any] = (self.media,) if isinstance(self.media, Media) else self.media
        items = tuple(media)
        for m in items:
            if not isinstance(m, Media):
                raise TypeError(f"ToolResult media must be Media objects, not {type(m).__name__}")
        object.__setattr__(self, "media", items)


def check_media_size(name: str, media: tuple[Media, ...], limit: int = MAX_TOOL_RESULT_MEDIA_BYTES) -> None:
    """Raise ``ToolMediaTooLargeError`` naming tool ``name`` when its inline media pass ``limit`` bytes."""
    total = sum(m.size for m in media)
    if total > limit:
        sizes = ", ".join(f"{m.mime_type} {m.size} bytes" for m in media if m.size)
        raise ToolMediaTooLargeError(
            f"tool {name!r} returned {total} bytes of media ({sizes}), more than the cap of {limit} bytes; "
            "return smaller media (downscale the image, split the document), a URL (Media.from_url), or raise "
            "ToolCallingManager(max_media_bytes=...)",
            name,
        )


class ToolMediaTooLargeError(ToolExecutionError):
    """A tool returned more media bytes than the cap allows (the message names the tool and the sizes)."""


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One tool call the tool loop ran: what the model asked for and what it got back.

    ``result`` is the text sent to the model (for a failure, the error text); ``duration`` is the
    wall-clock time of the call in seconds (for a timed-out call, the time waited). Read them from
    ``spec.call().chat_client_response().tool_executions``. ``compensated`` is true for a call that
    succeeded and was undone because another call of its turn failed.
    """

    id: str
    name: str
    arguments: str
    result: str
    is_error: bool
    duration: float
    compensated: bool = False


@runtime_checkable
class ToolResultConverter(Protocol):
    """Converts a tool's return value to text; raise ``TypeError`` for values it cannot convert."""

    def __call__(self, result: Any) -> str: ...


def default_result_converter(result: Any) -> str:
    """``str`` as is; ``None`` as ``"Done"``; models, dataclasses, dicts, lists, numbers as JSON.

    Anything pydantic cannot serialise raises ``TypeError`` (the callback adds the tool's name).
    """
    if result is None:
        return DONE
    if isinstance(result, str):
        return result
    if isinstance(result, enum.Enum) and isinstance(result.value, str):
        return result.value
    from pydantic import BaseModel
    from pydantic_core import PydanticSerializationError, to_json

    if isinstance(result, BaseModel):
        return result.model_dump_json()
    if isinstance(result, type) or (callable(result) and not dataclasses.is_dataclass(result)):
        # Functions and classes would be "serialised" by pydantic as their repr: a bug, not a result.
        raise TypeError(f"cannot convert a {type(result).__name__} to JSON")
    try:
        return to_json(result).decode()
    except PydanticSerializationError as exc:
        raise TypeError(f"cannot convert a {type(result).__name__} to JSON: {exc}") from exc
