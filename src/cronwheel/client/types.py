"""What the client's methods return.

Objects the API answers with (a job, a run, a token...) are :class:`~typing.TypedDict` types: the
JSON as the server sent it, typed for mypy and editors, printed by ``-o json`` unchanged and
carrying any field a newer server adds. Instants stay RFC 3339 strings (``"2026-03-02T12:00:00Z"``),
as the API writes them. ``tests/client/test_routes.py`` holds each type's keys equal to the
server's response schema. What the client itself makes (a page, the outcome of a trigger) is a
frozen dataclass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar

T = TypeVar("T")


class LastRun(TypedDict):
    id: str
    state: str
    slot: str
    finished_at: str | None


class RecentRun(TypedDict):
    """``RecentRunOut``: one point of a job's sparkline (``include=recent``)."""

    slot: str
    state: str
    lateness_ms: float | None
    duration_ms: float | None


class JobDefinition(TypedDict):
    """The fields of a job's definition, as the server answers them (in ``Job`` and in a
    ``JobValidation``)."""

    team: str
    name: str
    schedule: str
    timezone: str
    dst_gap: str | None
    dst_fold: str | None
    target: dict[str, Any]
    description: str
    payload: Any
    timeout_s: float
    retry: dict[str, Any]
    misfire: dict[str, Any]
    overlap: str
    jitter_s: float
    start_at: str | None
    end_at: str | None
    queue: str
    labels: dict[str, str]
    retention: dict[str, Any] | None
    delete_after_success: bool
    calendars: list[str]
    calendar_shift: str


class Job(JobDefinition):
    """``JobOut``: a job's definition and its state; ``version`` is its ETag."""

    id: str
    version: int
    paused: bool
    pause_note: str | None
    paused_at: str | None
    created_at: str | None
    updated_at: str | None
    next_run_at: str | None
    next_fire_at: str | None  # next_run_at plus its jitter offset
    last_run: LastRun | None
    plain_values: list[str]
    schedule_description: str
    late: bool
    recent: list[RecentRun] | None


Backfill = TypedDict(
    "Backfill",
    {
        "id": str, "job_id": str, "from": str, "to": str, "state": str, "total": int, "created": int,
        "existing": int, "remaining": int, "next_slot": str | None, "created_at": str | None,
        "updated_at": str | None,
    },
)  # fmt: skip
"""``BackfillOut``: a backfill and its progress (``state`` running, done or cancelled)."""

BackfillPlan = TypedDict(
    "BackfillPlan",
    {
        "job_id": str, "from": str, "to": str, "total": int, "create": list[str], "existing": list[str],
        "confirm_required": bool,
    },
)  # fmt: skip
"""``BackfillPlanOut``: a dry run's slots to create and those that have runs (nothing written)."""


class Run(TypedDict):
    """``RunOut``: one run of a job (``job_team``/``job_name`` null once the job is deleted)."""

    id: str
    job_id: str
    job_team: str | None
    job_name: str | None
    kind: str
    slot: str
    due_at: str | None  # the slot plus the job's jitter offset; None: at the slot
    state: str
    reason: str | None
    attempts: int
    job_version: int
    queue: str
    idempotency_key: str | None
    payload: Any
    has_payload: bool
    created_at: str | None
    queued_at: str | None
    started_at: str | None
    finished_at: str | None
    next_attempt_at: str | None
    queued_lateness_s: float | None
    start_lateness_s: float | None
    trace_id: str | None  # the run's trace (32 hex digits); None when tracing was off


class RunDetail(Run):
    """``RunDetailOut``: a run with its attempts and its state history."""

    attempt_details: list[dict[str, Any]]
    events: list[dict[str, Any]]


class RunOutput(TypedDict):
    """``RunOutputOut``: each attempt's kept output (``{number, outcome, output, kept}``)."""

    run_id: str
    attempts: list[dict[str, Any]]


class Token(TypedDict):
    """``TokenOut``: a token's record (never the token itself)."""

    id: str
    name: str
    team: str | None
    scopes: list[str]
    state: str
    created_at: str
    created_by: str | None
    expires_at: str | None
    last_used_at: str | None
    revoked_at: str | None


class AuditEntry(TypedDict):
    """``AuditEntryOut``: one entry of the audit log (secrets and plain values redacted)."""

    id: str
    at: str
    team: str | None
    action: str
    actor_kind: str
    actor_id: str | None
    actor_name: str | None
    client: str | None
    target_kind: str | None
    target_id: str | None
    target_name: str | None
    outcome: str
    status: int | None
    detail: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class NewToken(Token):
    """``TokenCreated``: the record and, this once, the token."""

    token: str


class Secret(TypedDict):
    """``SecretOut``: a secret's name and key id (never its value)."""

    team: str
    name: str
    key_id: str
    created_at: str | None
    updated_at: str | None


class Calendar(TypedDict):
    """``CalendarOut``: a team's calendar of closed days."""

    team: str
    name: str
    description: str
    dates: list[str]
    ranges: list[dict[str, str]]
    weekdays: list[str]
    holidays: dict[str, str | None] | None
    version: int
    created_at: str | None
    updated_at: str | None


class Reencryption(TypedDict):
    """``ReencryptOut``."""

    key_id: str
    rewritten: int
    changed_meanwhile: int
    failed: list[dict[str, str]]


class Preview(TypedDict):
    """``PreviewOut``: the next fire times of an expression."""

    expression: str
    timezone: str
    dst_gap: str
    dst_fold: str
    wildcard: bool
    description: str
    after: str
    fires: list[dict[str, Any]]
    warnings: list[str]


class JobValidation(JobDefinition):
    """``JobValidation``: a definition the server accepts, as it would store it (``id``: the job
    it would replace, null for a new one), with its first slot and next fire times."""

    id: str | None
    next_run_at: str | None
    schedule_description: str
    fires: list[dict[str, Any]]
    warnings: list[str]


class Health(TypedDict):
    status: str


class Ready(TypedDict):
    status: str
    checks: dict[str, bool]


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; ``next_cursor`` continues it (None: the last page)."""

    items: list[T]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class Triggered:
    """A trigger's run; ``created`` is False when an ``Idempotency-Key`` found an earlier one."""

    run: Run
    created: bool


@dataclass(frozen=True, slots=True)
class SecretSet:
    """A secret as stored; ``created`` is False when it replaced a value."""

    secret: Secret
    created: bool
