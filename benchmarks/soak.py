"""Soak: ten minutes of faults against a loopback server, with memory and descriptor slopes.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--concurrency 256]

256 concurrent workers send calls and streams (half each) through a ``ChatClient`` on
``OpenAIChatModel`` to a ``LoopbackServer`` in a child process that answers by the case in each
prompt: 50 % normal, 10 % slow (a delayed reply, a stream that stalls 150 ms mid-body), 8 % each
429, 503, a reset before any answer and a stream cut by a TCP reset after three events; a tenth of
the streams are cancelled by the caller. Printed: requests, outcomes by case, anything wrong (a
result that does not fit its case, an untyped failure, a lost or duplicated result), and after a
warm-up of a quarter of the run (at most a minute) the RSS and descriptor ranges and slopes per
minute, and the most sockets open at once. CI does not run this; ``tests/integration/test_soak.py``
is the one-minute version. The run is bounded: it stops when the time is up.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.chdir(ROOT)

from tests.support.soak import run_soak  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    report = run_soak(args.minutes * 60, concurrency=args.concurrency)
    print(report.summary())
    for key, count in sorted(report.outcomes.items()):
        print(f"   {key:40} {count:8,}")
    for line in (report.wrong + report.untyped)[:20]:
        print(f"   ! {line}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
