"""The run reads contract (``RunReads`` and ``ClusterReads`` of :mod:`cronwheel.store.port`),
run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import pytest

from cronwheel.errors import (
    NotFoundError,
)
from cronwheel.model import (
    LEGAL_TRANSITIONS,
    Outcome,
    RunKind,
    RunState,
    new_id,
)
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore

from .support import FAILURE, LEASE, START, SUCCESS, at, fire_one, make_run, new_job


async def test_get_runs_reads_many_runs_in_one_call(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    second = await fire_one(store, await store.get_job(job.id))
    await store.delete_job(job.id, at(3))  # a deleted job's runs (their slots past) stay readable
    found = await store.get_runs([second.id, new_id(), first.id, second.id])
    assert found == {first.id: first, second.id: second}
    assert await store.get_runs([]) == {}


async def test_count_runs_by_state(store: SqlStore) -> None:
    job = await new_job(store)
    first = await fire_one(store, job)
    await fire_one(store, await store.get_job(job.id))
    await fire_one(store, await store.get_job(job.id), RunState.SKIPPED, reason="misfire")
    assert await store.claim_run(first.id, "w", START, START + LEASE) is not None
    wanted = (RunState.PENDING, RunState.RUNNING, RunState.RETRYING, RunState.SKIPPED)
    assert await store.count_runs(wanted) == {
        RunState.PENDING: 1,
        RunState.RUNNING: 1,
        RunState.SKIPPED: 1,
    }
    assert await store.count_runs(()) == {}


async def test_list_runs_newest_first_with_stable_pages(store: SqlStore) -> None:
    job = await new_job(store)
    other = await new_job(store, "other")
    runs = []
    for _ in range(5):
        runs.append(await fire_one(store, job))
        job = await store.get_job(job.id)
    same_slot = [  # manual runs share a slot: the id breaks the tie
        (await store.create_manual_run(make_run(job, at(2), kind=RunKind.MANUAL)))[0] for _ in range(2)
    ]
    other_run = await fire_one(store, other)
    newest_first = sorted([*runs, *same_slot], key=lambda run: (run.slot, run.id), reverse=True)

    first = await store.list_runs(RunQuery(job_id=job.id, limit=3))
    assert first.items == newest_first[:3]
    await store.create_manual_run(make_run(job, at(60), kind=RunKind.MANUAL))  # newer: not in later pages
    await store.create_manual_run(make_run(job, at(-60), kind=RunKind.MANUAL))  # older: at the end
    seen = list(first.items)
    cursor = first.next_cursor
    while cursor is not None:
        page = await store.list_runs(RunQuery(job_id=job.id, limit=3, cursor=cursor))
        seen.extend(page.items)
        cursor = page.next_cursor
    assert [run.id for run in seen[: len(newest_first)]] == [run.id for run in newest_first]
    assert len(seen) == len(newest_first) + 1
    assert seen[-1].slot == at(-60)

    everything = await store.list_runs(RunQuery(limit=100))
    assert other_run.id in {run.id for run in everything.items}
    assert everything.next_cursor is None
    only_pending = await store.list_runs(RunQuery(job_id=job.id, states=(RunState.PENDING,)))
    assert len(only_pending.items) == len(newest_first) + 2
    assert (await store.list_runs(RunQuery(states=(RunState.RUNNING, RunState.SUCCESS)))).items == []


async def test_every_state_change_is_recorded_in_order(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(1), at(1) + LEASE)
    await store.finish_attempt(run.id, 1, "w1", FAILURE, at(2), at(3))
    await store.claim_run(run.id, "w2", at(3), at(3) + LEASE)
    await store.expire_leases(at(10))
    await store.claim_run(run.id, "w3", at(11), at(11) + LEASE)
    await store.heartbeat(run.id, 3, "w3", at(12) + LEASE)  # not a state change
    await store.finish_attempt(run.id, 3, "w3", SUCCESS, at(12), None)

    events = await store.list_events(run.id)
    assert [(e.previous, e.state, e.attempt, e.at) for e in events] == [
        (None, RunState.PENDING, 0, START),
        (RunState.PENDING, RunState.RUNNING, 1, at(1)),
        (RunState.RUNNING, RunState.RETRYING, 1, at(2)),
        (RunState.RETRYING, RunState.RUNNING, 2, at(3)),
        (RunState.RUNNING, RunState.RETRYING, 2, at(10)),
        (RunState.RETRYING, RunState.RUNNING, 3, at(11)),
        (RunState.RUNNING, RunState.SUCCESS, 3, at(12)),
    ]
    for before, after in zip([None, *events], events, strict=False):
        assert after.state in LEGAL_TRANSITIONS[after.previous]
        assert after.previous == (None if before is None else before.state)
    assert events[-1].state is (await store.get_run(run.id)).state
    assert [a.outcome for a in await store.list_attempts(run.id)] == [
        Outcome.FAILURE,
        Outcome.LOST,
        Outcome.SUCCESS,
    ]


async def test_history_of_a_missing_run_is_not_found(store: SqlStore) -> None:
    with pytest.raises(NotFoundError):
        await store.list_events(new_id())
    with pytest.raises(NotFoundError):
        await store.list_attempts(new_id())
    with pytest.raises(NotFoundError):
        await store.get_run(new_id())


async def test_run_changes_follow_run_events_from_the_newest(store: SqlStore) -> None:
    assert await store.run_changes(None, 1) == []  # no events yet: follow from the start
    job = await new_job(store)
    first = await fire_one(store, job)
    (newest,) = await store.run_changes(None, 1)
    assert (newest.run_id, newest.job_id, newest.team, newest.state) == (
        first.id,
        job.id,
        job.team,
        RunState.PENDING,
    )
    assert await store.claim_run(first.id, "w", START, START + LEASE) is not None
    await store.delete_job(job.id, at(3))  # a deleted job's runs keep their team
    after = await store.run_changes(newest.event_id, 100)
    assert [(c.run_id, c.team, c.state) for c in after] == [(first.id, job.team, RunState.RUNNING)]
    assert after[0].event_id > newest.event_id
    assert await store.run_changes(after[0].event_id, 100) == []
    second = await fire_one(store, await new_job(store, "other"))
    assert [c.run_id for c in await store.run_changes(newest.event_id, 1)] == [first.id]  # lowest first
    assert [c.run_id for c in await store.run_changes(after[0].event_id, 100)] == [second.id]
