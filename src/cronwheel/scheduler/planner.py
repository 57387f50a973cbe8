"""The scheduler's pure decisions: given a job, its schedule, ``now`` and the job's active runs,
which slots to fire, which to record SKIPPED (and why), and where the job's cursor goes next.

A slot is due at its fire time (:func:`due_at`): the slot itself, or, for a job with jitter,
later by the slot's offset. Whether a slot is due, and how late it is for the misfire policy,
are judged against that instant; the slot stays the run's identity.

No I/O and no clock: everything comes in as arguments, so tests drive it with plain values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from cronwheel.model import (
    DueJob,
    FireGroup,
    Firing,
    Job,
    MisfireMode,
    Overlap,
    Run,
    RunKind,
    RunState,
    SkipReason,
)
from cronwheel.schedule import OnceSchedule, Schedule, parse_schedule
from cronwheel.schedule.calendar import CalendarSchedule, CalendarShift, CalendarSpec
from cronwheel.schedule.jitter import fire_at

MAX_SLOTS_PER_PLAN = 1000  # slots looked at per job per pass; a job further behind continues next pass
_EPSILON = timedelta(microseconds=1)

Plannable = Job | DueJob  # the planner reads only the attributes the two share


Timeline = Schedule | CalendarSchedule  # what the cursor walks: a job's slots, and shifted runs


def schedule_of(job: Plannable) -> Schedule:
    """The job's parsed schedule (cached by the engine: free after the first call)."""
    return parse_schedule(job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id)


def timeline_of(job: Plannable | FireGroup) -> Timeline:
    """What the job's cursor walks: its schedule, or, when it has calendars, the schedule that
    also knows its excluded slots and shifted runs (a job without calendars pays one test)."""
    schedule = parse_schedule(
        job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id
    )  # schedule_of's body, inlined: this is every fire's path (measured: a call is 5 % of a plan)
    if job.calendar_spec is None:
        return schedule
    return _calendar_schedule(schedule, job.calendar_spec, job.calendar_shift)


@functools.lru_cache(maxsize=65_536)
def _calendar_schedule(schedule: Schedule, spec: CalendarSpec, shift: CalendarShift) -> CalendarSchedule:
    return CalendarSchedule(schedule, spec, shift)


def excluded(timeline: Timeline, slot: datetime) -> bool:
    """Whether ``slot`` is a nominal slot its job's calendars close (recorded SKIPPED)."""
    return isinstance(timeline, CalendarSchedule) and timeline.excluded(slot)


def first_slot(job: Plannable, after: datetime) -> datetime | None:
    """The job's first slot strictly after ``after`` that lies within [start_at, end_at]."""
    if job.start_at is not None and job.start_at > after:
        after = job.start_at - _EPSILON  # start_at itself may be a slot
    return _within_end(job, _as_utc(timeline_of(job).next_after(after)))


@functools.lru_cache(maxsize=65_536)
def _next_slot(schedule: Timeline, slot: datetime) -> datetime | None:
    """The slot after ``slot`` (UTC), computed once per (schedule, slot): the many jobs that share
    an expression and fire together share the computation (schedules are cached per expression,
    zone and options; a job with ``H`` has its own)."""
    return _as_utc(schedule.next_after(slot))


def due_at(job: Plannable, slot: datetime) -> datetime:
    """When ``slot`` of ``job`` fires: the slot, later by its jitter offset if the job has a
    window (:mod:`cronwheel.schedule.jitter`)."""
    return fire_at(job.id, slot, job.jitter_s)


def _not_due(job: Plannable, slot: datetime, now: datetime) -> bool:
    """Whether ``slot`` fires after ``now`` (the slot itself first: no hashing for most)."""
    return slot > now or (bool(job.jitter_s) and due_at(job, slot) > now)


def misfire_fires(job: Plannable, now: datetime, slot: datetime) -> bool:
    """Whether the misfire policy fires ``slot``, due at ``now``, when it is the only slot due:
    ``run_once`` and ``catch_up`` always do; ``skip`` within ``grace_s`` of its fire time."""
    if job.misfire.mode is not MisfireMode.SKIP:
        return True
    fires = slot if not job.jitter_s else due_at(job, slot)  # no call for most jobs: the hot path
    return now - fires <= timedelta(seconds=job.misfire.grace_s)


def late_once(job: Plannable, now: datetime) -> datetime | None:
    """A one-time job's instant that has passed (within its start/end window), when its misfire
    policy would still fire it: the cursor goes there and the next pass fires it, late."""
    schedule = schedule_of(job)
    if not isinstance(schedule, OnceSchedule):
        return None
    at = schedule.at.astimezone(UTC)
    within = (job.start_at is None or job.start_at <= at) and (job.end_at is None or at <= job.end_at)
    return at if at <= now and within and misfire_fires(job, now, at) else None


def _within_end(job: Plannable, slot: datetime | None) -> datetime | None:
    if slot is None or (job.end_at is not None and slot > job.end_at):
        return None
    return slot


def plan(
    job: Plannable,
    now: datetime,
    active: Sequence[Run],
    new_id: Callable[[], str],
) -> Firing | None:
    """Decide the due slots of ``job`` (those whose fire time is at or before ``now``, from its
    cursor on).

    Returns None when nothing is due. Otherwise a :class:`Firing` that records one run per due
    slot, PENDING or SKIPPED with its reason, and moves the cursor to the next slot after the
    last one decided (None when the schedule or ``end_at`` has no more).
    """
    cursor = job.next_run_at
    if cursor is None or cursor > now or job.paused or job.deleted_at is not None:
        return None
    if job.jitter_s and due_at(job, cursor) > now:
        return None
    schedule = timeline_of(job)
    if job.calendar_spec is not None and _stale_shift(job, schedule, cursor):
        return _moved_on(job, cursor, _within_end(job, _next_slot(schedule, cursor - _EPSILON)))
    due: list[datetime] = [cursor]
    slot = _within_end(job, _next_slot(schedule, cursor))
    if not active and (slot is None or slot > now or _not_due(job, slot, now)):  # the common case
        return _one_slot(job, now, cursor, slot, new_id)
    while slot is not None and not _not_due(job, slot, now) and len(due) < MAX_SLOTS_PER_PLAN:
        due.append(slot)
        slot = _within_end(job, _next_slot(schedule, slot))
    closed = [each for each in due if excluded(schedule, each)]
    if closed:  # recorded SKIPPED (calendar); the policies decide the open slots alone
        due = [each for each in due if not excluded(schedule, each)]
    later = _count_due(job, slot, now, _tail_size(job))  # due slots beyond this pass (bounded)
    fire = _misfire(job, now, due, later)
    runs, cancel = _overlap(job, now, due, fire, active, new_id)
    if closed:
        runs.extend(_run(job, now, each, RunState.SKIPPED, new_id(), SkipReason.CALENDAR) for each in closed)
        runs.sort(key=lambda run: run.slot)
    return Firing(
        job_id=job.id,
        expected_version=job.version,
        expected_next_run_at=cursor,
        next_run_at=slot,
        runs=tuple(runs),
        cancel_run_ids=tuple(cancel),
    )


def _stale_shift(job: Plannable, schedule: Timeline, cursor: datetime) -> bool:
    """Whether ``cursor`` is a shifted run's instant that the job's calendars no longer give (a
    calendar edit opened its slot's day, or closed the day it moved to): not a slot of the job."""
    if not isinstance(schedule, CalendarSchedule) or schedule.shift is CalendarShift.NONE:
        return False
    return _next_slot(schedule, cursor - _EPSILON) != cursor


def _moved_on(job: Plannable, cursor: datetime, following: datetime | None) -> Firing:
    """A firing that records nothing and moves the cursor from ``cursor`` to ``following``."""
    return Firing(job.id, job.version, cursor, following, ())


def armable(job: Plannable) -> bool:
    """Whether ``job``'s next slot may be recorded before it comes (armed): only a job whose
    decision does not depend on what is running at the slot (overlap ``allow``; forbid and replace
    decide on the runs active at the slot, so they fire at the slot), and not a slot its calendars
    close (recorded SKIPPED at its time, as a missed slot would be)."""
    if job.overlap is not Overlap.ALLOW or job.paused or job.deleted_at is not None:
        return False
    return (
        job.calendar_spec is None
        or job.next_run_at is None
        or not excluded(timeline_of(job), job.next_run_at)
    )


def arm(job: Plannable, now: datetime, new_id: Callable[[], str]) -> Firing | None:
    """The firing that records ``job``'s next slot (its cursor, due after ``now``) ahead of
    time: one PENDING run created ``now``, the cursor moved to the slot after. None when the job
    is not :func:`armable` or its cursor is not due ahead. No misfire can arise: the slot's fire
    time is still to come."""
    cursor = job.next_run_at
    if cursor is None or (cursor if not job.jitter_s else due_at(job, cursor)) <= now or not armable(job):
        return None
    slot = _within_end(job, _next_slot(timeline_of(job), cursor))
    run = _run(job, now, cursor, RunState.PENDING, new_id(), None)
    return Firing(job.id, job.version, cursor, slot, (run,))


def _one_slot(
    job: Plannable, now: datetime, cursor: datetime, slot: datetime | None, new_id: Callable[[], str]
) -> Firing:
    """:func:`plan` when only ``cursor`` is due and no run of the job is active (what a herd is
    made of): the same decision as the general path, without its sets and lists (measured: a
    third of a fire's planning; ``test_the_one_slot_path_decides_as_the_general_one``)."""
    if job.calendar_spec is not None and excluded(timeline_of(job), cursor):
        run = _run(job, now, cursor, RunState.SKIPPED, new_id(), SkipReason.CALENDAR)
    elif misfire_fires(job, now, cursor):
        run = _run(job, now, cursor, RunState.PENDING, new_id(), None)
    else:
        run = _run(job, now, cursor, RunState.SKIPPED, new_id(), SkipReason.MISFIRE)
    return Firing(job.id, job.version, cursor, slot, (run,))


def _tail_size(job: Plannable) -> int:
    """How many of the newest due slots the misfire policy may fire (0: decided by time alone)."""
    if job.misfire.mode is MisfireMode.RUN_ONCE:
        return 1
    if job.misfire.mode is MisfireMode.CATCH_UP:
        return max(job.misfire.max_catch_up, 1)
    return 0


def _count_due(job: Plannable, slot: datetime | None, now: datetime, limit: int) -> int:
    """Due slots from ``slot`` on (those a pass capped at MAX_SLOTS_PER_PLAN left), up to ``limit``."""
    count = 0
    schedule = timeline_of(job)
    while slot is not None and not _not_due(job, slot, now) and count < limit:
        count += 0 if excluded(schedule, slot) else 1
        slot = _within_end(job, _next_slot(schedule, slot))
    return count


def _misfire(job: Plannable, now: datetime, due: list[datetime], later: int) -> set[datetime]:
    """The due slots the misfire policy lets fire; the others are SKIPPED (misfire).

    A job far behind is decided in passes of at most MAX_SLOTS_PER_PLAN slots; ``later`` counts
    (up to the tail size) the due slots after this pass, so that run_once and catch_up fire only
    the newest slots of the whole backlog, not of each pass."""
    policy = job.misfire
    if policy.mode is MisfireMode.SKIP:
        grace = timedelta(seconds=policy.grace_s)
        return {slot for slot in due if now - due_at(job, slot) <= grace}
    room = _tail_size(job) - later
    return set(due[-room:]) if room > 0 else set()


def _overlap(
    job: Plannable,
    now: datetime,
    due: list[datetime],
    fire: set[datetime],
    active: Sequence[Run],
    new_id: Callable[[], str],
) -> tuple[list[Run], list[str]]:
    """Apply the overlap policy to the slots that fire; returns the runs and the runs to cancel."""
    running = [run.id for run in active if not run.state.terminal]
    firing = [slot for slot in due if slot in fire]
    if job.overlap is Overlap.REPLACE and firing:
        firing = firing[-1:]  # within one pass only the newest slot survives a replace
    runs: list[Run] = []
    busy = bool(running)
    for slot in due:
        if slot not in fire:
            runs.append(_run(job, now, slot, RunState.SKIPPED, new_id(), SkipReason.MISFIRE))
        elif slot not in firing or (busy and job.overlap is Overlap.FORBID):
            runs.append(_run(job, now, slot, RunState.SKIPPED, new_id(), SkipReason.OVERLAP))
        else:
            runs.append(_run(job, now, slot, RunState.PENDING, new_id(), None))
            busy = True
    cancel = running if job.overlap is Overlap.REPLACE and firing else []
    return runs, cancel


def _run(
    job: Plannable, now: datetime, slot: datetime, state: RunState, run_id: str, reason: SkipReason | None
) -> Run:
    return Run(
        id=run_id,
        job_id=job.id,
        kind=RunKind.SCHEDULED,
        slot=slot,
        state=state,
        queue=job.queue,
        job_version=job.version,
        reason=None if reason is None else reason.value,
        created_at=now,
        due_at=None if not job.jitter_s else due_at(job, slot),
    )


def _as_utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def last_slots(job: Plannable, start: datetime, end: datetime, count: int) -> tuple[list[datetime], bool]:
    """The newest ``count`` slots of ``job`` in [start, end], and whether older ones were left out.

    Slots are only computed forwards, so windows that end at ``end`` are widened (x4) until they
    hold ``count`` slots or reach ``start``: the cost is proportional to ``count``, not to the
    length of [start, end]. With calendars, shifted runs are among them."""
    schedule = timeline_of(job)
    width = timedelta(minutes=1)
    while True:
        lo = max(start, end - width)
        slots: list[datetime] = []
        slot = _within_end(job, _as_utc(schedule.next_after(lo - _EPSILON)))
        while slot is not None and slot <= end:
            slots.append(slot)
            slot = _within_end(job, _as_utc(schedule.next_after(slot)))
        if len(slots) >= count or lo == start:
            return slots[-count:], len(slots) > count or lo > start
        width *= 4
