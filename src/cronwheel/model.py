"""The records cronwheel's roles pass around: jobs, runs, attempts, and their policies.

Small frozen dataclasses, no references to services. Instants are aware UTC ``datetime`` objects.
Pydantic lives only at the API boundary (``cronwheel.api.schemas.jobs``), which converts to and from
these records with ``to_record`` / ``from_record``.
"""

from __future__ import annotations

import enum
import os
import time
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

# The DST options are the schedule engine's own vocabulary (``Literal`` aliases defined there once);
# jobs, the store and the API use these aliases rather than spelling the choices again.
from cronwheel.schedule.calendar import CalendarShift, CalendarSpec
from cronwheel.schedule.schedule import DstFold, DstGap
from cronwheel.targets.kinds import (
    CommandTarget,
    GrpcTarget,
    HttpTarget,
    KafkaSasl,
    KafkaTarget,
    MqttQos,
    MqttTarget,
    NatsTarget,
    PythonTarget,
    RabbitMqTarget,
    Target,
)
from cronwheel.targets.values import SecretRef, Value

# The target records are each kind's own (cronwheel.targets.kinds); model names them too, as the
# records a job holds.
__all__ = [
    "LEGAL_TRANSITIONS",
    "SHARDS",
    "Attempt",
    "AttemptResult",
    "Backfill",
    "BackfillState",
    "BackfillStep",
    "Calendar",
    "CalendarShift",
    "CalendarSpec",
    "CommandTarget",
    "DueJob",
    "Finish",
    "FireResult",
    "Firing",
    "GrpcTarget",
    "HttpTarget",
    "Job",
    "KafkaSasl",
    "KafkaTarget",
    "MisfireMode",
    "MisfirePolicy",
    "MqttQos",
    "MqttTarget",
    "NatsTarget",
    "Outcome",
    "Overlap",
    "PythonTarget",
    "RabbitMqTarget",
    "RetentionPolicy",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunKind",
    "RunState",
    "SecretRef",
    "SkipReason",
    "Target",
    "Value",
    "dedup_key",
    "new_id",
    "shard_of",
    "utc_text",
]


def utc_text(moment: datetime) -> str:
    """An aware ``moment`` as RFC 3339 in UTC with a ``Z`` (``2026-03-02T13:00:00Z``; sub-seconds
    only when it has them): how instants read in messages, files and payloads."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


# -- identifiers ---------------------------------------------------------------------------------


def new_id() -> str:
    """A UUIDv7 string (RFC 9562): time-ordered, so ids sort by creation and index well."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


SHARDS = 256  # fixed number of shards; shard = stable_hash(job_id) mod SHARDS


def shard_of(job_id: str, shards: int = SHARDS) -> int:
    """Stable shard of a job id (FNV-1a, independent of Python's randomized hash)."""
    value = 0xCBF29CE484222325
    for byte in job_id.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value % shards


# -- policies ------------------------------------------------------------------------------------


class Overlap(enum.StrEnum):
    """What to do when a slot comes while an earlier run of the job has not finished
    (as Kubernetes CronJob's concurrencyPolicy)."""

    ALLOW = "allow"  # start the new run anyway
    FORBID = "forbid"  # record the new slot as SKIPPED (reason: overlap)
    REPLACE = "replace"  # cancel the running run, then start the new one


class MisfireMode(enum.StrEnum):
    """What to do with slots whose time passed while nothing could fire them (downtime, pause)."""

    SKIP = "skip"  # fire a missed slot only within the grace period; record the rest SKIPPED
    RUN_ONCE = "run_once"  # fire the latest missed slot once; record the others SKIPPED
    CATCH_UP = "catch_up"  # fire every missed slot, up to max_catch_up (the oldest are SKIPPED)


@dataclass(frozen=True, slots=True)
class MisfirePolicy:
    mode: MisfireMode = MisfireMode.SKIP
    grace_s: float = 60.0
    max_catch_up: int = 10


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Attempts of one run: exponential backoff with full jitter between them."""

    max_attempts: int = 1
    initial_delay_s: float = 1.0
    multiplier: float = 2.0
    max_delay_s: float = 300.0
    jitter: bool = True


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """How much of a job's run history to keep (``None``: no limit of that kind). A run may go
    when it is terminal, older than ``keep_days`` or beyond the newest ``keep_runs`` of its job,
    and not its job's latest run of its state (:mod:`cronwheel.retention` decides)."""

    keep_days: int | None = None
    keep_runs: int | None = None


# -- jobs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    """A team's cron job. ``version`` grows with every edit; ``next_run_at`` is the scheduler's
    cursor (the next slot not yet fired or recorded), advanced without bumping ``version``."""

    id: str
    team: str
    name: str
    schedule: str
    target: Target
    timezone: str = "UTC"
    description: str = ""
    dst_gap: DstGap | None = None
    dst_fold: DstFold | None = None
    payload: Any = None  # JSON value
    timeout_s: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    misfire: MisfirePolicy = field(default_factory=MisfirePolicy)
    overlap: Overlap = Overlap.ALLOW
    # each slot fires this much later at most: an offset of the job id and the slot
    # (cronwheel.schedule.jitter); 0: at the slot
    jitter_s: float = 0.0
    start_at: datetime | None = None
    end_at: datetime | None = None
    paused: bool = False
    pause_note: str | None = None
    paused_at: datetime | None = None
    queue: str = "default"
    labels: tuple[tuple[str, str], ...] = ()
    retention: RetentionPolicy | None = None  # None: the server's default (--retention-days/-runs)
    # ``@at`` jobs only: the success of its slot's run deletes the job in the same transaction
    delete_after_success: bool = False
    calendars: tuple[str, ...] = ()  # names of calendars of the job's team whose days it skips
    calendar_shift: CalendarShift = CalendarShift.NONE
    # the union of ``calendars``' specs, resolved by the store when the job or a calendar is written
    calendar_spec: CalendarSpec | None = None
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    next_run_at: datetime | None = None
    deleted_at: datetime | None = None

    @property
    def shard(self) -> int:
        return shard_of(self.id)


@dataclass(frozen=True, slots=True)
class DueJob:
    """A job as the scheduler's wheel holds it: what planning and firing read, nothing else (no
    target, payload or labels). A scheduler keeps one per job due within its horizon, up to every
    job of its shards, so it is small; its attribute names are :class:`Job`'s own, so the planner
    takes either. Built from a ``jobs`` row by the store (``codec.due_job_from_row``) or from a
    :class:`Job` (:meth:`of`)."""

    id: str
    team: str
    version: int
    next_run_at: datetime | None
    schedule: str
    timezone: str
    dst_gap: DstGap | None
    dst_fold: DstFold | None
    misfire: MisfirePolicy
    overlap: Overlap
    queue: str
    start_at: datetime | None
    end_at: datetime | None
    paused: bool = False
    deleted_at: datetime | None = None
    jitter_s: float = 0.0
    calendar_spec: CalendarSpec | None = None
    calendar_shift: CalendarShift = CalendarShift.NONE

    @classmethod
    def of(cls, job: Job | DueJob) -> DueJob:
        """The slim view of ``job``: its fields of the same names."""
        if isinstance(job, DueJob):
            return job
        return cls(*(getattr(job, name) for name in _DUE_FIELDS))

    def moved(self, next_run_at: datetime) -> DueJob:
        """The same job with its cursor at ``next_run_at`` (after a firing the store accepted):
        built directly, since ``dataclasses.replace`` cost a tenth of a fire (measured)."""
        return DueJob(
            self.id, self.team, self.version, next_run_at, self.schedule, self.timezone, self.dst_gap,
            self.dst_fold, self.misfire, self.overlap, self.queue, self.start_at, self.end_at,
            self.paused, self.deleted_at, self.jitter_s, self.calendar_spec, self.calendar_shift,
        )  # fmt: skip

    @property
    def shard(self) -> int:
        return shard_of(self.id)


_DUE_FIELDS = tuple(each.name for each in fields(DueJob))


@dataclass(frozen=True, slots=True)
class FireGroup:
    """``jobs`` live, unpaused, not complete jobs of ``team`` that fire alike: the same slots (the
    expression, zone, DST options, bounds and calendars that :class:`DueJob` names alike) at the
    slots themselves. A job whose fires are its own (a jitter window, or an expression that may
    hash its id with ``H``: ``schedule.may_hash``) is a group of one that names it (``id``) and
    its ``jitter_s``. What the upcoming fires count (``Store.fire_groups``)."""

    team: str
    jobs: int
    schedule: str
    timezone: str
    dst_gap: DstGap | None
    dst_fold: DstFold | None
    start_at: datetime | None
    end_at: datetime | None
    calendar_spec: CalendarSpec | None = None
    calendar_shift: CalendarShift = CalendarShift.NONE
    id: str | None = None  # the job of a group of one whose fires are its own
    jitter_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Calendar:
    """A team's named calendar of closed days (unique per team and name); jobs of the team list
    calendars by name. ``version`` grows with every edit."""

    team: str
    name: str
    spec: CalendarSpec
    description: str = ""
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None


# -- runs ----------------------------------------------------------------------------------------


class RunState(enum.StrEnum):
    PENDING = "PENDING"  # recorded, trigger queued or about to be
    RUNNING = "RUNNING"  # an attempt holds the lease
    RETRYING = "RETRYING"  # an attempt failed; the next one is due at next_attempt_at
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # recorded miss (misfire, overlap, paused, calendar): never ran

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL


_TERMINAL = frozenset({RunState.SUCCESS, RunState.FAILED, RunState.SKIPPED})

LEGAL_TRANSITIONS: dict[RunState | None, frozenset[RunState]] = {
    None: frozenset({RunState.PENDING, RunState.SKIPPED}),
    RunState.PENDING: frozenset({RunState.RUNNING, RunState.FAILED}),  # FAILED: cancelled before start
    RunState.RUNNING: frozenset({RunState.SUCCESS, RunState.FAILED, RunState.RETRYING}),
    RunState.RETRYING: frozenset({RunState.RUNNING, RunState.FAILED}),
    RunState.SUCCESS: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.SKIPPED: frozenset(),
}


class RunKind(enum.StrEnum):
    SCHEDULED = "scheduled"  # a slot the scheduler fired
    MANUAL = "manual"  # a trigger: keyed by its idempotency key, not by a slot
    BACKFILL = "backfill"  # a past slot a backfill recorded: keyed by its slot, as a scheduled run

    @property
    def keyed_by_slot(self) -> bool:
        """Whether a run of this kind takes its slot's (job, slot) key (guarantee 1): a slot
        backfilled is a slot fired, whichever came first."""
        return self is not RunKind.MANUAL


class SkipReason(enum.StrEnum):
    MISFIRE = "misfire"  # missed beyond the grace period (skip), or superseded (run_once/catch_up cap)
    OVERLAP = "overlap"  # overlap=forbid and an earlier run was still active
    PAUSED = "paused"  # the slot passed while the job was paused
    CALENDAR = "calendar"  # the slot's local date is closed by one of the job's calendars


@dataclass(frozen=True, slots=True)
class Run:
    """One slot (or manual trigger) of a job. ``id`` is the execution id: the idempotency key
    every attempt carries."""

    id: str
    job_id: str
    kind: RunKind
    slot: datetime  # the nominal fire time (manual runs: when triggered)
    state: RunState
    queue: str = "default"
    job_version: int = 1
    reason: str | None = None  # why SKIPPED or FAILED without an attempt
    payload: Any = None  # manual override; None means the job's payload
    has_payload: bool = False
    attempts: int = 0  # attempts started so far (the last one's number)
    lost_attempts: int = 0  # of those, attempts whose worker died (they do not use the retry budget)
    idempotency_key: str | None = None
    created_at: datetime | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None  # first attempt's start
    finished_at: datetime | None = None
    next_attempt_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    cancel_requested: bool = False
    # W3C ``traceparent`` of the run's trace, its fire span the parent (None: tracing was off)
    traceparent: str | None = None
    # when the slot fires: the slot plus the job's jitter offset (None: at the slot; manual and
    # backfill runs are never jittered). The slot stays the run's identity.
    due_at: datetime | None = None

    @property
    def due(self) -> datetime:
        """The instant the run is due: its jittered fire time, or its slot."""
        return self.slot if self.due_at is None else self.due_at

    @property
    def dedup_key(self) -> str:
        return dedup_key(self.kind, self.slot, self.idempotency_key, self.id)


def dedup_key(kind: RunKind, slot: datetime, idempotency_key: str | None, run_id: str) -> str:
    """Unique per job: one run per slot for scheduled and backfill runs, one per client key for
    manual ones."""
    if kind.keyed_by_slot:
        return f"slot:{int(slot.timestamp())}"
    return f"key:{idempotency_key}" if idempotency_key else f"run:{run_id}"


class Outcome(enum.StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"  # the target answered: bad status, non-zero exit, exception raised
    TIMEOUT = "timeout"
    ERROR = "error"  # could not reach or start the target
    CANCELLED = "cancelled"  # overlap=replace or delete cancelled it
    LOST = "lost"  # the worker's lease expired (crash); found by the sweep


@dataclass(frozen=True, slots=True)
class Attempt:
    run_id: str
    number: int  # 1-based
    worker: str
    started_at: datetime
    finished_at: datetime | None = None
    outcome: Outcome | None = None
    status_code: int | None = None  # HTTP
    exit_code: int | None = None  # command
    error: str | None = None
    output: str | None = None  # first KiB of the response body, or the tail of stdout/stderr
    retry_after_s: float | None = None  # the target asked to wait (HTTP Retry-After)
    # up to --output-tail-bytes (64 KiB) of the output, when it was longer than ``output``: the
    # tail of stdout/stderr or of a traceback, the start of a response body (read no further)
    output_tail: str | None = None
    # the headers of the HTTP request this attempt sent, in order, each credential "[redacted]"
    # (cronwheel.redaction.kept_headers); None: no HTTP request was sent
    request_headers: tuple[tuple[str, str], ...] | None = None
    # while the attempt runs, ``output`` is its output so far (up to 64 KiB), written at
    # ``output_at`` by the worker holding the run's lease; the final record replaces both
    output_at: datetime | None = None
    # the headers of the HTTP answer, in order, credentials "[redacted]"; None: no answer was read
    response_headers: tuple[tuple[str, str], ...] | None = None


LIVE_OUTPUT_MOST = 65_536  # characters of a running attempt's output so far kept: its last ones


@dataclass(frozen=True, slots=True)
class LiveOutput:
    """The output so far of attempt ``attempt`` of run ``run_id``, while it runs (bounded and
    redacted by the worker), for :meth:`cronwheel.store.Store.write_outputs`."""

    run_id: str
    attempt: int
    output: str


@dataclass(frozen=True, slots=True)
class OutputChange:
    """The output so far of a running attempt, as the store last had it written (for the live
    events of :mod:`cronwheel.api.events`)."""

    run_id: str
    job_id: str
    team: str
    attempt: int
    output: str
    at: datetime


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One line of a run's append-only history."""

    run_id: str
    at: datetime
    state: RunState
    previous: RunState | None
    attempt: int = 0
    node: str | None = None
    detail: str | None = None


# -- backfills ------------------------------------------------------------------------------------


class BackfillState(enum.StrEnum):
    RUNNING = "running"  # slots remain from ``cursor`` on
    DONE = "done"  # every slot of the range has a run
    CANCELLED = "cancelled"  # cancelled, or its job deleted, before the range was through


@dataclass(frozen=True, slots=True)
class Backfill:
    """A request to record a run for every past slot of a job in [``start``, ``end``] that has
    none. The store holds it and its progress; the backfiller moves ``cursor`` (the earliest
    instant whose slots remain; None once through) a batch at a time, each batch one transaction
    with its runs. ``total`` is the range's slot count when it was accepted; of those, ``created``
    got their run from this backfill and ``existing`` already had one."""

    id: str
    job_id: str
    start: datetime
    end: datetime
    total: int
    cursor: datetime | None
    state: BackfillState = BackfillState.RUNNING
    created: int = 0
    existing: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def decided(self) -> int:
        """Slots of the range decided so far: given a run here, or found with one."""
        return self.created + self.existing


# -- what the roles hand the store -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Firing:
    """The scheduler's decision for one job: record ``runs`` (PENDING or SKIPPED) and move the
    job's cursor from ``expected_next_run_at`` to ``next_run_at``, only if the job is still at
    ``expected_version`` and ``expected_next_run_at`` (guarantee 1: the store decides)."""

    job_id: str
    expected_version: int
    expected_next_run_at: datetime | None
    next_run_at: datetime | None
    runs: tuple[Run, ...] = ()
    cancel_run_ids: tuple[str, ...] = ()  # overlap=replace: ask these runs' workers to stop


@dataclass(frozen=True, slots=True)
class BackfillStep:
    """The backfiller's decision for one backfill: record ``runs`` (PENDING, kind ``backfill``)
    and move its cursor from ``expected_cursor`` to ``next_cursor`` (None: the range is through),
    only if the backfill is still running at ``expected_cursor`` (the store decides)."""

    backfill_id: str
    job_id: str
    expected_cursor: datetime
    next_cursor: datetime | None
    runs: tuple[Run, ...] = ()


@dataclass(frozen=True, slots=True)
class FireResult:
    accepted: list[Run] = field(default_factory=list)  # PENDING runs now recorded: queue them
    skipped: list[Run] = field(default_factory=list)  # SKIPPED runs now recorded
    stale_job_ids: list[str] = field(default_factory=list)  # condition failed: nothing written
    # the job's shard is not held at the given epoch (a newer lease exists): nothing written
    fenced_job_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class AttemptResult:
    outcome: Outcome
    status_code: int | None = None
    exit_code: int | None = None
    error: str | None = None
    output: str | None = None
    retry_after_s: float | None = None
    output_tail: str | None = None  # more of the output than the 1 KiB excerpt (None: it held it all)
    # the HTTP request's headers as sent, credentials "[redacted]" (redaction.kept_headers); None:
    # no request was sent (not HTTP, or refused before sending)
    request_headers: tuple[tuple[str, str], ...] | None = None
    # the HTTP answer's headers, credentials "[redacted]" (redaction.kept_headers); None: no
    # answer was read
    response_headers: tuple[tuple[str, str], ...] | None = None
    # the target said retrying cannot help (a gRPC INVALID_ARGUMENT, a payload that does not
    # convert ...): the run ends FAILED whatever attempts remain; ``error`` says why
    final: bool = False


@dataclass(frozen=True, slots=True)
class Finish:
    """One attempt's outcome, for :meth:`cronwheel.store.Store.finish_attempts`."""

    run_id: str
    attempt: int
    result: AttemptResult
    next_attempt_at: datetime | None = None  # given: the run is RETRYING (unless it succeeded)
