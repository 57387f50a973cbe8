"""Runs, their attempts and their state history as the API gives them, and pages of runs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import (
    Field,
)

from cronwheel.api.schemas.base import OutcomeName, OutModel, RunKindName, RunStateName
from cronwheel.model import (
    Attempt,
    Job,
    Run,
    RunEvent,
)
from cronwheel.telemetry.tracing import trace_id

# -- runs --------------------------------------------------------------------------------------


def _seconds(later: datetime | None, earlier: datetime) -> float | None:
    return None if later is None else (later - earlier).total_seconds()


class RunOut(OutModel):
    """One run (its ``id`` is the execution id every attempt carries)."""

    id: str
    job_id: str
    job_team: str | None = Field(description="The job's team; null when the job was deleted.")
    job_name: str | None = Field(description="The job's name; null when the job was deleted.")
    kind: RunKindName
    slot: datetime
    due_at: datetime | None = Field(
        description="When the slot fired: the slot plus the job's jitter offset; null: at the slot "
        "(no jitter, and every manual or backfill run)."
    )
    state: RunStateName
    reason: str | None
    attempts: int
    job_version: int
    queue: str
    idempotency_key: str | None
    payload: Any = None
    has_payload: bool
    created_at: datetime | None
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    next_attempt_at: datetime | None
    queued_lateness_s: float | None = Field(
        description="queued_at - due_at (the slot when due_at is null), in seconds."
    )
    start_lateness_s: float | None = Field(
        description="started_at - due_at (the slot when due_at is null), in seconds."
    )
    trace_id: str | None = Field(
        description="The run's OpenTelemetry trace (32 hex digits); null when tracing was off.",
        pattern="^[0-9a-f]{32}$",
    )

    @classmethod
    def from_record(cls, run: Run, job: Job | None) -> RunOut:
        """``run`` as answered; ``job`` is its live job (None once deleted), which gives the
        team and name a reader knows the job by."""
        return cls.model_validate(_run_fields(run, job))


def _run_fields(run: Run, job: Job | None) -> dict[str, Any]:
    return {
        "id": run.id,
        "job_id": run.job_id,
        "job_team": None if job is None else job.team,
        "job_name": None if job is None else job.name,
        "kind": run.kind.value,
        "slot": run.slot,
        "due_at": run.due_at,
        "state": run.state.value,
        "reason": run.reason,
        "attempts": run.attempts,
        "job_version": run.job_version,
        "queue": run.queue,
        "idempotency_key": run.idempotency_key,
        "payload": run.payload if run.has_payload else None,
        "has_payload": run.has_payload,
        "created_at": run.created_at,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "next_attempt_at": run.next_attempt_at,
        "queued_lateness_s": _seconds(run.queued_at, run.due),
        "start_lateness_s": _seconds(run.started_at, run.due),
        "trace_id": trace_id(run.traceparent),
    }


class AttemptOut(OutModel):
    number: int
    worker: str
    started_at: datetime
    finished_at: datetime | None
    outcome: OutcomeName | None
    status_code: int | None
    exit_code: int | None
    error: str | None
    output: str | None = Field(
        description="The attempt's kept output: the first KiB of a response body, or the tail of "
        "a command's output or a traceback. While the attempt runs: its output so far (its last "
        "64 KiB, secrets redacted), written by its worker at most once a second; see output_at."
    )
    output_at: datetime | None = Field(
        None,
        description="While the attempt runs: when its worker last wrote its output so far. Null: "
        "none written yet, or the attempt ended (output is then the final record).",
    )
    retry_after_s: float | None
    request_headers: dict[str, str] | None = Field(
        description="The headers the HTTP request of this attempt was sent with, in order; the values "
        'of credentials (Authorization, signatures, cookies, values from team secrets) are "[redacted]". '
        "Null: no HTTP request was sent."
    )
    response_headers: dict[str, str] | None = Field(
        None,
        description="The headers the HTTP target answered this attempt with, in order (a repeated "
        'name joined with ", "); the values of credentials (Set-Cookie, Authorization, values of team '
        'secrets ...) are "[redacted]"; at most 64 headers, 16 KiB. Null: no answer was read.',
    )

    @classmethod
    def from_record(cls, attempt: Attempt) -> AttemptOut:
        return cls(
            number=attempt.number,
            worker=attempt.worker,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
            outcome=attempt.outcome,
            status_code=attempt.status_code,
            exit_code=attempt.exit_code,
            error=attempt.error,
            output=attempt.output,
            output_at=attempt.output_at if attempt.finished_at is None else None,
            retry_after_s=attempt.retry_after_s,
            request_headers=None if attempt.request_headers is None else dict(attempt.request_headers),
            response_headers=None if attempt.response_headers is None else dict(attempt.response_headers),
        )


class RunEventOut(OutModel):
    at: datetime
    state: RunStateName
    previous: RunStateName | None
    attempt: int
    node: str | None
    detail: str | None

    @classmethod
    def from_record(cls, event: RunEvent) -> RunEventOut:
        return cls(
            at=event.at,
            state=event.state,
            previous=event.previous,
            attempt=event.attempt,
            node=event.node,
            detail=event.detail,
        )


class RunDetailOut(RunOut):
    """A run with its attempts (``attempts`` stays the count) and its history."""

    attempt_details: list[AttemptOut]
    events: list[RunEventOut]

    @classmethod
    def from_records(
        cls, run: Run, job: Job | None, attempts: list[Attempt], events: list[RunEvent]
    ) -> RunDetailOut:
        data = _run_fields(run, job)
        data["attempt_details"] = [AttemptOut.from_record(attempt) for attempt in attempts]
        data["events"] = [RunEventOut.from_record(event) for event in events]
        return cls.model_validate(data)


class RunPage(OutModel):
    items: list[RunOut]
    next_cursor: str | None
