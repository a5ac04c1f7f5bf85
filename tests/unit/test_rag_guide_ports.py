"""The seed ports in docs/guide/rag.md run, in order, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "rag.md"
SECTION = "Web search, enrichers and classification"


def test_seed_ports_run_and_print_what_the_page_shows() -> None:
    page = GUIDE.read_text(encoding="utf-8")
    parts = re.split(r"^## (.+)$", page, flags=re.MULTILINE)
    body = dict(zip(parts[1::2], parts[2::2], strict=True))[SECTION]
    blocks = re.findall(r"^```python\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 3
    namespace: dict[str, object] = {"__name__": "rag_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    shown = "".join(re.findall(r"^```text\n(.*?)^```$", body, flags=re.MULTILINE | re.DOTALL))
    assert out.getvalue() == shown
