"""The snippets of docs/guide/guardrails.md run, in order, and print what the page says they print."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "guardrails.md"


def test_guide_snippets_run_and_print_what_the_page_shows() -> None:
    page = GUIDE.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert len(blocks) >= 8
    namespace: dict[str, object] = {"__name__": "guardrails_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    lines = out.getvalue().splitlines()
    assert lines == [
        "Looking into it.",
        "What is the status of ticket 4411?",
        "KeywordGuardrail | the request contains blocked content (keyword 'salary')",
        "KeywordGuardrail | no credentials (keyword 'password')",
        "The capital of France is Paris. 2",
        "['Capital of France?', 'Paris, probably', 'Answer in one complete sentence.']",
        "['The capital ', 'is Paris.']",
        "I am [EMAIL], card [CARD]",
        "possible prompt injection (instruction_override, prompt_leak)",
        "name='Lisbon' population=545000",
        "the text was flagged by moderation (violence)",
        "one two",
    ]
    # Every printed line is quoted on the page (in a text block or in the prose around a snippet).
    for line in lines:
        assert line in page, line
