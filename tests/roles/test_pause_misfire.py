"""Pause / resume and the misfire policies after downtime, through JobService and the scheduler
over the real store: every slot gets a run or an explicit SKIPPED record (guarantee 2)."""

from __future__ import annotations

from datetime import datetime

import pytest

from cronwheel.model import MisfireMode, MisfirePolicy, RunState, SkipReason
from cronwheel.scheduler.planner import MAX_SLOTS_PER_PLAN

from .harness import Roles, at, minutes

PENDING, SKIPPED = RunState.PENDING, RunState.SKIPPED
PAUSED, MISFIRE = SkipReason.PAUSED.value, SkipReason.MISFIRE.value


async def test_paused_job_does_not_fire(roles: Roles) -> None:
    job = await roles.create()
    stale_view = roles.new_scheduler("scheduler-2", reload_every_s=3600)  # never told of the pause
    await stale_view.load(at(0))
    roles.clock.set(at(0, 30))
    paused = await roles.service.pause(job.id, "maintenance")
    await roles.notify()
    assert paused.paused
    assert paused.paused_at == at(0, 30)
    assert paused.version == job.version + 1
    assert job.id not in roles.scheduler.wheel

    for minute in range(1, 6):
        await roles.tick(at(minute))
        await roles.tick(at(minute), stale_view)
    assert await roles.runs(job.id) == []
    assert stale_view.stats.stale == 1  # it tried once with the old version; the store refused
    assert stale_view.stats.fired == roles.scheduler.stats.fired == 0
    assert await roles.receive() == []


async def test_resume_skip_records_paused_slots_and_carries_on_from_now(roles: Roles) -> None:
    job = await roles.create()
    await roles.tick(at(1))
    roles.clock.set(at(1, 30))
    await roles.service.pause(job.id, None)
    await roles.notify()
    for minute in range(2, 6):
        await roles.tick(at(minute))

    roles.clock.set(at(5, 30))
    resumed = await roles.service.resume(job.id, missed="skip")
    await roles.notify()
    assert not resumed.paused
    assert resumed.next_run_at == at(6)
    assert job.id in roles.scheduler.wheel
    await roles.tick(at(5, 31))
    await roles.tick(at(6))
    await roles.tick(at(7))

    assert await roles.table(job.id) == [
        (at(1), PENDING, None),
        *[(slot, SKIPPED, PAUSED) for slot in minutes(2, 3, 4, 5)],
        (at(6), PENDING, None),
        (at(7), PENDING, None),
    ]
    assert await roles.queue.depth("default") == 3  # SKIPPED runs are never queued
    await roles.work()
    runs = await roles.audit()
    assert [r.state for r in runs] == [RunState.SUCCESS, *[SKIPPED] * 4, RunState.SUCCESS, RunState.SUCCESS]
    for run in runs:
        if run.state is SKIPPED:
            assert await roles.history(run.id) == [SKIPPED]
            assert await roles.attempts(run.id) == []


async def test_resume_skip_at_a_slot_instant_skips_it(roles: Roles) -> None:
    job = await roles.create()
    await roles.service.pause(job.id, None)
    roles.clock.set(at(3))
    resumed = await roles.service.resume(job.id, missed="skip")
    await roles.notify()
    assert resumed.next_run_at == at(4)
    await roles.tick(at(3))
    await roles.tick(at(4))
    assert await roles.table(job.id) == [
        *[(slot, SKIPPED, PAUSED) for slot in minutes(1, 2, 3)],
        (at(4), PENDING, None),
    ]


@pytest.mark.parametrize(
    ("policy", "expected_fired"),
    [
        (MisfirePolicy(MisfireMode.SKIP, grace_s=60), [5]),  # 12:05 is 30 s late, 12:04 is 90 s
        (MisfirePolicy(MisfireMode.SKIP, grace_s=100), [4, 5]),
        (MisfirePolicy(MisfireMode.RUN_ONCE), [5]),
        (MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=10), [2, 3, 4, 5]),
        (MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=2), [4, 5]),
    ],
    ids=["skip-60", "skip-100", "run_once", "catch_up-10", "catch_up-2"],
)
async def test_resume_misfire_applies_the_misfire_policy(
    roles: Roles, policy: MisfirePolicy, expected_fired: list[int]
) -> None:
    job = await roles.create(misfire=policy)
    await roles.tick(at(1))
    roles.clock.set(at(1, 30))
    await roles.service.pause(job.id, None)
    await roles.notify()
    for minute in range(2, 6):
        await roles.tick(at(minute))
    assert len(await roles.runs(job.id)) == 1

    roles.clock.set(at(5, 30))
    resumed = await roles.service.resume(job.id, missed="misfire")
    await roles.notify()
    assert resumed.next_run_at == at(2)  # the cursor stayed where the pause left it
    await roles.tick(at(5, 30))
    await roles.tick(at(6))

    expected: list[tuple[datetime, RunState, str | None]] = [(at(1), PENDING, None)]
    for minute in (2, 3, 4, 5):
        fired = minute in expected_fired
        expected.append((at(minute), PENDING if fired else SKIPPED, None if fired else MISFIRE))
    expected.append((at(6), PENDING, None))
    assert await roles.table(job.id) == expected
    assert (await roles.store.get_job(job.id)).next_run_at == at(7)


# -- downtime: the scheduler did not tick for minutes -------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected_fired"),
    [
        (MisfirePolicy(MisfireMode.SKIP, grace_s=60), [10]),  # 12:10 is 30 s late, 12:09 is 90 s
        (MisfirePolicy(MisfireMode.SKIP, grace_s=120), [9, 10]),
        (MisfirePolicy(MisfireMode.SKIP, grace_s=0), []),  # every slot is late: all recorded SKIPPED
        (MisfirePolicy(MisfireMode.RUN_ONCE), [10]),
        (MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=3), [8, 9, 10]),
        (MisfirePolicy(MisfireMode.CATCH_UP, max_catch_up=50), list(range(1, 11))),
    ],
    ids=["skip-60", "skip-120", "skip-0", "run_once", "catch_up-3", "catch_up-50"],
)
@pytest.mark.parametrize("restart", [False, True], ids=["same-scheduler", "new-scheduler"])
async def test_misfire_policy_after_downtime(
    roles: Roles, policy: MisfirePolicy, expected_fired: list[int], restart: bool
) -> None:
    job = await roles.create(misfire=policy)
    await roles.scheduler.load(at(0))
    roles.clock.advance(10 * 60 + 30)  # 12:10:30, nothing ticked meanwhile
    scheduler = roles.new_scheduler("scheduler-2") if restart else roles.scheduler
    await roles.tick(at(10, 30), scheduler)
    await roles.tick(at(10, 30), scheduler)

    expected: list[tuple[datetime, RunState, str | None]] = []
    for minute in range(1, 11):
        fired = minute in expected_fired
        expected.append((at(minute), PENDING if fired else SKIPPED, None if fired else MISFIRE))
    assert await roles.table(job.id) == expected
    assert (await roles.store.get_job(job.id)).next_run_at == at(11)
    assert scheduler.stats.fired == len(expected_fired)
    assert scheduler.stats.skipped == 10 - len(expected_fired)
    # lateness of the queued ones is exactly the downtime they suffered
    assert scheduler.stats.lateness_s == [(at(10, 30) - at(m)).total_seconds() for m in expected_fired]
    assert len(await roles.receive()) == len(expected_fired)

    await roles.tick(at(11), scheduler)  # back in steady state
    assert (await roles.runs(job.id))[-1].slot == at(11)


async def test_run_once_after_a_long_downtime_fires_once(roles: Roles) -> None:
    job = await roles.create(misfire=MisfirePolicy(MisfireMode.RUN_ONCE))
    missed = MAX_SLOTS_PER_PLAN + 500  # a 25-hour outage of an every-minute job
    roles.clock.set(at(missed, 30))
    for _ in range(3):
        await roles.tick(at(missed, 30))
    runs = await roles.runs(job.id)
    assert len(runs) == missed
    assert [r.slot for r in runs if r.state is PENDING] == [at(missed)]


async def test_resume_skip_records_no_slots_past_end_at(roles: Roles) -> None:
    job = await roles.create(end_at=at(3, 30))
    await roles.service.pause(job.id, None)
    roles.clock.set(at(6, 10))
    resumed = await roles.service.resume(job.id, missed="skip")
    assert resumed.next_run_at is None
    assert await roles.table(job.id) == [(slot, SKIPPED, PAUSED) for slot in minutes(1, 2, 3)]
