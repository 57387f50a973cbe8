"""The benchmark smoke profile (``scripts/bench --smoke``): each workload at tiny sizes, a test
each, so that a benchmark that no longer runs fails the suite. No timing assertions: figures of
such sizes, taken beside the rest of the suite, mean nothing (docs/performance.md has the real
ones). Each writes its printed report and its JSON, which must hold a result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from suite_backends import REDIS_URL

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "scripts" / "bench"
WORKLOADS = subprocess.run(
    [BENCH, "--smoke", "--list"], check=True, capture_output=True, text=True
).stdout.split()
TIMEOUT_S = 600

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("workload", WORKLOADS)
def test_the_benchmark_runs_at_smoke_size(workload: str, tmp_path: Path) -> None:
    env = {**os.environ, "CRONWHEEL_BENCH_REDIS": os.environ.get("CRONWHEEL_BENCH_REDIS", REDIS_URL)}
    command = [str(BENCH), "--smoke", "--only", workload, "--out", str(tmp_path)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True
    ) as bench:
        try:
            printed, _ = bench.communicate(timeout=TIMEOUT_S)
        finally:
            if bench.poll() is None:  # timed out: the workload's servers too
                os.killpg(bench.pid, signal.SIGKILL)
                bench.wait()
    assert bench.returncode == 0, printed[-8000:]
    assert f"== {workload}: " in printed, printed[:2000]
    assert json.loads((tmp_path / f"{workload}.json").read_text()), printed[-8000:]
    assert (tmp_path / f"{workload}.txt").read_text().strip(), printed[-8000:]


def test_the_smoke_profile_lists_each_workload_once() -> None:
    assert len(WORKLOADS) == len(set(WORKLOADS)) >= 10
    refused = subprocess.run(
        [BENCH, "--smoke", "--only", "no-such-workload"], capture_output=True, text=True, check=False
    )
    assert refused.returncode == 2
    assert "no smoke workload named no-such-workload" in refused.stderr
