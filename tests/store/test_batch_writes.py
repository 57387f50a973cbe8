"""The worker's batch writes on every backend: one ``claim_runs_with_jobs`` and one
``finish_attempts`` for many runs keep each run's own conditions (claimable and due; the lease
and attempt of the worker that finishes), whatever else the batch holds, however big it is, and
whichever other batch races it."""

from __future__ import annotations

import asyncio

from cronwheel.model import AttemptResult, Finish, Outcome, Run, RunState
from cronwheel.store.sql import SqlStore
from cronwheel.store.sql.tx import CHUNK

from .support import LEASE, START, at, fire_one, new_job

SUCCESS = AttemptResult(Outcome.SUCCESS, status_code=200)
FAILURE = AttemptResult(Outcome.FAILURE, status_code=500, error="HTTP 500")


async def fired(store: SqlStore, count: int, prefix: str = "j") -> list[Run]:
    return [await fire_one(store, await new_job(store, name=f"{prefix}{n}")) for n in range(count)]


async def test_a_claim_batch_over_several_statements_claims_each_run_once(store: SqlStore) -> None:
    """More runs than one statement takes, each named twice (a trigger delivered twice, the
    second copy in another chunk): one transaction, one attempt per run."""
    runs = await fired(store, CHUNK + 3)
    ids = [run.id for run in runs]
    claimed = await store.claim_runs_with_jobs(ids + ids[::-1], "w1", at(1), at(1) + LEASE)
    assert sorted(claimed) == sorted(ids)
    assert {run.attempts for run, _ in claimed.values()} == {1}
    assert all(job is not None and job.id == run.job_id for run, job in claimed.values())
    for run_id in (ids[0], ids[CHUNK], ids[-1]):
        assert [a.number for a in await store.list_attempts(run_id)] == [1]
        assert [e.state for e in await store.list_events(run_id)] == [RunState.PENDING, RunState.RUNNING]
    assert await store.claim_runs_with_jobs(ids, "w2", at(1), at(1) + LEASE) == {}


async def test_batches_racing_over_overlapping_runs_start_one_attempt_each(store: SqlStore) -> None:
    """Four workers' batches, overlapping and each with a duplicate, at the same moment: every
    run goes to exactly one of them, with one attempt and one RUNNING event."""
    runs = await fired(store, 12)
    ids = [run.id for run in runs]
    batches = [ids[0:8] + ids[0:1], ids[4:12] + ids[5:6], ids[::2] + ids[::2], ids[::-1]]
    claims = await asyncio.gather(
        *(store.claim_runs_with_jobs(batch, f"w{n}", START, START + LEASE) for n, batch in enumerate(batches))
    )
    owners = [run_id for claim in claims for run_id in claim]
    assert sorted(owners) == sorted(ids)  # every run claimed, none twice
    for n, claim in enumerate(claims):
        for run, _ in claim.values():
            assert (await store.get_run(run.id)).lease_owner == f"w{n}"
    for run_id in ids:
        assert len(await store.list_attempts(run_id)) == 1
        assert [e.state for e in await store.list_events(run_id)].count(RunState.RUNNING) == 1


async def test_a_claim_batch_mixes_claimable_runs_with_gone_and_not_due_ones(store: SqlStore) -> None:
    """A run that does not exist is absent from the answer as a taken one is: ``get_runs`` tells
    them apart (the worker's next step), and neither changes what the batch claims."""
    pending, early, taken = await fired(store, 3)
    await store.claim_runs([early.id, taken.id], "w0", at(0), at(0) + LEASE)
    await store.finish_attempts([Finish(early.id, 1, FAILURE, at(9))], "w0", at(0))
    gone = "0" * 26
    batch = [gone, early.id, pending.id, taken.id]
    claimed = await store.claim_runs_with_jobs(batch, "w1", at(1), at(1) + LEASE)
    assert set(claimed) == {pending.id}
    found = await store.get_runs([gone, early.id, taken.id])
    assert gone not in found  # not found: a distinct answer from "not claimable"
    assert (found[early.id].state, found[taken.id].state) == (RunState.RETRYING, RunState.RUNNING)
    claimed = await store.claim_runs_with_jobs([early.id], "w1", at(9), at(9) + LEASE)  # now due
    assert claimed[early.id][0].attempts == 2


async def test_a_finish_batch_writes_only_what_each_lease_still_allows(store: SqlStore) -> None:
    """One batch of a worker whose lease on one run expired and went to another worker (attempt
    2): that run keeps the other's attempt; the others are recorded, each retry at its own time."""
    ok, retry_soon, retry_late, lost = await fired(store, 4)
    await store.claim_runs([ok.id, retry_soon.id, retry_late.id], "w1", at(0), at(10))
    await store.claim_runs([lost.id], "w1", at(0), at(0.5))  # a short lease
    [expired] = await store.expire_leases(at(1))
    assert (expired.id, expired.state) == (lost.id, RunState.RETRYING)
    assert set(await store.claim_runs([lost.id], "w2", at(1), at(1) + LEASE)) == {lost.id}
    finishes = [
        Finish(lost.id, 1, SUCCESS),  # w1's stale outcome: fenced off by lease and attempt
        Finish(retry_late.id, 1, FAILURE, at(5)),
        Finish(ok.id, 1, SUCCESS),
        Finish(retry_soon.id, 1, FAILURE, at(2)),
    ]
    recorded = await store.finish_attempts(finishes, "w1", at(1))
    assert {run_id: run.state for run_id, run in recorded.items()} == {
        ok.id: RunState.SUCCESS,
        retry_soon.id: RunState.RETRYING,
        retry_late.id: RunState.RETRYING,
    }
    assert (recorded[retry_soon.id].next_attempt_at, recorded[retry_late.id].next_attempt_at) == (
        at(2),
        at(5),
    )
    held = await store.get_run(lost.id)
    assert (held.state, held.lease_owner, held.attempts) == (RunState.RUNNING, "w2", 2)
    assert [a.outcome for a in await store.list_attempts(lost.id)] == [Outcome.LOST, None]
    recorded = await store.finish_attempts([Finish(lost.id, 2, SUCCESS)], "w2", at(2))
    assert recorded[lost.id].state is RunState.SUCCESS


async def test_finish_batches_racing_with_a_claim_batch_stay_consistent(store: SqlStore) -> None:
    """Outcomes of one batch and the claim of the next batch, at the same moment over disjoint
    runs: both land whole, each run's history a legal chain."""
    first = await fired(store, 6)
    second = await fired(store, 6, prefix="k")
    await store.claim_runs([run.id for run in first], "w1", at(0), at(0) + LEASE)
    finishes = [Finish(run.id, 1, SUCCESS) for run in first]
    recorded, claimed = await asyncio.gather(
        store.finish_attempts(finishes, "w1", at(1)),
        store.claim_runs_with_jobs([run.id for run in second], "w1", at(1), at(1) + LEASE),
    )
    assert set(recorded) == {run.id for run in first}
    assert set(claimed) == {run.id for run in second}
    for run in first:
        assert [e.state for e in await store.list_events(run.id)] == [
            RunState.PENDING,
            RunState.RUNNING,
            RunState.SUCCESS,
        ]


async def test_claim_and_finish_batches_note_each_jobs_latest_run(store: SqlStore) -> None:
    """``job_last_run`` follows a batch whatever its size (one statement, or several in one
    transaction): RUNNING once claimed, the outcome's state once finished."""
    for size, prefix in ((3, "small"), (CHUNK + 1, "big")):
        runs = await fired(store, size, prefix=prefix)
        ids, job_ids = [run.id for run in runs], [run.job_id for run in runs]
        await store.claim_runs_with_jobs(ids, "w1", at(1), at(1) + LEASE)
        latest = await store.last_runs(job_ids)
        assert {run.state for run in latest.values()} == {RunState.RUNNING}
        assert sorted(run.id for run in latest.values()) == sorted(ids)
        finishes = [Finish(run.id, 1, SUCCESS if n % 2 else FAILURE) for n, run in enumerate(runs)]
        await store.finish_attempts(finishes, "w1", at(2))
        latest = await store.last_runs(job_ids)
        assert [latest[run.job_id].state for run in runs[:2]] == [RunState.FAILED, RunState.SUCCESS]
        assert len(latest) == size
