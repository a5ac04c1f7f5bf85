"""docs/guide/serving.md: its snippets run (the apps served on loopback) and print what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="needs the dev extra (the openai SDK is the guide's client)")
pytest.importorskip("fastapi", reason="needs the dev extra (the guide's FastAPI example)")
pytest.importorskip("uvicorn", reason="needs the serve extra: pip install 'chatclient[serve]'")

from tests.support.serving import running

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "serving.md"


def test_the_guide_snippets_run_and_print_what_the_page_shows() -> None:
    page = PAGE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    shown = "".join(re.findall(r"```text\n(.*?)```", page, flags=re.DOTALL)).splitlines()
    assert len(blocks) >= 4 and shown
    namespace: dict[str, object] = {"__name__": "serving_guide", "running": running}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)  # our own documentation
    assert out.getvalue().splitlines() == shown
