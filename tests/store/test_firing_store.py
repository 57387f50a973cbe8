"""The scheduler's store contract (``FiringStore`` of :mod:`cronwheel.store.port`): due jobs and
the conditional fire, run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from cronwheel.errors import (
    InvalidInputError,
    NotFoundError,
)
from cronwheel.model import (
    DueJob,
    MisfireMode,
    MisfirePolicy,
    Overlap,
    RunState,
    new_id,
    shard_of,
)
from cronwheel.store.port import JobQuery, RunQuery
from cronwheel.store.sql import SqlStore, open_store

from .support import LEASE, START, SUCCESS, TRACEPARENT, at, fire_one, firing_of, make_job, make_run, new_job


async def test_due_jobs(store: SqlStore) -> None:
    second = await new_job(store, "second", next_run_at=at(2))
    first = await new_job(store, "first", next_run_at=at(1))
    await new_job(store, "later", next_run_at=at(10))
    await new_job(store, "never", next_run_at=None)
    await new_job(store, "paused", next_run_at=at(0), paused=True)
    deleted = await new_job(store, "deleted", next_run_at=at(0))
    await store.delete_job(deleted.id, START)
    assert [job.id for job in await store.due_jobs(at(5))] == [first.id, second.id]
    assert [job.id for job in await store.due_jobs(at(2))] == [first.id, second.id]  # inclusive
    assert [job.id for job in await store.due_jobs(at(5), limit=1)] == [first.id]
    assert first.next_run_at is not None
    paged = await store.due_jobs(at(5), limit=1, after=(first.next_run_at, first.id))
    assert [job.id for job in paged] == [second.id]
    in_second_shard = [job.id for job in (first, second) if shard_of(job.id) == shard_of(second.id)]
    assert [job.id for job in await store.due_jobs(at(5), shards=[shard_of(second.id)])] == in_second_shard
    others = [shard for shard in range(256) if shard not in (shard_of(first.id), shard_of(second.id))]
    assert await store.due_jobs(at(5), shards=others) == []
    assert await store.due_jobs(at(5), shards=[]) == []
    assert await store.due_jobs(at(0.5)) == []

    ties = sorted([(await new_job(store, f"tie-{n}", next_run_at=at(3))).id for n in range(3)])
    seen: list[DueJob] = []
    while page := await store.due_jobs(
        at(5), limit=2, after=(seen[-1].next_run_at or at(0), seen[-1].id) if seen else None
    ):
        seen += page
    assert [job.id for job in seen] == [first.id, second.id, *ties]  # ties in id order, none twice


async def test_due_jobs_are_the_jobs_slim_view(store: SqlStore) -> None:
    """What the scheduler reads of a due job equals the job's own fields (every policy and
    option the planner uses), shared texts and policies interned or not."""
    edge = MisfirePolicy(MisfireMode.CATCH_UP, grace_s=12.5, max_catch_up=3)
    made = [
        await new_job(store, "plain", next_run_at=at(1)),
        await new_job(
            store,
            "options",
            next_run_at=at(2),
            timezone="Europe/Paris",
            dst_gap="skip",
            dst_fold="both",
            misfire=edge,
            overlap=Overlap.REPLACE,
            queue="batch",
            start_at=at(0),
            end_at=at(99),
        ),
    ]
    due = await store.due_jobs(at(5))
    assert due == [DueJob.of(await store.get_job(job.id)) for job in made]
    assert (due[1].misfire, due[1].timezone, due[1].queue) == (edge, "Europe/Paris", "batch")


async def test_fire_records_runs_and_moves_the_cursor(store: SqlStore) -> None:
    job = await new_job(store)
    pending = make_run(job, at(0))
    skipped = make_run(job, at(-1), RunState.SKIPPED, reason="misfire")
    result = await store.fire([firing_of(job, skipped, pending, following=at(1))], at(0.5))
    assert [run.id for run in result.accepted] == [pending.id]
    assert [run.id for run in result.skipped] == [skipped.id]
    assert result.stale_job_ids == []
    assert result.accepted[0] == replace(pending, created_at=at(0.5))
    stored = await store.get_job(job.id)
    assert stored.next_run_at == at(1)
    assert stored.version == job.version  # firing is not an edit
    assert await store.get_run(pending.id) == result.accepted[0]
    assert (await store.get_run(skipped.id)).reason == "misfire"
    events = await store.list_events(skipped.id)
    assert [(e.previous, e.state, e.at, e.detail) for e in events] == [
        (None, RunState.SKIPPED, at(0.5), "misfire")
    ]


async def test_a_runs_trace_context_is_kept_from_fire_to_claim(store: SqlStore) -> None:
    job = await new_job(store)
    traced = make_run(job, at(0), traceparent=TRACEPARENT)
    plain = make_run(job, at(1))
    result = await store.fire([firing_of(job, traced, following=at(1))], at(0.5))
    assert result.accepted[0].traceparent == TRACEPARENT
    await store.fire([firing_of(replace(job, next_run_at=at(1)), plain, following=at(2))], at(1.5))
    assert (await store.get_run(traced.id)).traceparent == TRACEPARENT
    assert (await store.get_run(plain.id)).traceparent is None  # tracing off: nothing recorded
    claimed = await store.claim_runs([traced.id, plain.id], "w1", at(2), at(2) + LEASE)
    assert {run_id: run.traceparent for run_id, run in claimed.items()} == {
        traced.id: TRACEPARENT,
        plain.id: None,
    }
    assert [run.traceparent for run in (await store.list_runs(RunQuery(job_id=job.id))).items] == [
        None,
        TRACEPARENT,
    ]


@pytest.mark.parametrize("change", ["version", "cursor", "deleted", "missing"])
async def test_stale_firing_writes_nothing(store: SqlStore, change: str) -> None:
    job = await new_job(store)
    run = make_run(job, at(0))
    firing = firing_of(job, run)
    if change == "version":
        await store.update_job(replace(job, description="edited"), None)
    elif change == "cursor":
        await store.update_job(replace(job, next_run_at=at(5)), None, move_cursor=True)
        firing = replace(firing, expected_version=2)
    elif change == "deleted":
        await store.delete_job(job.id, START)
    else:
        firing = replace(firing, job_id=new_id(), runs=())
    before = (await store.list_jobs(JobQuery())).items
    result = await store.fire([firing], at(0))
    assert result.stale_job_ids == [firing.job_id]
    assert result.accepted == result.skipped == []
    with pytest.raises(NotFoundError):
        await store.get_run(run.id)
    assert (await store.list_jobs(JobQuery())).items == before


async def test_fire_compares_a_null_cursor_as_a_value(store: SqlStore) -> None:
    idle = await new_job(store, "idle", next_run_at=None)
    busy = await new_job(store, "busy", next_run_at=at(0))
    result = await store.fire(
        [
            firing_of(busy, expected_next_run_at=None, next_run_at=at(1)),
            firing_of(idle, expected_next_run_at=at(0), next_run_at=at(1)),
        ],
        START,
    )
    assert sorted(result.stale_job_ids) == sorted([busy.id, idle.id])
    result = await store.fire([firing_of(idle, expected_next_run_at=None, next_run_at=at(3))], START)
    assert result.stale_job_ids == []
    assert (await store.get_job(idle.id)).next_run_at == at(3)
    result = await store.fire([firing_of(busy, next_run_at=None)], START)
    assert result.stale_job_ids == []
    assert (await store.get_job(busy.id)).next_run_at is None


async def test_a_slot_is_never_recorded_twice(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    job = await store.get_job(job.id)
    again = make_run(job, first.slot)  # same slot, new run id
    fresh = make_run(job, at(1))
    result = await store.fire([firing_of(job, again, fresh)], START)
    assert [run.id for run in result.accepted] == [fresh.id]  # "already exists" is not an error
    assert result.stale_job_ids == []
    assert (await store.get_job(job.id)).next_run_at == at(2)
    runs = (await store.list_runs(RunQuery(job_id=job.id))).items
    assert sorted(run.id for run in runs) == sorted([first.id, fresh.id])
    with pytest.raises(NotFoundError):
        await store.list_events(again.id)


async def test_fire_batch_applies_each_firing_on_its_own(store: SqlStore) -> None:
    fresh = await new_job(store, "fresh")
    moved = await new_job(store, "moved")
    await store.update_job(replace(moved, description="edited"), None)
    fresh_run, moved_run = make_run(fresh, at(0)), make_run(moved, at(0))
    result = await store.fire([firing_of(moved, moved_run), firing_of(fresh, fresh_run)], START)
    assert [run.id for run in result.accepted] == [fresh_run.id]
    assert result.stale_job_ids == [moved.id]
    with pytest.raises(NotFoundError):
        await store.get_run(moved_run.id)


async def test_firings_of_one_job_in_one_batch_apply_in_order(store: SqlStore) -> None:
    job = await new_job(store)
    one, two = make_run(job, at(0)), make_run(job, at(1))
    first = firing_of(job, one, following=at(1))
    second = firing_of(job, two, expected_next_run_at=at(1), following=at(2))
    repeat = firing_of(job, make_run(job, at(0)), following=at(1))  # stale once `first` applied
    result = await store.fire([first, second, repeat], START)
    assert [run.id for run in result.accepted] == [one.id, two.id]
    assert result.stale_job_ids == [job.id]
    assert (await store.get_job(job.id)).next_run_at == at(2)


async def test_many_firings_in_one_batch(store: SqlStore) -> None:
    jobs = [await new_job(store, f"job-{n}") for n in range(30)]
    runs = [make_run(job, at(0)) for job in jobs]
    stale = jobs[::7]
    for job in stale:
        await store.update_job(replace(job, description="edited"), None)
    result = await store.fire([firing_of(job, run) for job, run in zip(jobs, runs, strict=True)], START)
    assert sorted(result.stale_job_ids) == sorted(job.id for job in stale)
    assert len(result.accepted) == len(jobs) - len(stale)
    assert [j.id for j in await store.due_jobs(at(0))] == sorted(j.id for j in stale)


async def test_concurrent_fire_of_one_slot_records_one_run(store: SqlStore) -> None:
    job = await new_job(store)
    firings = [firing_of(job, make_run(job, at(0))) for _ in range(12)]
    results = await asyncio.gather(*(store.fire([firing], START) for firing in firings))
    winners = [result for result in results if result.accepted]
    assert len(winners) == 1
    assert all(result.stale_job_ids == [job.id] for result in results if not result.accepted)
    runs = (await store.list_runs(RunQuery(job_id=job.id))).items
    assert [run.id for run in runs] == [winners[0].accepted[0].id]
    assert len(await store.list_events(runs[0].id)) == 1


async def test_two_stores_on_one_database_record_one_run_per_slot(store: SqlStore, store_url: str) -> None:
    """Two schedulers that both believe they own the shard: the store decides."""
    other = await open_store(store_url)
    try:
        jobs = [await new_job(store, f"job-{n}") for n in range(4)]
        calls = [
            (side, firing_of(job, make_run(job, at(0))))
            for job in jobs
            for side in (store, other, store, other, store, other)
        ]
        results = await asyncio.gather(*(side.fire([firing], START) for side, firing in calls))
        accepted = [run for result in results for run in result.accepted]
        assert sorted(run.job_id for run in accepted) == sorted(job.id for job in jobs)
        assert sum(len(result.stale_job_ids) for result in results) == len(calls) - len(jobs)
        assert len((await other.list_runs(RunQuery())).items) == len(jobs)
    finally:
        await other.close()


async def test_fire_refuses_runs_that_are_not_new(store: SqlStore) -> None:
    job = await new_job(store)
    with pytest.raises(InvalidInputError):
        await store.fire([firing_of(job, make_run(job, at(0), RunState.RUNNING))], START)
    other = make_job("other")
    with pytest.raises(InvalidInputError):
        await store.fire([firing_of(job, make_run(other, at(0)))], START)
    assert (await store.get_job(job.id)).next_run_at == job.next_run_at
    assert (await store.list_runs(RunQuery())).items == []


async def test_fire_requests_cancel_of_the_replaced_runs(store: SqlStore) -> None:
    job = await new_job(store)
    old = await fire_one(store, job)
    await store.claim_run(old.id, "w1", START, START + LEASE)
    job = await store.get_job(job.id)
    stale_cancel = firing_of(job, make_run(job, at(1)), expected_version=99, cancel_run_ids=(old.id,))
    await store.fire([stale_cancel], START)
    assert not (await store.get_run(old.id)).cancel_requested
    result = await store.fire([firing_of(job, make_run(job, at(1)), cancel_run_ids=(old.id,))], START)
    assert result.accepted
    beat = await store.heartbeat(old.id, 1, "w1", START + 2 * LEASE)
    assert beat is not None
    assert beat.cancel_requested


async def test_record_skipped_inserts_only_new_slots(store: SqlStore) -> None:
    job = await new_job(store)
    existing = await fire_one(store, job)  # slot at(0), PENDING
    skipped = [make_run(job, at(n), RunState.SKIPPED, reason="paused") for n in range(3)]
    recorded = await store.record_skipped(skipped, at(5))
    assert [run.id for run in recorded] == [skipped[1].id, skipped[2].id]
    assert recorded[0] == replace(skipped[1], created_at=at(5))
    assert await store.get_run(existing.id) == existing
    events = await store.list_events(skipped[2].id)
    assert [(e.previous, e.state, e.at, e.detail) for e in events] == [
        (None, RunState.SKIPPED, at(5), "paused")
    ]
    assert await store.record_skipped(skipped, at(6)) == []
    assert (await store.get_job(job.id)).next_run_at == at(1)  # the cursor is not touched
    with pytest.raises(InvalidInputError):
        await store.record_skipped([make_run(job, at(9))], at(6))
    with pytest.raises(NotFoundError):
        await store.record_skipped([make_run(make_job("ghost"), at(9), RunState.SKIPPED)], at(6))


async def test_active_runs(store: SqlStore) -> None:
    job = await new_job(store)
    idle = await new_job(store, "idle")
    pending = await fire_one(store, job)
    job = await store.get_job(job.id)
    done = await fire_one(store, job)
    await store.claim_run(done.id, "w", done.slot, done.slot + LEASE)
    await store.finish_attempt(done.id, 1, "w", SUCCESS, START, None)
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", running.slot, running.slot + LEASE)
    job = await store.get_job(job.id)
    await fire_one(store, job, RunState.SKIPPED)
    active = await store.active_runs([job.id, idle.id])
    assert [run.id for run in active[job.id]] == [pending.id, running.id]
    assert active[idle.id] == []
