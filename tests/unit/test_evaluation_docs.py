"""The snippets of docs/guide/evaluation.md run, in order, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "evaluation.md"


def test_guide_snippets_run_and_print_what_the_page_shows() -> None:
    page = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "evaluation_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    lines = out.getvalue().splitlines()
    assert lines == [
        "True 0.9 It answers which advisor runs first, as the context says.",
        "False Only claim what the documents say.",
        "True",
        "answer_correctness: the judge model did not return a valid verdict after 3 attempt(s)",
        "the answer matches /\\b\\d{4}\\b/ (at '1815')",
        "0.6666666666666666",
        "0.6666666666666666 2 3",
        "['water'] ['spider']",
        "vs v1: pass rate +0%, mean score +0.00; 1 better, 1 worse, 1 unchanged",
    ]
    for line in lines:  # every printed line is quoted on the page
        assert f"`{line}`" in page, line
