"""Which jobs are late, and the percentiles of fire lateness (cronwheel.lateness)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from cronwheel.lateness import LATE_GRACE, is_late, late_before, percentiles
from cronwheel.model import HttpTarget, Job

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
JOB = Job(id="j", team="t", name="n", schedule="* * * * *", target=HttpTarget("https://example.com/"))


def test_a_job_is_late_past_the_grace_only_while_active() -> None:
    assert late_before(NOW) == NOW - LATE_GRACE == NOW - timedelta(seconds=60)
    slot = dataclasses.replace(JOB, next_run_at=NOW - timedelta(seconds=61))
    assert is_late(slot, NOW)
    assert not is_late(
        dataclasses.replace(slot, next_run_at=NOW - timedelta(seconds=60)), NOW
    )  # at the grace
    assert not is_late(dataclasses.replace(slot, next_run_at=NOW + timedelta(seconds=1)), NOW)
    assert not is_late(dataclasses.replace(slot, paused=True), NOW)
    assert not is_late(dataclasses.replace(slot, deleted_at=NOW), NOW)
    assert not is_late(dataclasses.replace(slot, next_run_at=None), NOW)  # no slot left
    assert is_late(
        dataclasses.replace(slot, next_run_at=NOW - timedelta(seconds=5)), NOW, timedelta(seconds=1)
    )


def test_a_jittered_job_is_late_only_past_its_whole_window() -> None:
    jittered = dataclasses.replace(JOB, jitter_s=30.0, next_run_at=NOW - timedelta(seconds=85))
    assert not is_late(jittered, NOW)  # its slot may fire up to 30 s after it: 55 s ago at most
    assert is_late(dataclasses.replace(jittered, next_run_at=NOW - timedelta(seconds=91)), NOW)


def test_percentiles_are_nearest_rank_in_milliseconds() -> None:
    values = [1000 * v for v in range(1, 101)]  # 1 ms .. 100 ms
    assert percentiles(values) == {
        "count": 100,
        "p50_ms": 50.0,
        "p90_ms": 90.0,
        "p99_ms": 99.0,
        "max_ms": 100.0,
    }
    assert percentiles([2500, 500]) == {
        "count": 2,
        "p50_ms": 0.5,
        "p90_ms": 2.5,
        "p99_ms": 2.5,
        "max_ms": 2.5,
    }
    assert percentiles([-1000]) == {
        "count": 1,
        "p50_ms": -1.0,
        "p90_ms": -1.0,
        "p99_ms": -1.0,
        "max_ms": -1.0,
    }
    assert percentiles([]) == {"count": 0, "p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
