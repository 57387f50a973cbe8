"""Jitter in the store, on every backend: ``jobs.jitter_s`` and ``runs.due_at`` round-trip (the
full job, the scheduler's slim view, fire, claim and reads); the claim, the sweep and an edit's
removal of armed runs judge a jittered run by its fire time (``due_at``), and fire lateness is
measured from it."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from cronwheel.model import RunState
from cronwheel.store.port import JobQuery, RunQuery
from cronwheel.store.sql import SqlStore

from .support import START, at, fire_one, new_job

DUE = at(1) + timedelta(seconds=17, milliseconds=250)  # a slot at(1) fired 17.25 s after it
JUST_BEFORE = DUE - timedelta(microseconds=1)


async def test_jitter_and_due_at_round_trip(store: SqlStore) -> None:
    job = await new_job(store, jitter_s=42.5, next_run_at=at(1))
    assert (await store.get_job(job.id)).jitter_s == 42.5
    [slim] = [due for due in await store.due_jobs(at(2), None, 10) if due.id == job.id]
    assert slim.jitter_s == 42.5
    run = await fire_one(store, job, due_at=DUE)
    assert (run.slot, run.due_at, run.due) == (at(1), DUE, DUE)
    assert (await store.get_run(run.id)).due_at == DUE
    assert [r.due_at for r in (await store.list_runs(RunQuery(job_id=job.id))).items] == [DUE]
    plain = await fire_one(store, await store.get_job(job.id))
    assert (plain.due_at, plain.due) == (None, plain.slot)  # not jittered: the slot itself
    edited = await store.update_job(dataclasses.replace(await store.get_job(job.id), jitter_s=0.0), None)
    assert edited.jitter_s == 0.0


async def test_every_claim_refuses_a_run_before_its_fire_time(store: SqlStore) -> None:
    job = await new_job(store, jitter_s=30.0, next_run_at=at(1))
    ids = [(await fire_one(store, job, due_at=DUE)).id]
    for _n in range(2):  # three runs of three slots, one per claim path
        job = await store.get_job(job.id)
        assert job.next_run_at is not None
        ids.append((await fire_one(store, job, due_at=job.next_run_at + (DUE - at(1)))).id)
    lease = DUE + timedelta(minutes=5)
    one, many, with_jobs = ids
    assert await store.claim_run(one, "w", at(1), lease) is None  # its slot came, not its time
    assert await store.claim_run(one, "w", JUST_BEFORE, lease) is None
    assert await store.claim_runs([many], "w", JUST_BEFORE + timedelta(minutes=1), lease) == {}
    assert await store.claim_runs_with_jobs([with_jobs], "w", JUST_BEFORE + timedelta(minutes=2), lease) == {}
    claimed = await store.claim_run(one, "w", DUE, lease)
    assert claimed is not None
    assert claimed.state is RunState.RUNNING
    assert set(await store.claim_runs([many], "w", DUE + timedelta(minutes=1), lease)) == {many}
    assert set(await store.claim_runs_with_jobs([with_jobs], "w", DUE + timedelta(minutes=2), lease)) == {
        with_jobs
    }


async def test_the_sweep_leaves_an_armed_jittered_run_until_its_fire_time(store: SqlStore) -> None:
    job = await new_job(store, jitter_s=30.0, next_run_at=at(1))
    run = await fire_one(store, job, due_at=DUE)  # armed at START: never queued
    after_slot = at(1) + timedelta(seconds=2)
    found = await store.runs_to_dispatch(after_slot, after_slot, unqueued_before=after_slot)
    assert run.id not in [each.id for each in found]
    after_due = DUE + timedelta(seconds=2)
    found = await store.runs_to_dispatch(after_due, after_due, unqueued_before=after_due)
    assert run.id in [each.id for each in found]


async def test_an_edit_removes_an_armed_run_whose_slot_passed_but_not_its_fire_time(store: SqlStore) -> None:
    job = await new_job(store, jitter_s=30.0, next_run_at=START - timedelta(seconds=5))
    fires = START + timedelta(seconds=10)  # the store's clock is at START: slot past, fire time ahead
    run = await fire_one(store, job, due_at=fires)
    job = await store.get_job(job.id)
    edited = await store.update_job(dataclasses.replace(job, payload={"n": 2}), job.version)
    assert edited.next_run_at == run.slot  # the new version decides that slot again
    assert (await store.list_runs(RunQuery(job_id=job.id))).items == []


async def test_fire_lateness_counts_from_the_fire_time(store: SqlStore) -> None:
    job = await new_job(store, jitter_s=30.0, next_run_at=at(1))
    run = await fire_one(store, job, due_at=DUE)
    await store.mark_queued([run.id], DUE + timedelta(milliseconds=40))
    assert await store.fire_lateness(at(0), 10) == [40_000]
    samples = await store.recent_runs([job.id], 5)
    assert [sample.lateness_us for sample in samples[job.id]] == [40_000]


async def test_the_late_filter_waits_for_the_end_of_a_jittered_window(store: SqlStore) -> None:
    """As ``lateness.is_late``: a slot may fire up to ``jitter_s`` after it, so the job is late
    only once that much more has passed."""
    plain = await new_job(store, "plain", next_run_at=at(-2))
    jittered = await new_job(store, "jittered", jitter_s=150.0, next_run_at=at(-2))  # ends at(0.5)
    assert [job.id for job in (await store.list_jobs(JobQuery(late_before=at(0)))).items] == [plain.id]
    late = await store.list_jobs(JobQuery(late_before=at(0) + timedelta(seconds=31)))
    assert sorted(job.id for job in late.items) == sorted([plain.id, jittered.id])
