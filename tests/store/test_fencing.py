"""Shard fencing (guarantee 1, docs/guarantees.md): ``claim_shards`` and ``fire(..., epochs=...)``, on
every backend. A scheduler whose lease epoch is older than the one stored for a shard writes
nothing for that shard, and learns so (``fenced_job_ids``)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import FireResult, Firing, Job, Run
from cronwheel.store import codec, schema
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore, bulk, open_store

from .support import START, at, firing_of, make_job, make_run, new_job


def _next(job: Job) -> Firing:
    assert job.next_run_at is not None
    return firing_of(job, make_run(job, job.next_run_at))


async def _runs_of(store: SqlStore, jobs: Sequence[Job]) -> int:
    return sum([len((await store.list_runs(RunQuery(job_id=job.id))).items) for job in jobs])


async def _jobs_in_distinct_shards(store: SqlStore, count: int) -> list[Job]:
    jobs: dict[int, Job] = {}
    n = 0
    while len(jobs) < count:
        job = await new_job(store, f"job-{n}")
        jobs.setdefault(job.shard, job)
        n += 1
    return list(jobs.values())


# -- claim_shards ----------------------------------------------------------------------------------


async def test_claims_take_new_and_newer_epochs_and_refuse_older_ones(store: SqlStore) -> None:
    assert await store.claim_shards({1: 10, 2: 10, 3: 10}, "a", START) == {1, 2, 3}
    assert await store.claim_shards({1: 10, 2: 10}, "a", at(1)) == {1, 2}  # same epoch: still ours
    assert await store.claim_shards({2: 11, 4: 1}, "b", at(2)) == {2, 4}  # newer epoch: taken over
    assert await store.claim_shards({1: 10, 2: 10, 3: 9}, "a", at(3)) == {1}  # 2 is b's, 3 is older
    assert await store.claim_shards({}, "a", at(4)) == set()


async def test_concurrent_claims_of_a_shard_leave_the_newest_epoch(store: SqlStore, store_url: str) -> None:
    other = await open_store(store_url)
    try:
        epochs = list(range(1, 13))
        results = await asyncio.gather(
            *(
                (store if epoch % 2 else other).claim_shards({7: epoch}, f"n{epoch}", START)
                for epoch in epochs
            )
        )
        assert results[-1] == {7}  # the newest epoch is never refused, whatever the order
        assert await store.shard_owners() == {7: ("n12", 12)}
        assert await other.claim_shards({7: 11}, "n11", START) == set()
    finally:
        await other.close()


# -- fire with epochs ------------------------------------------------------------------------------


async def test_equal_epoch_fires_and_an_older_one_is_fenced_after_a_newer_claim(store: SqlStore) -> None:
    job = await new_job(store)
    assert await store.claim_shards({job.shard: 5}, "a", START) == {job.shard}
    first = await store.fire([_next(job)], START, {job.shard: 5})
    assert len(first.accepted) == 1
    assert first.fenced_job_ids == first.stale_job_ids == []
    job = await store.get_job(job.id)

    assert await store.claim_shards({job.shard: 6}, "b", at(1)) == {job.shard}  # the shard moved
    refused = await store.fire([_next(job)], at(1), {job.shard: 5})  # a, unaware
    assert refused == FireResult(fenced_job_ids=[job.id])
    assert await store.get_job(job.id) == job  # cursor and version untouched
    assert await _runs_of(store, [job]) == 1

    taken = await store.fire([_next(job)], at(1), {job.shard: 6})  # b, the new owner
    assert len(taken.accepted) == 1
    assert await _runs_of(store, [job]) == 2


async def test_a_paused_schedulers_batch_writes_nothing(store: SqlStore) -> None:
    """Scheduler a plans a batch, is paused past its lease; b claims the shards and fires the
    same slots; a wakes and writes its batch: every firing is fenced, none is written twice."""
    jobs = await _jobs_in_distinct_shards(store, 6)
    a_epochs = {job.shard: 3 for job in jobs}
    assert await store.claim_shards(a_epochs, "a", START) == set(a_epochs)
    paused_batch = [_next(job) for job in jobs]  # planned by a, not yet written

    b_epochs = {job.shard: 4 for job in jobs}
    assert await store.claim_shards(b_epochs, "b", at(0.5)) == set(b_epochs)
    b_result = await store.fire([_next(job) for job in jobs], at(0.5), b_epochs)
    assert len(b_result.accepted) == len(jobs)

    a_result = await store.fire(paused_batch, at(1), a_epochs)
    assert a_result.accepted == a_result.skipped == []
    assert a_result.stale_job_ids == []
    assert sorted(a_result.fenced_job_ids) == sorted(job.id for job in jobs)  # stale writes rejected
    assert await _runs_of(store, jobs) == len(jobs)  # b's runs only


async def test_fenced_and_stale_are_told_apart_in_one_batch(store: SqlStore) -> None:
    kept, lost, moved, deleted, never_claimed = await _jobs_in_distinct_shards(store, 5)
    epochs = {job.shard: 2 for job in (kept, lost, moved, deleted)}
    assert await store.claim_shards(epochs, "a", START) == set(epochs)
    assert await store.claim_shards({lost.shard: 3}, "b", START) == {lost.shard}
    assert len((await store.fire([_next(moved)], START, epochs)).accepted) == 1  # moved on since
    await store.delete_job(deleted.id, START)
    result = await store.fire(
        [_next(kept), _next(lost), _next(moved), _next(deleted), _next(never_claimed)], at(1), epochs
    )
    assert [run.job_id for run in result.accepted] == [kept.id]
    assert sorted(result.fenced_job_ids) == sorted([lost.id, never_claimed.id])
    assert sorted(result.stale_job_ids) == sorted([moved.id, deleted.id])


async def test_a_shard_missing_from_epochs_is_fenced(store: SqlStore) -> None:
    job, other = await _jobs_in_distinct_shards(store, 2)
    assert await store.claim_shards({job.shard: 1, other.shard: 1}, "a", START) == {job.shard, other.shard}
    result = await store.fire([_next(job), _next(other)], START, {other.shard: 1})
    assert result.fenced_job_ids == [job.id]
    assert [run.job_id for run in result.accepted] == [other.id]
    assert (await store.fire([_next(job)], START, {})).fenced_job_ids == [job.id]


async def test_without_epochs_nothing_is_fenced(store: SqlStore) -> None:
    job = await new_job(store)
    await store.claim_shards({job.shard: 9}, "b", START)
    result = await store.fire([_next(job)], START)  # embedded: one process owns every shard
    assert len(result.accepted) == 1
    assert result.fenced_job_ids == []


async def test_many_fenced_firings_in_one_batch(store: SqlStore) -> None:
    jobs = [make_job(f"job-{n}") for n in range(600)]  # more than one statement chunk
    async with store.engine.begin() as connection:  # bulk: 600 create_job calls take seconds
        await connection.execute(insert(schema.jobs), [codec.job_to_row(job) for job in jobs])
    shards = {job.shard for job in jobs}
    await store.claim_shards(dict.fromkeys(shards, 1), "a", START)
    taken = sorted(shards)[::2]
    await store.claim_shards(dict.fromkeys(taken, 2), "b", START)
    result = await store.fire([_next(job) for job in jobs], START, dict.fromkeys(shards, 1))
    assert sorted(result.fenced_job_ids) == sorted(job.id for job in jobs if job.shard in taken)
    assert sorted(run.job_id for run in result.accepted) == sorted(
        job.id for job in jobs if job.shard not in taken
    )
    assert result.stale_job_ids == []


async def test_a_claim_waits_for_a_firing_in_flight_and_then_fences_the_old_owner(
    store: SqlStore, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once ``claim_shards`` has returned, no firing under an older epoch can still commit: a
    firing transaction in flight holds the shard (PostgreSQL: its ``FOR SHARE`` row lock;
    SQLite: the write lock), so the claim waits for it."""
    job = await new_job(store)
    await store.claim_shards({job.shard: 1}, "a", START)
    inside, release = asyncio.Event(), asyncio.Event()
    insert_runs = bulk.insert_runs

    async def slow_insert_runs(
        connection: AsyncConnection,
        new_runs: Sequence[Run],
        now: datetime,
        epochs: Mapping[int, int] | None = None,
    ) -> list[Run]:
        inside.set()
        await release.wait()
        return await insert_runs(connection, new_runs, now, epochs)

    monkeypatch.setattr(bulk, "insert_runs", slow_insert_runs)
    new_owner = await open_store(store_url)
    try:
        firing = asyncio.create_task(store.fire([_next(job)], START, {job.shard: 1}))
        await asyncio.wait_for(inside.wait(), 5)  # a is inside its transaction, past the check
        claim = asyncio.create_task(new_owner.claim_shards({job.shard: 2}, "b", START))
        await asyncio.sleep(0.3)
        assert not claim.done()  # b waits for a's transaction
        release.set()
        assert len((await firing).accepted) == 1  # a committed before b's claim
        assert await asyncio.wait_for(claim, 5) == {job.shard}
        monkeypatch.undo()
        job = await store.get_job(job.id)
        assert (await store.fire([_next(job)], START, {job.shard: 1})).fenced_job_ids == [job.id]
    finally:
        release.set()
        await new_owner.close()


async def test_shard_owners_are_the_latest_claims(store: SqlStore) -> None:
    assert await store.shard_owners() == {}
    await store.claim_shards({1: 5, 2: 5}, "a", START)
    await store.claim_shards({2: 6, 1: 4}, "b", at(1))  # 1 refused, 2 taken over
    assert await store.shard_owners() == {1: ("a", 5), 2: ("b", 6)}


async def test_each_fired_run_keeps_the_epoch_it_was_written_under(store: SqlStore) -> None:
    """The audit trail the chaos checker reads: per shard, epochs never decrease."""
    job = await new_job(store)
    assert await store.claim_shards({job.shard: 5}, "a", START) == {job.shard}
    await store.fire([_next(job)], START, {job.shard: 5})
    job = await store.get_job(job.id)
    assert await store.claim_shards({job.shard: 9}, "b", at(1)) == {job.shard}
    await store.fire([_next(job)], at(1), {job.shard: 9})
    job = await store.get_job(job.id)
    await store.fire([_next(job)], at(2))  # embedded: no epoch
    async with store.engine.connect() as connection:
        result = await connection.execute(
            select(schema.runs.c.epoch)
            .where(schema.runs.c.job_id == job.id)
            .order_by(schema.runs.c.created_at)
        )
        assert [row.epoch for row in result] == [5, 9, None]
