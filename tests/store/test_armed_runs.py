"""Armed runs (recorded before their slot), on every backend: a version bump removes those still
ahead, released or not, in its own transaction and moves the cursor back; the claim refuses them
before their slot; the sweep leaves them until their slot; a scheduler gaining shards finds the
unreleased ones (``cronwheel.store.sql.armed``)."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import update

from cronwheel.clock import ManualClock
from cronwheel.errors import NotFoundError
from cronwheel.model import RunKind, RunState
from cronwheel.store.port import RunQuery
from cronwheel.store.schema import runs
from cronwheel.store.sql import SqlStore

from .support import START, at, fire_one, make_run, new_job

PENDING = RunState.PENDING


async def _armed(store: SqlStore, slot_minutes: float = 1) -> tuple[str, str]:
    """A job whose run at ``at(slot_minutes)`` was armed at START (the store's clock); returns
    (job id, run id)."""
    job = await new_job(store, next_run_at=at(slot_minutes))
    run = await fire_one(store, job)
    assert (run.state, run.queued_at, run.slot) == (PENDING, None, at(slot_minutes))
    return job.id, run.id


async def _gone(store: SqlStore, run_id: str) -> None:
    with pytest.raises(NotFoundError):
        await store.get_run(run_id)
    with pytest.raises(NotFoundError):
        await store.list_events(run_id)


async def test_an_edit_removes_the_armed_run_and_moves_the_cursor_back(store: SqlStore) -> None:
    job_id, run_id = await _armed(store)
    job = await store.get_job(job_id)
    assert job.next_run_at == at(2)  # the arm moved the cursor past the armed slot
    edited = await store.update_job(dataclasses.replace(job, payload={"n": 2}), job.version)
    await _gone(store, run_id)
    assert edited.next_run_at == at(1)  # the new version decides that slot again
    assert edited.version == job.version + 1
    assert await store.last_runs([job_id]) == {}  # no run, no SKIPPED record either
    assert (await store.list_runs(RunQuery(job_id=job_id))).items == []


async def test_a_retimed_edit_keeps_its_own_cursor(store: SqlStore) -> None:
    job_id, run_id = await _armed(store)
    job = await store.get_job(job_id)
    retimed = dataclasses.replace(job, schedule="*/5 * * * *", next_run_at=at(5))
    edited = await store.update_job(retimed, job.version, move_cursor=True)
    await _gone(store, run_id)
    assert edited.next_run_at == at(5)


async def test_a_pause_removes_the_armed_run_and_a_resume_decides_the_slot(store: SqlStore) -> None:
    earlier = await new_job(store, name="earlier", next_run_at=START)
    job_id, run_id = await _armed(store)
    job = await store.get_job(job_id)
    paused = await store.update_job(dataclasses.replace(job, paused=True), job.version)
    await _gone(store, run_id)
    assert paused.next_run_at == at(1)
    resumed, recorded = await store.resume_job(
        dataclasses.replace(paused, paused=False), paused.version, [], START, move_cursor=False
    )
    assert (resumed.next_run_at, recorded) == (at(1), [])
    assert (await store.get_job(earlier.id)).next_run_at == START  # other jobs untouched


async def test_a_delete_removes_the_armed_run(store: SqlStore) -> None:
    job_id, run_id = await _armed(store)
    await store.delete_job(job_id, START, cancel_active=True)
    await _gone(store, run_id)


async def test_the_job_last_run_falls_back_to_the_run_before(store: SqlStore) -> None:
    job = await new_job(store, next_run_at=START)
    done = await fire_one(store, job)  # released and due: not armed
    await store.mark_queued([done.id], START)
    job = await store.get_job(job.id)
    armed = await fire_one(store, job)  # slot at(1), ahead of the store's clock
    assert (await store.last_runs([job.id]))[job.id].id == armed.id
    await store.update_job(dataclasses.replace(await store.get_job(job.id), payload={"x": 1}), None)
    await _gone(store, armed.id)
    assert (await store.last_runs([job.id]))[job.id].id == done.id
    assert (await store.get_run(done.id)).state is PENDING


async def test_runs_at_or_past_their_slot_stay(store: SqlStore, clock: ManualClock) -> None:
    job = await new_job(store, next_run_at=at(1))
    run = await fire_one(store, job)
    clock.set(at(1))  # the slot has come: the run stands, whatever the edit
    job = await store.get_job(job.id)
    edited = await store.update_job(dataclasses.replace(job, payload={"x": 1}), job.version)
    assert (await store.get_run(run.id)).state is PENDING
    assert edited.next_run_at == at(2)


async def test_a_run_released_ahead_of_its_slot_goes_with_an_edit(store: SqlStore) -> None:
    job_id, run_id = await _armed(store)
    await store.mark_queued([run_id], START)  # released ahead: a worker holds its trigger
    assert (await store.get_run(run_id)).queued_at == START
    job = await store.get_job(job_id)
    edited = await store.update_job(dataclasses.replace(job, payload={"x": 2}), job.version)
    await _gone(store, run_id)  # the trigger held meets no run at the slot
    assert edited.next_run_at == at(1)


async def test_a_started_run_stays_through_an_edit(store: SqlStore, clock: ManualClock) -> None:
    job_id, run_id = await _armed(store)
    clock.set(at(1))
    assert run_id in await store.claim_runs_with_jobs([run_id], "w", at(1), at(2))
    clock.set(START + timedelta(seconds=30))  # an edit dated before the slot (a clock behind)
    job = await store.get_job(job_id)
    await store.update_job(dataclasses.replace(job, payload={"x": 3}), job.version)
    assert (await store.get_run(run_id)).state is RunState.RUNNING


async def test_the_claim_refuses_a_run_before_its_slot(store: SqlStore) -> None:
    _, run_id = await _armed(store)
    await store.mark_queued([run_id], START)
    just_before = at(1) - timedelta(microseconds=1)
    assert await store.claim_runs_with_jobs([run_id], "w", just_before, at(2)) == {}
    assert (await store.get_run(run_id)).state is PENDING
    claimed = await store.claim_runs_with_jobs([run_id], "w", at(1), at(2))
    run, job = claimed[run_id]
    assert (run.state, run.started_at, run.slot) == (RunState.RUNNING, at(1), at(1))
    assert job is not None


async def test_the_sweep_leaves_an_armed_run_until_its_slot(store: SqlStore) -> None:
    _, run_id = await _armed(store, slot_minutes=1)
    long_after_arming = START + timedelta(seconds=50)  # created 50 s ago, slot 10 s ahead
    found = await store.runs_to_dispatch(
        long_after_arming, long_after_arming, unqueued_before=long_after_arming
    )
    assert run_id not in [run.id for run in found]
    after_slot = at(1) + timedelta(seconds=2)
    found = await store.runs_to_dispatch(after_slot, after_slot, unqueued_before=after_slot)
    assert run_id in [run.id for run in found]


async def test_unreleased_runs_are_read_by_shard(store: SqlStore) -> None:
    job_id, run_id = await _armed(store)
    shard = (await store.get_job(job_id)).shard
    other = await new_job(store, name="other", next_run_at=START)
    released = await fire_one(store, other)
    await store.mark_queued([released.id], START)
    await store.create_manual_run(make_run(other, at(3), kind=RunKind.MANUAL))  # its service queues it
    assert [run.id for run in await store.unreleased_runs(None)] == [run_id]
    assert [run.id for run in await store.unreleased_runs([shard])] == [run_id]
    assert await store.unreleased_runs([s for s in range(256) if s != shard]) == []
    assert await store.unreleased_runs([]) == []


async def test_a_claim_in_flight_wins_over_an_edit_that_would_remove_its_run(
    store: SqlStore, clock: ManualClock
) -> None:
    job_id, run_id = await _armed(store)
    await store.mark_queued([run_id], START)
    job = await store.get_job(job_id)
    async with store.engine.connect() as claim:  # a claim holds the run's row (a clock already at the slot)
        transaction = await claim.begin()
        await claim.execute(update(runs).where(runs.c.id == run_id).values(state=RunState.RUNNING.value))
        edit = asyncio.create_task(store.update_job(dataclasses.replace(job, payload={"x": 1}), job.version))
        await asyncio.sleep(0.3)  # the edit reaches the run's row and waits for it
        await transaction.commit()
    edited = await edit
    assert (await store.get_run(run_id)).state is RunState.RUNNING  # started: it stays
    assert [event.state for event in await store.list_events(run_id)] == [PENDING]  # its history intact
    assert edited.next_run_at == at(2)  # the cursor stays past the slot that ran
