"""Resuming and deleting a job are atomic: a failure between the job's write and what
it implies (the SKIPPED records of its paused slots; the cancel flags of its unfinished runs)
leaves nothing written, on every backend. The failure is a failpoint armed to raise inside the
store's transaction (``cronwheel.failpoints``), driven through ``JobService`` as the API does."""

from __future__ import annotations

import asyncio

import pytest

from cronwheel import failpoints
from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import RunState
from cronwheel.queue.memory import MemoryQueue
from cronwheel.store.change_listener import PostgresChangeListener
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore

from .support import LEASE, at, fire_one, make_job


def _service(store: SqlStore, clock: ManualClock) -> JobService:
    return JobService(store, MemoryQueue(clock), ChangeFeed(), clock, TargetPolicy())


async def _runs(store: SqlStore, job_id: str) -> list[tuple[RunState, bool]]:
    page = await store.list_runs(RunQuery(job_id=job_id))
    return sorted((run.state, run.cancel_requested) for run in page.items)


async def test_a_resume_that_fails_before_its_skipped_runs_writes_nothing(
    store: SqlStore, clock: ManualClock
) -> None:
    service = _service(store, clock)
    job = await service.create(make_job(schedule="* * * * *", paused=True))  # cursor: at(1)
    clock.set(at(5.5))  # slots at(1)..at(5) passed while paused

    with failpoints.armed("store.before_skipped_runs=raise@1"), pytest.raises(failpoints.FailpointError):
        await service.resume(job.id, missed="skip")

    stored = await store.get_job(job.id)
    assert (stored.paused, stored.version, stored.next_run_at) == (True, job.version, job.next_run_at)
    assert await _runs(store, job.id) == []  # neither resumed nor recorded

    resumed = await service.resume(job.id, missed="skip")  # the retry does both
    assert (resumed.paused, resumed.version, resumed.next_run_at) == (False, job.version + 1, at(6))
    assert await _runs(store, job.id) == [(RunState.SKIPPED, False)] * 5


async def test_a_delete_that_fails_before_its_cancel_flags_writes_nothing(
    store: SqlStore, clock: ManualClock
) -> None:
    service = _service(store, clock)
    job = await service.create(make_job(schedule="* * * * *"))
    running = await fire_one(store, job)
    assert await store.claim_run(running.id, "w1", running.slot, running.slot + LEASE) is not None
    pending = await fire_one(store, await store.get_job(job.id))
    clock.set(at(3))  # past both slots: runs, not armed runs (which a delete removes)

    with failpoints.armed("store.before_cancel_flags=raise@1"), pytest.raises(failpoints.FailpointError):
        await service.delete(job.id)

    assert (await store.get_job(job.id)).version == job.version  # still live, unchanged
    assert await store.cancel_requested([running.id, pending.id]) == set()

    await service.delete(job.id)  # the retry does both
    assert await store.cancel_requested([running.id, pending.id]) == {running.id, pending.id}
    assert await _runs(store, job.id) == [(RunState.PENDING, True), (RunState.RUNNING, True)]


async def test_a_resume_or_delete_is_announced_once_and_only_if_it_commits(
    postgres_store: SqlStore, postgres_url: str, clock: ManualClock
) -> None:
    """PostgreSQL: the job-change notification is sent inside the one transaction."""
    service = _service(postgres_store, clock)
    async with PostgresChangeListener(postgres_url) as listener:
        changes = listener.subscribe()
        job = await service.create(make_job(paused=True))
        assert await asyncio.wait_for(changes.get(), 1) == job.id
        clock.set(at(2.5))
        with failpoints.armed("store.before_skipped_runs=raise@1"), pytest.raises(failpoints.FailpointError):
            await service.resume(job.id)
        marker = await service.create(make_job("marker"))
        assert await asyncio.wait_for(changes.get(), 1) == marker.id  # the failed resume said nothing
        await service.resume(job.id)
        assert await asyncio.wait_for(changes.get(), 1) == job.id
        await service.delete(job.id)
        assert await asyncio.wait_for(changes.get(), 1) == job.id
        await asyncio.sleep(0.2)
        assert changes.empty()  # one notification each
