"""Every Python snippet in docs/ names only what the page defines or imports (issue 41, 3b).

A reader copies a snippet and runs it; a name it never defines (``client``, ``model``,
``OpenAIChatModel``) is the first error they meet. The blocks of one page are read in order as one
program, as a reader following the page would run them, and checked by ruff's undefined-name rule
(F821), so a later block may use what an earlier one defined. Guides whose snippets also *run* have
their own tests (tests/unit/test_*_docs.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)


def _ruff() -> str:
    beside = Path(sys.executable).with_name("ruff")
    found = str(beside) if beside.is_file() else shutil.which("ruff")
    if found is None:
        pytest.skip("ruff (in the dev extra) is not installed")
    return found


def _pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if _BLOCK.search(p.read_text(encoding="utf-8")))


def undefined_names(source: str, ruff: str) -> list[str]:
    done = subprocess.run(
        [ruff, "check", "--isolated", "--select", "F821", "--output-format", "json", "--stdin-filename", "page.py", "-"],
        input=source,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise AssertionError(f"ruff failed: {done.stderr[-2000:]}")
    return sorted({f"line {d['location']['row']}: {d['message']}" for d in json.loads(done.stdout or "[]")})


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_snippets_define_every_name_they_use(page: Path) -> None:
    blocks = _BLOCK.findall(page.read_text(encoding="utf-8"))
    assert undefined_names("\n\n".join(blocks), _ruff()) == []


def test_the_check_finds_an_undefined_name() -> None:
    assert undefined_names("client.prompt('hi')\n", _ruff()) == ["line 1: Undefined name `client`"]
