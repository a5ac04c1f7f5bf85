"""examples/chat_ui needs the ``ui`` extra, says so when it is missing, and its scripted demo is short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "examples" / "chat_ui" / "app.py"

# Runs the page as a user would, in an interpreter where Starlette and Uvicorn cannot be imported
# (a [local] install without the ui extra).
WITHOUT_UI = f"""
import runpy, sys
class NoUi:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("starlette", "uvicorn"):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, NoUi())
sys.argv = [{str(APP)!r}, "--scripted"]
runpy.run_path({str(APP)!r}, run_name="__main__")
"""


def test_without_the_ui_extra_the_page_names_the_extra() -> None:
    result = subprocess.run([sys.executable, "-c", WITHOUT_UI], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "pip install 'chatclient[ui]'" in last and "Starlette and Uvicorn" in last
    assert "No module named 'starlette" in last


def test_the_ui_extra_is_declared() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {r.split(">")[0] for r in extras["ui"]} == {"starlette", "uvicorn"}


def test_the_scripted_demo_is_short_and_says_it_is_scripted() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("chat_ui_app_under_test", APP)
    assert spec is not None and spec.loader is not None
    app = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = app  # its dataclasses look their module up
    try:
        spec.loader.exec_module(app)
    finally:
        del sys.modules[spec.name]
    text = app.SlowScriptedModel()._words()
    answer = "".join(text).strip()
    assert answer.startswith("The library is open from 9:00 to 19:00")
    assert answer.endswith("(Scripted demo answer: run the page without --scripted to hear the embedded model.)")
    assert len(answer.split()) == 31  # 18 words of answer + 13 of the note: about 1.5 s at 0.05 s a word
    assert len(list(app.SlowScriptedModel(words=600)._words())) == 631  # --filler-words for a long stream
