"""Failpoints crash the process (or raise) on the chosen pass, and only when armed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from cronwheel import failpoints

PROGRAM = """
import sys
from cronwheel import failpoints
for index in range(1, 6):
    print(index, flush=True)
    failpoints.hit("scheduler.after_commit")
print("survived", flush=True)
"""


def _run(spec: str | None) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key != "CRONWHEEL_FAILPOINTS"}
    if spec is not None:
        env["CRONWHEEL_FAILPOINTS"] = spec
    return subprocess.run(
        [sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_an_armed_failpoint_kills_the_process_on_the_nth_pass() -> None:
    result = _run("scheduler.after_commit=kill@3")
    assert result.returncode == -signal.SIGKILL
    assert result.stdout.split() == ["1", "2", "3"]


def test_unarmed_or_other_failpoints_do_nothing() -> None:
    for spec in (None, "", "scheduler.after_publish=kill@1"):
        result = _run(spec)
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[-1] == "survived"


def test_a_raising_failpoint_raises_on_the_nth_pass_and_armed_disarms_after() -> None:
    with failpoints.armed("store.before_cancel_flags=raise@2"):
        failpoints.hit("store.before_cancel_flags")
        failpoints.hit("store.before_skipped_runs")  # another place: not armed
        with pytest.raises(failpoints.FailpointError, match=r"store\.before_cancel_flags"):
            failpoints.hit("store.before_cancel_flags")
        failpoints.hit("store.before_cancel_flags")  # the third pass: only the second fails
    failpoints.hit("store.before_cancel_flags")  # disarmed
    assert failpoints.FailpointError("x").retryable  # as the lost connection it stands for


@pytest.mark.parametrize("spec", ["x=kill", "x=kill@0", "x=stop@1", "x=kill@-1", "x", "x=raise"])
def test_malformed_specs_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="expected name=kill@N"):
        failpoints.arm(spec)
    failpoints.arm("")
