"""No circle of imports among the agents and decisions modules — type-only imports (under
``TYPE_CHECKING``) and imports inside functions included, since each is a dependency all the same."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "chatclient"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (base + ("." + node.module if node.module else "")) if node.level else (node.module or "")
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {m for m in found if m in known and m != name}


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, if the graph has one."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


@pytest.mark.parametrize("package", ["chatclient.agents", "chatclient.decisions"])
def test_no_import_circle_through_the_package(package: str) -> None:
    files = list(PACKAGE_ROOT.rglob("*.py"))
    known = {_module_name(p) for p in files}
    graph = {_module_name(p): _imports(p, known) for p in files}
    # Package faces (__init__) re-export their modules; a module importing its own package face is
    # a circle too, so they stay in the graph.
    circles = []
    for module in sorted(m for m in graph if m == package or m.startswith(package + ".")):
        if module == package:
            continue  # the face imports every module; modules must not import it back (found below)
        cycle = _cycle_through(module, graph)
        if cycle is not None:
            circles.append(" -> ".join(cycle))
    assert not circles, "import circles:\n" + "\n".join(circles)
