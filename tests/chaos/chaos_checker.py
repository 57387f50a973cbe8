"""The chaos suite's judge: reads what happened (a :class:`History`) and says what went wrong.

Jepsen-style and independent: it imports nothing from ``cronwheel`` (states, kinds and policies are
plain strings; fire times come from :mod:`chaos_reference`), so a bug in cronwheel's scheduling
cannot hide itself in the checker. :func:`check` runs eleven checks, each producing named
:class:`Violation` records with enough context to debug (job, slot, run ids, times):

- ``missed``: every required slot has a delivery, or a SKIPPED/FAILED record its policy explains;
- ``doubled``: at most one scheduled run, and one delivered execution id, per (job, slot);
- ``phantom``: nothing runs for a slot that should not exist;
- ``late``: required slots are delivered, and released, within their phase's bound;
- ``unfinished``: every run ends in SUCCESS, FAILED or SKIPPED;
- ``illegal_transition``: each run's history is a legal walk of :data:`LEGAL` ending in the row's state;
- ``stale_epoch``: per shard, scheduled runs in creation order never go back to an older epoch;
- ``manual``: one trigger-now key, one run, one execution id, delivered;
- ``orphan_delivery``: every delivery names a run row, with its job, slot and a recorded attempt;
- ``early_start``: no scheduled run is started or delivered before its slot (a trigger is
  queued ahead of its slot by design, for the worker to hold until it);
- ``after_stop``: nothing of a paused job is delivered for a slot after the pause took effect, and
  no attempt of a deleted job starts after the deletion took effect.

Lateness (``late``). A slot is judged twice: its first *delivery* (the sink's arrival) and its
*release*, the earliest evidence that its trigger was out: the first attempt's ``queued_at``, the
first RUNNING event, or the first delivery, whichever is first. The ``queued_at`` stamp alone is
not judged late: a scheduler stamps a batch queued after publishing it, so a scheduler stopped
between the publish and the stamp writes the stamp when it wakes, after workers have started the
runs on time; the stamp's lateness is reported (``queue_lateness_*``), not bounded. Early is
judged by ``early_start`` alone, with no allowance under faults: the nodes run on one clock,
PostgreSQL's carried forward by the monotonic clock, which agrees with the harness's (the
machine's) to within the anchor's precision, ``clock_tolerance_s``; an attempt's start or an
arrival earlier than that before its slot is early.

Stops (``after_stop``). A pause, an edit or a deletion *takes effect* at the instant the API node
read its clock for the change (``Window.committed``, ``Version.committed``: the job's
``updated_at`` in the API's answer; for a deletion, which answers with no body, the
acknowledgement, which is never before it). cronwheel promises, from that instant: no slot after
it is delivered while the job stays paused (its armed runs are removed in the pause's
transaction); no slot after it that only the replaced schedule has is delivered; and no attempt
of a deleted job is started (a claim reads the live job; a deleted job's run is cancelled, not
attempted). A run whose slot came before a pause took effect
may still be delivered after it: it was due, and released, while the job was active.

Time. Instants the harness measured (API acknowledgements, deliveries, faults) are ``time.time()``
floats; instants from the store are aware datetimes. Both come from the one machine clock.

Which slots are *required* (must have a delivery or an explained record). A slot ``s`` of the
window (``window_start``, ``window_end``] is required when all of these hold:

* it is a reference slot of a definition that was *certainly* live at ``s``: acknowledged at least
  ``edit_margin_s`` before ``s``, and its successor not yet requested at ``s`` (an edit's
  ambiguity band is [request, acknowledgement + edit_margin_s]: slots there may or may not run);
* it lies in no pause window [requested, end_acknowledged + edit_margin_s) (the pause's own edges
  [requested, acknowledged] and [end_requested, end_acknowledged] are ambiguous as well) and
  before any deletion request;
* nothing that may legitimately drop an in-flight slot (an edit, pause or delete request) happened
  between ``s`` and its deadline (``s`` + the lateness its phase allows; for an unbounded fault the
  fault's end + ``recovery_s``).

The checker assumes the workload resumes paused jobs with cronwheel's default ``missed="skip"``
(slots passed while paused are recorded SKIPPED "paused", never run), and that the history is
collected well after ``window_end`` (every required slot's deadline has passed, no fault open).

Phases. A slot is *calm* unless it lies in [fault.start - calm_bound_s, fault.end + extra] of
some fault, where extra is the fault's ``bound_s`` (*bounded*: the slot may be late by up to
``bound_s`` counted from the later of the slot and the fault's start, at least ``calm_bound_s``)
or
``recovery_s`` (*unbounded*: exempt from any lateness bound, but still required, so it must be
made good after the fault by the job's misfire policy).

Explained records (how a required slot without a delivery can still be fine):

* SKIPPED "misfire", slot under a fault: ``skip`` jobs when the record was written (``created_at``)
  at least ``grace_s`` - ``calm_bound_s`` after the slot; ``run_once`` jobs when a later slot
  of the job under the same fault was fired (the policy fires the latest missed slot);
  ``catch_up`` jobs when at least ``max_catch_up`` later slots under the same fault were fired
  (the policy skips only the oldest beyond the cap). Never in a calm phase.
* SKIPPED "overlap": ``overlap="forbid"`` jobs always; ``overlap="replace"`` jobs only under a
  fault (cronwheel's planner keeps only the newest of several slots due in one pass, which only
  happens after a stall).
* SKIPPED "paused": only for slots inside a pause window (those are not required anyway).
* FAILED: jobs with ``expect_failure``; a cancellation (reason mentions "cancel") of an
  ``overlap="replace"`` job; a run finished after its job's deletion was requested; a run with at
  least one attempt whose life [created_at, finished_at] overlaps a fault (attempts exhausted or
  lost under the fault). A calm FAILED run of a healthy job is a miss.
* SKIPPED "calendar": only, and always, for a slot whose local day the job's calendars close
  (``closed_dates``); such a slot must have that record and no delivery.
* SUCCESS without any delivery is *not* an explanation: the sink records every arrival.

Jitter. A job with ``jitter_s`` fires each slot at the slot plus its offset, which the reference
computes on its own (:func:`chaos_reference.jitter_offset`). That instant, not the slot, is what
lateness, early starts, phases and deadlines are measured from; the (job, slot) key is unchanged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from chaos_reference import closed, fires_at, jitter_offset, slots

CHECKS = (
    "missed",
    "doubled",
    "phantom",
    "late",
    "unfinished",
    "illegal_transition",
    "stale_epoch",
    "manual",
    "orphan_delivery",
    "early_start",
    "after_stop",
)
TERMINAL = frozenset({"SUCCESS", "FAILED", "SKIPPED"})
FIRST_STATES = frozenset({"PENDING", "SKIPPED"})
# Guarantee 4 (docs/guarantees.md): "PENDING -> RUNNING -> SUCCESS | FAILED, with RETRYING between
# attempts; SKIPPED is terminal for recorded misses". RUNNING -> RETRYING also covers a lost
# attempt (lease expired).
LEGAL: Mapping[str | None, frozenset[str]] = {
    None: FIRST_STATES,
    "PENDING": frozenset({"RUNNING"}),
    "RUNNING": frozenset({"SUCCESS", "FAILED", "RETRYING"}),
    "RETRYING": frozenset({"RUNNING"}),
    "SUCCESS": frozenset(),
    "FAILED": frozenset(),
    "SKIPPED": frozenset(),
}
MISFIRE_MODES = frozenset({"skip", "run_once", "catch_up"})
OVERLAP_MODES = frozenset({"allow", "forbid", "replace"})
_INF = math.inf


# -- input ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Version:
    """One definition of a job's timing. ``since``: when the API acknowledged the create or edit
    that made it; ``until``: when it acknowledged the next timing edit (None: live to the end);
    ``requested``: when that create or edit call was issued (None: same as ``since``);
    ``committed``: when that edit took effect (module docstring, "Stops"; None: unknown)."""

    expression: str
    zone: str
    since: float
    until: float | None
    requested: float | None = None
    committed: float | None = None


@dataclass(frozen=True)
class Window:
    """A pause (or a deletion) as the harness saw it: the call issued and acknowledged, and the
    resume issued and acknowledged (None: never resumed)."""

    requested: float
    acknowledged: float
    end_requested: float | None = None
    end_acknowledged: float | None = None
    committed: float | None = None  # when the change took effect (module docstring, "Stops")

    @property
    def effective(self) -> float:
        return self.acknowledged if self.committed is None else self.committed


@dataclass(frozen=True)
class JobPlan:
    """What the workload asked of one job. ``versions`` in order; ``misfire`` one of skip,
    run_once, catch_up; ``overlap`` one of allow, forbid, replace."""

    job_id: str
    shard: int
    versions: Sequence[Version]
    misfire: str = "skip"
    grace_s: float = 60.0
    max_catch_up: int = 10
    overlap: str = "allow"
    paused: Sequence[Window] = ()
    deleted: Window | None = None
    expect_failure: bool = False
    jitter_s: float = 0.0  # each slot fires at its reference jitter offset after it
    closed_dates: Sequence[str] = ()  # local dates (ISO, in the job's zone) its calendars close

    def __post_init__(self) -> None:
        if not self.versions:
            raise ValueError(f"job {self.job_id}: at least one version")
        if self.misfire not in MISFIRE_MODES or self.overlap not in OVERLAP_MODES:
            raise ValueError(f"job {self.job_id}: unknown policy {self.misfire!r}/{self.overlap!r}")


@dataclass(frozen=True)
class Delivery:
    """One arrival at the webhook sink (or one line of a command target): ``arrived`` is the
    sink's ``time.time()``, ``answered`` the status it returned (None: no answer)."""

    execution_id: str
    job_id: str
    slot: datetime
    attempt: int
    arrived: float
    answered: int | None = None


@dataclass(frozen=True)
class RunRow:
    """One row of the store's ``runs`` table (``epoch``: the shard epoch its firing carried,
    None in embedded mode)."""

    id: str
    job_id: str
    kind: str
    slot: datetime
    state: str
    reason: str | None = None
    attempts: int = 0
    idempotency_key: str | None = None
    created_at: datetime | None = None
    queued_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    epoch: int | None = None


@dataclass(frozen=True)
class EventRow:
    """One row of ``run_events``; ``id`` is the global insertion order."""

    id: int
    run_id: str
    state: str
    previous: str | None
    at: datetime
    node: str | None = None


@dataclass(frozen=True)
class FaultWindow:
    """A fault injected over [start, end]. ``bound_s``: how late it may make a slot (None:
    unbounded, cronwheel must stop firing and make good by policy afterwards)."""

    kind: str
    start: float
    end: float
    bound_s: float | None


@dataclass(frozen=True)
class ManualTrigger:
    """Trigger-now calls that carried one idempotency key, and the run ids they returned."""

    job_id: str
    idempotency_key: str
    responses: Sequence[str]


@dataclass(frozen=True)
class History:
    """Everything the judge sees. See the module docstring for the meaning of the bounds."""

    jobs: Sequence[JobPlan]
    deliveries: Sequence[Delivery]
    runs: Sequence[RunRow]
    events: Sequence[EventRow]
    window_start: float
    window_end: float
    faults: Sequence[FaultWindow] = ()
    manual: Sequence[ManualTrigger] = ()
    calm_bound_s: float = 1.0
    edit_margin_s: float = 1.0
    recovery_s: float = 30.0
    clock_tolerance_s: float = 0.05


# -- output --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    check: str
    message: str
    job_id: str | None = None
    slot: datetime | None = None
    run_ids: tuple[str, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "message": self.message,
            "job_id": self.job_id,
            "slot": _jsonable(self.slot),
            "run_ids": list(self.run_ids),
            "context": _jsonable(self.context),
        }

    def __str__(self) -> str:
        slot = "" if self.slot is None else f" slot {self.slot.isoformat()}"
        runs = f" runs {','.join(self.run_ids)}" if self.run_ids else ""
        return f"[{self.check}] job {self.job_id}{slot}{runs}: {self.message}"


@dataclass(frozen=True)
class LatenessSummary:
    """Seconds from slot to first arrival (or to queueing); None when there are no samples."""

    count: int
    p50: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True)
class Counts:
    jobs: int
    expected_slots: int  # required slots in the window
    optional_slots: int  # slots in an ambiguity band: may or may not run
    delivered_slots: int  # distinct (job, slot) of the window with a scheduled delivery
    skipped: int  # SKIPPED run rows
    failed: int  # FAILED run rows
    manual: int  # manual run rows
    runs: int
    deliveries: int
    calendar_skipped: int = 0  # SKIPPED (calendar) run rows: slots of closed days
    jittered_slots: int = 0  # delivered slots of the window of jobs with a jitter window


@dataclass(frozen=True)
class Report:
    counts: Counts
    violations: Mapping[str, Sequence[Violation]]  # one entry per name in CHECKS
    lateness_calm: LatenessSummary
    lateness_faulty: LatenessSummary  # bounded faults
    lateness_unbounded: LatenessSummary  # exempt from bounds, reported for the record
    queue_lateness_calm: LatenessSummary
    queue_lateness_faulty: LatenessSummary

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = _jsonable(
            {
                "ok": self.ok,
                "counts": vars(self.counts),
                "lateness_calm": vars(self.lateness_calm),
                "lateness_faulty": vars(self.lateness_faulty),
                "lateness_unbounded": vars(self.lateness_unbounded),
                "queue_lateness_calm": vars(self.queue_lateness_calm),
                "queue_lateness_faulty": vars(self.queue_lateness_faulty),
            }
        )
        result["violations"] = {name: [v.to_dict() for v in found] for name, found in self.violations.items()}
        return result

    def summary(self, per_check: int = 3) -> str:
        c = self.counts
        lines = [
            f"chaos check {'OK' if self.ok else 'FAILED'}: {c.jobs} jobs, {c.expected_slots} expected slots "
            f"({c.optional_slots} optional), {c.delivered_slots} delivered, {c.skipped} skipped, "
            f"{c.failed} failed, {c.manual} manual",
            f"lateness calm {_brief(self.lateness_calm)}; faulty {_brief(self.lateness_faulty)}; "
            f"unbounded {_brief(self.lateness_unbounded)}",
        ]
        for name, found in self.violations.items():
            if found:
                lines.append(f"{name}: {len(found)}")
                lines.extend(f"  {violation}" for violation in found[:per_check])
        return "\n".join(lines)


def _brief(summary: LatenessSummary) -> str:
    if not summary.count:
        return "n=0"
    return f"n={summary.count} p50={summary.p50:.3f}s p99={summary.p99:.3f}s max={summary.max:.3f}s"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- the view the checks share ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    """Consecutive versions with the same timing, merged: live for sure in
    [acknowledged + margin, next_requested), possibly in [requested, until]."""

    expression: str
    zone: str
    requested: float
    acknowledged: float
    until: float
    next_requested: float


@dataclass(frozen=True)
class _Phase:
    kind: str  # "calm" | "bounded" | "unbounded"
    allowed: float  # lateness allowed (inf for unbounded)
    deadline: float  # when the slot must have been fired by
    faults: tuple[FaultWindow, ...]
    cover_end: float  # end of the fault coverage (the slot itself when calm)


@dataclass(frozen=True)
class _Index:
    """The history, indexed once."""

    history: History
    jobs: Mapping[str, JobPlan]
    spans: Mapping[str, Sequence[_Span]]
    runs_by_id: Mapping[str, RunRow]
    scheduled: Mapping[tuple[str, datetime], Sequence[RunRow]]
    delivered: Mapping[tuple[str, datetime], Sequence[Delivery]]  # deliveries of scheduled slots
    by_run: Mapping[str, Sequence[Delivery]]
    events: Mapping[str, Sequence[EventRow]]
    fired: Mapping[str, Sequence[float]]  # per job: sorted slots with a delivery or a run that ran
    # caches, filled as the checks go: phases by instant; per job, the window's reference slots
    phases: dict[float, _Phase] = field(default_factory=dict)
    owned: dict[str, set[datetime]] = field(default_factory=dict)

    def phase(self, moment: float) -> _Phase:
        found = self.phases.get(moment)
        if found is None:
            found = self.phases[moment] = _phase(self.history, moment)
        return found


def _index(history: History) -> _Index:
    runs_by_id = {run.id: run for run in history.runs}
    scheduled: dict[tuple[str, datetime], list[RunRow]] = defaultdict(list)
    for run in history.runs:
        if run.kind == "scheduled":
            scheduled[run.job_id, _utc(run.slot)].append(run)
    delivered: dict[tuple[str, datetime], list[Delivery]] = defaultdict(list)
    by_run: dict[str, list[Delivery]] = defaultdict(list)
    for delivery in history.deliveries:
        by_run[delivery.execution_id].append(delivery)
        named = runs_by_id.get(delivery.execution_id)
        if named is None or named.kind == "scheduled":
            delivered[delivery.job_id, _utc(delivery.slot)].append(delivery)
    events: dict[str, list[EventRow]] = defaultdict(list)
    for event in sorted(history.events, key=lambda e: e.id):
        events[event.run_id].append(event)
    return _Index(
        history=history,
        jobs={job.job_id: job for job in history.jobs},
        spans={job.job_id: _spans(job) for job in history.jobs},
        runs_by_id=runs_by_id,
        scheduled=scheduled,
        delivered=delivered,
        by_run=by_run,
        events=events,
        fired=_fired(scheduled, delivered),
    )


def _fired(
    scheduled: Mapping[tuple[str, datetime], Sequence[RunRow]],
    delivered: Mapping[tuple[str, datetime], Sequence[Delivery]],
) -> dict[str, list[float]]:
    found: dict[str, set[float]] = defaultdict(set)
    for (job_id, slot), rows in scheduled.items():
        if any(row.state != "SKIPPED" for row in rows):
            found[job_id].add(slot.timestamp())
    for job_id, slot in delivered:
        found[job_id].add(slot.timestamp())
    return {job_id: sorted(values) for job_id, values in found.items()}


def _spans(job: JobPlan) -> list[_Span]:
    merged: list[Version] = []
    for version in job.versions:
        if merged and (merged[-1].expression, merged[-1].zone) == (version.expression, version.zone):
            merged[-1] = Version(
                version.expression, version.zone, merged[-1].since, version.until, merged[-1].requested
            )
        else:
            merged.append(version)
    spans = []
    for position, version in enumerate(merged):
        follower = merged[position + 1] if position + 1 < len(merged) else None
        until = _INF if version.until is None else version.until
        spans.append(
            _Span(
                expression=version.expression,
                zone=version.zone,
                requested=_requested(version),
                acknowledged=version.since,
                until=until,
                next_requested=until if follower is None else _requested(follower),
            )
        )
    return spans


def _requested(version: Version) -> float:
    return version.since if version.requested is None else version.requested


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _phase(history: History, slot: float) -> _Phase:
    calm = history.calm_bound_s
    bounded = [f for f in history.faults if f.bound_s is not None and _covers(f, slot, calm, f.bound_s)]
    unbounded = [
        f for f in history.faults if f.bound_s is None and _covers(f, slot, calm, history.recovery_s)
    ]
    # One outage, however many faults make it up: a slot's misfire decision may be taken as
    # late as the last covering fault's coverage ends (an unbounded fault's recovery can reach
    # into a later bounded fault, whose stall then collapses the slot with later ones).
    cover_end = max(
        [f.end + history.recovery_s for f in unbounded] + [f.end + (f.bound_s or 0.0) for f in bounded],
        default=slot,
    )
    if unbounded:
        end = max(f.end for f in unbounded) + history.recovery_s
        return _Phase("unbounded", _INF, max(end, slot + calm), tuple(unbounded), cover_end)
    if bounded:
        # late by up to bound_s, counted from the later of the slot and the fault's start
        allowed = max(calm, *((f.bound_s or 0.0) + max(0.0, f.start - slot) for f in bounded))
        return _Phase("bounded", allowed, slot + allowed, tuple(bounded), cover_end)
    return _Phase("calm", calm, slot + calm, (), slot)


def _covers(fault: FaultWindow, slot: float, calm: float, extra: float) -> bool:
    return fault.start - calm <= slot <= fault.end + extra


def _in_any_fault(history: History, start: float, end: float) -> bool:
    """Whether [start, end] overlaps a fault's coverage."""
    for fault in history.faults:
        extra = history.recovery_s if fault.bound_s is None else fault.bound_s
        if start <= fault.end + extra and end >= fault.start - history.calm_bound_s:
            return True
    return False


# -- which slots should exist ----------------------------------------------------------------------


def _has_owner(index: _Index, job: JobPlan, slot: datetime) -> bool:
    """Whether a definition possibly live at ``slot`` fires at it."""
    if slot in index.owned.get(job.job_id, ()):  # found by _window_slots: yes
        return True
    moment = slot.timestamp()
    return any(
        span.requested <= moment <= span.until and fires_at(span.expression, span.zone, slot)
        for span in index.spans[job.job_id]
    )


def _paused_proper(job: JobPlan, moment: float) -> Window | None:
    for pause in job.paused:
        end = _INF if pause.end_requested is None else pause.end_requested
        if pause.acknowledged <= moment < end:
            return pause
    return None


def _paused_any(job: JobPlan, moment: float, margin: float) -> bool:
    for pause in job.paused:
        end = _INF if pause.end_acknowledged is None else pause.end_acknowledged + margin
        if pause.requested <= moment < end:
            return True
    return False


def _changes(index: _Index, job: JobPlan) -> list[float]:
    """Requests that may drop an in-flight slot: timing edits, pauses, the deletion."""
    found = [span.requested for span in index.spans[job.job_id][1:]]
    found += [pause.requested for pause in job.paused]
    if job.deleted is not None:
        found.append(job.deleted.requested)
    return found


def _required(index: _Index, job: JobPlan, span: _Span, moment: float, changes: Sequence[float]) -> bool:
    """Whether ``job`` must have fired (or recorded) its slot at ``moment`` of ``span``."""
    history = index.history
    if not span.acknowledged + history.edit_margin_s <= moment < span.next_requested:
        return False
    if _paused_any(job, moment, history.edit_margin_s):
        return False
    if job.deleted is not None and moment >= job.deleted.requested:
        return False
    deadline = index.phase(moment).deadline
    return not any(moment <= change <= deadline for change in changes)


def _due(job: JobPlan, slot: datetime) -> float:
    """When ``job`` fires ``slot``: the slot plus its jitter offset (the reference's own)."""
    return (slot + jitter_offset(job.job_id, slot, job.jitter_s)).timestamp()


def _closed(job: JobPlan, slot: datetime) -> bool:
    """Whether ``job``'s calendars close ``slot``'s local day (it is recorded SKIPPED, not run)."""
    return bool(job.closed_dates) and closed(frozenset(job.closed_dates), job.versions[-1].zone, slot)


def _window_slots(index: _Index, job: JobPlan) -> tuple[list[datetime], list[datetime]]:
    """(required, optional) slots of ``job`` in the history's window."""
    history = index.history
    required: set[datetime] = set()
    optional: set[datetime] = set()
    changes = _changes(index, job)
    for span in index.spans[job.job_id]:
        start = max(history.window_start, span.requested)
        end = min(history.window_end, span.until)
        if end <= start:
            continue
        for slot in slots(span.expression, span.zone, _at(start), _at(end)):
            (required if _required(index, job, span, _due(job, slot), changes) else optional).add(slot)
    index.owned[job.job_id] = required | optional
    return sorted(required), sorted(optional - required)


# -- a. missed -----------------------------------------------------------------------------------


def _explained(index: _Index, job: JobPlan, run: RunRow) -> str | None:
    """Why this SKIPPED or FAILED run is a legitimate outcome of its slot (None: it is not)."""
    if run.state == "SKIPPED":
        return _skip_explained(index, job, run)
    if run.state == "FAILED":
        return _failure_explained(index, job, run)
    return None


def _skip_explained(index: _Index, job: JobPlan, run: RunRow) -> str | None:  # noqa: PLR0911
    if run.reason == "calendar":
        return "calendar" if _closed(job, _utc(run.slot)) else None
    moment = _due(job, _utc(run.slot))
    phase = index.phase(moment)
    if run.reason == "paused":
        return "paused" if _paused_any(job, moment, index.history.edit_margin_s) else None
    if run.reason == "overlap":
        if job.overlap == "forbid" or (job.overlap == "replace" and phase.kind != "calm"):
            return f"overlap={job.overlap}"
        return None
    if run.reason != "misfire" or phase.kind == "calm":
        return None
    if job.misfire == "skip":
        decided = None if run.created_at is None else run.created_at.timestamp() - moment
        in_grace = decided is not None and decided < job.grace_s - index.history.calm_bound_s
        return None if in_grace else f"misfire=skip under {phase.kind} fault"
    later = [s for s in index.fired.get(job.job_id, ()) if moment < s <= phase.cover_end]
    needed = 1 if job.misfire == "run_once" else job.max_catch_up
    return f"misfire={job.misfire} under {phase.kind} fault" if len(later) >= needed else None


def _failure_explained(index: _Index, job: JobPlan, run: RunRow) -> str | None:
    if job.expect_failure:
        return "expected failure"
    if job.overlap == "replace" and "cancel" in (run.reason or ""):
        return "replaced"
    finished = None if run.finished_at is None else run.finished_at.timestamp()
    if job.deleted is not None and finished is not None and finished >= job.deleted.requested:
        return "job deleted"
    created = _utc(run.created_at or run.slot).timestamp()
    if run.attempts >= 1 and _in_any_fault(index.history, created, finished or _INF):
        return "attempts exhausted under a fault"
    return None


def _check_missed(index: _Index, job: JobPlan, required: Sequence[datetime]) -> list[Violation]:
    """Every required slot has a delivery, or a SKIPPED/FAILED record its policy explains."""
    found = []
    for slot in required:
        rows = index.scheduled.get((job.job_id, slot), ())
        if _closed(job, slot):
            if not any(run.state == "SKIPPED" and run.reason == "calendar" for run in rows):
                what = "a slot of a closed day without its SKIPPED (calendar) record"
                states = [run.state for run in rows]
                found.append(Violation("missed", what, job.job_id, slot, _ids(rows), {"states": states}))
            continue
        if index.delivered.get((job.job_id, slot)):
            continue
        if any(_explained(index, job, run) for run in rows):
            continue
        phase = index.phase(slot.timestamp())
        found.append(
            Violation(
                "missed",
                "no delivery and no explained record" if rows else "no delivery and no run record",
                job.job_id,
                slot,
                tuple(run.id for run in rows),
                {
                    "states": [f"{run.state}({run.reason})" for run in rows],
                    "phase": phase.kind,
                    "faults": [f.kind for f in phase.faults],
                    "misfire": job.misfire,
                    "overlap": job.overlap,
                },
            )
        )
    return found


# -- b. doubled ----------------------------------------------------------------------------------


def _check_doubled(index: _Index) -> list[Violation]:
    """At most one scheduled run row, and one delivered execution id, per (job, slot)."""
    found = []
    for (job_id, slot), rows in index.scheduled.items():
        if len(rows) > 1:
            states = [run.state for run in rows]
            found.append(
                Violation("doubled", "several scheduled runs", job_id, slot, _ids(rows), {"states": states})
            )
    for (job_id, slot), deliveries in index.delivered.items():
        ids = sorted({delivery.execution_id for delivery in deliveries})
        if len(ids) > 1:
            arrivals = sorted(delivery.arrived for delivery in deliveries)
            found.append(
                Violation(
                    "doubled",
                    "several execution ids delivered",
                    job_id,
                    slot,
                    tuple(ids),
                    {"arrivals": arrivals},
                )
            )
    return found


def _ids(rows: Iterable[RunRow]) -> tuple[str, ...]:
    return tuple(run.id for run in rows)


# -- c. phantom ----------------------------------------------------------------------------------


def _phantom_reason(
    index: _Index, job_id: str, slot: datetime, skipped_paused: bool, skipped_calendar: bool = False
) -> str | None:
    job = index.jobs.get(job_id)
    if job is None:
        return "unknown job"
    moment = slot.timestamp()
    if not _has_owner(index, job, slot):
        return "not a slot of any definition live at that time"
    if _closed(job, slot) and not skipped_calendar:
        return "on a day its calendars close"
    if job.deleted is not None and moment > job.deleted.acknowledged:
        return "after the deletion was acknowledged"
    if _paused_proper(job, moment) is not None and not skipped_paused:
        return "inside a pause"
    return None


def _check_phantom(index: _Index) -> list[Violation]:
    """No scheduled run row and no delivery for a slot that should not exist: not a reference
    slot of a definition possibly live then, after the deletion was acknowledged, or (except a
    SKIPPED "paused" record) inside a pause proper [acknowledged, end_requested)."""
    found = []
    for (job_id, slot), rows in index.scheduled.items():
        only_paused_skips = all(run.state == "SKIPPED" and run.reason == "paused" for run in rows)
        only_calendar_skips = all(run.state == "SKIPPED" and run.reason == "calendar" for run in rows)
        reason = _phantom_reason(index, job_id, slot, only_paused_skips, only_calendar_skips)
        if reason:
            states = [f"{run.state}({run.reason})" for run in rows]
            found.append(Violation("phantom", f"run {reason}", job_id, slot, _ids(rows), {"states": states}))
    for (job_id, slot), deliveries in index.delivered.items():
        reason = _phantom_reason(index, job_id, slot, skipped_paused=False)
        if reason:
            ids = tuple(sorted({delivery.execution_id for delivery in deliveries}))
            arrived = min(delivery.arrived for delivery in deliveries)
            found.append(Violation("phantom", f"delivery {reason}", job_id, slot, ids, {"arrived": arrived}))
    return found


# -- d. late -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Sample:
    job_id: str
    slot: datetime
    phase: _Phase
    delivered: float | None
    queued: float | None
    released: float | None


def _samples(index: _Index, job: JobPlan, required: Sequence[datetime]) -> list[_Sample]:
    found = []
    for slot in required:
        if _closed(job, slot):
            continue  # recorded SKIPPED, never delivered: _check_missed and _check_phantom judge it
        moment = _due(job, slot)
        deliveries = index.delivered.get((job.job_id, slot), ())
        delivered = min((d.arrived for d in deliveries), default=None)
        rows = index.scheduled.get((job.job_id, slot), ())
        # queued_at is rewritten when a trigger is re-dispatched: only a first attempt's is the fire
        queued = [run.queued_at.timestamp() for run in rows if run.queued_at and run.attempts <= 1]
        started = [_first_start(index, run) for run in rows]
        evidence = [*queued, *(s for s in started if s is not None)]
        if delivered is not None:
            evidence.append(delivered)
        found.append(
            _Sample(
                job_id=job.job_id,
                slot=slot,
                phase=index.phase(moment),
                delivered=None if delivered is None else delivered - moment,
                queued=min(queued) - moment if queued else None,
                released=min(evidence) - moment if evidence else None,
            )
        )
    return found


def _first_start(index: _Index, run: RunRow) -> float | None:
    """When the run's first attempt started: its first RUNNING event."""
    starts = _starts(index, run)
    return starts[0] if starts else None


def _starts(index: _Index, run: RunRow) -> list[float]:
    """When each attempt of the run started (its RUNNING events, in order)."""
    return [event.at.timestamp() for event in index.events.get(run.id, ()) if event.state == "RUNNING"]


def _check_late(samples: Sequence[_Sample]) -> list[Violation]:
    """Required slots are delivered, and released (module docstring, "Lateness"), no later than
    their phase allows: ``calm_bound_s`` when calm, ``max(bound_s, calm_bound_s)`` under a
    bounded fault, no bound under an unbounded one."""
    found = []
    for sample in samples:
        if sample.phase.kind == "unbounded":
            continue
        for what, lateness in (("delivered", sample.delivered), ("released", sample.released)):
            if lateness is None or lateness <= sample.phase.allowed:
                continue
            found.append(
                Violation(
                    "late",
                    f"{what} {lateness:.3f}s late ({sample.phase.kind}, allowed {sample.phase.allowed:.3f}s)",
                    sample.job_id,
                    sample.slot,
                    context={"lateness": lateness, "faults": [f.kind for f in sample.phase.faults]},
                )
            )
    return found


def _summary(values: Sequence[float]) -> LatenessSummary:
    if not values:
        return LatenessSummary(0, None, None, None)
    ordered = sorted(values)

    def rank(fraction: float) -> float:
        return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]

    return LatenessSummary(len(ordered), rank(0.5), rank(0.99), ordered[-1])


def _lateness(samples: Sequence[_Sample], kind: str, queued: bool = False) -> LatenessSummary:
    values = [s.queued if queued else s.delivered for s in samples if s.phase.kind == kind]
    return _summary([value for value in values if value is not None])


# -- e. unfinished -------------------------------------------------------------------------------


def _check_unfinished(index: _Index) -> list[Violation]:
    """Every run, scheduled or manual, is in a terminal state (SUCCESS, FAILED, SKIPPED)."""
    return [
        Violation(
            "unfinished",
            f"{run.kind} run left {run.state}",
            run.job_id,
            _utc(run.slot),
            (run.id,),
            {"attempts": run.attempts, "reason": run.reason},
        )
        for run in index.history.runs
        if run.state not in TERMINAL
    ]


# -- f. illegal transition -----------------------------------------------------------------------


def _check_transitions(index: _Index) -> list[Violation]:
    """Each run's events, by id, start with previous None in PENDING or SKIPPED; each names the
    state before it as ``previous``; each step is in :data:`LEGAL` (nothing leaves a terminal
    state); the last event's state is the row's state; every run has a history and every event
    a run."""
    found = []
    for run in index.history.runs:
        events = index.events.get(run.id, ())
        found += [_transition_violation(run, message, event) for message, event in _walk(run, events)]
    for run_id in index.events:
        if run_id not in index.runs_by_id:
            found.append(
                Violation("illegal_transition", "events of a run that has no row", None, None, (run_id,))
            )
    return found


def _walk(run: RunRow, events: Sequence[EventRow]) -> list[tuple[str, EventRow | None]]:
    if not events:
        return [("run has no history", None)]
    problems: list[tuple[str, EventRow | None]] = []
    state: str | None = None
    for event in events:
        if event.previous != state:
            problems.append((f"event says previous {event.previous}, history says {state}", event))
        if event.state not in LEGAL.get(state, frozenset()):
            problems.append((f"illegal step {state} -> {event.state}", event))
        state = event.state
    if state != run.state:
        problems.append((f"row state {run.state} but history ends in {state}", events[-1]))
    return problems


def _transition_violation(run: RunRow, message: str, event: EventRow | None) -> Violation:
    context = {} if event is None else {"event_id": event.id, "at": event.at, "node": event.node}
    return Violation("illegal_transition", message, run.job_id, _utc(run.slot), (run.id,), context)


# -- g. stale epoch ------------------------------------------------------------------------------


def _check_epochs(index: _Index) -> list[Violation]:
    """Per shard, scheduled runs in the order their first event was inserted carry
    non-decreasing epochs: a decrease is a write fenced by a stale lease accepted after a newer
    one. Runs without an epoch (embedded mode) or without events are left out."""
    per_shard: dict[int, list[tuple[int, int, RunRow]]] = defaultdict(list)
    for run in index.history.runs:
        job = index.jobs.get(run.job_id)
        events = index.events.get(run.id)
        if run.kind == "scheduled" and run.epoch is not None and job is not None and events:
            per_shard[job.shard].append((events[0].id, run.epoch, run))
    found = []
    for shard, entries in per_shard.items():
        newest: tuple[int, RunRow] | None = None
        for _, epoch, run in sorted(entries, key=lambda entry: entry[0]):
            if newest is not None and epoch < newest[0]:
                found.append(_epoch_violation(shard, run, newest[1]))
            elif newest is None or epoch > newest[0]:
                newest = (epoch, run)
    return found


def _epoch_violation(shard: int, run: RunRow, newest: RunRow) -> Violation:
    return Violation(
        "stale_epoch",
        f"shard {shard}: epoch {run.epoch} written after epoch {newest.epoch} (run {newest.id})",
        run.job_id,
        _utc(run.slot),
        (run.id, newest.id),
        {"shard": shard, "epoch": run.epoch, "newer_epoch": newest.epoch},
    )


# -- h. manual -----------------------------------------------------------------------------------


def _check_manual(index: _Index) -> list[Violation]:
    """Per (job, idempotency key) of trigger-now calls: every response names the same run, there
    is exactly one manual run with that key (none is fine when no call got a response), it is
    the one the responses name, and it was delivered (or its failure is explained). A manual run
    whose key no trigger used is a violation as well."""
    responses: dict[tuple[str, str], set[str]] = defaultdict(set)
    for trigger in index.history.manual:
        responses[trigger.job_id, trigger.idempotency_key].update(trigger.responses)
    manual_runs: dict[tuple[str, str | None], list[RunRow]] = defaultdict(list)
    for run in index.history.runs:
        if run.kind == "manual":
            manual_runs[run.job_id, run.idempotency_key].append(run)
    found = []
    for (job_id, key), named in responses.items():
        found += _manual_key(index, job_id, key, named, manual_runs.get((job_id, key), []))
    for (job_id, run_key), rows in manual_runs.items():
        if run_key is None or (job_id, run_key) not in responses:
            found.append(
                Violation(
                    "manual", f"manual run with key {run_key!r} nobody asked for", job_id, None, _ids(rows)
                )
            )
    return found


def _manual_key(index: _Index, job_id: str, key: str, named: set[str], rows: list[RunRow]) -> list[Violation]:
    def violation(message: str) -> Violation:
        context = {"key": key, "responses": sorted(named), "states": [run.state for run in rows]}
        return Violation("manual", message, job_id, None, _ids(rows) or tuple(sorted(named)), context)

    if len(named) > 1:
        return [violation("responses name different runs")]
    if len(rows) > 1 or (named and not rows):
        return [violation(f"{len(rows)} manual runs for one key")]
    if not rows:
        return []
    run = rows[0]
    if named and run.id not in named:
        return [violation("the run is not the one the responses named")]
    job = index.jobs.get(job_id)
    if not index.by_run.get(run.id) and (job is None or _explained(index, job, run) is None):
        return [violation(f"manual run {run.state} and never delivered")]
    return []


# -- i. orphan deliveries ------------------------------------------------------------------------


def _check_orphans(index: _Index) -> list[Violation]:
    """Every delivery's execution id names a run row of the same job and slot, and its attempt
    number is one the row recorded (1 <= attempt <= attempts)."""
    found = []
    for delivery in index.history.deliveries:
        run = index.runs_by_id.get(delivery.execution_id)
        slot = _utc(delivery.slot)
        problem = None
        if run is None:
            problem = "execution id names no run"
        elif (run.job_id, _utc(run.slot)) != (delivery.job_id, slot):
            problem = f"run row is job {run.job_id} slot {_utc(run.slot).isoformat()}"
        elif not 1 <= delivery.attempt <= run.attempts:
            problem = f"attempt {delivery.attempt} but the row recorded {run.attempts}"
        if problem:
            context = {"arrived": delivery.arrived, "attempt": delivery.attempt}
            found.append(
                Violation(
                    "orphan_delivery", problem, delivery.job_id, slot, (delivery.execution_id,), context
                )
            )
    return found


# -- j. early start -------------------------------------------------------------------------------


def _check_early(index: _Index) -> list[Violation]:
    """No scheduled run is queued, has an attempt started (RUNNING event) or is delivered more
    than ``clock_tolerance_s`` before its slot: nothing is released before its slot, under a
    fault or not."""
    history = index.history
    found = []
    for run in history.runs:
        if run.kind != "scheduled":
            continue
        slot = _utc(run.slot)
        job = index.jobs.get(run.job_id)
        due = slot.timestamp() if job is None else _due(job, slot)
        stamps = [(f"attempt {n} started", at) for n, at in enumerate(_starts(index, run), start=1)]
        for what, moment in stamps:
            if moment < due - history.clock_tolerance_s:
                found.append(_early(run, slot, due, what, moment))
        for delivery in index.by_run.get(run.id, ()):
            if delivery.arrived < due - history.clock_tolerance_s:
                what = f"attempt {delivery.attempt} delivered"
                found.append(_early(run, slot, due, what, delivery.arrived))
    return found


def _early(run: RunRow, slot: datetime, due: float, what: str, moment: float) -> Violation:
    when = "its slot" if due == slot.timestamp() else "its slot's jittered fire time"
    return Violation("early_start", f"{what} {due - moment:.3f}s before {when}", run.job_id, slot, (run.id,),
                     {"at": moment, "due": due})  # fmt: skip


# -- k. after a stop -------------------------------------------------------------------------------


def _check_after_stop(index: _Index) -> list[Violation]:
    """Module docstring, "Stops": no delivery of a slot after a pause took effect (until the
    resume was requested), and no delivered attempt of a deleted job that started after the
    deletion took effect (attempt n's start: the run's n-th RUNNING event; its arrival when the
    history has none)."""
    found = []
    tolerance = index.history.clock_tolerance_s
    for delivery in index.history.deliveries:
        job = index.jobs.get(delivery.job_id)
        run = index.runs_by_id.get(delivery.execution_id)
        if job is None or run is None:
            continue  # an orphan: its own check
        slot = _utc(run.slot).timestamp()
        for pause in job.paused:
            end = _INF if pause.end_requested is None else pause.end_requested
            if run.kind == "scheduled" and pause.effective + tolerance < slot < end:
                found.append(
                    _stopped(run, delivery, "a slot after the pause took effect delivered", pause.effective)
                )
        if run.kind == "scheduled" and _replaced(job, _utc(run.slot), tolerance):
            found.append(_stopped(run, delivery, "a slot of the replaced schedule delivered after the edit"))
        if job.deleted is not None:
            starts = _starts(index, run)
            started = starts[delivery.attempt - 1] if delivery.attempt <= len(starts) else delivery.arrived
            if started > job.deleted.effective + tolerance:
                found.append(_stopped(run, delivery, "an attempt started after the deletion took effect",
                                      job.deleted.effective))  # fmt: skip
    return found


def _replaced(job: JobPlan, slot: datetime, tolerance: float) -> bool:
    """Whether ``slot`` is a slot of a schedule an edit replaced, not of its successor, and after
    that edit took effect (and before the next edit was requested)."""
    moment = slot.timestamp()
    versions = job.versions
    for position in range(1, len(versions)):
        old, new = versions[position - 1], versions[position]
        following = versions[position + 1] if position + 1 < len(versions) else None
        end = _INF if following is None else _requested(following)
        if new.committed is None or not new.committed + tolerance < moment < end:
            continue
        if fires_at(old.expression, old.zone, slot) and not fires_at(new.expression, new.zone, slot):
            return True
    return False


def _stopped(run: RunRow, delivery: Delivery, message: str, effective: float | None = None) -> Violation:
    context = {"arrived": delivery.arrived, "attempt": delivery.attempt, "effective": effective}
    return Violation("after_stop", message, run.job_id, _utc(run.slot), (run.id,), context)


# -- the judge -----------------------------------------------------------------------------------


def check(history: History) -> Report:
    """Run every check on ``history``. Raises ValueError when the reference cannot judge (a DST
    change inside the window, an expression outside its dialect)."""
    index = _index(history)
    violations: dict[str, list[Violation]] = {name: [] for name in CHECKS}
    samples: list[_Sample] = []
    expected = optional = 0
    for job in history.jobs:
        required, maybe = _window_slots(index, job)
        expected += len(required)
        optional += len(maybe)
        violations["missed"] += _check_missed(index, job, required)
        samples += _samples(index, job, required)
    violations["doubled"] = _check_doubled(index)
    violations["phantom"] = _check_phantom(index)
    violations["late"] = _check_late(samples)
    violations["unfinished"] = _check_unfinished(index)
    violations["illegal_transition"] = _check_transitions(index)
    violations["stale_epoch"] = _check_epochs(index)
    violations["manual"] = _check_manual(index)
    violations["orphan_delivery"] = _check_orphans(index)
    violations["early_start"] = _check_early(index)
    violations["after_stop"] = _check_after_stop(index)
    return Report(
        counts=_counts(index, expected, optional),
        violations=violations,
        lateness_calm=_lateness(samples, "calm"),
        lateness_faulty=_lateness(samples, "bounded"),
        lateness_unbounded=_lateness(samples, "unbounded"),
        queue_lateness_calm=_lateness(samples, "calm", queued=True),
        queue_lateness_faulty=_lateness(samples, "bounded", queued=True),
    )


def _counts(index: _Index, expected: int, optional: int) -> Counts:
    history = index.history
    in_window = {
        key for key in index.delivered if history.window_start < key[1].timestamp() <= history.window_end
    }
    return Counts(
        jobs=len(history.jobs),
        expected_slots=expected,
        optional_slots=optional,
        delivered_slots=len(in_window),
        skipped=sum(run.state == "SKIPPED" for run in history.runs),
        failed=sum(run.state == "FAILED" for run in history.runs),
        manual=sum(run.kind == "manual" for run in history.runs),
        runs=len(history.runs),
        deliveries=len(history.deliveries),
        calendar_skipped=sum(run.state == "SKIPPED" and run.reason == "calendar" for run in history.runs),
        jittered_slots=sum(
            index.jobs[job_id].jitter_s > 0 for job_id, _ in in_window if job_id in index.jobs
        ),
    )


def load_history(raw: Mapping[str, Any]) -> History:
    """A History from its JSON dump (``history.json`` beside a run), to judge it again."""

    def instant(value: Any) -> datetime | None:
        return None if value is None else datetime.fromisoformat(str(value))

    def job(row: Mapping[str, Any]) -> JobPlan:
        deleted = row.get("deleted")
        return JobPlan(
            **{
                **row,
                "versions": [Version(**version) for version in row["versions"]],
                "paused": [Window(**window) for window in row.get("paused", ())],
                "deleted": None if deleted is None else Window(**deleted),
            }
        )

    def stamped(row: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
        return {**row, **{name: instant(row.get(name)) for name in names if name in row}}

    run_times = ("slot", "created_at", "queued_at", "started_at", "finished_at")
    return History(
        jobs=[job(row) for row in raw["jobs"]],
        deliveries=[Delivery(**stamped(row, ("slot",))) for row in raw["deliveries"]],
        runs=[RunRow(**stamped(row, run_times)) for row in raw["runs"]],
        events=[EventRow(**stamped(row, ("at",))) for row in raw["events"]],
        window_start=raw["window_start"],
        window_end=raw["window_end"],
        faults=[FaultWindow(**row) for row in raw.get("faults", ())],
        manual=[ManualTrigger(**row) for row in raw.get("manual", ())],
        calm_bound_s=raw["calm_bound_s"],
        edit_margin_s=raw["edit_margin_s"],
        recovery_s=raw["recovery_s"],
        clock_tolerance_s=raw.get("clock_tolerance_s", 0.05),
    )
