"""Builders shared by the store tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.model import (
    AttemptResult,
    FireResult,
    Firing,
    HttpTarget,
    Job,
    Outcome,
    Run,
    RunKind,
    RunState,
    new_id,
)
from cronwheel.store.port import Store

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
LEASE = timedelta(seconds=30)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SUCCESS = AttemptResult(Outcome.SUCCESS, status_code=200, output="ok")
FAILURE = AttemptResult(Outcome.FAILURE, status_code=500, error="HTTP 500", output="boom", retry_after_s=7.5)


def at(minutes: float) -> datetime:
    return START + timedelta(minutes=minutes)


def make_job(name: str = "backup", **fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": new_id(),
        "team": "ops",
        "name": name,
        "schedule": "* * * * *",
        "target": HttpTarget("https://example.com/hook"),
        "created_at": START,
        "updated_at": START,
        "next_run_at": START,
    }
    values.update(fields)
    return Job(**values)


def make_run(job: Job, slot: datetime, state: RunState = RunState.PENDING, **fields: Any) -> Run:
    values: dict[str, Any] = {
        "id": new_id(),
        "job_id": job.id,
        "kind": RunKind.SCHEDULED,
        "slot": slot,
        "state": state,
        "queue": job.queue,
        "job_version": job.version,
    }
    values.update(fields)
    return Run(**values)


def firing_of(job: Job, *runs: Run, following: datetime | None = None, **fields: Any) -> Firing:
    """The firing that records ``runs`` and moves ``job``'s cursor one minute on (by default)."""
    cursor = job.next_run_at
    values: dict[str, Any] = {
        "job_id": job.id,
        "expected_version": job.version,
        "expected_next_run_at": cursor,
        "next_run_at": following or (None if cursor is None else cursor + MINUTE),
        "runs": runs,
    }
    values.update(fields)
    return Firing(**values)


async def fire_one(store: Store, job: Job, state: RunState = RunState.PENDING, **fields: Any) -> Run:
    """Record one run at ``job``'s cursor (and move the cursor on); returns the stored run."""
    assert job.next_run_at is not None
    run = make_run(job, job.next_run_at, state, **fields)
    result: FireResult = await store.fire([firing_of(job, run)], START)
    stored = result.accepted + result.skipped
    assert [r.id for r in stored] == [run.id]
    return stored[0]


async def new_job(store: Store, name: str = "backup", **fields: Any) -> Job:
    return await store.create_job(make_job(name, **fields))
