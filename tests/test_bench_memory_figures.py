"""The benchmarks' per-process memory figures are each process' own.

``ru_maxrss`` on Linux starts at the parent's RSS at the fork and survives exec, so a worker
started by a scheduler process that had seeded many jobs would appear to grow with the number of
jobs (the parent's heap) while the worker itself stays near 140 MB. A child started by a parent
that holds a large ballast must report its own peak, not the parent's.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
BALLAST_MB = 400

REPORT = f"""
import json, resource, sys
sys.path.insert(0, {str(BENCHMARKS)!r})
import bench_fire
print(json.dumps({{"usage": bench_fire.worker_usage(),
                   "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and the fork's ru_maxrss are Linux's")
def test_a_worker_reports_its_own_peak_not_its_parents() -> None:
    ballast = bytearray(BALLAST_MB * 2**20)
    for offset in range(0, len(ballast), 4096):  # touch every page: resident, not just reserved
        ballast[offset] = 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 > BALLAST_MB
    done = subprocess.run(
        [sys.executable, "-c", REPORT], capture_output=True, text=True, check=True, timeout=60
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["ru_maxrss_mb"] > BALLAST_MB  # the trap this guards against is there
    assert found["usage"]["peak_rss_mb"] < BALLAST_MB / 2  # the figure reported is the child's own
    del ballast
