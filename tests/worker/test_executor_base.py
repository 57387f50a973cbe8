"""AttemptContext and the shared text helpers of the executors."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import pytest

from cronwheel.model import AttemptResult, HttpTarget, Job, Outcome, Run, RunKind, RunState
from cronwheel.worker.executors.base import AttemptContext, head_text, rfc3339, storable, tail_text

SLOT = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def job() -> Job:
    return Job(
        id="job-1",
        team="ops",
        name="ping",
        schedule="* * * * *",
        target=HttpTarget(url="https://example.com/"),
        payload={"from": "job"},
        timeout_s=30.0,
    )


def test_for_run_uses_the_jobs_payload() -> None:
    run = Run(id="run-1", job_id="job-1", kind=RunKind.SCHEDULED, slot=SLOT, state=RunState.RUNNING)
    ctx = AttemptContext.for_run(job(), run, attempt=2)
    assert ctx == AttemptContext(
        execution_id="run-1",
        job_id="job-1",
        job_name="ping",
        team="ops",
        scheduled_at=SLOT,
        attempt=2,
        timeout_s=30.0,
        payload={"from": "job"},
    )


def test_for_run_manual_payload_overrides() -> None:
    run = Run(
        id="run-2",
        job_id="job-1",
        kind=RunKind.MANUAL,
        slot=SLOT,
        state=RunState.RUNNING,
        payload=None,
        has_payload=True,  # an explicit null
    )
    assert AttemptContext.for_run(job(), run, attempt=1).payload is None


def test_budget() -> None:
    run = Run(id="r", job_id="job-1", kind=RunKind.SCHEDULED, slot=SLOT, state=RunState.RUNNING)
    ctx = AttemptContext.for_run(job(), run, 1, deadline=SLOT + timedelta(seconds=10))
    assert ctx.budget_s(SLOT) == 10.0  # the deadline is nearer than the 30 s timeout
    assert ctx.budget_s(SLOT - timedelta(seconds=60)) == 30.0
    assert ctx.budget_s(SLOT + timedelta(seconds=11)) == 0.0


def test_rfc3339() -> None:
    assert rfc3339(SLOT) == "2025-06-01T12:00:00Z"
    assert rfc3339(datetime(2025, 6, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))) == (
        "2025-06-01T12:00:00.000005Z"
    )
    with pytest.raises(ValueError, match="aware"):
        rfc3339(datetime(2025, 6, 1))  # noqa: DTZ001


@pytest.mark.parametrize(
    ("data", "limit", "head", "tail"),
    [
        (b"hello", 10, "hello", "hello"),
        (b"hello", 3, "hel", "llo"),
        ("né!".encode(), 2, "n", "!"),  # 6e c3 a9 21: the cut "é" is dropped either way
        ("né!".encode(), 3, "né", "é!"),
        (b"\xff\xfeok", 10, "\ufffd\ufffdok", "\ufffd\ufffdok"),  # invalid bytes are replaced
        (b"abc", 0, "", ""),
    ],
)
def test_head_and_tail_text(data: bytes, limit: int, head: str, tail: str) -> None:
    assert head_text(data, limit) == head
    assert tail_text(data, limit) == tail


def test_storable_texts() -> None:
    """PostgreSQL refuses NUL in text (the attempt could not be recorded at all); a lone surrogate
    has no UTF-8 bytes."""
    clean = AttemptResult(Outcome.FAILURE, exit_code=1, error="exited with status 1", output="café\n")
    assert storable(clean) is clean
    dirty = AttemptResult(Outcome.FAILURE, error="ValueError: a\0b", output="\0x\ud800y", retry_after_s=3.0)
    assert storable(dirty) == AttemptResult(
        Outcome.FAILURE, error="ValueError: a\ufffdb", output="\ufffdx?y", retry_after_s=3.0
    )
    assert storable(AttemptResult(Outcome.SUCCESS)) == AttemptResult(Outcome.SUCCESS)


def test_budget_of_a_timeout_that_is_not_a_number() -> None:
    ctx = AttemptContext.for_run(
        job(), Run(id="r", job_id="job-1", kind=RunKind.MANUAL, slot=SLOT, state=RunState.RUNNING), 1
    )
    assert replace(ctx, timeout_s=float("nan")).budget_s(SLOT) == 0.0
    assert replace(ctx, timeout_s=-1.0).budget_s(SLOT) == 0.0
