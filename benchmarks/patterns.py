"""User-supplied patterns on RE2 (``chatclient.patterns.LinearPattern``) next to Python's ``re``.

    .venv/bin/python benchmarks/patterns.py

For each pattern: µs per search on an ordinary 2 KB answer (the common case: RE2's fixed cost per
call against ``re``), then ms per search on hostile texts of 20 KB and 1 MB, where ``re`` backtracks
(it is run only on the 20 KB text, with the time it took printed, or on a short prefix when it would
take minutes). Also the seconds of ``import re2`` in a fresh process.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatclient.patterns import IGNORECASE, LinearPattern

ANSWER = ("Advisors run in order; the memory advisor adds history before the model is called. " * 25)[:2000]

# (pattern, hostile text builder, the longest hostile length `re` is given)
CASES = [
    (r"\bord(er)?\b", lambda n: "word " * (n // 5), 20_000),
    (r"(a+)+b", lambda n: "a" * n, 22),
    (r"\s*\d+\s*x", lambda n: " " * (n // 2) + "1" * (n // 2), 5_000),
    (r"(x+x+)+y", lambda n: "x" * n, 18),
]


def best(fn: object, rounds: int = 5, inner: int = 1) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(inner):
            fn()  # type: ignore[operator]
        times.append((time.perf_counter() - started) / inner)
    return min(times)


def main() -> None:
    timer = "import time; t = time.perf_counter(); import re2; print(time.perf_counter() - t)"
    imports = [float(subprocess.run([sys.executable, "-c", timer], check=True, capture_output=True, text=True).stdout) for _ in range(5)]
    print(f"import re2 in a fresh process: {min(imports) * 1000:.1f} ms (best of 5; chatclient imports it on first use)")
    for pattern, hostile, re_cap in CASES:
        fast = LinearPattern(pattern, IGNORECASE)
        slow = re.compile(pattern, re.IGNORECASE)
        ordinary_re2 = best(partial(fast.search, ANSWER), inner=200) * 1e6
        ordinary_re = best(partial(slow.search, ANSWER), inner=200) * 1e6
        line = f"{pattern!r:16} 2 KB answer: RE2 {ordinary_re2:7.1f} µs, re {ordinary_re:7.1f} µs"
        for size in (20_000, 1_000_000):
            text = hostile(size)
            line += f"; {size // 1000:>5} KB hostile: RE2 {best(partial(fast.search, text), rounds=3) * 1000:7.2f} ms"
        capped = hostile(re_cap)
        took = best(partial(slow.search, capped), rounds=1)
        line += f"; re on {len(capped):,} chars: {took * 1000:.1f} ms"
        print(line)


if __name__ == "__main__":
    main()
