"""``python -m chatclient eval`` stopped with Ctrl-C: one line, exit status 130, no traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_in_the_eval_cli_is_one_line_and_status_130(tmp_path: Path) -> None:
    data = tmp_path / "cases.jsonl"
    cases = [{"id": f"c{i}", "input": text, "expected": text.upper()} for i, text in enumerate(["a", "b", "slow", "d"])]
    data.write_text("".join(json.dumps(c) + "\n" for c in cases))
    calls = tmp_path / "calls.txt"
    env = {**os.environ, "EVAL_CALLS": str(calls), "EVAL_HANG": "1", "PYTHONPATH": str(ROOT)}
    command = ["eval", str(data), "--client", "tests.support.eval_slow_client:make", "--concurrency", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "chatclient", *command, "--out", str(tmp_path / "out")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (calls.exists() and "slow" in calls.read_text().split()):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    (said,) = [line for line in err.splitlines() if "interrupted" in line]
    assert said.startswith("eval interrupted after 2 of 4 cases (2 passed); nothing was written")
    assert "run the same command again" in said
    assert not (tmp_path / "out").exists() and "wrote" not in out
