"""The backfill's pure decisions: which slots of a job a past range holds, and what one step of a
running backfill records. No I/O and no clock: the backfiller (:mod:`.backfiller`) reads the
store, calls :func:`step` and writes what it returns.

A step takes the slots from the backfill's cursor on, oldest first, as PENDING runs of kind
``backfill`` keyed by their slot (so a slot that has a run, fired, skipped or backfilled, gets no
second one). Overlap ``allow``: up to the step's budget at once. ``forbid`` and ``replace``: one
run, and only while no run of the job is active (read just before the step, as the scheduler reads
them before a fire), so backfill runs do not overlap each other or a scheduled run, and a backfill
never cancels one; the slot waits rather than being skipped, since a backfill asks for the slot to
run. A paused job's backfill waits for the job to be resumed. A job's calendars hold for a
backfill as for the scheduler, but a backfill asks for slots to run: a slot on a closed day is
not one (no run is made for it), and a shifted run is (its instant is backfilled as a slot).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from cronwheel.model import Backfill, BackfillState, BackfillStep, Job, Overlap, Run, RunKind, RunState
from cronwheel.scheduler.planner import excluded, timeline_of

BACKFILL_CONFIRM_SLOTS = 1000  # a range of more slots is refused unless the caller confirms it
BACKFILL_MAX_SLOTS = 100_000  # a range of more slots is refused even confirmed (counting is bounded)
BACKFILL_RUNS_PER_S = 20  # runs the backfiller records per second, all backfills together
_EPSILON = timedelta(microseconds=1)


def slots_in(job: Job, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The job's slots in [``start``, ``end``] that lie within its [start_at, end_at], oldest
    first, at most ``limit`` of them (UTC): with calendars, its shifted runs' instants too, and
    not its slots on closed days."""
    if job.start_at is not None and job.start_at > start:
        start = job.start_at
    if job.end_at is not None and job.end_at < end:
        end = job.end_at
    schedule = timeline_of(job)
    slots: list[datetime] = []
    slot = schedule.next_after(start - _EPSILON)
    while slot is not None and slot <= end and len(slots) < limit:
        if not excluded(schedule, slot):
            slots.append(slot.astimezone(UTC))
        slot = schedule.next_after(slot)
    return slots


def step(
    backfill: Backfill,
    job: Job,
    active: Sequence[Run],
    now: datetime,
    budget: int,
    new_id: Callable[[], str],
) -> BackfillStep | None:
    """The next step of ``backfill`` of ``job`` (whose non-terminal runs are ``active``): at most
    ``budget`` runs. None when it must wait (no budget, the job paused, or, unless the job's
    overlap is ``allow``, a run of the job active) or has nothing left."""
    cursor = backfill.cursor
    if cursor is None or backfill.state is not BackfillState.RUNNING or budget < 1 or job.paused:
        return None
    if job.overlap is not Overlap.ALLOW:
        if any(not run.state.terminal for run in active):
            return None
        budget = 1
    slots = slots_in(job, cursor, backfill.end, budget + 1)
    taken, rest = slots[:budget], slots[budget:]
    runs = tuple(_run(job, now, slot, new_id()) for slot in taken)
    return BackfillStep(backfill.id, job.id, cursor, rest[0] if rest else None, runs)


def _run(job: Job, now: datetime, slot: datetime, run_id: str) -> Run:
    return Run(
        id=run_id,
        job_id=job.id,
        kind=RunKind.BACKFILL,
        slot=slot,
        state=RunState.PENDING,
        queue=job.queue,
        job_version=job.version,
        created_at=now,
    )
