"""YAML parsing for files a user did not write (datasets, skill front matter): no aliases, bounded.

``yaml.safe_load`` builds no arbitrary objects, but it still expands aliases: a few hundred bytes of
nested ``&a [*b, *b, ...]`` anchors grow into billions of nodes (the "billion laughs" bomb), far past
any byte-size cap. Real datasets and front matter never need an alias, so :func:`load` refuses them
while composing, before anything is expanded, and caps the number of nodes and the nesting depth.
Every refusal is a :class:`YAMLSafetyError` (a ``ValueError``) that callers map to their own typed error.
PyYAML is imported here, lazily: it is only needed by the features that read YAML.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_NODES", "YAMLSafetyError", "load"]

MAX_YAML_NODES = 1_000_000
"""Scalars, sequences and mappings accepted in one document (a 20 MB dataset holds far fewer)."""

MAX_YAML_DEPTH = 100
"""Nesting levels accepted; PyYAML's composer recurses once per level."""


class YAMLSafetyError(ValueError):
    """The YAML text is invalid, uses an alias, or is too large or too deep to load safely."""


def load(text: str, *, what: str = "YAML", max_nodes: int = MAX_YAML_NODES, max_depth: int = MAX_YAML_DEPTH) -> Any:
    """Parse one YAML document with the safe loader, refusing aliases, too many nodes and deep nesting.

    ``what`` names the source in messages (``"dataset.yaml"``). Raises :class:`YAMLSafetyError` for
    every problem, and ``ImportError`` (naming PyYAML) when PyYAML is not installed.
    """
    try:
        import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints
    except ImportError:
        raise ImportError(f"reading {what} needs PyYAML: pip install pyyaml") from None

    class _BoundedLoader(yaml.SafeLoader):  # type: ignore[misc]  # an untyped base class
        nodes = 0
        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise YAMLSafetyError(
                    f"{what} line {mark.line + 1}: YAML aliases (*name) are not accepted; write the value out in full"
                )
            self.nodes += 1
            if self.nodes > max_nodes:
                raise YAMLSafetyError(f"{what}: more than {max_nodes:,} YAML nodes; split the file")
            self.depth += 1
            try:
                if self.depth > max_depth:
                    raise YAMLSafetyError(f"{what}: YAML nests deeper than {max_depth} levels")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except YAMLSafetyError:
        raise
    except yaml.YAMLError as exc:
        raise YAMLSafetyError(f"{what}: not valid YAML ({str(exc)[:200]})") from None
    except RecursionError:
        raise YAMLSafetyError(f"{what}: YAML nests too deeply") from None
    finally:
        loader.dispose()
