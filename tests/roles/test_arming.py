"""Arm ahead, release at the slot (``Scheduler(arm_ahead_s=...)``): a slot's run is recorded
before the slot and its trigger queued only at it; a pause, edit or delete in between removes
it; a scheduler that dies between arm and release loses nothing and doubles nothing."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, cast

import pytest

from cronwheel import failpoints
from cronwheel.model import Overlap, RunState
from cronwheel.queue import Trigger
from cronwheel.scheduler import loop
from cronwheel.scheduler.loop import Scheduler

from .harness import Roles, at
from .test_firing import Leases

PENDING, SUCCESS, SKIPPED = RunState.PENDING, RunState.SUCCESS, RunState.SKIPPED


def arming(roles: Roles, node: str = "armer", **options: Any) -> Scheduler:
    options.setdefault("arm_ahead_s", 30.0)
    options.setdefault("release_ahead_s", 0.0)  # released at the slot (test_release_ahead.py: ahead)
    scheduler = roles.new_scheduler(node, **options)
    roles.scheduler = scheduler  # notifications go to it
    return scheduler


async def queued(roles: Roles) -> list[str]:
    return [delivery.trigger.run_id for delivery in await roles.receive()]


async def test_armed_before_the_slot_released_at_it(roles: Roles) -> None:
    scheduler = arming(roles)
    job = await roles.create()
    await roles.tick(at(0, 58), scheduler)
    assert await roles.runs() == []  # one job: a lead of one second
    wake = await roles.tick(at(0, 59), scheduler)
    [run] = await roles.runs()
    assert (run.slot, run.state, run.queued_at, run.created_at) == (at(1), PENDING, None, at(0, 59))
    assert (await roles.store.get_job(job.id)).next_run_at == at(2)
    assert wake == at(1)
    await roles.tick(at(0, 59.999), scheduler)
    assert await queued(roles) == []  # nothing released before its slot
    await roles.tick(at(1), scheduler)
    assert (await roles.store.get_run(run.id)).queued_at == at(1)
    [done] = await roles.work()
    assert done is not None
    assert done.state is SUCCESS
    assert done.started_at is not None
    assert done.started_at >= done.slot
    await roles.tick(at(1, 59), scheduler)
    await roles.tick(at(2), scheduler)
    assert [(r.slot, r.queued_at) for r in await roles.runs()] == [(at(1), at(1)), (at(2), at(2))]


async def test_the_lead_grows_with_the_jobs_of_a_second(
    roles: Roles, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = arming(roles, arm_ahead_s=4.0)
    assert [scheduler.lead(n) for n in (1, 2_000, 6_000, 100_000)] == [1.0, 1.0, 3.0, 4.0]
    monkeypatch.setattr(loop, "ARM_S_PER_JOB", 1.0)  # five jobs in one second: a lead of 4 s (the max)
    for n in range(5):
        await roles.create(name=f"job-{n}")
    await roles.tick(at(0, 55), scheduler)
    assert await roles.runs() == []
    await roles.tick(at(0, 56), scheduler)
    assert len(await roles.runs()) == 5
    await roles.tick(at(1), scheduler)
    assert len(await queued(roles)) == 5


@pytest.mark.parametrize("lead", [0.0, 0.5])
async def test_a_lead_of_0_or_below_one_second_turns_arming_off(roles: Roles, lead: float) -> None:
    """``--arm-ahead 0`` (tests/cli/test_arm_ahead_option.py: it reaches the settings): nothing is
    recorded before its slot, and the slot fires at its time as without arming."""
    scheduler = arming(roles, arm_ahead_s=lead)
    assert scheduler.arm_ahead_s == 0.0
    await roles.create()
    await roles.tick(at(0, 59), scheduler)
    assert await roles.runs() == []
    await roles.tick(at(1), scheduler)
    assert [run.state for run in await roles.runs()] == [PENDING]
    assert len(await queued(roles)) == 1


@pytest.mark.parametrize("overlap", [Overlap.FORBID, Overlap.REPLACE])
async def test_jobs_decided_at_the_slot_are_not_armed(roles: Roles, overlap: Overlap) -> None:
    scheduler = arming(roles)
    await roles.create(overlap=overlap)
    await roles.tick(at(0, 59), scheduler)
    await roles.tick(at(0, 59.5), scheduler)
    assert await roles.runs() == []
    await roles.tick(at(1), scheduler)
    [run] = await roles.runs()
    assert (run.slot, run.created_at, run.queued_at) == (at(1), at(1), at(1))


async def test_a_pause_in_the_window_removes_the_armed_run_and_a_resume_rearms(roles: Roles) -> None:
    scheduler = arming(roles)
    job = await roles.create()
    await roles.tick(at(0, 59), scheduler)
    [armed] = await roles.runs()
    roles.clock.set(at(0, 59.2))
    await roles.service.pause(job.id, "window")
    await roles.notify(scheduler)
    assert await roles.runs() == []  # removed, not SKIPPED: it never existed for anyone
    assert len(scheduler.armed) == 0
    roles.clock.set(at(0, 59.5))
    await roles.service.resume(job.id)
    await roles.notify(scheduler)
    await roles.tick(at(0, 59.5), scheduler)
    [again] = await roles.runs()
    assert again.id != armed.id
    assert again.slot == at(1)
    assert again.queued_at is None
    await roles.tick(at(1), scheduler)
    assert await queued(roles) == [again.id]  # one run for the slot, one trigger


async def test_a_pause_over_the_slot_records_it_skipped_on_resume(roles: Roles) -> None:
    scheduler = arming(roles)
    job = await roles.create()
    await roles.tick(at(0, 59), scheduler)
    roles.clock.set(at(0, 59.5))
    await roles.service.pause(job.id, None)
    await roles.notify(scheduler)
    await roles.tick(at(1), scheduler)
    assert await roles.runs() == []
    assert await queued(roles) == []
    roles.clock.set(at(1, 30))
    await roles.service.resume(job.id)
    assert await roles.table(job.id) == [(at(1), SKIPPED, "paused")]


async def test_an_edit_in_the_window_rearms_with_the_new_version(roles: Roles) -> None:
    scheduler = arming(roles)
    job = await roles.create(payload={"v": 1})
    await roles.tick(at(0, 59), scheduler)
    [armed] = await roles.runs()
    roles.clock.set(at(0, 59.3))
    current = await roles.store.get_job(job.id)
    edited = await roles.service.update(replace(current, payload={"v": 2}), current.version)
    await roles.notify(scheduler)
    await roles.tick(at(0, 59.3), scheduler)
    [rearmed] = await roles.runs()
    assert rearmed.id != armed.id
    assert rearmed.job_version == edited.version
    await roles.tick(at(1), scheduler)
    assert await queued(roles) == [rearmed.id]


async def test_a_delete_in_the_window_and_a_trigger_whose_run_is_gone(roles: Roles) -> None:
    scheduler = arming(roles)
    job = await roles.create()
    await roles.tick(at(0, 59), scheduler)
    [armed] = await roles.runs()
    roles.clock.set(at(0, 59.5))
    await roles.service.delete(job.id)
    await roles.notify(scheduler)
    await roles.tick(at(1), scheduler)
    assert await roles.runs() == []
    assert await queued(roles) == []
    # a trigger that was queued for it anyway (a clock skewed node): the worker treats it as done
    await roles.queue.publish([Trigger(armed.id, job.id, "default")])
    assert await roles.work() == [None]
    assert await queued(roles) == []
    assert await roles.runs() == []


async def test_the_sweeper_never_releases_an_armed_run_before_its_slot(roles: Roles) -> None:
    scheduler = arming(roles, arm_ahead_s=30.0)
    for n in range(3):
        await roles.create(name=f"job-{n}")
    await roles.tick(at(0, 59), scheduler)
    assert len(await roles.runs()) == 3
    eager = type(roles.sweeper)(roles.store, roles.queue, roles.clock, unqueued_after_s=0.0)
    roles.clock.set(at(0, 59.9))
    assert await eager.sweep(roles.now) == 0
    assert await roles.sweeper.recover_after_restart(roles.now) == 0
    assert await queued(roles) == []


@pytest.mark.parametrize("place", ["scheduler.after_arm", "scheduler.before_release"])
async def test_killed_between_arm_and_release_the_next_owner_releases_once(roles: Roles, place: str) -> None:
    dying = arming(roles, "dying")
    await roles.create()
    with failpoints.armed(f"{place}=raise@1"):
        if place == "scheduler.after_arm":
            with pytest.raises(failpoints.FailpointError):
                await roles.tick(at(0, 59), dying)
        else:
            await roles.tick(at(0, 59), dying)
            with pytest.raises(failpoints.FailpointError):
                await roles.tick(at(1), dying)
    [run] = await roles.runs()
    assert run.queued_at is None  # recorded, never released
    heir = arming(roles, "heir")
    await roles.tick(at(1), heir)  # loads the armed run with the wheel, releases it at its slot
    assert await queued(roles) == [run.id]
    roles.clock.set(at(1, 10))
    assert await roles.sweeper.sweep(roles.now) == 0  # released: nothing for the sweep
    assert [r.id for r in await roles.runs()] == [run.id]  # one run for the slot


async def test_killed_after_arm_with_no_heir_the_sweep_releases_after_the_slot(roles: Roles) -> None:
    dying = arming(roles, "dying")
    await roles.create()
    with failpoints.armed("scheduler.after_arm=raise@1"), pytest.raises(failpoints.FailpointError):
        await roles.tick(at(0, 59), dying)
    [run] = await roles.runs()
    roles.clock.set(at(1, 1))
    assert await roles.sweeper.sweep(roles.now) == 0  # within unqueued_after_s of its slot
    roles.clock.set(at(1, 3))
    assert await roles.sweeper.sweep(roles.now) == 1
    [done] = await roles.work()
    assert done is not None
    assert done.state is SUCCESS
    assert [r.id for r in await roles.runs()] == [run.id]


async def test_a_gained_shard_s_armed_runs_are_released_by_its_new_owner(roles: Roles) -> None:
    job = await roles.create()
    leases = Leases()
    leases.own({job.shard: 1})
    first = arming(roles, "first", ownership=cast(Any, leases))
    await roles.tick(at(0, 59), first)
    [run] = await roles.runs()
    other = Leases()
    second = arming(roles, "second", ownership=cast(Any, other))
    await roles.tick(at(0, 59.2), second)  # owns nothing yet
    leases.own({})  # the first loses the shard before the slot ...
    other.own({job.shard: 2})  # ... and the second gains it
    await roles.tick(at(0, 59.5), second)
    assert run.id in second.armed
    await roles.tick(at(1), first)
    await roles.tick(at(1), second)
    assert await queued(roles) == [run.id]  # released once, by the owner
    assert [r.id for r in await roles.runs()] == [run.id]


async def test_a_stale_arm_is_refused_by_the_store(roles: Roles) -> None:
    """Two schedulers arming the same slot (both believe they own it): one run."""
    one, two = arming(roles, "one"), arming(roles, "two")
    await roles.create()
    await roles.tick(at(0, 58), one)
    await roles.tick(at(0, 58), two)
    await roles.tick(at(0, 59), one)
    await roles.tick(at(0, 59), two)
    assert len(await roles.runs()) == 1
    await roles.tick(at(1), one)
    await roles.tick(at(1), two)
    [run] = await roles.runs()
    assert await queued(roles) == [run.id]
    assert run.created_at is not None
    assert run.slot - run.created_at == timedelta(seconds=1)
