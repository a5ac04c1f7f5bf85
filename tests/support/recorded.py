"""A recorded provider answer (a file under tests/data/providers/) as a loopback reply."""

from __future__ import annotations

import random
from pathlib import Path

from tests.support.loopback import Reply

__all__ = ["recorded_file"]


def recorded_file(path: Path, *, seed: str, whole: bool = False) -> Reply:
    """``path`` as an HTTP answer, cut into random 1..23 byte chunks drawn from ``seed`` unless ``whole``.

    A ``.sse`` file is sent as an event stream; a file named ``error_<status>...`` with that status.
    """
    rng = random.Random(seed)
    sizes = () if whole else tuple(rng.randint(1, 23) for _ in range(64))
    body = path.read_bytes()
    if path.name.endswith(".sse"):
        return Reply(200, body=body, headers={"content-type": "text/event-stream"}, split=sizes)
    status = int(path.name.split("_")[1].split(".")[0]) if path.name.startswith("error_") else 200
    return Reply(status, body=body, split=sizes)
