"""The worker's store contract (``LeaseStore`` of :mod:`cronwheel.store.port`): claims, leases,
attempts and their outcomes, run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from cronwheel.errors import (
    InvalidInputError,
)
from cronwheel.model import (
    AttemptResult,
    Finish,
    Outcome,
    RunKind,
    RunState,
    new_id,
)
from cronwheel.store.schema import jobs
from cronwheel.store.sql import SqlStore

from .support import FAILURE, LEASE, START, SUCCESS, at, fire_one, make_run, new_job


async def test_claim_starts_an_attempt(store: SqlStore) -> None:
    job = await new_job(store)
    run = await fire_one(store, job)
    claimed = await store.claim_run(run.id, "w1", at(1), at(1) + LEASE)
    assert claimed is not None
    assert (claimed.state, claimed.attempts, claimed.lease_owner) == (RunState.RUNNING, 1, "w1")
    assert (claimed.lease_expires_at, claimed.started_at) == (at(1) + LEASE, at(1))
    assert claimed == await store.get_run(run.id)
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.number, attempt.worker, attempt.started_at, attempt.outcome) == (1, "w1", at(1), None)
    assert await store.claim_run(run.id, "w2", at(1), at(1) + LEASE) is None
    assert await store.claim_run(new_id(), "w2", at(1), at(1) + LEASE) is None


async def test_concurrent_claims_have_one_winner(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    claims = await asyncio.gather(*(store.claim_run(run.id, f"w{n}", START, START + LEASE) for n in range(8)))
    winners = [claim for claim in claims if claim is not None]
    assert len(winners) == 1
    assert len(await store.list_attempts(run.id)) == 1
    assert (await store.get_run(run.id)).lease_owner == winners[0].lease_owner


async def test_claim_runs_claims_what_is_claimable_in_one_call(store: SqlStore) -> None:
    """A batch mixing a PENDING run, a due retry, a retry not due yet, a running run, a finished
    run and an unknown id claims exactly the first two, each with its attempt and RUNNING event."""
    pending, due, early, running, finished = [await fire_one(store, await new_job(store, name=f"j{n}"))
                                              for n in range(5)]  # fmt: skip
    for run in (due, early, running, finished):
        await store.claim_run(run.id, "w0", at(0), at(0) + LEASE)
    await store.finish_attempt(due.id, 1, "w0", FAILURE, at(1), at(2))
    await store.finish_attempt(early.id, 1, "w0", FAILURE, at(1), at(9))
    await store.finish_attempt(finished.id, 1, "w0", SUCCESS, at(1), None)
    ids = [pending.id, due.id, early.id, running.id, finished.id, new_id(), pending.id]
    claimed = await store.claim_runs(ids, "w1", at(3), at(3) + LEASE)
    assert set(claimed) == {pending.id, due.id}
    assert (claimed[pending.id].attempts, claimed[due.id].attempts) == (1, 2)
    for run in claimed.values():
        assert run == await store.get_run(run.id)
        assert (run.state, run.lease_owner, run.lease_expires_at) == (RunState.RUNNING, "w1", at(3) + LEASE)
        assert (await store.list_attempts(run.id))[-1].worker == "w1"
        [*_, event] = await store.list_events(run.id)
        assert (event.state, event.attempt, event.node) == (RunState.RUNNING, run.attempts, "w1")
    assert [e.previous for e in await store.list_events(due.id)][-1] is RunState.RETRYING
    assert (await store.get_run(early.id)).state is RunState.RETRYING
    assert (await store.get_run(running.id)).lease_owner == "w0"
    assert await store.claim_runs([pending.id, due.id], "w2", at(4), at(4) + LEASE) == {}
    assert await store.claim_runs([], "w2", at(4), at(4) + LEASE) == {}


async def test_claim_runs_with_jobs_returns_each_claimed_run_with_its_live_job(store: SqlStore) -> None:
    """What a worker starts attempts from: the claim as claim_runs makes it, each run with its
    job as get_jobs reads it, and None for a run whose job was deleted meanwhile."""
    kept, gone = [await new_job(store, name=f"j{n}") for n in range(2)]
    kept_run, gone_run, taken = [await fire_one(store, job) for job in (kept, gone, await new_job(store))]
    await store.claim_run(taken.id, "w0", at(0), at(0) + LEASE)
    async with store.engine.begin() as connection:  # deleted after its run was queued
        await connection.execute(jobs.update().where(jobs.c.id == gone.id).values(deleted_at=at(0)))
    ids = [kept_run.id, gone_run.id, taken.id, new_id()]
    claimed = await store.claim_runs_with_jobs(ids, "w1", at(1), at(1) + LEASE)
    assert set(claimed) == {kept_run.id, gone_run.id}
    run, job = claimed[kept_run.id]
    assert run == await store.get_run(kept_run.id)
    assert (run.state, run.lease_owner, run.attempts) == (RunState.RUNNING, "w1", 1)
    assert job == (await store.get_jobs([kept.id]))[kept.id]
    assert claimed[gone_run.id][1] is None
    assert [e.state for e in await store.list_events(gone_run.id)][-1] is RunState.RUNNING
    assert await store.claim_runs_with_jobs([kept_run.id], "w2", at(2), at(2) + LEASE) == {}


async def test_concurrent_batch_claims_give_each_run_to_one_worker(store: SqlStore) -> None:
    fired = [await fire_one(store, await new_job(store, name=f"j{n}")) for n in range(6)]
    ids = [run.id for run in fired]
    claims = await asyncio.gather(
        *(store.claim_runs(ids[n % 3 :] + ids[: n % 3], f"w{n}", START, START + LEASE) for n in range(6))
    )
    owners = [run_id for claim in claims for run_id in claim]
    assert sorted(owners) == sorted(ids)  # every run claimed, none twice
    for run_id in ids:
        assert len(await store.list_attempts(run_id)) == 1


async def test_finish_attempts_records_many_outcomes_in_one_call(store: SqlStore) -> None:
    """Success, retry and failure in one batch, each with its attempt row and event; a run whose
    lease the worker lost and a run named twice are left alone."""
    fired = [await fire_one(store, await new_job(store, name=f"j{n}")) for n in range(5)]
    ok, retry, failed, lost, twice = fired
    await store.claim_runs([run.id for run in fired], "w1", at(0), at(0) + LEASE)
    finishes = [
        Finish(ok.id, 1, SUCCESS),
        Finish(retry.id, 1, FAILURE, at(7)),
        Finish(failed.id, 1, AttemptResult(Outcome.FAILURE, status_code=500, error="boom", output="x")),
        Finish(lost.id, 2, SUCCESS),  # not its attempt: as with a lost lease
        Finish(twice.id, 1, SUCCESS),
        Finish(twice.id, 1, FAILURE),
    ]
    recorded = await store.finish_attempts(finishes, "w1", at(2))
    assert {run_id: run.state for run_id, run in recorded.items()} == {
        ok.id: RunState.SUCCESS,
        retry.id: RunState.RETRYING,
        failed.id: RunState.FAILED,
    }
    assert (recorded[retry.id].next_attempt_at, recorded[retry.id].finished_at) == (at(7), None)
    assert (recorded[ok.id].finished_at, recorded[ok.id].lease_owner) == (at(2), None)
    for run in recorded.values():
        assert run == await store.get_run(run.id)
    [attempt] = await store.list_attempts(failed.id)
    assert (attempt.outcome, attempt.status_code, attempt.error, attempt.finished_at) == (
        Outcome.FAILURE,
        500,
        "boom",
        at(2),
    )
    [*_, event] = await store.list_events(failed.id)
    assert (event.state, event.previous, event.node, event.detail) == (
        RunState.FAILED,
        RunState.RUNNING,
        "w1",
        "failure: boom",
    )
    for run in (lost, twice):
        assert (await store.get_run(run.id)).state is RunState.RUNNING
    assert await store.finish_attempts([Finish(ok.id, 1, SUCCESS)], "w1", at(3)) == {}
    assert await store.finish_attempts([], "w1", at(3)) == {}


async def test_an_attempt_keeps_the_headers_it_sent_in_their_order(store: SqlStore) -> None:
    """``AttemptResult.request_headers`` go through ``finish_attempts`` as given (the worker has
    redacted them); an attempt that sent no request keeps None."""
    sent = (("Host", "h:1"), ("Authorization", "[redacted]"), ("X-Zeta", "z"), ("X-Alpha", "ä, b"))
    http, other = [await fire_one(store, await new_job(store, name=name)) for name in ("http", "other")]
    await store.claim_runs([http.id, other.id], "w1", at(0), at(0) + LEASE)
    finishes = [
        Finish(http.id, 1, AttemptResult(Outcome.SUCCESS, status_code=200, request_headers=sent)),
        Finish(other.id, 1, SUCCESS),
    ]
    assert set(await store.finish_attempts(finishes, "w1", at(1))) == {http.id, other.id}
    [attempt] = await store.list_attempts(http.id)
    assert attempt.request_headers == sent
    [plain] = await store.list_attempts(other.id)
    assert plain.request_headers is None


async def test_only_the_lease_holder_heartbeats_and_finishes(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    assert await store.heartbeat(run.id, 1, "w2", at(5)) is None
    assert await store.heartbeat(run.id, 2, "w1", at(5)) is None
    assert await store.finish_attempt(run.id, 1, "w2", SUCCESS, at(1), None) is None
    assert await store.finish_attempt(run.id, 2, "w1", SUCCESS, at(1), None) is None
    assert (await store.get_run(run.id)).lease_expires_at == START + LEASE
    beat = await store.heartbeat(run.id, 1, "w1", at(5))
    assert beat is not None
    assert beat.lease_expires_at == at(5)
    assert not beat.cancel_requested
    done = await store.finish_attempt(run.id, 1, "w1", SUCCESS, at(1), None)
    assert done is not None
    assert done.state is RunState.SUCCESS
    assert await store.heartbeat(run.id, 1, "w1", at(6)) is None
    assert await store.finish_attempt(run.id, 1, "w1", SUCCESS, at(1), None) is None


@pytest.mark.parametrize(
    ("result", "retry_at", "state"),
    [
        (SUCCESS, None, RunState.SUCCESS),
        (SUCCESS, at(9), RunState.SUCCESS),
        (FAILURE, None, RunState.FAILED),
        (FAILURE, at(9), RunState.RETRYING),
        (AttemptResult(Outcome.TIMEOUT), at(9), RunState.RETRYING),
    ],
)
async def test_finish_attempt(
    store: SqlStore, result: AttemptResult, retry_at: datetime | None, state: RunState
) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", START, START + LEASE)
    finished = await store.finish_attempt(run.id, 1, "w1", result, at(1), retry_at)
    assert finished is not None
    assert finished.state is state
    assert (finished.lease_owner, finished.lease_expires_at) == (None, None)
    assert finished.finished_at == (at(1) if state.terminal else None)
    assert finished.next_attempt_at == (retry_at if state is RunState.RETRYING else None)
    [attempt] = await store.list_attempts(run.id)
    assert (attempt.outcome, attempt.finished_at, attempt.status_code) == (
        result.outcome,
        at(1),
        result.status_code,
    )
    assert (attempt.error, attempt.output, attempt.retry_after_s) == (
        result.error,
        result.output,
        result.retry_after_s,
    )
    assert (await store.list_events(run.id))[-1].state is state


async def test_a_retry_is_claimable_when_due_and_keeps_the_first_start(store: SqlStore) -> None:
    run = await fire_one(store, await new_job(store))
    await store.claim_run(run.id, "w1", at(0), at(0) + LEASE)
    await store.finish_attempt(run.id, 1, "w1", FAILURE, at(1), at(3))
    assert await store.claim_run(run.id, "w2", at(2), at(2) + LEASE) is None
    second = await store.claim_run(run.id, "w2", at(3), at(3) + LEASE)
    assert second is not None
    assert (second.attempts, second.started_at, second.next_attempt_at) == (2, at(0), None)
    assert [(a.number, a.worker) for a in await store.list_attempts(run.id)] == [(1, "w1"), (2, "w2")]


async def test_fail_run(store: SqlStore) -> None:
    job = await new_job(store)
    pending = await fire_one(store, job)
    failed = await store.fail_run(pending.id, "job deleted", at(1))
    assert failed is not None
    assert (failed.state, failed.reason, failed.finished_at) == (RunState.FAILED, "job deleted", at(1))
    job = await store.get_job(job.id)
    retrying = await fire_one(store, job)
    await store.claim_run(retrying.id, "w", START, START + LEASE)
    await store.finish_attempt(retrying.id, 1, "w", FAILURE, START, at(5))
    failed = await store.fail_run(retrying.id, "cancelled", at(2))
    assert failed is not None
    assert (failed.state, failed.next_attempt_at) == (RunState.FAILED, None)
    assert await store.fail_run(new_id(), "gone", at(2)) is None


async def test_illegal_transitions_are_refused(store: SqlStore) -> None:
    job = await new_job(store)
    done = await fire_one(store, job)
    await store.claim_run(done.id, "w", done.slot, done.slot + LEASE)
    await store.finish_attempt(done.id, 1, "w", SUCCESS, START, None)
    job = await store.get_job(job.id)
    skipped = await fire_one(store, job, RunState.SKIPPED, reason="paused")
    job = await store.get_job(job.id)
    running = await fire_one(store, job)
    await store.claim_run(running.id, "w", running.slot, running.slot + LEASE)
    job = await store.get_job(job.id)
    pending = await fire_one(store, job)
    before = {
        run_id: await store.list_events(run_id) for run_id in (done.id, skipped.id, running.id, pending.id)
    }

    for terminal in (done, skipped):
        assert await store.claim_run(terminal.id, "w2", at(9), at(9) + LEASE) is None
        assert await store.fail_run(terminal.id, "nope", at(9)) is None
        assert await store.finish_attempt(terminal.id, 1, "w", FAILURE, at(9), at(10)) is None
    assert await store.fail_run(running.id, "not without its worker", at(9)) is None  # PENDING/RETRYING only
    assert await store.finish_attempt(pending.id, 0, "w", SUCCESS, at(9), None) is None
    assert await store.heartbeat(pending.id, 0, "w", at(9)) is None
    assert await store.expire_leases(START) == []
    with pytest.raises(InvalidInputError):
        await store.create_manual_run(make_run(job, at(9), RunState.SUCCESS, kind=RunKind.MANUAL))
    for run_id, events in before.items():
        assert await store.list_events(run_id) == events
    assert (await store.get_run(done.id)).state is RunState.SUCCESS
