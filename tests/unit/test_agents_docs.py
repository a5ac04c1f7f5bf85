"""The snippets of docs/guide/agents.md run, in order, and print what the guide shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "agents.md"


def run_guide() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) >= 12
    namespace: dict[str, object] = {"__name__": "agents_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    return out.getvalue().splitlines()


def test_guide_snippets_run_and_print_what_they_promise() -> None:
    assert run_guide() == EXPECTED


EXPECTED: list[str] = [
    "Otters hold hands while they sleep so they do not drift apart.",
    "Write about otters.",
    "True",
    "score=0.9 verdict='vivid'",
    "10.8",
    "20.0",
    "Otter learns to swim.",
    "['writer', 'editor']",
    "Good!!!",
    "sunny in Lyon; a jazz night in Lyon",
    "[5, 3]",
    "Ask a lawyer.",
    "Here is a general answer.",
    "Ask a lawyer.",
    "20 EUR is 21.6 USD.",
    "OTTR: 101.5 3",
    "Publish 'Otters are back.'?",
    "Otters are back. [approved]",
    "resumed",
    "20 ['one', 'two', 'two']",
    "AgentStarted sequence",
    "AgentStarted writer",
    "AgentFinished writer",
    "AgentStarted editor",
    "text 'Short'",
    "text ' draft.'",
    "AgentFinished editor",
    "AgentFinished sequence",
    "Who are you?",
    "Welcome, Ada.",
    "A story.",
    "parallel [('weather', 'sunny in Oslo'), ('events', 'a jazz night in Oslo')]",
    "True",
    "writer ['topic']",
    "7",
    "['extract_person', 'extract_sign', 'horoscope', 'find_story', 'write']",
    "black holes evaporate slowly",
    "bronchitis (fever, cough; infection markers up)",
    "Verdict: acceptable, with credit where feasible.",
    "9",
    "AgentExecutionError ['credit Dmytro 100', 'debit Dmytro 100']",
    "2 2",
]
