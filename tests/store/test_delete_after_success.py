"""One-time jobs deleted after success: the transaction that records the SUCCESS of a job's slot
run also deletes a job with ``delete_after_success``, as the API's delete does (its history stays
readable, an audit entry says the server did it), on every backend and on each path an outcome
batch takes: the write that commits alone (SQLite's one trip to the driver, PostgreSQL's one
statement), which spares such successes for a transaction of their own, and the transaction of
batches. A failpoint inside that transaction proves there is no moment when one is written
without the other."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from cronwheel import failpoints
from cronwheel.audit import AuditQuery
from cronwheel.errors import NotFoundError
from cronwheel.model import AttemptResult, Finish, Job, Run, RunKind, RunState
from cronwheel.store import sql
from cronwheel.store.port import JobQuery, RunQuery
from cronwheel.store.sql import SqlStore
from cronwheel.store.sql.jobs import SUCCESS_DELETES

from .support import FAILURE, LEASE, START, SUCCESS, fire_one, make_run, new_job

ONCE = "@at 2026-03-02T12:00:00Z"  # START


@pytest.fixture(params=["alone", "batches"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``alone``: the usual path of a worker's batch; ``batches``: the transaction that larger
    batches take (every batch is "too large" with a chunk of 0)."""
    if request.param == "batches":
        monkeypatch.setattr(sql, "CHUNK", 0)
    name: str = request.param
    return name


async def _once(store: SqlStore, name: str = "once", **fields: object) -> Job:
    return await new_job(store, name, schedule=ONCE, delete_after_success=True, **fields)


async def _running(store: SqlStore, job: Job) -> Run:
    run = await fire_one(store, job)
    claimed = await store.claim_run(run.id, "w1", START, START + LEASE)
    assert claimed is not None
    return claimed


def _finish(run: Run, result: AttemptResult = SUCCESS, retry_at: datetime | None = None) -> Finish:
    return Finish(run.id, run.attempts, result, retry_at)


async def _is_live(store: SqlStore, job_id: str) -> bool:
    try:
        await store.get_job(job_id)
    except NotFoundError:
        return False
    return True


async def test_the_success_of_its_run_deletes_the_job_and_keeps_its_history(
    store: SqlStore, path: str
) -> None:
    job = await _once(store)
    run = await _running(store, job)

    recorded = await store.finish_attempts([_finish(run)], "w1", START + timedelta(seconds=1))

    assert recorded[run.id].state is RunState.SUCCESS
    assert not await _is_live(store, job.id)
    assert await store.job_known(job.id)  # deleted, as the API deletes: the row stays
    assert (await store.list_jobs(JobQuery(team="ops"))).items == []
    assert [r.state for r in (await store.list_runs(RunQuery(job_id=job.id))).items] == [RunState.SUCCESS]
    assert [e.state for e in await store.list_events(run.id)][-1] is RunState.SUCCESS
    (entry,) = (await store.list_audit(AuditQuery(team="ops", action="job.delete"))).items
    assert (entry.actor_kind, entry.target_id, entry.detail) == ("server", job.id, SUCCESS_DELETES)
    assert entry.before is not None
    assert entry.before["delete_after_success"] is True


async def test_a_failed_or_retrying_run_leaves_the_job_and_the_final_success_deletes_it(
    store: SqlStore, path: str
) -> None:
    failed_job = await _once(store, "fails")
    failed = await _running(store, failed_job)
    retried_job = await _once(store, "retried")
    retried = await _running(store, retried_job)
    later = START + timedelta(seconds=5)

    recorded = await store.finish_attempts(
        [_finish(failed, FAILURE), _finish(retried, FAILURE, later)], "w1", START + timedelta(seconds=1)
    )
    assert {r.state for r in recorded.values()} == {RunState.FAILED, RunState.RETRYING}
    assert await _is_live(store, failed_job.id)
    assert await _is_live(store, retried_job.id)

    again = await store.claim_run(retried.id, "w1", later, later + LEASE)
    assert again is not None
    assert again.attempts == 2
    await store.finish_attempts([_finish(again)], "w1", later)
    assert await _is_live(store, failed_job.id)  # complete, for people to see why it failed
    assert not await _is_live(store, retried_job.id)


async def test_a_manual_success_or_a_job_without_the_flag_is_kept(store: SqlStore, path: str) -> None:
    kept = await new_job(store, "plain", schedule=ONCE)
    ordinary = await _running(store, kept)
    once = await _once(store)
    manual = make_run(once, START, kind=RunKind.MANUAL, idempotency_key="k1")
    stored, _ = await store.create_manual_run(manual)
    claimed = await store.claim_run(stored.id, "w1", START, START + LEASE)
    assert claimed is not None

    recorded = await store.finish_attempts([_finish(ordinary), _finish(claimed)], "w1", START)

    assert {r.state for r in recorded.values()} == {RunState.SUCCESS}
    assert await _is_live(store, kept.id)
    assert await _is_live(store, once.id)  # a manual run is not the job's one slot


async def test_one_batch_records_every_outcome_and_deletes_only_the_flagged_job(
    store: SqlStore, path: str
) -> None:
    once = await _once(store)
    deleting = await _running(store, once)
    plain = await new_job(store, "plain", schedule=ONCE)
    succeeding = await _running(store, plain)
    other = await _once(store, "other")
    failing = await _running(store, other)

    batch = [_finish(deleting), _finish(succeeding), _finish(failing, FAILURE)]
    recorded = await store.finish_attempts(batch, "w1", START)

    assert {run_id: r.state for run_id, r in recorded.items()} == {
        deleting.id: RunState.SUCCESS,
        succeeding.id: RunState.SUCCESS,
        failing.id: RunState.FAILED,
    }
    assert [await _is_live(store, j.id) for j in (once, plain, other)] == [False, True, True]
    assert (await store.last_runs([once.id]))[once.id].state is RunState.SUCCESS


async def test_a_lost_lease_records_nothing_and_deletes_nothing(store: SqlStore, path: str) -> None:
    job = await _once(store)
    run = await _running(store, job)
    assert await store.finish_attempts([_finish(run)], "w2", START) == {}  # w1 holds it
    assert await _is_live(store, job.id)
    assert (await store.get_run(run.id)).state is RunState.RUNNING


@pytest.mark.parametrize(
    "failpoint",
    [
        "store.before_success_delete",  # the run is SUCCESS, the job not yet deleted
        "store.before_cancel_flags",  # the job is deleted too, its runs' cancel flags not yet set
    ],
)
async def test_a_failure_inside_the_transaction_leaves_neither_the_success_nor_the_deletion(
    store: SqlStore, path: str, failpoint: str
) -> None:
    job = await _once(store)
    run = await _running(store, job)

    with failpoints.armed(f"{failpoint}=raise@1"), pytest.raises(failpoints.FailpointError):
        await store.finish_attempts([_finish(run)], "w1", START)

    assert (await store.get_run(run.id)).state is RunState.RUNNING
    assert (await store.get_job(job.id)).version == job.version  # live, unchanged
    assert (await store.list_audit(AuditQuery(team="ops", action="job.delete"))).items == []

    recorded = await store.finish_attempts([_finish(run)], "w1", START)  # the worker's retry
    assert recorded[run.id].state is RunState.SUCCESS
    assert not await _is_live(store, job.id)
