"""The seed ports in docs/guide/tools.md run, in order, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "tools.md"
SECTIONS = ("When a tool fails", "Tools chosen per request")


def _section(page: str, title: str) -> str:
    parts = re.split(r"^## (.+)$", page, flags=re.MULTILINE)
    bodies = dict(zip(parts[1::2], parts[2::2], strict=True))
    return bodies[title]


def test_seed_ports_run_and_print_what_the_page_shows() -> None:
    page = GUIDE.read_text(encoding="utf-8")
    for title in SECTIONS:
        body = _section(page, title)
        blocks = re.findall(r"^```python\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL)
        assert blocks, title
        namespace: dict[str, object] = {"__name__": "tools_guide"}
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for block in blocks:
                exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
        shown = "".join(re.findall(r"^```text\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL))
        assert out.getvalue() == shown, title
