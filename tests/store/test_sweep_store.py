"""The sweeper's store contract (``SweepStore`` of :mod:`cronwheel.store.port`): expired leases
and runs to dispatch again, run against every backend in conftest.BACKENDS."""

from __future__ import annotations

from datetime import datetime, timedelta

from cronwheel.model import (
    Outcome,
    RunState,
)
from cronwheel.store.port import MAX_LOST_ATTEMPTS
from cronwheel.store.sql import SqlStore

from .support import FAILURE, LEASE, START, SUCCESS, at, fire_one, new_job


async def test_expired_lease_is_lost_then_retried_by_another_worker(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    assert await store.expire_leases(START + LEASE) == []  # expires strictly after
    [expired] = await store.expire_leases(START + LEASE + timedelta(microseconds=1))
    now = START + LEASE + timedelta(microseconds=1)
    assert (expired.id, expired.state, expired.next_attempt_at) == (run.id, RunState.RETRYING, now)
    assert (expired.lease_owner, expired.attempts) == (None, 1)
    assert expired == await store.get_run(run.id)
    [lost] = await store.list_attempts(run.id)
    assert (lost.outcome, lost.finished_at) == (Outcome.LOST, now)
    assert await store.expire_leases(at(5)) == []
    second = await store.claim_run(run.id, "w2", now, now + LEASE)
    assert second is not None
    assert second.attempts == 2
    assert await store.finish_attempt(run.id, 1, "w1", SUCCESS, now, None) is None  # the lost worker
    assert await store.heartbeat(run.id, 1, "w1", at(9)) is None
    assert await store.finish_attempt(run.id, 2, "w2", SUCCESS, now, None) is not None


async def test_a_run_that_keeps_losing_its_worker_fails(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    now = START
    states = []
    for n in range(1, MAX_LOST_ATTEMPTS + 1):
        claimed = await store.claim_run(run.id, f"w{n}", now, now + LEASE)
        assert claimed is not None
        assert claimed.attempts == n
        now += 2 * LEASE
        [changed] = await store.expire_leases(now)
        states.append(changed.state)
    assert states == [RunState.RETRYING] * (MAX_LOST_ATTEMPTS - 1) + [RunState.FAILED]
    final = await store.get_run(run.id)
    assert (final.state, final.finished_at, final.next_attempt_at) == (RunState.FAILED, now, None)
    assert final.reason is not None
    assert all(a.outcome is Outcome.LOST for a in await store.list_attempts(run.id))
    assert await store.claim_run(run.id, "late", now, now + LEASE) is None


async def test_expire_leases_respects_its_limit(store: SqlStore) -> None:
    job = await new_job(store)
    for _ in range(3):
        run = await fire_one(store, job)
        await store.claim_run(run.id, "w", run.slot, run.slot + LEASE)
        job = await store.get_job(job.id)
    assert len(await store.expire_leases(at(5), limit=2)) == 2
    assert len(await store.expire_leases(at(5), limit=2)) == 1


async def test_runs_to_dispatch_and_mark_queued(store: SqlStore) -> None:
    job = await new_job(store)
    fresh = await fire_one(store, job)
    job = await store.get_job(job.id)
    queued = await fire_one(store, job)
    await store.mark_queued([queued.id], at(10))
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", at(10), at(10) + LEASE)
    await store.mark_queued([running.id], at(10))  # claimed before its stamp: stamped once
    await store.mark_queued([running.id], at(11))  # stamped and not claimable: kept
    assert (await store.get_run(running.id)).queued_at == at(10)
    job = await store.get_job(job.id)
    retry_due = await fire_one(store, job)
    await store.claim_run(retry_due.id, "w", at(10), at(10) + LEASE)
    await store.finish_attempt(retry_due.id, 1, "w", FAILURE, at(10), at(11))
    job = await store.get_job(job.id)
    retry_later = await fire_one(store, job)
    await store.claim_run(retry_later.id, "w", at(10), at(10) + LEASE)
    await store.finish_attempt(retry_later.id, 1, "w", FAILURE, at(10), at(20))
    job = await store.get_job(job.id)
    skipped = await fire_one(store, job, RunState.SKIPPED)

    async def dispatch(now: datetime, queued_before: datetime, limit: int = 1000) -> set[str]:
        return {run.id for run in await store.runs_to_dispatch(now, queued_before, limit)}

    assert await dispatch(at(12), queued_before=at(10)) == {fresh.id, retry_due.id}
    assert await dispatch(at(12), queued_before=at(10.5)) == {fresh.id, queued.id, retry_due.id}
    assert await dispatch(at(20), queued_before=at(10)) == {fresh.id, retry_due.id, retry_later.id}
    assert len(await dispatch(at(20), queued_before=at(10), limit=2)) == 2
    created = fresh.created_at
    assert created is not None
    young = await store.runs_to_dispatch(at(12), at(10), unqueued_before=created)
    assert {run.id for run in young} == {retry_due.id}  # never queued, but not created before
    after = created + timedelta(microseconds=1)
    older = await store.runs_to_dispatch(at(12), at(10), unqueued_before=after)
    assert {run.id for run in older} == {fresh.id, retry_due.id}
    assert (await store.get_run(queued.id)).queued_at == at(10)
    assert skipped.id not in await dispatch(at(99), at(99))
