"""Every store port under concurrency and outages: writers on two engines never fail, an
unreachable backend is unavailable, a lost race is run again; on every backend in
conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from cronwheel.errors import (
    BackendUnavailableError,
    RaceLostError,
)
from cronwheel.model import (
    Job,
    Run,
    RunState,
)
from cronwheel.store import sql
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore, open_store

from .conftest import BACKENDS
from .support import LEASE, START, SUCCESS, fire_one, firing_of, make_run, new_job


async def _lifecycle(store: SqlStore, job: Job, cycles: int, worker: str) -> list[Run]:
    done = []
    for _ in range(cycles):
        job = await store.get_job(job.id)
        assert job.next_run_at is not None
        run = make_run(job, job.next_run_at)
        result = await store.fire([firing_of(job, run)], START)
        assert result.accepted
        await store.mark_queued([run.id], START)
        claimed = await store.claim_run(run.id, worker, run.slot, run.slot + LEASE)
        assert claimed is not None
        assert await store.heartbeat(run.id, 1, worker, run.slot + 2 * LEASE) is not None
        await store.list_runs(RunQuery(job_id=job.id, limit=2))
        finished = await store.finish_attempt(run.id, 1, worker, SUCCESS, START, None)
        assert finished is not None
        done.append(finished)
    return done


async def test_concurrent_writers_never_fail(store: SqlStore, store_url: str) -> None:
    """Many tasks on two stores (two processes' worth of engines) over one database: writes
    wait for each other, none fails with "database is locked"."""
    other = await open_store(store_url)
    try:
        jobs = [await new_job(store, f"job-{n}") for n in range(12)]
        results = await asyncio.gather(
            *(_lifecycle(store if n % 2 else other, job, 4, f"w{n}") for n, job in enumerate(jobs)),
            *(store.expire_leases(START) for _ in range(4)),
            *(other.runs_to_dispatch(START, START) for _ in range(4)),
        )
        finished = [run for result in results[: len(jobs)] for run in result]
        assert len(finished) == 4 * len(jobs)
        assert all(run.state is RunState.SUCCESS for run in finished)
    finally:
        await other.close()


async def test_an_unreachable_backend_is_unavailable(unreachable_url: str) -> None:
    threads = set(threading.enumerate())
    with pytest.raises(BackendUnavailableError) as raised:
        await open_store(unreachable_url)
    assert raised.value.retryable
    # aiosqlite stops the worker thread of a failed connection without waiting for it; let it
    # finish while this test's event loop still runs (it reports back to the loop).
    for thread in set(threading.enumerate()) - threads:
        await asyncio.to_thread(thread.join, 5)


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "sqlite"])
async def test_batch_writes_of_runs_run_again_when_they_lose_a_race(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim that PostgreSQL aborted for a concurrent one (a deadlock) wrote nothing and is run
    again at once, instead of failing the worker's whole receive."""
    run = await fire_one(store, await new_job(store))
    real_claim = sql._claim
    calls = 0

    async def losing_once(*args: Any, **options: Any) -> dict[str, tuple[Run, Job | None]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RaceLostError("deadlock detected")
        return await real_claim(*args, **options)

    monkeypatch.setattr(sql, "_claim", losing_once)
    claimed = await store.claim_runs([run.id], "w1", START, START + LEASE)
    assert list(claimed) == [run.id]
    assert calls == 2
    assert len(await store.list_attempts(run.id)) == 1

    async def always_losing(*args: Any, **options: Any) -> dict[str, tuple[Run, Job | None]]:
        raise RaceLostError("deadlock detected")

    monkeypatch.setattr(sql, "_claim", always_losing)
    with pytest.raises(RaceLostError):
        await store.claim_runs([run.id], "w2", START, START + LEASE)
