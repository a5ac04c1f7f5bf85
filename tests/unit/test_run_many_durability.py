"""run_many in a real child process: a SIGKILL loses no finished item; Ctrl-C says how to resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _start(calls: Path, checkpoint: Path, hang_at: int, hang_seconds: float = 600) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.run_many_child",
            str(calls),
            str(checkpoint),
            str(hang_at),
            str(hang_seconds),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _called(calls: Path) -> list[int]:
    return [int(line) for line in calls.read_text().split()] if calls.exists() else []


def _wait_for_call(calls: Path, item: int, proc: subprocess.Popen[str], limit: float = 60.0) -> None:
    deadline = time.monotonic() + limit
    while item not in _called(calls):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"item {item} was never called: {_called(calls)}"
        time.sleep(0.02)


def test_sigkill_after_four_items_loses_none_of_them(tmp_path: Path) -> None:
    calls, checkpoint = tmp_path / "calls.txt", tmp_path / "run.sqlite"
    first = _start(calls, checkpoint, hang_at=4)
    _wait_for_call(calls, 4, first)  # items 0-3 returned; item 4 is in flight
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert _called(calls) == [0, 1, 2, 3, 4]

    again = _start(calls, checkpoint, hang_at=-1)
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    # the re-run paid only for the items that had not returned: 4 (in flight when killed) .. 7
    assert _called(calls) == [0, 1, 2, 3, 4, 4, 5, 6, 7]
    assert "values: ['answer 0', 'answer 1'" in out


def test_ctrl_c_says_what_was_saved_and_a_resumed_bar_says_how_many_came_from_the_checkpoint(tmp_path: Path) -> None:
    calls, checkpoint = tmp_path / "calls.txt", tmp_path / "run.sqlite"
    first = _start(calls, checkpoint, hang_at=4, hang_seconds=1.0)
    _wait_for_call(calls, 4, first)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    # Python's own end on Ctrl-C (killed by SIGINT: the shell's status 130), without a traceback
    assert first.returncode == -signal.SIGINT, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    (said,) = [line for line in err.splitlines() if "interrupted" in line]
    assert said.startswith(f"run_many interrupted: 4 of 8 items are saved in checkpoint {str(checkpoint)!r}")
    assert "waiting for 1 call(s) in flight, which are saved too" in said and "Run the same call again" in said

    again = _start(calls, checkpoint, hang_at=-1)
    _out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    # item 4, in flight at Ctrl-C, finished and was saved: the re-run calls only 5, 6, 7
    assert _called(calls) == [0, 1, 2, 3, 4, 5, 6, 7]
    lines = err.strip().splitlines()
    assert "5/8" in lines[0] and "5 from checkpoint" in lines[0], err
    assert "8/8" in lines[-1] and "5 from checkpoint" in lines[-1]
