"""Old import paths of the HTTP machinery, which moved into ``chatclient.models.http``.

``import chatclient.models.stdlib_http`` (and the other names below) still works: a finder on
``sys.meta_path`` hands out the module at its new place, the same module object, so code and
patches written against the earlier paths keep working while the folder shows its two parts.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType
from typing import Any

MOVED = {
    f"chatclient.models.{name}": f"chatclient.models.http.{name}"
    for name in ("stdlib_http", "sse", "eventstream", "sigv4", "aiohttp_transport", "_pooled", "response_headers")
}
"""Earlier module path -> where it lives now."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        """The module at its new place is already executed."""


def install() -> None:
    """Put the finder on ``sys.meta_path`` once."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
