"""Turning a tool's return value into the text sent back to the model."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

DONE = "Done"
"""What a tool that returns ``None`` reports to the model."""


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """One tool call the tool loop ran: what the model asked for and what it got back.

    ``result`` is the text sent to the model (for a failure, the error text); ``duration`` is the
    wall-clock time of the call in seconds (for a timed-out call, the time waited). Read them from
    ``spec.call().chat_client_response().tool_executions``.
    """

    id: str
    name: str
    arguments: str
    result: str
    is_error: bool
    duration: float


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
