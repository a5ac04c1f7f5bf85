"""mkdocs hook: show interactive examples (``>>>`` lines) in docstrings as Python console code.

Docstrings in chatclient carry doctest-style examples without a fence. Left alone, Markdown would
read their output lines (``['b', 'c']``) as reference links and the strict build would fail on
"links" that were never meant as links. This preprocessor wraps each run of ``>>>``/``...`` lines
and their output in a ``pycon`` fence before anything else parses it, in pages and in docstrings
rendered by mkdocstrings alike (they share the configured Markdown extensions).
"""

from __future__ import annotations

from typing import Any

from markdown import Extension, Markdown
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority

FENCES = ("```", "~~~")


class DoctestFencer(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        in_fence = False
        block: list[str] = []
        indent = ""

        def flush() -> None:
            if block:
                out.extend([f"{indent}```pycon", *block, f"{indent}```"])
                block.clear()

        for line in lines:
            stripped = line.lstrip()
            if block:
                if stripped and line.startswith(indent) and not stripped.startswith(FENCES):
                    block.append(line)
                    continue
                flush()
            if stripped.startswith(FENCES):
                in_fence = not in_fence
                out.append(line)
            elif not in_fence and stripped.startswith(">>>"):
                indent = line[: len(line) - len(stripped)]
                block.append(line)
            else:
                out.append(line)
        flush()
        return out


class DoctestExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:
        # Priority above the fenced-code preprocessor (25), so the new fences are then parsed normally.
        md.preprocessors.register(DoctestFencer(md), "chatclient_doctest_fencer", 40)


@event_priority(100)  # before mkdocstrings reads the extension list
def on_config(config: Any) -> Any:
    config.markdown_extensions.append(DoctestExtension())
    return config
