"""The official ``a2a-sdk``, imported on first use (extra ``a2a``), and what both ends share."""

from __future__ import annotations

from typing import Any

EXTRA_HINT = "chatclient.a2a needs the A2A SDK and uvicorn: pip install 'chatclient[a2a]'"


def sdk() -> Any:
    """The ``a2a`` package, or an ImportError naming the extra to install."""
    try:
        import a2a
        import a2a.client
        import a2a.helpers
        import a2a.types
    except ImportError as exc:
        raise ImportError(EXTRA_HINT) from exc
    return a2a


def json_format() -> Any:
    """protobuf's JSON mapping (the SDK's types are protobuf messages)."""
    from google.protobuf import json_format as module  # type: ignore[import-untyped, unused-ignore]

    return module


def clip(text: str, limit: int = 500) -> str:
    """``text`` cut to ``limit`` characters for an error message (remote text is not trusted to be short)."""
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit:,} more characters)"


def output_text(output: Any) -> str:
    """An agent's output as the text of an A2A answer: strings as they are, anything else as JSON."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    import pydantic_core

    return pydantic_core.to_json(output, fallback=str).decode()
