"""The scheduler role over the real store: one run per slot, the cursor, the wheel, lateness,
start_at / end_at."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from cronwheel.clock import ManualClock
from cronwheel.coordinator.port import ShardLease
from cronwheel.jobs.service import JobService
from cronwheel.model import DueJob, Job, Overlap, RunKind, RunState
from cronwheel.scheduler import loop
from cronwheel.scheduler.planner import plan as real_plan
from cronwheel.store import Store
from cronwheel.store.sql import SqlStore, open_store

from . import targets
from .harness import START, Roles, at, minutes


async def test_a_slot_fires_exactly_once_and_the_cursor_advances(roles: Roles) -> None:
    job = await roles.create()
    assert job.next_run_at == at(1)

    assert await roles.tick(at(0, 59)) == at(1)  # nothing due yet; wakes at the slot
    assert await roles.runs(job.id) == []

    await roles.tick(at(1))
    await roles.tick(at(1))  # the same instant again
    runs = await roles.runs(job.id)
    assert [(r.slot, r.state, r.kind) for r in runs] == [(at(1), RunState.PENDING, RunKind.SCHEDULED)]
    assert runs[0].queued_at == at(1)
    assert (await roles.store.get_job(job.id)).next_run_at == at(2)
    assert roles.scheduler.stats.fired == 1
    assert len(await roles.receive()) == 1  # exactly one trigger

    # a full reload at the same instant does not bring the slot back either
    await roles.scheduler.load(at(1))
    await roles.tick(at(1))
    assert len(await roles.runs(job.id)) == 1
    assert await roles.receive() == []


async def test_consecutive_slots_each_fire_once(roles: Roles) -> None:
    job = await roles.create()
    for minute in range(1, 6):
        await roles.tick(at(minute))
        await roles.tick(at(minute, 0.5))
    assert await roles.table(job.id) == [(slot, RunState.PENDING, None) for slot in minutes(1, 2, 3, 4, 5)]
    assert (await roles.store.get_job(job.id)).next_run_at == at(6)
    assert roles.scheduler.stats.fired == 5


async def test_second_scheduler_on_the_same_store_is_stale(roles: Roles) -> None:
    """Guarantee 1 (docs/guarantees.md): two schedulers that both think they own the job cannot
    both fire it."""
    job = await roles.create()
    other = roles.new_scheduler("scheduler-2", reload_every_s=3600)  # no periodic re-read meanwhile
    await other.load(at(0))
    await roles.scheduler.load(at(0))

    await roles.tick(at(1))
    await roles.tick(at(1), other)  # it still holds the old cursor in its wheel

    assert [(r.slot, r.state) for r in await roles.runs(job.id)] == [(at(1), RunState.PENDING)]
    assert other.stats.fired == 0
    assert other.stats.stale == 1
    assert len(await roles.receive()) == 1
    # the stale scheduler re-read the job and carries on from the store's cursor, once
    assert job.id in other.wheel
    await roles.tick(at(2), other)
    await roles.tick(at(2))
    assert [(r.slot, r.state) for r in await roles.runs(job.id)] == [
        (at(1), RunState.PENDING),
        (at(2), RunState.PENDING),
    ]
    assert other.stats.fired + roles.scheduler.stats.fired == 2


async def test_two_schedulers_on_two_connections_tick_concurrently(
    roles: Roles, store_url: str, clock: ManualClock
) -> None:
    """As two processes: a second SqlStore on the same file, both ticking at the same instant."""
    jobs = [await roles.create(f"job-{n}") for n in range(5)]
    second_store = await open_store(store_url, clock=clock)
    try:
        one = roles.new_scheduler("scheduler-1", reload_every_s=3600)
        other = roles.new_scheduler("scheduler-2", store=second_store, reload_every_s=3600)
        await asyncio.gather(one.load(at(0)), other.load(at(0)))
        for minute in (1, 2, 3):
            clock.set(at(minute))
            await asyncio.gather(one.tick(at(minute)), other.tick(at(minute)))
    finally:
        await second_store.close()
    for job in jobs:
        assert [r.slot for r in await roles.runs(job.id)] == minutes(1, 2, 3)
    assert one.stats.fired + other.stats.fired == 15
    assert one.stats.stale + other.stats.stale == 15  # every minute both tried; the store chose
    assert len(await roles.receive()) == 15


async def test_job_created_two_seconds_ahead_is_in_the_wheel_at_once(roles: Roles) -> None:
    await roles.scheduler.load(at(0, 50))
    roles.clock.set(at(0, 58))
    job = await roles.create()  # notified through the ChangeFeed
    assert job.next_run_at == at(1)
    assert job.id in roles.scheduler.wheel
    assert roles.scheduler.wheel.next_due() == int(at(1).timestamp())

    assert await roles.tick(at(0, 59)) == at(1)
    assert await roles.runs(job.id) == []
    await roles.tick(at(1))
    assert [r.slot for r in await roles.runs(job.id)] == [at(1)]


async def test_second_resolution_job_created_mid_tick(roles: Roles) -> None:
    await roles.scheduler.load(at(0))
    roles.clock.set(at(0, 10.4))
    job = await roles.create(schedule="*/2 * * * * *")
    assert job.next_run_at == at(0, 12)
    assert job.id in roles.scheduler.wheel
    await roles.tick(at(0, 11))
    await roles.tick(at(0, 12))
    await roles.tick(at(0, 13))
    await roles.tick(at(0, 14))
    assert [r.slot for r in await roles.runs(job.id)] == [at(0, 12), at(0, 14)]


async def test_queued_lateness_is_the_clock_difference(roles: Roles) -> None:
    job = await roles.create()
    await roles.tick(at(1, 0.25))
    await roles.tick(at(2))
    await roles.tick(at(3, 0.75))
    assert roles.scheduler.stats.lateness_s == [0.25, 0.0, 0.75]
    runs = await roles.runs(job.id)
    assert [(r.queued_at - r.slot).total_seconds() for r in runs if r.queued_at] == [0.25, 0.0, 0.75]


async def test_start_at_and_end_at_bound_the_slots(roles: Roles) -> None:
    job = await roles.create(start_at=at(3, 30), end_at=at(6))
    assert job.next_run_at == at(4)
    for minute in range(1, 10):
        await roles.tick(at(minute))
    assert [r.slot for r in await roles.runs(job.id)] == minutes(4, 5, 6)
    assert (await roles.store.get_job(job.id)).next_run_at is None
    assert job.id not in roles.scheduler.wheel


async def test_start_at_on_a_slot_includes_it(roles: Roles) -> None:
    job = await roles.create(start_at=at(5))
    assert job.next_run_at == at(5)
    for minute in range(1, 7):
        await roles.tick(at(minute))
    assert [r.slot for r in await roles.runs(job.id)] == minutes(5, 6)


async def test_fired_runs_are_worked_and_end_terminal(roles: Roles) -> None:
    job = await roles.create(payload={"n": 1})
    for minute in (1, 2, 3):
        await roles.tick(at(minute))
        done = await roles.work()
        assert [r.state if r else None for r in done] == [RunState.SUCCESS]
    runs = await roles.audit()
    assert [r.id for r in runs] == [c.execution_id for c in targets.calls]
    assert [c.scheduled_at for c in targets.calls] == minutes(1, 2, 3)
    assert all(c.payload == {"n": 1} and c.attempt == 1 for c in targets.calls)
    assert {r.job_id for r in runs} == {job.id}
    for run in runs:
        assert await roles.history(run.id) == [RunState.PENDING, RunState.RUNNING, RunState.SUCCESS]


def test_start_is_a_monday_on_the_minute() -> None:
    assert START.weekday() == 0
    assert START.second == 0


async def test_store_file_is_real(store_url: str, roles: Roles) -> None:
    await roles.create()
    assert Path(store_url.removeprefix("sqlite:///")).stat().st_size > 0


async def test_an_edit_makes_an_unnotified_scheduler_stale_and_the_new_schedule_applies(
    roles: Roles,
) -> None:
    job = await roles.create()
    stale_view = roles.new_scheduler("scheduler-2", reload_every_s=3600)
    await stale_view.load(at(0))
    await roles.tick(at(1))
    await roles.tick(at(1), stale_view)
    roles.clock.set(at(1, 30))
    edited = await roles.service.update(
        dataclasses.replace(await roles.store.get_job(job.id), schedule="*/5 * * * *"), job.version
    )
    await roles.notify()
    assert (edited.version, edited.next_run_at) == (job.version + 1, at(5))
    for minute in range(2, 11):
        await roles.tick(at(minute), stale_view)
        await roles.tick(at(minute))
    assert [(r.slot, r.job_version) for r in await roles.runs(job.id)] == [
        (at(1), 1),
        (at(5), 2),
        (at(10), 2),
    ]
    assert stale_view.stats.stale == 2  # once for 12:01 (the other fired it), once for 12:02 (edited)


async def test_pause_racing_a_fire_still_gives_one_run_per_slot(roles: Roles) -> None:
    """JobService.pause reads the job, then writes it back whole (cursor included) without a
    condition on the cursor: a slot fired in between is planned again after resume. The unique
    (job, slot) key must keep it to one run and one trigger."""
    job = await roles.create()
    roles.clock.set(at(1))
    racing = JobService(
        cast(Store, FireDuringRead(roles, job.id)),
        roles.queue,
        roles.feed,
        roles.clock,
        roles.service.policy,
    )
    await racing.pause(job.id, "racing")
    await roles.notify()
    assert [r.slot for r in await roles.runs(job.id)] == [at(1)]

    roles.clock.set(at(1, 20))
    await roles.service.resume(job.id, missed="misfire")
    await roles.notify()
    await roles.tick(at(1, 20))
    await roles.tick(at(2))
    assert [r.slot for r in await roles.runs(job.id)] == [at(1), at(2)]
    assert len(await roles.receive()) == 2


async def test_an_edit_racing_a_fire_does_not_cancel_the_fired_run(roles: Roles) -> None:
    job = await roles.create(overlap=Overlap.REPLACE, payload={"v": 1})
    roles.clock.set(at(1))
    racing = JobService(
        cast(Store, FireDuringRead(roles, job.id)),
        roles.queue,
        roles.feed,
        roles.clock,
        roles.service.policy,
    )
    await racing.update(dataclasses.replace(job, payload={"v": 2}), job.version)
    [fired] = await roles.runs(job.id)
    claimed = await roles.store.claim_run(fired.id, "ghost", at(1, 1), at(1, 1) + timedelta(minutes=10))
    assert claimed is not None
    await roles.notify()
    await roles.tick(at(1, 5))

    assert (await roles.store.get_job(job.id)).next_run_at == at(2)
    assert [r.id for r in await roles.runs(job.id)] == [fired.id]
    assert not (await roles.store.get_run(fired.id)).cancel_requested


class FireDuringRead:
    """A store whose first ``get_job`` lets the scheduler fire the job before answering."""

    def __init__(self, roles: Roles, job_id: str) -> None:
        self._roles = roles
        self._job_id = job_id
        self._fired = False

    async def get_job(self, job_id: str) -> Job:
        job = await self._roles.store.get_job(job_id)
        if not self._fired and job_id == self._job_id:
            self._fired = True
            await self._roles.tick(self._roles.now)
        return job

    def __getattr__(self, name: str) -> Any:
        return getattr(self._roles.store, name)


class CountingStore:
    """Wraps the real store; records the ids each ``due_jobs`` call returned."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.reads: list[list[str]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def due_jobs(self, *args: Any, **kwargs: Any) -> list[DueJob]:
        found = await self._inner.due_jobs(*args, **kwargs)
        self.reads.append([job.id for job in found])
        return found


async def test_the_wheel_loads_every_due_job_page_by_page(roles: Roles) -> None:
    """Seen in the fire benchmark: a load read only the first 10,000 due jobs (one page), so at
    scale most jobs waited for a later reload and fired late."""
    jobs = [await roles.create(f"job-{n}") for n in range(25)]
    store = CountingStore(roles.store)
    scheduler = roles.new_scheduler("paged", store=cast(SqlStore, store), load_page=10)
    await scheduler.load(at(0, 30))
    assert [len(read) for read in store.reads] == [10, 10, 5]
    assert {job.id for job in jobs} <= set(scheduler.jobs)
    await scheduler.tick(at(1))
    assert scheduler.stats.fired == 25


async def test_the_horizon_moves_on_by_reading_only_what_enters_it(roles: Roles) -> None:
    minutely = await roles.create("minutely")
    daily = await roles.create("daily", "4 12 * * *")  # 12:04: beyond the 120 s horizon at 12:00
    store = CountingStore(roles.store)
    scheduler = roles.new_scheduler("mover", store=cast(SqlStore, store), reload_every_s=30, horizon_s=120)
    await scheduler.load(at(0))
    assert set(scheduler.jobs) == {minutely.id}
    for second in range(30, 150, 30):
        roles.clock.set(at(0, second))
        await scheduler.tick(roles.now)
    # every 30 s a read of the jobs entering the horizon; the minutely job is not read again
    assert store.reads[0] == [minutely.id]
    assert store.reads[1:] == [[], [], [], [daily.id]]
    assert set(scheduler.jobs) >= {daily.id}
    roles.clock.set(at(4))
    await scheduler.tick(at(4))
    assert [r.slot for r in await roles.runs(daily.id)] == [at(4)]
    assert [r.slot for r in await roles.runs(minutely.id)] == minutes(1, 2, 3, 4)


class Leases:
    """A coordinator whose owned shards the test sets (the scheduler reads only these two calls)."""

    def __init__(self) -> None:
        self.leases: dict[int, ShardLease] = {}

    def own(self, shards: dict[int, int]) -> None:
        self.leases = {shard: ShardLease(shard, epoch, float("inf")) for shard, epoch in shards.items()}

    def owned_shards(self) -> dict[int, ShardLease]:
        return dict(self.leases)

    async def wait_for_change(self, timeout_s: float) -> None:
        await asyncio.sleep(timeout_s)


async def test_a_gained_shard_is_read_alone_and_a_lost_one_forgotten(roles: Roles) -> None:
    """Ownership changes move the wheel without a full reload: a gained (or re-leased) shard's
    due jobs are read with that shard alone, a lost shard's jobs leave the wheel unread."""
    created = [await roles.create(name=f"job-{n}") for n in range(40)]
    by_shard: dict[int, list[Job]] = {}
    for job in created:
        by_shard.setdefault(job.shard, []).append(job)
    first, second = sorted(by_shard, key=lambda shard: -len(by_shard[shard]))[:2]
    leases = Leases()
    leases.own({first: 1})
    scheduler = roles.new_scheduler("owner", ownership=cast(Any, leases), reload_every_s=3600)
    reads: list[list[int] | None] = []
    due_jobs = roles.store.due_jobs

    async def counted(*args: Any, **kwargs: Any) -> list[DueJob]:
        reads.append(None if args[1] is None else list(args[1]))
        return await due_jobs(*args, **kwargs)

    roles.store.due_jobs = counted  # type: ignore[method-assign]
    await roles.tick(at(0, 30), scheduler)
    assert set(scheduler.jobs) == {job.id for job in by_shard[first]}
    reads.clear()

    leases.own({first: 1, second: 1})
    await roles.tick(at(0, 31), scheduler)
    assert reads == [[second]]  # only the gained shard was read
    assert set(scheduler.jobs) == {job.id for job in by_shard[first] + by_shard[second]}

    reads.clear()
    leases.own({second: 2})  # first lost; second held again under a newer epoch
    await roles.tick(at(0, 32), scheduler)
    assert reads == [[second]]
    assert set(scheduler.jobs) == {job.id for job in by_shard[second]}
    await roles.tick(at(1), scheduler)
    assert {run.job_id for run in await roles.runs()} == {job.id for job in by_shard[second]}


async def test_the_next_batch_is_planned_while_the_previous_one_is_written(
    roles: Roles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches are written in order, one at a time, and each is planned while the one before it is
    in the store: planning is the scheduler's CPU, writing mostly the database's."""
    created = [await roles.create(name=f"job-{n}") for n in range(7)]
    monkeypatch.setattr(loop, "BATCH", 3)
    monkeypatch.setattr(loop, "PLAN_SLICE", 1)
    events: list[str] = []
    writing = 0
    real_fire = roles.store.fire

    def planned(job: Job, *args: Any) -> Any:
        events.append(f"plan{' during write' if writing else ''}")
        return real_plan(job, *args)

    async def fire(firings: Any, *args: Any) -> Any:
        nonlocal writing
        writing += 1
        assert writing == 1  # one write at a time
        events.append(f"write {len(firings)}")
        try:
            await asyncio.sleep(0.05)
            return await real_fire(firings, *args)
        finally:
            writing -= 1

    monkeypatch.setattr(loop, "plan", planned)
    monkeypatch.setattr(roles.store, "fire", fire)
    await roles.tick(at(1))
    assert [e for e in events if e.startswith("write")] == ["write 3", "write 3", "write 1"]
    assert events.count("plan during write") >= 3  # the second batch was planned meanwhile
    assert {run.job_id for run in await roles.runs()} == {job.id for job in created}
