"""Turning a tool's return value into the text sent back to the model."""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Protocol, runtime_checkable

DONE = "Done"
"""What a tool that returns ``None`` reports to the model."""


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
