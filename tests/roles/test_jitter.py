"""Jitter through the scheduler and the store, on a manual clock: a jittered slot fires at its
fire time (the slot plus the job's offset), not before, the tick waking at that instant; the run
records it; armed runs are released at it; the claim refuses a run before it; and a restart (a
new scheduler on the same store) fires the slot at the same instant."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronwheel.model import Job, RunState
from cronwheel.schedule.jitter import fire_at
from cronwheel.scheduler.loop import Scheduler

from .harness import Roles, at
from .test_arming import arming, queued

JITTER_S = 30.0
MS = timedelta(milliseconds=1)


async def jittered(roles: Roles, name: str = "job") -> tuple[Job, datetime]:
    """A ``* * * * *`` job with a 30 s window whose first slot (at(1)) fires inside it, not at
    its second's start (so that the tests see the tick wake within a second)."""
    for n in range(100):
        job = await roles.create(name=f"{name}-{n}", jitter_s=JITTER_S)
        due = fire_at(job.id, at(1), JITTER_S)
        if due.microsecond >= 100_000:
            return job, due
        await roles.service.delete(job.id)
        await roles.notify()
    raise AssertionError("no job id gave an offset off a whole second")


async def follow(roles: Roles, scheduler: Scheduler, start: datetime, until: datetime) -> list[datetime]:
    """Tick at ``start``, then at each wake-up the scheduler asks for, up to ``until``: the
    instants it ticked at (each strictly after the one before: no busy loop)."""
    ticks, now = [start], start
    while now < until:
        wake = await roles.tick(now, scheduler)
        assert wake > now or wake >= until
        now = min(wake, until)
        ticks.append(now)
    await roles.tick(until, scheduler)
    return ticks


async def test_a_jittered_slot_fires_at_its_fire_time_and_records_it(roles: Roles) -> None:
    job, due = await jittered(roles)
    assert at(1) < due < at(1) + timedelta(seconds=JITTER_S)
    await roles.tick(at(1), roles.scheduler)
    assert await roles.runs(job.id) == []  # the slot has come, its fire time not yet
    ticks = await follow(roles, roles.scheduler, at(1), due)
    assert due in ticks  # woken at the instant itself, not at the next whole second
    [run] = await roles.runs(job.id)
    assert (run.slot, run.due_at, run.state, run.queued_at) == (at(1), due, RunState.PENDING, due)
    assert (await roles.store.get_job(job.id)).next_run_at == at(2)  # the cursor moves by slot


async def test_nothing_fires_a_millisecond_before_the_fire_time(roles: Roles) -> None:
    job, due = await jittered(roles)
    await follow(roles, roles.scheduler, at(0, 59), due - MS)
    assert await roles.runs(job.id) == []
    await roles.tick(due, roles.scheduler)
    assert [run.due_at for run in await roles.runs(job.id)] == [due]


async def test_a_restarted_scheduler_fires_the_slot_at_the_same_instant(roles: Roles) -> None:
    job, due = await jittered(roles)
    await roles.tick(at(1), roles.scheduler)  # the first scheduler dies before the fire time
    again = roles.new_scheduler("restarted")
    roles.scheduler = again
    await again.load(at(1, 0.5))
    await roles.tick(due - MS, again)
    assert await roles.runs(job.id) == []
    await roles.tick(due, again)
    [run] = await roles.runs(job.id)
    assert (run.slot, run.due_at) == (at(1), due)


async def test_an_armed_jittered_run_is_recorded_ahead_and_released_at_its_fire_time(roles: Roles) -> None:
    scheduler = arming(roles)
    job, due = await jittered(roles)
    await scheduler.load(at(0, 50))
    ticks = await follow(roles, scheduler, at(0, 50), due - MS)
    [run] = await roles.runs(job.id)
    assert (run.slot, run.due_at, run.queued_at) == (at(1), due, None)  # armed: recorded, held
    assert run.created_at is not None
    assert run.created_at < due
    assert await queued(roles) == []
    assert ticks[-1] == due - MS
    await roles.tick(due, scheduler)
    assert (await roles.store.get_run(run.id)).queued_at == due
    assert await queued(roles) == [run.id]


async def test_the_claim_refuses_a_jittered_run_before_its_fire_time(roles: Roles) -> None:
    scheduler = arming(roles)
    job, due = await jittered(roles)
    await scheduler.load(at(0, 50))
    await follow(roles, scheduler, at(0, 50), due - MS)
    [run] = await roles.runs(job.id)
    lease = due + timedelta(minutes=1)
    assert await roles.store.claim_run(run.id, "w", at(1), lease) is None  # the slot: not yet
    assert await roles.store.claim_run(run.id, "w", due - MS, lease) is None
    claimed = await roles.store.claim_run(run.id, "w", due, lease)
    assert claimed is not None
    assert claimed.state is RunState.RUNNING
