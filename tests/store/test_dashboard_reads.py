"""The dashboard's reads, on SQLite and PostgreSQL: late jobs (``JobQuery.late_before``), each
job's newest runs for its sparkline (``recent_runs``), and the fire lateness of recent runs
(``fire_lateness``), with the indexes that keep them cheap (the plans, on SQLite; PostgreSQL's at
scale are measured by benchmarks/bench_ui.py)."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import insert, text

from cronwheel.model import Job, Run, RunKind, RunState
from cronwheel.store import JobQuery, codec, schema
from cronwheel.store.sql import SqlStore
from cronwheel.store.sql.jobs import _matching
from cronwheel.store.sql.runs import _recent_statement

from .support import START, at, make_run, new_job

SECOND = timedelta(seconds=1)


async def _insert_runs(store: SqlStore, runs: list[Run]) -> None:
    async with store.engine.begin() as connection:
        await connection.execute(insert(schema.runs), [codec.run_to_row(run) for run in runs])


def _finished(job: Job, minute: int, late_s: float, took_s: float, **fields: object) -> Run:
    slot = at(minute)
    return make_run(
        job, slot, RunState.SUCCESS,
        queued_at=slot + late_s * SECOND, started_at=slot + 2 * late_s * SECOND,
        finished_at=slot + (2 * late_s + took_s) * SECOND, created_at=slot, **fields,
    )  # fmt: skip


async def test_late_jobs_are_active_unpaused_and_past_their_slot(store: SqlStore) -> None:
    late = await new_job(store, "late", next_run_at=at(-5))
    await new_job(store, "due soon", next_run_at=at(1))
    await new_job(store, "paused", next_run_at=at(-5), paused=True)
    await new_job(store, "done", next_run_at=None)
    gone = await new_job(store, "deleted", next_run_at=at(-5))
    await store.delete_job(gone.id, START)
    page = await store.list_jobs(JobQuery(late_before=at(-1)))
    assert [job.name for job in page.items] == ["late"]
    assert (await store.list_jobs(JobQuery(late_before=at(-6)))).items == []
    both = await store.list_jobs(JobQuery(late_before=at(-1), team="ops", name="late"))
    assert [job.id for job in both.items] == [late.id]


async def test_recent_runs_are_each_jobs_newest_oldest_first(store: SqlStore) -> None:
    one = await new_job(store, "one")
    two = await new_job(store, "two")
    idle = await new_job(store, "idle")
    await _insert_runs(store, [_finished(one, minute, minute / 10, minute / 100) for minute in range(30)])
    pending = make_run(two, at(3), RunState.PENDING, created_at=at(3))
    await _insert_runs(store, [_finished(two, 1, 0.5, 2.0), pending])
    recent = await store.recent_runs([one.id, two.id, idle.id], 20)
    assert set(recent) == {one.id, two.id}
    assert [sample.slot for sample in recent[one.id]] == [at(minute) for minute in range(10, 30)]
    newest = recent[one.id][-1]
    assert (newest.state, newest.lateness_us, newest.duration_us) == (RunState.SUCCESS, 2_900_000, 290_000)
    assert [(s.state, s.lateness_us, s.duration_us) for s in recent[two.id]] == [
        (RunState.SUCCESS, 500_000, 2_000_000),
        (RunState.PENDING, None, None),
    ]
    assert await store.recent_runs([], 20) == {}


async def test_fire_lateness_reads_the_window_of_queued_scheduled_runs(store: SqlStore) -> None:
    job = await new_job(store)
    runs = [_finished(job, minute, minute, 1.0) for minute in range(10)]
    manual = _finished(job, 5, 30.0, 1.0, kind=RunKind.MANUAL, idempotency_key="k")
    never_queued = make_run(job, at(11), RunState.SKIPPED, created_at=at(11))
    await _insert_runs(store, [*runs, manual, never_queued])
    assert sorted(await store.fire_lateness(at(6), 1000)) == [6_000_000, 7_000_000, 8_000_000, 9_000_000]
    assert await store.fire_lateness(at(0), 2) == [9_000_000, 8_000_000]  # the newest first
    assert await store.fire_lateness(at(20), 1000) == []


async def test_on_sqlite_the_reads_use_their_indexes(store: SqlStore) -> None:
    if store.engine.dialect.name != "sqlite":
        return  # PostgreSQL's plans depend on statistics: benchmarks/bench_ui.py measures them
    async with store.engine.connect() as connection:
        statement = _recent_statement(connection, ["a", "b"], 20)
        sql = str(statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
        recent = "\n".join(
            str(row[-1]) for row in await connection.execute(text("EXPLAIN QUERY PLAN " + sql))
        )
    assert re.search(r"SEARCH picked USING (COVERING )?INDEX ix_runs_job_id_slot", recent), recent
    assert re.search(r"SEARCH runs USING INDEX sqlite_autoindex_runs_1 \(id=\?\)", recent), recent  # by key
    assert not re.search(r"\bSCAN (runs|picked)\b", recent), recent
    async with store.engine.connect() as connection:
        late = schema.jobs.select().where(schema.JOB_LIVE, *_matching(JobQuery(late_before=START), None))
        sql = str(late.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
        plan = "\n".join(str(row[-1]) for row in await connection.execute(text("EXPLAIN QUERY PLAN " + sql)))
    assert "ix_jobs_due_at" in plan, plan
