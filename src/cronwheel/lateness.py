"""Lateness, decided once for every reader: which jobs are late, and the percentiles of fire
lateness the cluster page shows.

A job is *late* when it is live, not paused, and its next slot (``next_run_at``, a slot not fired
yet) is more than :data:`LATE_GRACE` in the past (past the end of its jitter window, with one):
the scheduler fires a slot within a second or two of its time, so a minute behind means no
scheduler is firing it (its shard unowned, the leader stuck, the store unreachable). The job list
filters on the same instant (``GET /v1/jobs?late=true``, served by the ``ix_jobs_due_at`` index)
that marks each job (``late`` in a job's answer).

Pure: the caller passes ``now`` (its injected clock's).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

from cronwheel.model import Job

LATE_GRACE = timedelta(seconds=60)
# A run is *late to start* when its first attempt started more than this after it was due (its
# slot, or its jittered fire time): the runs list's ``late`` filter (``GET /v1/runs?late=true``).
# Fixed, not per job: a run starts within well under a second in steady state (guarantee 5).
LATE_START = timedelta(seconds=1)
LATENESS_WINDOW = timedelta(minutes=5)  # the cluster page's fire-lateness percentiles: this long back
LATENESS_SAMPLE = 10_000  # ... from at most this many of the newest runs


def late_before(now: datetime, grace: timedelta = LATE_GRACE) -> datetime:
    """The instant a job's unfired slot must be before for the job to be late."""
    return now - grace


def is_late(job: Job, now: datetime, grace: timedelta = LATE_GRACE) -> bool:
    """Whether ``job`` is late at ``now`` (see the module's docstring)."""
    return (
        job.deleted_at is None
        and not job.paused
        and job.next_run_at is not None
        and job.next_run_at < late_before(now, grace)
        and job.next_run_at + timedelta(seconds=job.jitter_s) < late_before(now, grace)
    )


def percentiles(values_us: Sequence[int]) -> dict[str, float | int | None]:
    """``count``, ``p50_ms``, ``p90_ms``, ``p99_ms`` and ``max_ms`` of ``values_us`` (microseconds;
    nearest rank: each percentile is one of the values). None for each when there are none."""
    ordered = sorted(values_us)
    out: dict[str, float | int | None] = {"count": len(ordered)}
    for name, rank in (("p50_ms", 50), ("p90_ms", 90), ("p99_ms", 99), ("max_ms", 100)):
        out[name] = None if not ordered else _ms(ordered[max(math.ceil(rank / 100 * len(ordered)), 1) - 1])
    return out


def _ms(micros: int) -> float:
    return round(micros / 1000, 3)
