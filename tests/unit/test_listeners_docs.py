"""The snippets of docs/guide/listeners.md run, in order, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "listeners.md"


def test_guide_snippets_run_and_print_what_the_page_shows() -> None:
    page = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```$", page, flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 4
    namespace: dict[str, object] = {"__name__": "listeners_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    shown = "".join(re.findall(r"^```text\n(.*?)^```$", page, flags=re.MULTILINE | re.DOTALL))
    assert out.getvalue() == shown
