"""The backfill store contract (``BackfillStore`` of :mod:`cronwheel.store.port`): a backfill
accepted in one transaction, each step one transaction that records its runs and moves the
progress, a slot recorded once whoever records it, a cancellation after which no step records
anything; run against every backend."""

from __future__ import annotations

import asyncio

import pytest

from cronwheel import failpoints
from cronwheel.audit import Actor, AuditAction, AuditQuery
from cronwheel.errors import InvalidInputError, NotFoundError, NotRunningError
from cronwheel.model import Backfill, BackfillState, BackfillStep, Job, Run, RunKind, RunState, new_id
from cronwheel.store.sql import SqlStore

from .support import START, at, fire_one, make_job, make_run, new_job

ACTOR = Actor("token", "tok-1", "ci", None, None)


def backfill_of(job: Job, first: int, last: int, **fields: object) -> Backfill:
    values: dict[str, object] = {
        "id": new_id(), "job_id": job.id, "start": at(first), "end": at(last),
        "total": last - first + 1, "cursor": at(first),
    }  # fmt: skip
    values.update(fields)
    return Backfill(**values)  # type: ignore[arg-type]


def backfill_runs(job: Job, *minutes: int) -> tuple[Run, ...]:
    return tuple(make_run(job, at(minute), kind=RunKind.BACKFILL, created_at=START) for minute in minutes)


async def test_a_backfill_is_stored_with_its_audit_entry_and_read_back(store: SqlStore) -> None:
    job = await new_job(store)
    entry = ACTOR.entry(AuditAction.JOB_BACKFILL, START, job.team, ("job", job.id, job.name))
    stored = await store.create_backfill(backfill_of(job, -10, -1), audit=entry)
    assert stored.state is BackfillState.RUNNING
    assert stored.created_at is not None
    assert await store.get_backfill(stored.id) == stored
    assert await store.job_backfills(job.id) == [stored]
    assert await store.running_backfills() == [stored]
    audited = (await store.list_audit(AuditQuery(action="job.backfill"))).items
    assert [(item.target_id, item.after) for item in audited] == [
        (job.id, {"backfill_id": stored.id, "from": "2026-03-02T11:50:00Z", "to": "2026-03-02T11:59:00Z"})
    ]


async def test_a_backfill_of_a_deleted_or_unknown_job_is_refused(store: SqlStore) -> None:
    job = await new_job(store)
    await store.delete_job(job.id, START)
    with pytest.raises(NotFoundError):
        await store.create_backfill(backfill_of(job, -3, -1))
    with pytest.raises(NotFoundError):
        await store.create_backfill(backfill_of(make_job("never stored"), -3, -1))
    with pytest.raises(NotFoundError):
        await store.get_backfill(new_id())
    assert await store.running_backfills() == []


async def test_a_step_records_its_runs_and_moves_the_progress(store: SqlStore) -> None:
    job = await new_job(store)
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    runs = backfill_runs(job, -4, -3)
    written = await store.advance_backfill(BackfillStep(backfill.id, job.id, at(-4), at(-2), runs), START)
    assert written is not None
    stored, inserted = written
    assert [run.id for run in inserted] == [run.id for run in runs]
    assert (stored.cursor, stored.created, stored.existing, stored.state) == (
        at(-2),
        2,
        0,
        BackfillState.RUNNING,
    )
    assert await store.get_backfill(backfill.id) == stored
    read = await store.get_runs([run.id for run in runs])
    assert {(run.kind, run.state, run.slot) for run in read.values()} == {
        (RunKind.BACKFILL, RunState.PENDING, at(-4)), (RunKind.BACKFILL, RunState.PENDING, at(-3))
    }  # fmt: skip
    assert await store.slots_with_runs(job.id, at(-10), at(0)) == {at(-4), at(-3)}


async def test_a_slot_that_has_a_run_keeps_it_and_counts_as_existing(store: SqlStore) -> None:
    job = await new_job(store, next_run_at=at(-2))
    scheduled = await fire_one(store, job)  # the slot at -2 fired by the scheduler
    manual = make_run(job, at(-1), kind=RunKind.MANUAL, idempotency_key="k")
    await store.create_manual_run(manual)  # a manual run holds no slot
    backfill = await store.create_backfill(backfill_of(job, -2, -1))
    step = BackfillStep(backfill.id, job.id, at(-2), None, backfill_runs(job, -2, -1))
    written = await store.advance_backfill(step, START)
    assert written is not None
    stored, inserted = written
    assert [run.slot for run in inserted] == [at(-1)]
    assert (stored.created, stored.existing, stored.state, stored.cursor) == (1, 1, BackfillState.DONE, None)
    assert (await store.get_run(scheduled.id)).kind is RunKind.SCHEDULED
    assert await store.running_backfills() == []


async def test_a_second_backfill_of_the_same_range_records_nothing(store: SqlStore) -> None:
    job = await new_job(store)
    first = await store.create_backfill(backfill_of(job, -2, -1))
    assert await store.advance_backfill(
        BackfillStep(first.id, job.id, at(-2), None, backfill_runs(job, -2, -1)), START
    )
    again = await store.create_backfill(backfill_of(job, -2, -1))
    written = await store.advance_backfill(
        BackfillStep(again.id, job.id, at(-2), None, backfill_runs(job, -2, -1)), START
    )
    assert written is not None
    assert (written[0].created, written[0].existing, written[1]) == (0, 2, [])


async def test_a_step_from_a_cursor_that_moved_writes_nothing(store: SqlStore) -> None:
    job = await new_job(store)
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    assert await store.advance_backfill(
        BackfillStep(backfill.id, job.id, at(-4), at(-3), backfill_runs(job, -4)), START
    )
    late = BackfillStep(backfill.id, job.id, at(-4), at(-2), backfill_runs(job, -3))  # a second backfiller
    assert await store.advance_backfill(late, START) is None
    assert (await store.get_backfill(backfill.id)).created == 1
    assert await store.slots_with_runs(job.id, at(-10), at(0)) == {at(-4)}


async def test_a_step_of_a_deleted_job_cancels_the_backfill_and_records_nothing(store: SqlStore) -> None:
    job = await new_job(store)
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    await store.delete_job(job.id, START)
    written = await store.advance_backfill(
        BackfillStep(backfill.id, job.id, at(-4), at(-3), backfill_runs(job, -4)), START
    )
    assert written is not None
    assert (written[0].state, written[0].cursor, written[1]) == (BackfillState.CANCELLED, None, [])
    assert await store.slots_with_runs(job.id, at(-10), at(0)) == set()


async def test_a_step_is_refused_whole_for_runs_of_another_job(store: SqlStore) -> None:
    job, other = await new_job(store), await new_job(store, "other")
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    with pytest.raises(InvalidInputError):
        await store.advance_backfill(
            BackfillStep(backfill.id, job.id, at(-4), None, backfill_runs(other, -4)), START
        )
    with pytest.raises(InvalidInputError):
        await store.advance_backfill(
            BackfillStep(backfill.id, other.id, at(-4), None, backfill_runs(other, -4)), START
        )
    assert (await store.get_backfill(backfill.id)).cursor == at(-4)


async def test_a_step_that_fails_before_its_progress_leaves_nothing_written(store: SqlStore) -> None:
    job = await new_job(store)
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    step = BackfillStep(backfill.id, job.id, at(-4), at(-2), backfill_runs(job, -4, -3))
    with failpoints.armed("store.backfill_before_progress=raise@1"), pytest.raises(failpoints.FailpointError):
        await store.advance_backfill(step, START)
    assert await store.slots_with_runs(job.id, at(-10), at(0)) == set()  # both or neither
    assert await store.get_backfill(backfill.id) == backfill
    assert await store.advance_backfill(step, START) is not None  # the same step again: recorded once


async def test_backfills_are_listed_newest_first_and_running_ones_oldest_first(store: SqlStore) -> None:
    job = await new_job(store)
    older = await store.create_backfill(backfill_of(job, -4, -1, created_at=at(-1)))
    newer = await store.create_backfill(backfill_of(job, -8, -5, created_at=at(0)))
    assert [item.id for item in await store.job_backfills(job.id)] == [newer.id, older.id]
    assert [item.id for item in await store.job_backfills(job.id, limit=1)] == [newer.id]
    assert [item.id for item in await store.running_backfills()] == [older.id, newer.id]


async def test_a_cancelled_backfill_keeps_its_runs_and_a_later_step_records_nothing(store: SqlStore) -> None:
    job = await new_job(store)
    backfill = await store.create_backfill(backfill_of(job, -4, -1))
    assert await store.advance_backfill(
        BackfillStep(backfill.id, job.id, at(-4), at(-3), backfill_runs(job, -4)), START
    )
    entry = ACTOR.entry(AuditAction.JOB_BACKFILL_CANCEL, at(1), job.team, ("job", job.id, job.name))

    cancelled = await store.cancel_backfill(backfill.id, at(1), audit=entry)

    assert (cancelled.state, cancelled.cursor, cancelled.created, cancelled.updated_at) == (
        BackfillState.CANCELLED,
        None,
        1,
        at(1),
    )
    assert await store.get_backfill(backfill.id) == cancelled
    assert await store.running_backfills() == []
    next_step = BackfillStep(backfill.id, job.id, at(-3), None, backfill_runs(job, -3, -2, -1))
    assert await store.advance_backfill(next_step, at(2)) is None  # the backfiller's next step
    assert await store.slots_with_runs(job.id, at(-10), at(0)) == {at(-4)}  # its run stays
    audited = (await store.list_audit(AuditQuery(action="job.backfill_cancel"))).items
    assert [(item.target_id, item.before, item.after) for item in audited] == [
        (
            job.id,
            {"backfill_id": backfill.id, "state": "running", "next_slot": "2026-03-02T11:57:00Z"},
            {"backfill_id": backfill.id, "state": "cancelled", "created": 1},
        )
    ]


async def test_cancelling_a_backfill_that_has_ended_is_refused_and_writes_nothing(store: SqlStore) -> None:
    job = await new_job(store)
    done = await store.create_backfill(backfill_of(job, -2, -1))
    written = await store.advance_backfill(
        BackfillStep(done.id, job.id, at(-2), None, backfill_runs(job, -2, -1)), START
    )
    assert written is not None
    cancelled = await store.cancel_backfill((await store.create_backfill(backfill_of(job, -8, -5))).id, START)
    for ended, state in ((written[0], "done"), (cancelled, "cancelled")):
        entry = ACTOR.entry(AuditAction.JOB_BACKFILL_CANCEL, at(1), job.team, ("job", job.id, job.name))
        with pytest.raises(NotRunningError, match=f"is {state}, not running") as refused:
            await store.cancel_backfill(ended.id, at(1), audit=entry)
        assert refused.value.state == state
        assert await store.get_backfill(ended.id) == ended
    assert (await store.list_audit(AuditQuery(action="job.backfill_cancel"))).items == []
    with pytest.raises(NotFoundError):
        await store.cancel_backfill(new_id(), START)


async def test_a_step_racing_a_cancel_records_its_runs_before_it_or_none(store: SqlStore) -> None:
    """Whichever commits first, no run is recorded after the cancellation: the step's runs are
    counted in the cancelled backfill, or the step writes nothing."""
    for attempt in range(6):
        job = await new_job(store, f"raced-{attempt}")
        backfill = await store.create_backfill(backfill_of(job, -4, -1))
        step = BackfillStep(backfill.id, job.id, at(-4), at(-2), backfill_runs(job, -4, -3))
        if attempt % 2:  # started in either order
            cancel = asyncio.create_task(store.cancel_backfill(backfill.id, START))
            advance = asyncio.create_task(store.advance_backfill(step, START))
        else:
            advance = asyncio.create_task(store.advance_backfill(step, START))
            cancel = asyncio.create_task(store.cancel_backfill(backfill.id, START))
        written, cancelled = await advance, await cancel
        recorded = await store.slots_with_runs(job.id, at(-10), at(0))
        assert cancelled.state is BackfillState.CANCELLED
        assert await store.get_backfill(backfill.id) == cancelled
        if written is None:  # the cancel came first
            assert (cancelled.created, recorded) == (0, set())
        else:
            assert cancelled.created == len(written[1]) == len(recorded) == 2
