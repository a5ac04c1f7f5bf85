"""Module-level ``__getattr__`` for packages whose public names load on first access."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, where: Mapping[str, str], namespace: dict[str, Any]) -> Callable[[str], Any]:
    """A ``__getattr__`` that imports ``where[name]`` on first access and caches the value in ``namespace``.

    Keeps optional dependencies (drivers, numpy, pydantic) out of a package's import.
    """

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
