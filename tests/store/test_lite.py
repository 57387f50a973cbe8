"""SQLite's claim and outcome batches, each one function on the driver's thread
(``store/sql/lite.py``): one trip, one transaction, every run found by primary key, and the same
rows written as the statement-by-statement path writes."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiosqlite.core
import pytest
from sqlalchemy import select

from cronwheel.errors import BackendUnavailableError, CronwheelError, InvalidInputError
from cronwheel.model import AttemptResult, Finish, Outcome, RunState
from cronwheel.store.schema import attempts, job_last_run, jobs, notification_inbox, run_events, runs
from cronwheel.store.sql import SqlStore, leases, lite, open_store

from .support import LEASE, START, at, fire_one, new_job

pytestmark = pytest.mark.parametrize("backend", ["sqlite"])


@pytest.fixture
async def other_store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await open_store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        yield opened
    finally:
        await opened.close()


def _outcomes(run_ids: list[str]) -> list[Finish]:
    """One success, one failure to retry a minute on, one failure for good."""
    return [
        Finish(run_ids[0], 1, AttemptResult(Outcome.SUCCESS, status_code=200, request_headers=(("a", "b"),))),
        Finish(run_ids[1], 1, AttemptResult(Outcome.FAILURE, status_code=500, error="boom"), at(2)),
        Finish(run_ids[2], 1, AttemptResult(Outcome.TIMEOUT, error="slow", output="x" * 10)),
    ]


async def _by_path(store: SqlStore, driver_thread: bool) -> None:
    """Three jobs fired, claimed and finished (plus a claim of a run already taken), by the
    driver-thread path or by the statement-by-statement one."""
    made = [await new_job(store, name) for name in ("a", "b", "c")]
    fired = [await fire_one(store, job) for job in made]
    ids = sorted(run.id for run in fired)
    tx = store._tx
    if driver_thread:
        await lite.claim(tx, ids, "w1", START, START + LEASE)
        await lite.claim(tx, ids, "w2", START, START + LEASE)
        await lite.finish(tx, _outcomes(ids), "w1", at(1))
        return
    async with tx.write() as connection:
        await leases.claim(connection, ids, "w1", START, START + LEASE, noted=True)
    async with tx.write() as connection:
        await leases.claim(connection, ids, "w2", START, START + LEASE, noted=True)
    async with tx.write() as connection:
        await leases.finish(connection, _outcomes(ids), "w1", at(1), noted=True)


async def _tables(store: SqlStore) -> dict[str, list[tuple[Any, ...]]]:
    """What the claims and outcomes wrote, with ids made comparable (the order of the jobs)."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    async with store._tx.read() as connection:
        named = select(runs.c.id).join(jobs, jobs.c.id == runs.c.job_id).order_by(jobs.c.name)
        order = {row[0]: n for n, row in enumerate(await connection.execute(named))}
        for table, drop in ((runs, {"id", "job_id", "dedup_key", "idempotency_key"}),
                            (attempts, set()), (run_events, {"id"}), (notification_inbox, {"id"}),
                            (job_last_run, {"job_id", "team"})):  # fmt: skip
            kept = [c for c in table.c if c.name not in drop]
            rows = (await connection.execute(select(*table.c))).mappings().all()
            found[table.name] = sorted(
                tuple(order.get(row[c.name], row[c.name]) if "id" in c.name else row[c.name] for c in kept)
                for row in rows
            )
    return found


async def test_the_driver_thread_writes_what_the_statements_write(
    store: SqlStore, other_store: SqlStore
) -> None:
    await _by_path(store, driver_thread=True)
    await _by_path(other_store, driver_thread=False)
    written, expected = await _tables(store), await _tables(other_store)
    assert written == expected
    states = [row[2] for row in written["runs"]]  # kind, slot, state, ...
    assert sorted(states) == ["FAILED", "RETRYING", "SUCCESS"]
    assert len(written["run_events"]) == 3 + 3 + 3  # PENDING, RUNNING, and the outcome of each
    assert len(written["notification_inbox"]) == 2  # SUCCESS and FAILED


async def test_a_claim_and_an_outcome_batch_are_one_trip_each(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = await fire_one(store, await new_job(store))
    job = await store.get_job(run.job_id)
    trips: list[str] = []
    through = aiosqlite.core.Connection._execute

    async def counted(self: aiosqlite.core.Connection, fn: Callable[..., Any], *args: Any) -> Any:
        trips.append(getattr(fn, "__name__", repr(fn)))
        return await through(self, fn, *args)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(aiosqlite.core.Connection, "_execute", counted)
    claimed = await store.claim_runs_with_jobs([run.id], "w1", START, START + LEASE)
    assert claimed[run.id][1] == job
    finish = Finish(run.id, 1, AttemptResult(Outcome.SUCCESS))
    assert (await store.finish_attempts([finish], "w1", at(1)))[run.id].state is RunState.SUCCESS
    # and the pool's reset of each connection it gets back (a no-op after COMMIT)
    assert trips == ["_transaction", "rollback", "_transaction", "rollback"]


async def test_a_batch_that_fails_midway_writes_nothing(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failpoint: the statement after the runs, attempts and events fails."""
    run = await fire_one(store, await new_job(store))
    monkeypatch.setattr(lite, "_NOTED_SQL", "INSERT INTO no_such_table VALUES (1)")
    with pytest.raises(CronwheelError):
        await store.claim_runs([run.id], "w1", START, START + LEASE)
    assert (await store.get_run(run.id)).state is RunState.PENDING
    assert await store.list_attempts(run.id) == []
    assert [event.state for event in await store.list_events(run.id)] == [RunState.PENDING]
    monkeypatch.undo()
    assert list(await store.claim_runs([run.id], "w1", START, START + LEASE)) == [run.id]


async def test_the_drivers_errors_are_translated(store: SqlStore) -> None:
    def locked(cursor: sqlite3.Cursor) -> None:
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(BackendUnavailableError):
        await store._tx.write_on_driver(locked)


@pytest.mark.parametrize("name", sorted(name for name in dir(lite) if name.endswith("_SQL")))
async def test_every_row_is_found_by_its_key(store: SqlStore, store_url: str, name: str) -> None:
    """Every table a statement reads is read by its key (the batch's own rows only: some read
    nothing but the batch), even on a fresh database without statistics, where SQLite would
    otherwise answer ``state IN ('PENDING', ...)`` by the state index and read every PENDING
    run of a herd."""
    params = {"ids": "[]", "now": 0, "worker": "w", "lease_until": 0, "outcomes": "[]", "previous": "[]"}
    with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
        plan = [row[3] for row in connection.execute(f"EXPLAIN QUERY PLAN {getattr(lite, name)}", params)]
    tables = [step for step in plan if step.startswith(("SEARCH", "SCAN")) and "VIRTUAL TABLE" not in step]
    assert all(step.startswith("SEARCH") and "INDEX sqlite_autoindex_" in step for step in tables)


async def test_an_outcome_with_nul_is_refused_and_writes_nothing(store: SqlStore) -> None:
    """SQLite's JSON functions would end the text at NUL: refused whole, as PostgreSQL refuses it
    (the executors replace NUL before any outcome reaches a store)."""
    run = await fire_one(store, await new_job(store))
    await store.claim_runs([run.id], "w1", START, START + LEASE)
    finish = Finish(run.id, 1, AttemptResult(Outcome.FAILURE, error="a\x00b"))
    with pytest.raises(InvalidInputError, match="not one the metadata store can hold"):
        await store.finish_attempts([finish], "w1", at(1))
    assert (await store.get_run(run.id)).state is RunState.RUNNING
