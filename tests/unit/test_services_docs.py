"""The snippets of docs/guide/services.md run, in order, and print what their comments say."""

import contextlib
import io
import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "services.md"


def test_guide_snippets_run_and_print_what_they_promise():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) >= 6
    namespace: dict[str, object] = {"__name__": "services_guide"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in blocks:
            exec(compile(block, str(GUIDE), "exec"), namespace)  # our own documentation
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["Four.", "You are a teacher. Answer in French.", "number='A-7' total=12.5"]
    assert "A cat on a sofa." in lines and "1" in lines
    assert "['Once ', 'upon ', 'a time.']" in lines
    assert "number='B' total=None" in lines and "number='B-1' total=3.0" in lines
    assert "number='C-2' total=9.0 stop True" in lines
    assert "Yes." in lines
    assert "Your name is Ada." in lines
    assert "['I am Ada.', 'Hi Ada!', 'What is my name?']" in lines
    assert "A-42 has shipped. ['A-42 shipped (customer ada)']" in lines
    assert lines[-1] == "['eiffel']"
