"""examples/quickstart.py runs offline on the embedded model and prints what the README promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


def test_quickstart_runs_offline_on_the_local_model(gguf_path: str) -> None:
    # gguf_path: skips when the local extra is absent, and assembles the model before the clock starts
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "CHATCLIENT_BASE_URL", "OPENAI_BASE_URL")}
    done = subprocess.run(
        [sys.executable, str(QUICKSTART)], env=env, capture_output=True, text=True, timeout=280, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "entity: Person(name='Maria Silva', age=31, city='Lisbon')" in lines
    assert "tool round trip: Weather(city='Oslo', conditions='light snow', temperature_c=2)" in lines
