"""Retention on every backend: the store's reads and batch deletes, and a purge pass (the
Purger) deleting exactly what cronwheel.retention.decide says, attempts and events included."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from cronwheel.clock import ManualClock
from cronwheel.model import AttemptResult, Job, Outcome, RetentionPolicy, Run, RunState
from cronwheel.retention import RunStub, decide, effective
from cronwheel.scheduler.purger import Purger
from cronwheel.store.port import RunQuery
from cronwheel.store.schema import attempts, run_events
from cronwheel.store.sql import SqlStore
from cronwheel.telemetry import metrics

from .support import LEASE, MINUTE, START, firing_of, make_run, new_job

S, F, K, P, R = RunState.SUCCESS, RunState.FAILED, RunState.SKIPPED, RunState.PENDING, RunState.RUNNING
NOW = START + timedelta(days=10)


async def record(store: SqlStore, job: Job, states: list[RunState]) -> list[Run]:
    """Runs of ``job`` one minute apart from START, each brought to its state the way the roles
    do (fired, claimed, finished), so that each has its attempts and events."""
    made = [
        make_run(job, START + i * MINUTE, K if state is K else P, reason="misfire" if state is K else None)
        for i, state in enumerate(states)
    ]
    following = START + len(states) * MINUTE
    result = await store.fire([firing_of(job, *made, following=following)], START)
    assert not result.stale_job_ids
    for run, state in zip(made, states, strict=True):
        if state in (S, F, R):
            assert await store.claim_run(run.id, "w1", run.slot, run.slot + LEASE) is not None
        if state in (S, F):
            outcome = Outcome.SUCCESS if state is S else Outcome.FAILURE
            attempt = AttemptResult(outcome, output="x")
            done = await store.finish_attempt(run.id, 1, "w1", attempt, run.slot, None)
            assert done is not None
            assert done.state is state
    return made


async def remaining(store: SqlStore, job: Job) -> set[str]:
    return {run.id for run in (await store.list_runs(RunQuery(job_id=job.id, limit=1000))).items}


async def stubs(store: SqlStore, job: Job) -> list[RunStub]:
    page = await store.list_runs(RunQuery(job_id=job.id, limit=1000))
    return [RunStub(run.id, run.slot, run.state) for run in page.items]


async def children(store: SqlStore, run_ids: set[str]) -> tuple[int, int]:
    async with store.engine.connect() as connection:
        counts = []
        for table in (attempts, run_events):
            statement = select(func.count()).select_from(table).where(table.c.run_id.in_(sorted(run_ids)))
            counts.append((await connection.execute(statement)).scalar_one())
    return counts[0], counts[1]


async def test_a_jobs_retention_round_trips(store: SqlStore) -> None:
    job = await new_job(store, retention=RetentionPolicy(keep_days=7, keep_runs=None))
    assert (await store.get_job(job.id)).retention == RetentionPolicy(keep_days=7)
    updated = await store.update_job(replace(job, retention=None), job.version)
    assert (await store.get_job(job.id)).retention is None is updated.retention
    assert await store.retention_jobs() == [(job.id, None)]


async def test_a_pass_deletes_what_the_rules_say_with_attempts_and_events(
    store: SqlStore, clock: ManualClock
) -> None:
    states = [F, S, K, S, P, S, R, F, S, S, K, S, S, S]
    job = await new_job(store, retention=RetentionPolicy(keep_runs=4))
    made = await record(store, job, states)
    other = await new_job(store, "kept-whole")  # no policy of its own, and no default: kept
    kept_whole = await record(store, other, [S, S, S])
    expected = decide(await stubs(store, job), RetentionPolicy(keep_runs=4), NOW)
    assert len(expected) == 7  # five older SUCCESS, the older FAILED and the older SKIPPED
    before = metrics.RUNS_PURGED._value.get()

    report = await Purger(store, clock, None, batch=3, pause_s=0).purge(NOW)  # several pages and batches

    assert (report.purged, report.jobs) == (7, 1)
    assert metrics.RUNS_PURGED._value.get() - before == 7
    assert await remaining(store, job) == {run.id for run in made} - expected
    assert await remaining(store, other) == {run.id for run in kept_whole}
    assert await children(store, expected) == (0, 0)
    left = {run.id for run in made} - expected
    assert (await children(store, left))[1] > 0  # the others keep their history
    assert (await Purger(store, clock, None, batch=3, pause_s=0).purge(NOW)).purged == 0  # nothing more


async def test_the_default_applies_to_jobs_without_a_policy_and_to_deleted_jobs(
    store: SqlStore, clock: ManualClock
) -> None:
    live = await new_job(store, "live")
    await record(store, live, [S, S, S])
    gone = await new_job(store, "gone")
    gone_runs = await record(store, gone, [S, S, F])
    await store.delete_job(gone.id, START)
    own = await new_job(store, "own", retention=RetentionPolicy(keep_days=30))
    own_runs = await record(store, own, [S, S, S])

    report = await Purger(store, clock, RetentionPolicy(keep_days=1), pause_s=0).purge(NOW)

    assert (report.purged, report.jobs) == (3, 2)  # two of live's, one of gone's
    assert len(await remaining(store, live)) == 1
    assert await remaining(store, gone) == {gone_runs[1].id, gone_runs[2].id}  # latest SUCCESS, FAILED
    assert await remaining(store, own) == {run.id for run in own_runs}


async def test_purge_runs_leaves_runs_that_are_not_terminal(store: SqlStore) -> None:
    job = await new_job(store)
    made = await record(store, job, [P, R, S, K])
    assert await store.purge_runs([run.id for run in made] + ["no-such-run"]) == 2
    assert await remaining(store, job) == {made[0].id, made[1].id}
    assert await store.purge_runs([]) == 0


async def test_history_bounds_and_oldest_runs(store: SqlStore) -> None:
    job = await new_job(store)
    made = await record(store, job, [S, F, S, K, S])
    bounds = await store.history_bounds(job.id, 2)
    assert bounds.nth_newest == (made[3].slot, made[3].id)
    assert bounds.latest == {made[4].id, made[1].id, made[3].id}
    assert (await store.history_bounds(job.id, 6)).nth_newest is None
    first = await store.oldest_runs(job.id, None, 2)
    assert [stub.id for stub in first] == [made[0].id, made[1].id]
    rest = await store.oldest_runs(job.id, first[-1].key, 10)
    assert [stub.id for stub in rest] == [run.id for run in made[2:]]
    assert effective(None, None) is None


async def test_a_pass_logs_its_counts_with_stable_keys(
    store: SqlStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    job = await new_job(store, retention=RetentionPolicy(keep_runs=1))
    await record(store, job, [S, S, S])
    with caplog.at_level(logging.INFO, logger="cronwheel.retention"):
        await Purger(store, clock, None, pause_s=0).purge(NOW)
    (line,) = [record for record in caplog.records if getattr(record, "action", None) == "purge"]
    assert (line.purged, line.jobs) == (2, 1)  # type: ignore[attr-defined]
    assert isinstance(line.seconds, float)  # type: ignore[attr-defined]


async def test_the_loop_purges_only_while_this_node_leads(store: SqlStore, clock: ManualClock) -> None:
    job = await new_job(store, retention=RetentionPolicy(keep_runs=1))
    await record(store, job, [S, S, S])
    clock.set(NOW)
    stop = asyncio.Event()
    asked = 0

    async def follower() -> bool:
        nonlocal asked
        asked += 1
        stop.set()
        return False

    await Purger(store, clock, None, every_s=0.01, pause_s=0).run(stop, follower)
    assert asked == 1
    assert len(await remaining(store, job)) == 3

    async def leader() -> bool:
        return True

    stop = asyncio.Event()
    purger = Purger(store, clock, None, every_s=60, pause_s=0)
    task = asyncio.create_task(purger.run(stop, leader))
    for _ in range(200):
        if len(await remaining(store, job)) == 1:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await task
    assert len(await remaining(store, job)) == 1


async def test_an_attempts_output_tail_is_kept_beside_its_excerpt(store: SqlStore) -> None:
    job = await new_job(store)
    (run,) = await record(store, job, [P])
    assert await store.claim_run(run.id, "w1", START, START + LEASE) is not None
    tail = "z" * 70_000
    result = AttemptResult(Outcome.FAILURE, exit_code=3, output=tail[-1024:], output_tail=tail)
    await store.finish_attempt(run.id, 1, "w1", result, START, None)
    (attempt,) = await store.list_attempts(run.id)
    assert (attempt.output, attempt.output_tail) == (tail[-1024:], tail)


async def test_a_pass_told_to_stop_ends_early(store: SqlStore, clock: ManualClock) -> None:
    for name in ("a", "b"):
        job = await new_job(store, name, retention=RetentionPolicy(keep_runs=1))
        await record(store, job, [S, S])
    stop = asyncio.Event()
    stop.set()
    assert (await Purger(store, clock, None, pause_s=0).purge(NOW, stop)).purged == 0


async def test_after_each_batch_the_purge_pauses_at_least_as_long_as_the_batch_took(
    store: SqlStore, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = await new_job(store, retention=RetentionPolicy(keep_runs=1))
    await record(store, job, [S, S, S, S, S])
    original_purge, original_sleep = store.purge_runs, asyncio.sleep
    pauses: list[float] = []

    async def slow_purge(run_ids: list[str]) -> int:
        clock.advance(0.7)  # the batch took 0.7 s
        return await original_purge(run_ids)

    async def recorded_sleep(seconds: float) -> None:
        pauses.append(seconds)
        await original_sleep(0)

    monkeypatch.setattr(store, "purge_runs", slow_purge)
    monkeypatch.setattr(asyncio, "sleep", recorded_sleep)  # the purger's pauses (and only those here)
    report = await Purger(store, clock, None, batch=2, pause_s=0.05).purge(NOW)
    assert report.purged == 4
    assert pauses == [0.7, 0.7]  # two full batches of two, not 0.05 each
