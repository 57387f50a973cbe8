"""The REST API's request and response bodies (pydantic v2), and their converters to and from the
records of :mod:`cronwheel.model`.

Pydantic lives here and nowhere else: routes validate a body into one of these models, call
``to_record`` to get a :class:`~cronwheel.model.Job`, and answer with ``from_record``. Every model
refuses unknown fields and does not coerce types (``"30"`` is not a number), so a typo is a 422
that names the field rather than a setting silently ignored.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from cronwheel.model import (
    Attempt,
    CommandTarget,
    HttpTarget,
    Job,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    PythonTarget,
    RetryPolicy,
    Run,
    RunEvent,
    Target,
)
from cronwheel.schedule import Fire, parse_schedule
from cronwheel.schedule.lint import schedule_warnings
from cronwheel.service import MAX_TIMEOUT_S, check_payload

# -- building blocks ---------------------------------------------------------------------------

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
LabelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]{1,100}$")]
LabelValue = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")]
HeaderValue = Annotated[str, StringConstraints(max_length=8192, pattern=r"^[^\r\n\x00]*$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")]
RunStateName = Literal["PENDING", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "SKIPPED"]

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$",
)


def _rfc3339_text(value: object) -> object:
    """Instants must come as RFC 3339 text (no Unix numbers, no date alone); the offset check is
    left to ``AwareDatetime`` so that a naive time gets its own clear message."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, such as 2026-03-01T09:00:00Z")
    return value


def _as_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


Instant = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_text),
    AfterValidator(_as_utc),
    Strict(False),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- targets -----------------------------------------------------------------------------------


class HttpTargetIn(_Strict):
    """POST (or another method) to a webhook URL."""

    type: Literal["http"]
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict, max_length=50)
    expected_status: list[Annotated[int, Field(ge=100, le=599)]] = Field(
        default_factory=list, max_length=50, description="Statuses that count as success; empty: any 2xx."
    )


class CommandTargetIn(_Strict):
    """Run a command (only on servers started with --allow-commands)."""

    type: Literal["command"]
    argv: list[Annotated[str, StringConstraints(max_length=4096)]] = Field(min_length=1, max_length=1000)
    env: dict[EnvName, Annotated[str, StringConstraints(max_length=8192)]] = Field(
        default_factory=dict, max_length=100
    )
    cwd: Annotated[str, StringConstraints(min_length=1, max_length=4096)] | None = None

    @field_validator("argv")
    @classmethod
    def _program(cls, argv: list[str]) -> list[str]:
        if not argv[0]:
            raise ValueError("the program (argv[0]) must not be empty")
        return argv


class PythonTargetIn(_Strict):
    """Call a Python function ``package.module:function`` (only ones the server allows)."""

    type: Literal["python"]
    function: Annotated[
        str,
        StringConstraints(
            max_length=300,
            pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$",
        ),
    ]


TargetIn = Annotated[HttpTargetIn | CommandTargetIn | PythonTargetIn, Field(discriminator="type")]


def target_to_record(target: HttpTargetIn | CommandTargetIn | PythonTargetIn) -> Target:
    if isinstance(target, HttpTargetIn):
        return HttpTarget(
            url=target.url,
            method=target.method,
            headers=tuple(target.headers.items()),
            expected_status=tuple(target.expected_status),
        )
    if isinstance(target, CommandTargetIn):
        return CommandTarget(argv=tuple(target.argv), env=tuple(target.env.items()), cwd=target.cwd)
    return PythonTarget(function=target.function)


def target_from_record(target: Target) -> dict[str, Any]:
    if isinstance(target, HttpTarget):
        return {
            "type": "http",
            "url": target.url,
            "method": target.method,
            "headers": dict(target.headers),
            "expected_status": list(target.expected_status),
        }
    if isinstance(target, CommandTarget):
        return {"type": "command", "argv": list(target.argv), "env": dict(target.env), "cwd": target.cwd}
    return {"type": "python", "function": target.function}


# -- policies ----------------------------------------------------------------------------------


class RetryIn(_Strict):
    """Attempts of one run, with exponential backoff and full jitter between them."""

    max_attempts: int = Field(default=1, ge=1, le=100)
    initial_delay_s: float = Field(default=1.0, gt=0, le=86_400)
    multiplier: float = Field(default=2.0, ge=1, le=100)
    max_delay_s: float = Field(default=300.0, gt=0, le=86_400)
    jitter: bool = True

    @field_validator("max_delay_s")
    @classmethod
    def _delays(cls, value: float, info: ValidationInfo) -> float:
        initial = info.data.get("initial_delay_s")
        if initial is not None and value < initial:
            raise ValueError("max_delay_s must be at least initial_delay_s")
        return value


class MisfireIn(_Strict):
    """What to do with slots that passed while nothing could fire them."""

    policy: Literal["skip", "run_once", "catch_up"] = "skip"
    grace_s: float = Field(default=60.0, ge=0, le=7 * 86_400)
    max_catch_up: int = Field(default=10, ge=1, le=1000)


# -- jobs --------------------------------------------------------------------------------------


def _json_payload(value: Any) -> Any:
    check_payload(value)  # InvalidInputError is a ValueError: reported on the payload field
    return value


Payload = Annotated[Any, AfterValidator(_json_payload)]


class JobSpec(_Strict):
    """Everything a client defines about a job (the body of POST and PUT)."""

    team: Name
    name: Name
    schedule: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "UTC"
    dst_gap: Literal["shift", "skip"] | None = None
    dst_fold: Literal["first", "last", "both"] | None = None
    target: TargetIn
    description: Annotated[str, StringConstraints(max_length=2000)] = ""
    payload: Payload = None
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S)
    retry: RetryIn = RetryIn()
    misfire: MisfireIn = MisfireIn()
    overlap: Literal["allow", "forbid", "replace"] = "allow"
    start_at: Instant | None = None
    end_at: Instant | None = None
    queue: Name = "default"
    labels: dict[LabelKey, LabelValue] = Field(default_factory=dict, max_length=64)

    @field_validator("end_at")
    @classmethod
    def _window(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start_at")
        if value is not None and start is not None and value <= start:
            raise ValueError("end_at must be after start_at")
        return value

    def to_record(self, job_id: str = "") -> Job:
        """The job record (``id`` empty for a new job: the service assigns one)."""
        return Job(
            id=job_id,
            team=self.team,
            name=self.name,
            schedule=self.schedule,
            timezone=self.timezone,
            dst_gap=self.dst_gap,
            dst_fold=self.dst_fold,
            target=target_to_record(self.target),
            description=self.description,
            payload=self.payload,
            timeout_s=self.timeout_s,
            retry=RetryPolicy(
                max_attempts=self.retry.max_attempts,
                initial_delay_s=self.retry.initial_delay_s,
                multiplier=self.retry.multiplier,
                max_delay_s=self.retry.max_delay_s,
                jitter=self.retry.jitter,
            ),
            misfire=MisfirePolicy(
                mode=MisfireMode(self.misfire.policy),
                grace_s=self.misfire.grace_s,
                max_catch_up=self.misfire.max_catch_up,
            ),
            overlap=Overlap(self.overlap),
            start_at=self.start_at,
            end_at=self.end_at,
            queue=self.queue,
            labels=tuple(self.labels.items()),
        )


class JobCreate(JobSpec):
    """POST /v1/jobs."""


class JobUpdate(JobSpec):
    """PUT /v1/jobs/{id}: the whole definition; omitted fields go back to their defaults."""


def spec_fields(job: Job) -> dict[str, Any]:
    """The client-defined part of a stored job, as JSON-ready values (what a PUT would send)."""
    return {
        "team": job.team,
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "dst_gap": job.dst_gap,
        "dst_fold": job.dst_fold,
        "target": target_from_record(job.target),
        "description": job.description,
        "payload": job.payload,
        "timeout_s": job.timeout_s,
        "retry": dataclasses.asdict(job.retry),
        "misfire": {
            "policy": job.misfire.mode.value,
            "grace_s": job.misfire.grace_s,
            "max_catch_up": job.misfire.max_catch_up,
        },
        "overlap": job.overlap.value,
        "start_at": _text(job.start_at),
        "end_at": _text(job.end_at),
        "queue": job.queue,
        "labels": dict(job.labels),
    }


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class JobPatch(_Strict):
    """PATCH /v1/jobs/{id}: only the fields given change. ``retry`` and ``misfire`` merge into
    the stored policy field by field; ``target`` and ``labels`` are replaced whole; ``null``
    clears a nullable field (``dst_gap``, ``start_at``, ``payload`` ...)."""

    team: Name | None = None
    name: Name | None = None
    schedule: Annotated[str, StringConstraints(min_length=1, max_length=1000)] | None = None
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] | None = None
    dst_gap: Literal["shift", "skip"] | None = None
    dst_fold: Literal["first", "last", "both"] | None = None
    target: TargetIn | None = None
    description: Annotated[str, StringConstraints(max_length=2000)] | None = None
    payload: Payload = None
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S)
    retry: RetryIn | None = None
    misfire: MisfireIn | None = None
    overlap: Literal["allow", "forbid", "replace"] | None = None
    start_at: Instant | None = None
    end_at: Instant | None = None
    queue: Name | None = None
    labels: dict[LabelKey, LabelValue] | None = Field(default=None, max_length=64)

    @field_validator("team", "name", "schedule", "timezone", "target", "timeout_s", "overlap", "queue")
    @classmethod
    def _not_null(cls, value: object) -> object:
        if value is None:  # validators run on given values only: this is an explicit null
            raise ValueError("cannot be null (omit the field to keep its value)")
        return value

    def apply_to(self, job: Job) -> dict[str, Any]:
        """The full definition after this patch, as a JSON-ready dict to validate as
        :class:`JobUpdate`."""
        merged = spec_fields(job)
        given = self.model_dump(mode="json", exclude_unset=True)
        for key in ("retry", "misfire"):
            if given.get(key) is not None:
                given[key] = {**merged[key], **given[key]}
            elif key in given:
                del given[key]  # null: keep the stored policy
        merged.update(given)
        return merged


def job_update_from_json(data: dict[str, Any]) -> JobUpdate:
    """Validate a JSON-ready dict as a full definition (the same way a request body is)."""
    return JobUpdate.model_validate_json(json.dumps(data))


class RetryOut(_Out):
    max_attempts: int
    initial_delay_s: float
    multiplier: float
    max_delay_s: float
    jitter: bool


class MisfireOut(_Out):
    policy: Literal["skip", "run_once", "catch_up"]
    grace_s: float
    max_catch_up: int


class HttpTargetOut(_Out):
    type: Literal["http"]
    url: str
    method: str
    headers: dict[str, str]
    expected_status: list[int]


class CommandTargetOut(_Out):
    type: Literal["command"]
    argv: list[str]
    env: dict[str, str]
    cwd: str | None


class PythonTargetOut(_Out):
    type: Literal["python"]
    function: str


TargetOut = Annotated[HttpTargetOut | CommandTargetOut | PythonTargetOut, Field(discriminator="type")]


class LastRunOut(_Out):
    """The summary of a job's most recent run."""

    id: str
    state: RunStateName
    slot: datetime
    finished_at: datetime | None


class JobOut(_Out):
    """A stored job: its definition plus the server's read-only fields."""

    id: str
    version: int
    team: str
    name: str
    schedule: str
    timezone: str
    dst_gap: Literal["shift", "skip"] | None
    dst_fold: Literal["first", "last", "both"] | None
    target: TargetOut
    description: str
    payload: Any
    timeout_s: float
    retry: RetryOut
    misfire: MisfireOut
    overlap: Literal["allow", "forbid", "replace"]
    start_at: datetime | None
    end_at: datetime | None
    queue: str
    labels: dict[str, str]
    paused: bool
    pause_note: str | None
    paused_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    next_run_at: datetime | None
    last_run: LastRunOut | None

    @classmethod
    def from_record(cls, job: Job, last_run: Run | None = None) -> JobOut:
        data = spec_fields(job)
        data.update(
            id=job.id,
            version=job.version,
            start_at=job.start_at,
            end_at=job.end_at,
            paused=job.paused,
            pause_note=job.pause_note,
            paused_at=job.paused_at,
            created_at=job.created_at,
            updated_at=job.updated_at,
            next_run_at=job.next_run_at,
            last_run=None
            if last_run is None
            else LastRunOut(
                id=last_run.id,
                state=last_run.state.value,
                slot=last_run.slot,
                finished_at=last_run.finished_at,
            ),
        )
        return cls.model_validate(data)


class JobPage(_Out):
    items: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


# -- actions -----------------------------------------------------------------------------------


class PauseIn(_Strict):
    note: Annotated[str, StringConstraints(max_length=1000)] | None = None


class ResumeIn(_Strict):
    missed: Literal["skip", "misfire"] = Field(
        "skip",
        description="skip: record the slots missed while paused as SKIPPED; "
        "misfire: leave them to the job's misfire policy.",
    )


class TriggerIn(_Strict):
    payload: Payload = Field(
        default=None, description="Replaces the job's payload for this run (when given)."
    )


# -- runs --------------------------------------------------------------------------------------


def _seconds(later: datetime | None, earlier: datetime) -> float | None:
    return None if later is None else (later - earlier).total_seconds()


class RunOut(_Out):
    """One run (its ``id`` is the execution id every attempt carries)."""

    id: str
    job_id: str
    job_team: str | None = Field(description="The job's team; null when the job was deleted.")
    job_name: str | None = Field(description="The job's name; null when the job was deleted.")
    kind: Literal["scheduled", "manual"]
    slot: datetime
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
    queued_lateness_s: float | None = Field(description="queued_at - slot, in seconds.")
    start_lateness_s: float | None = Field(description="started_at - slot, in seconds.")

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
        "queued_lateness_s": _seconds(run.queued_at, run.slot),
        "start_lateness_s": _seconds(run.started_at, run.slot),
    }


class AttemptOut(_Out):
    number: int
    worker: str
    started_at: datetime
    finished_at: datetime | None
    outcome: Literal["success", "failure", "timeout", "error", "cancelled", "lost"] | None
    status_code: int | None
    exit_code: int | None
    error: str | None
    output: str | None
    retry_after_s: float | None

    @classmethod
    def from_record(cls, attempt: Attempt) -> AttemptOut:
        return cls(
            number=attempt.number,
            worker=attempt.worker,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
            outcome=None if attempt.outcome is None else attempt.outcome.value,
            status_code=attempt.status_code,
            exit_code=attempt.exit_code,
            error=attempt.error,
            output=attempt.output,
            retry_after_s=attempt.retry_after_s,
        )


class RunEventOut(_Out):
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
            state=event.state.value,
            previous=None if event.previous is None else event.previous.value,
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


class RunPage(_Out):
    items: list[RunOut]
    next_cursor: str | None


# -- schedule preview --------------------------------------------------------------------------


class PreviewIn(_Strict):
    expression: Annotated[str, StringConstraints(min_length=1, max_length=1000)]
    timezone: Annotated[str, StringConstraints(min_length=1, max_length=64)] = "UTC"
    count: int = Field(default=10, ge=1, le=1000)
    after: Instant | None = Field(default=None, description="Start after this instant; default: now.")
    dst_gap: Literal["shift", "skip"] | None = None
    dst_fold: Literal["first", "last", "both"] | None = None
    seed: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="What H hashes (a job's id, for that job's own schedule)."
    )


class FireOut(_Out):
    at: datetime = Field(description="The fire time in the schedule's zone.")
    utc: datetime
    offset_s: int = Field(description="UTC offset of the zone at that time, in seconds.")
    kind: Literal["normal", "shifted", "repeated-first", "repeated-second"]
    wall: str = Field(description="The nominal local wall time (differs from `at` when shifted).")

    @classmethod
    def from_record(cls, fire: Fire) -> FireOut:
        offset = fire.at.utcoffset()
        return cls(
            at=fire.at,
            utc=fire.at.astimezone(UTC),
            offset_s=0 if offset is None else int(offset.total_seconds()),
            kind=fire.kind.value,
            wall=fire.wall.isoformat(),
        )


class PreviewOut(_Out):
    expression: str
    timezone: str
    dst_gap: Literal["shift", "skip"]
    dst_fold: Literal["first", "last", "both"]
    wildcard: bool
    after: datetime = Field(description="The instant the fire times follow, in UTC.")
    fires: list[FireOut]
    warnings: list[str]

    @classmethod
    def build(cls, request: PreviewIn, now: datetime) -> PreviewOut:
        """The preview ``request`` asks for (after ``request.after``, else after ``now``).

        The one builder of a preview: ``POST /v1/schedules/preview`` and ``cronwheel schedule
        preview`` (which runs locally, without a server) both answer with it, so their JSON is
        the same. Raises :class:`~cronwheel.schedule.ScheduleError` for an invalid expression,
        zone or option."""
        schedule = parse_schedule(
            request.expression,
            request.timezone,
            dst_gap=request.dst_gap,
            dst_fold=request.dst_fold,
            seed=request.seed,
        )
        after = (request.after if request.after is not None else now).astimezone(UTC)
        fires = itertools.islice(schedule.fires_after(after), request.count)
        return cls(
            expression=schedule.expression,
            timezone=schedule.timezone,
            dst_gap=schedule.dst_gap,
            dst_fold=schedule.dst_fold,
            wildcard=schedule.wildcard,
            after=after,
            fires=[FireOut.from_record(fire) for fire in fires],
            warnings=schedule_warnings(schedule, after),
        )
