"""examples/quickstart.py runs offline on the embedded default model and shows what the README promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SERVED = ("OPENAI_API_KEY", "CHATCLIENT_BASE_URL", "OPENAI_BASE_URL", "CHATCLIENT_MODEL", "LOG_LEVEL")


def run(script: str, cwd: Path | None = None, **env_vars: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {k: v for k, v in os.environ.items() if k not in SERVED} | env_vars
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    return done, time.perf_counter() - start


def test_quickstart_runs_offline_on_the_local_model(smollm2_path: str, tmp_path: Path) -> None:
    done, seconds = run("quickstart.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("model: SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp in-process; chat template")
    # two turns, the second remembers the first (memory advisor)
    assert lines[1] == "> Remember this: my name is Ana." and lines[3] == "> What is my name?"
    assert "Ana" in lines[4]
    assert "entity: Person(name='Maria Silva', age=31, city='Lisbon')" in lines
    assert 'tool: get_weather({ "city": "Oslo" }) -> {"city":"Oslo","conditions":"light snow","temperature_c":2}' in lines
    answer = next(line for line in lines if line.startswith("answer: "))
    # The answer draws on the tool's result. Greedy decoding still differs between CPUs (llama.cpp's SIMD
    # paths round differently): on one machine the model mentions the snow, on another only the 2 °C.
    assert "Oslo" in answer and ("snow" in answer or re.search(r"\b2\s*(°|degrees)", answer)), answer
    # the logger stays quiet by default: nothing on stdout beyond the example's lines, nothing on stderr
    assert len(lines) == 8, lines
    assert "chat_client" not in done.stderr
    assert seconds < 60, f"quickstart took {seconds:.1f} s (the README promises under a minute)"
    # it writes nothing into the working directory (no logs/, no database, no cache)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_quickstart_summary_logs_go_to_stderr_when_asked(smollm2_path: str) -> None:
    done, _ = run("quickstart.py", LOG_LEVEL="INFO")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "chat_client" in done.stderr  # SimpleLoggerAdvisor's one-line summaries
    assert "chat_client" not in done.stdout


def test_an_example_runs_on_the_embedded_model_when_asked(smollm2_path: str) -> None:
    done, _ = run("fluent_call.py", CHATCLIENT_MODEL="local")
    assert done.returncode == 0, done.stderr[-3000:]
    first = done.stdout.splitlines()[0]
    assert first.startswith("model: SmolLM2-135M-Instruct.Q4_1.gguf (llama.cpp in-process;")
    assert "CHATCLIENT_MODEL=local" in first
    assert "(offline, from chatclient.testing" not in done.stdout
