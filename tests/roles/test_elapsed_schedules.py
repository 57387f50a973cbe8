"""``@every`` and ``@at`` jobs through JobService, the scheduler and the worker over the real store:
an interval fires on its multiples, a one-time job fires once and is then complete (no cursor),
and a one-time slot missed in an outage follows the job's misfire policy (guarantee 2: run, or a
SKIPPED record, never silently absent); one with ``delete_after_success`` is deleted by its run's
success and kept after a failure."""

from __future__ import annotations

import pytest

from cronwheel.errors import NotFoundError
from cronwheel.model import MisfireMode, MisfirePolicy, RunState, SkipReason
from cronwheel.store.port import JobQuery

from .harness import Roles, at

PENDING, SKIPPED = RunState.PENDING, RunState.SKIPPED


async def test_an_interval_job_fires_on_its_multiples(roles: Roles) -> None:
    job = await roles.create(schedule="@every 90s")  # the clock is 12:00:00Z, a multiple of 90 s
    assert job.next_run_at == at(1, 30)
    for instant in (at(1), at(1, 30), at(2), at(3), at(4, 30)):
        await roles.tick(instant)
    assert await roles.table(job.id) == [
        (at(1, 30), PENDING, None),
        (at(3), PENDING, None),
        (at(4, 30), PENDING, None),
    ]
    assert (await roles.store.get_job(job.id)).next_run_at == at(6)
    await roles.work()
    assert [run.state for run in await roles.audit()] == [RunState.SUCCESS] * 3


async def test_a_one_time_job_fires_once_then_has_no_cursor(roles: Roles) -> None:
    job = await roles.create(schedule="@at 2026-03-02T13:05:00+01:00")  # 12:05Z
    assert job.next_run_at == at(5)
    for minute in range(1, 9):
        await roles.tick(at(minute))
    assert await roles.table(job.id) == [(at(5), PENDING, None)]
    stored = await roles.store.get_job(job.id)
    assert stored.next_run_at is None  # complete: nothing more to fire
    assert job.id not in roles.scheduler.wheel
    await roles.work()
    assert [run.state for run in await roles.audit()] == [RunState.SUCCESS]
    resumed = await roles.service.resume((await roles.service.pause(job.id, None)).id)
    assert resumed.next_run_at is None  # a resume does not bring it back


@pytest.mark.parametrize(
    ("policy", "state", "reason"),
    [
        (MisfirePolicy(MisfireMode.SKIP, grace_s=60), SKIPPED, SkipReason.MISFIRE.value),
        (MisfirePolicy(MisfireMode.SKIP, grace_s=3600), PENDING, None),
        (MisfirePolicy(MisfireMode.RUN_ONCE), PENDING, None),
        (MisfirePolicy(MisfireMode.CATCH_UP), PENDING, None),
    ],
    ids=["skip-60", "skip-3600", "run_once", "catch_up"],
)
async def test_a_one_time_slot_missed_in_an_outage_follows_the_misfire_policy(
    roles: Roles, policy: MisfirePolicy, state: RunState, reason: str | None
) -> None:
    job = await roles.create(schedule="@at 2026-03-02T12:05:00Z", misfire=policy)
    await roles.scheduler.load(at(0))
    roles.clock.set(at(20))  # nothing ticked from 12:00 to 12:20
    scheduler = roles.new_scheduler("scheduler-2")
    await roles.tick(at(20), scheduler)
    await roles.tick(at(21), scheduler)
    assert await roles.table(job.id) == [(at(5), state, reason)]
    assert (await roles.store.get_job(job.id)).next_run_at is None


async def test_a_one_time_job_created_late_runs_at_once_under_run_once(roles: Roles) -> None:
    roles.clock.set(at(30))
    job = await roles.create(schedule="@at 2026-03-02T12:05:00Z", misfire=MisfirePolicy(MisfireMode.RUN_ONCE))
    assert job.next_run_at == at(5)
    await roles.tick(at(30))
    runs = await roles.runs(job.id)
    assert [(run.slot, run.state) for run in runs] == [(at(5), PENDING)]
    assert roles.scheduler.stats.lateness_s == [25 * 60.0]  # late by the time it was created after
    assert (await roles.store.get_job(job.id)).next_run_at is None


async def test_a_one_time_job_deleted_after_success_is_gone_once_its_run_succeeds(roles: Roles) -> None:
    job = await roles.create(schedule="@at 2026-03-02T12:00:02Z", delete_after_success=True)  # now + 2 s
    await roles.tick(at(0, 1))
    assert await roles.runs(job.id) == []
    await roles.tick(at(0, 2))
    await roles.work()

    (run,) = await roles.audit()
    assert (run.job_id, run.state) == (job.id, RunState.SUCCESS)
    assert (await roles.store.list_jobs(JobQuery(team="ops"))).items == []  # gone from `jobs list`
    with pytest.raises(NotFoundError):  # `jobs get`: as for any deleted job
        await roles.service.store.get_job(job.id)
    assert await roles.history(run.id) == [PENDING, RunState.RUNNING, RunState.SUCCESS]  # still readable


async def test_a_one_time_job_whose_run_fails_stays_complete(roles: Roles) -> None:
    job = await roles.create(
        schedule="@at 2026-03-02T12:00:02Z", delete_after_success=True, payload={"fail": 1}
    )
    await roles.tick(at(0, 2))
    await roles.work()

    assert [run.state for run in await roles.audit()] == [RunState.FAILED]
    stored = await roles.store.get_job(job.id)  # kept, for people to see why
    assert stored.next_run_at is None


async def test_a_manual_success_does_not_delete_a_one_time_job_before_its_instant(roles: Roles) -> None:
    job = await roles.create(schedule="@at 2026-03-02T12:05:00Z", delete_after_success=True)
    await roles.service.trigger(job.id)
    await roles.work()
    assert [run.state for run in await roles.audit()] == [RunState.SUCCESS]
    assert (await roles.store.get_job(job.id)).next_run_at == at(5)  # its one slot still to come

    await roles.tick(at(5))
    await roles.work()
    assert [run.state for run in await roles.audit()] == [RunState.SUCCESS, RunState.SUCCESS]
    assert (await roles.store.list_jobs(JobQuery(team="ops"))).items == []
