"""A one-minute soak (issue 40.5): 256 concurrent calls and streams against a server that injects
resets, slow bodies, 429/503 and mid-stream disconnects, a tenth of the streams cancelled by the
caller. Nothing lost, duplicated or untyped; memory, descriptors and sockets stay bounded.

The bounds on growth are generous on purpose (a leak of one object per request would pass many
MiB in a minute; noise does not): this checks behaviour over time, not speed.
``benchmarks/soak.py`` is the ten-minute version with the slopes printed.
"""

from __future__ import annotations

import pytest

from tests.support.soak import FAILING, run_soak

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CONCURRENCY = 256


def test_one_minute_of_faults_loses_nothing_and_leaks_nothing() -> None:
    report = run_soak(60, concurrency=CONCURRENCY, warmup=15)
    print(report.summary())
    assert report.requests > CONCURRENCY  # every worker got through requests, not just one
    assert report.untyped == []  # every failure is a ChatClientError
    assert report.wrong == []  # each success has its own request's text; each fault case failed
    assert report.lost == 0 and report.duplicated == []  # exactly one outcome per request
    kinds = {key.split(":")[0] for key in report.outcomes}
    for case in FAILING:
        assert f"call {case}" in kinds and f"stream {case}" in kinds, f"no {case} outcome: {sorted(kinds)}"
    assert report.outcomes["stream cancelled"] > 0
    rss_growth, fd_growth = report.growth()
    assert rss_growth < 48, report.summary()
    assert fd_growth < 64, report.summary()
    # the pool: one socket per request in flight at most, plus a few idle ones
    assert report.max_sockets <= CONCURRENCY + 64, report.summary()
