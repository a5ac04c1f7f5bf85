"""Import time and the first call of a fresh model (cold) next to a warm one.

    .venv/bin/python benchmarks/first_call.py

Each cold figure comes from a new Python process (so nothing is imported or pooled yet), against the
instant loopback responder (``tests.support.loopback.main``) running in another process:

- ``import chatclient``: the package alone (it must not import a provider, httpx, pydantic or numpy);
- first call: ``from chatclient.models.openai import OpenAIChatModel``, build a model, one ``call()`` —
  imports, client construction, TCP connect and the request together;
- warm call: the median of the next 50 calls of the same model (pooled connection).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = r"""
import json, sys, time
t0 = time.perf_counter()
import chatclient
t_import = time.perf_counter() - t0
heavy = [m for m in ("httpx", "pydantic", "numpy", "jsonschema", "chatclient.models.openai") if m in sys.modules]
t1 = time.perf_counter()
from chatclient.models.openai import OpenAIChatModel
from chatclient.prompt import Prompt
model = OpenAIChatModel("gpt-test", api_key="sk-bench", base_url=sys.argv[1])
model.call(Prompt("Hello"))
t_first = time.perf_counter() - t1
warm = []
for _ in range(50):
    t = time.perf_counter()
    model.call(Prompt("Hello"))
    warm.append(time.perf_counter() - t)
warm.sort()
print(json.dumps({"import": t_import, "heavy": heavy, "first": t_first, "warm": warm[len(warm) // 2]}))
"""


def main() -> None:
    server = subprocess.Popen(
        [sys.executable, "-c", "from tests.support.loopback import main; main()"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    port = server.stdout.readline().strip()
    try:
        runs = []
        for _ in range(7):
            out = subprocess.run(
                [sys.executable, "-c", PROBE, f"http://127.0.0.1:{port}/v1"], cwd=ROOT, capture_output=True, text=True, check=True
            )
            runs.append(json.loads(out.stdout))
        med = {k: statistics.median(r[k] for r in runs) for k in ("import", "first", "warm")}
        print(f"median of {len(runs)} fresh processes")
        print(f"import chatclient         {med['import'] * 1e3:7.1f} ms  (heavy modules imported: {runs[0]['heavy'] or 'none'})")
        print(f"first call (cold model)   {med['first'] * 1e3:7.1f} ms  (provider import + client + connect + call)")
        print(f"warm call                 {med['warm'] * 1e3:7.2f} ms")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
