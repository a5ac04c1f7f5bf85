"""The documentation builds in strict mode: no broken link, missing anchor or unresolvable reference.

The API reference pages are generated from the docstrings, so this also fails when a documented
module, class or cross-reference disappears from the code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="the docs tools are not installed (mkdocs, mkdocs-material, mkdocstrings[python])")
pytest.importorskip("material", reason="mkdocs-material is not installed")
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is not installed")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    output = result.stdout + result.stderr
    warnings = [line for line in output.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0 and not warnings, output[-4000:]
    # The build produced the guide and the generated reference, not just an empty shell.
    assert (tmp_path / "getting-started" / "index.html").is_file()
    reference = (tmp_path / "reference" / "chatclient" / "index.html").read_text(encoding="utf-8")
    assert 'id="chatclient.ChatClient"' in reference
