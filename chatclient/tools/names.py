"""The rule for tool names, in one place: every provider API accepts 1-64 letters, digits, ``_`` and ``-``."""

from __future__ import annotations

import re
from typing import Any

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_tool_name(name: Any) -> str:
    """``name`` if it is a valid tool name; ``ValueError`` saying the rule otherwise."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid tool name {name!r}: use 1-64 letters, digits, '_' or '-'")
    return name


__all__ = ["check_tool_name"]
