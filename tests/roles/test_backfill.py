"""Backfills through JobService, the backfiller and the worker over the real store, driven by a
ManualClock: the rate bound, overlap policies, pause, deletion, a repeated range, a restart."""

from __future__ import annotations

import logging

import pytest

from cronwheel.jobs.backfill import BackfillRefusedError
from cronwheel.model import BackfillState, Overlap, RunKind, RunState, new_id
from cronwheel.scheduler.backfill import BACKFILL_CONFIRM_SLOTS, step
from cronwheel.scheduler.backfiller import Backfiller
from cronwheel.telemetry import metrics

from .harness import Roles, at, minutes

PENDING = RunState.PENDING


def backfiller(roles: Roles, runs_per_s: float = 3) -> Backfiller:
    return Backfiller(roles.store, roles.queue, roles.clock, runs_per_s=runs_per_s)


async def test_a_backfill_records_its_slots_at_the_bounded_rate_and_queues_them(
    roles: Roles, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "cronwheel.backfiller")
    job = await roles.create()
    roles.clock.set(at(10))
    backfill = await roles.service.backfill(job.id, at(-10), at(-6))
    assert (backfill.total, backfill.cursor, backfill.state) == (5, at(-10), BackfillState.RUNNING)
    filler = backfiller(roles)
    counted = metrics.RUNS_RECORDED.labels("PENDING", "backfill")
    before = counted._value.get()
    assert await filler.advance(roles.now) == 3  # three runs a pass at 3 runs/s
    assert await roles.table(job.id) == [(slot, PENDING, None) for slot in minutes(-10, -9, -8)]
    assert await filler.advance(roles.now) == 2
    runs = await roles.runs(job.id)
    assert [run.slot for run in runs] == minutes(-10, -9, -8, -7, -6)
    assert {run.kind for run in runs} == {RunKind.BACKFILL}
    assert all(run.queued_at == roles.now for run in runs)
    stored = await roles.store.get_backfill(backfill.id)
    assert (stored.state, stored.created, stored.existing, stored.cursor) == (BackfillState.DONE, 5, 0, None)
    assert await filler.advance(roles.now) == 0
    assert counted._value.get() - before == 5
    [ended] = [record for record in caplog.records if record.getMessage() == "backfill ended"]
    assert (ended.__dict__["runs_created"], ended.__dict__["state"]) == (5, "done")
    outcomes = await roles.work()
    assert [run.state for run in outcomes if run is not None] == [RunState.SUCCESS] * 5


async def test_a_second_backfill_of_the_same_range_creates_nothing(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    await roles.service.backfill(job.id, at(-3), at(-1))
    await backfiller(roles, 100).advance(roles.now)
    again = await roles.service.backfill(job.id, at(-3), at(-1))
    plan = await roles.service.plan_backfill(job.id, at(-3), at(-1))
    assert (plan.missing, plan.existing) == ((), tuple(minutes(-3, -2, -1)))
    assert await backfiller(roles, 100).advance(roles.now) == 0
    stored = await roles.store.get_backfill(again.id)
    assert (stored.state, stored.created, stored.existing) == (BackfillState.DONE, 0, 3)
    assert len(await roles.runs(job.id)) == 3


async def test_slots_the_scheduler_fired_are_left_alone(roles: Roles) -> None:
    job = await roles.create()
    await roles.tick(at(1))
    await roles.tick(at(2))
    roles.clock.set(at(3))
    plan = await roles.service.plan_backfill(job.id, at(0), at(2))
    assert (plan.missing, plan.existing) == ((at(0),), (at(1), at(2)))
    await roles.service.backfill(job.id, at(0), at(2))
    assert await backfiller(roles, 100).advance(roles.now) == 1
    assert [(run.slot, run.kind) for run in await roles.runs(job.id)] == [
        (at(0), RunKind.BACKFILL), (at(1), RunKind.SCHEDULED), (at(2), RunKind.SCHEDULED)
    ]  # fmt: skip


async def test_forbid_records_one_slot_at_a_time_once_nothing_of_the_job_is_active(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.FORBID)
    roles.clock.set(at(10))
    await roles.service.backfill(job.id, at(-3), at(-1))
    filler = backfiller(roles, 100)
    assert await filler.advance(roles.now) == 1
    assert await filler.advance(roles.now) == 0  # the first backfill run is active: the slot waits
    await roles.work()
    assert await filler.advance(roles.now) == 1
    await roles.work()
    assert await filler.advance(roles.now) == 1
    await roles.work()
    runs = await roles.runs(job.id)
    assert [(run.slot, run.state) for run in runs] == [
        (slot, RunState.SUCCESS) for slot in minutes(-3, -2, -1)
    ]


async def test_two_backfills_of_a_forbid_job_never_run_at_once(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.FORBID)
    roles.clock.set(at(10))
    await roles.service.backfill(job.id, at(-3), at(-2))
    await roles.service.backfill(job.id, at(-6), at(-5))
    filler = backfiller(roles, 100)
    for _ in range(4):
        assert await filler.advance(roles.now) == 1  # one run of the job at a time, both backfills together
        await roles.work()
    assert [run.slot for run in await roles.runs(job.id)] == minutes(-6, -5, -3, -2)
    assert await filler.advance(roles.now) == 0


async def test_a_paused_job_s_backfill_waits_for_the_resume(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    await roles.service.backfill(job.id, at(-3), at(-1))
    await roles.service.pause(job.id, "fixing")
    assert await backfiller(roles, 100).advance(roles.now) == 0
    await roles.service.resume(job.id)
    assert await backfiller(roles, 100).advance(roles.now) == 3


async def test_a_deleted_job_s_backfill_is_cancelled(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    backfill = await roles.service.backfill(job.id, at(-3), at(-1))
    await roles.service.delete(job.id)
    assert await backfiller(roles, 100).advance(roles.now) == 0
    assert (await roles.store.get_backfill(backfill.id)).state is BackfillState.CANCELLED
    assert await roles.runs(job.id) == []


async def test_a_backfiller_that_died_after_its_write_leaves_runs_the_sweep_queues(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    await roles.service.backfill(job.id, at(-2), at(-1))
    [backfill] = await roles.store.running_backfills()
    jobs = await roles.store.get_jobs([job.id])
    planned = step(backfill, jobs[job.id], [], roles.now, 10, new_id)
    assert planned is not None
    assert await roles.store.advance_backfill(planned, roles.now) is not None  # then the process died
    assert await roles.receive() == []
    roles.clock.set(at(11))
    assert await roles.sweeper.sweep(roles.now) == 2
    assert len(await roles.work()) == 2


async def test_a_range_beyond_the_confirmation_limit_needs_confirm(roles: Roles) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    start = at(-BACKFILL_CONFIRM_SLOTS)  # BACKFILL_CONFIRM_SLOTS + 1 slots up to at(0)
    with pytest.raises(BackfillRefusedError) as refused:
        await roles.service.backfill(job.id, start, at(0))
    assert (refused.value.field, refused.value.code) == ("confirm", "confirm_required")
    assert await roles.store.running_backfills() == []
    assert (await roles.service.backfill(job.id, start, at(-1))).total == BACKFILL_CONFIRM_SLOTS
    confirmed = await roles.service.backfill(job.id, start, at(0), confirm=True)
    assert confirmed.total == BACKFILL_CONFIRM_SLOTS + 1


@pytest.mark.parametrize(
    ("first", "last", "field", "code"),
    [
        (-1, -2, "to", "range_order"),
        (-1, -1, "to", "range_order"),
        (-2, 11, "to", "in_future"),
        (-0.9, -0.1, "from", "no_slot"),
    ],
)
async def test_a_bad_range_is_refused_whole(
    roles: Roles, first: float, last: float, field: str, code: str
) -> None:
    job = await roles.create()
    roles.clock.set(at(10))
    with pytest.raises(BackfillRefusedError) as refused:
        await roles.service.backfill(job.id, at(first), at(last))
    assert (refused.value.field, refused.value.code) == (field, code)
    assert await roles.store.job_backfills(job.id) == []


async def test_a_range_is_cut_to_the_job_s_start_and_end(roles: Roles) -> None:
    job = await roles.create(start_at=at(-5), end_at=at(30))
    roles.clock.set(at(40))
    plan = await roles.service.plan_backfill(job.id, at(-10), at(35))
    assert (plan.missing[:2], plan.missing[-1], plan.total) == ((at(-5), at(-4)), at(30), 36)
