"""The scheduler's hot read, "jobs due soon in my shards", is answered from the partial indexes
(``ix_jobs_due`` on (shard, next_run_at), ``ix_jobs_due_at`` on next_run_at, both WHERE live and
unpaused), never by scanning the table.

Measured by hand on PostgreSQL 15 with 2,000,000 jobs (next_run_at spread over 4.4 hours, 2 %
paused, 1 % deleted, statistics up to date), due within a 2-minute horizon, limit 10,000: one shard
0.2 ms (bitmap scan of ``ix_jobs_due``), 16 or 128 of 256 shards 4-5 ms and all shards 4 ms
(ordered scan of ``ix_jobs_due_at`` with the shard as a filter, stopping at the limit); with every
job due (a backlog) 65-70 ms for 1 or 16 shards, 6 ms for 128. Which of the two the planner takes
depends on how many shards are asked for and how many rows are due; both are partial indexes, and
no plan scanned the table, so no index was missing. ``active_runs`` (overlap policies) over 1.5
million runs of three jobs: 0.1 ms through ``ix_runs_state_next_attempt_at``. (Without
statistics, right after a bulk load, the planner misjudged row counts by 1000x and took seconds:
autovacuum's ANALYZE matters.)
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.store import codec, schema
from cronwheel.store.sql import SqlStore, due_jobs_statement

from .support import START, make_job

JOBS = 20_000
HORIZON = START + timedelta(minutes=2)
DUE_BY_SHARD = re.compile(r"\bix_jobs_due\b(?!_at)")
PARTIAL = re.compile(r"\bix_jobs_due(_at)?\b")


async def _plan(
    connection: AsyncConnection, shards: list[int] | None, after: tuple[datetime, str] | None = None
) -> str:
    statement = due_jobs_statement(HORIZON, shards, 10_000, after)
    sql = str(statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
    prefix = "EXPLAIN QUERY PLAN " if connection.dialect.name == "sqlite" else "EXPLAIN "
    rows = (await connection.execute(text(prefix + sql))).all()
    return "\n".join(str(row[-1]) for row in rows)


async def _fill_postgres(connection: AsyncConnection) -> None:
    """``JOBS`` jobs in every shard, due over the next day (a few in the horizon); some paused,
    some deleted."""
    await connection.execute(insert(schema.jobs).values(codec.job_to_row(make_job("template"))))
    await connection.execute(
        text(
            """
            INSERT INTO jobs
            SELECT md5(g::text), team, name || g, g % 256, schedule, timezone, description, dst_gap,
                   dst_fold, target, payload, timeout_s, retry, misfire, overlap, start_at, end_at,
                   g % 50 = 0, pause_note, paused_at, queue, labels, version, created_at, updated_at,
                   :start + (g::bigint * 1000003007) % 86400000000,
                   CASE WHEN g % 97 = 0 THEN created_at END
            FROM jobs, generate_series(1, :count) AS g
            WHERE jobs.name = 'template'
            """
        ),
        {"start": schema.to_micros(START), "count": JOBS},
    )
    await connection.execute(text("ANALYZE jobs"))


async def test_due_jobs_in_my_shards_use_the_partial_indexes(store: SqlStore) -> None:
    async with store.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            await _fill_postgres(connection)
        one = await _plan(connection, [3])
        some = await _plan(connection, list(range(0, 256, 16)))
        half = await _plan(connection, list(range(128)))
        every = await _plan(connection, None)
    assert DUE_BY_SHARD.search(one), one
    for plan in (some, half, every):
        assert PARTIAL.search(plan), plan
        assert "Seq Scan" not in plan, plan  # PostgreSQL
        assert not re.search(r"\bSCAN jobs\b(?! USING)", plan), plan  # SQLite: a full table scan
    if store.engine.dialect.name == "sqlite":  # no statistics: it takes the (shard, ...) index
        assert DUE_BY_SHARD.search(some), some


async def test_a_page_after_a_key_starts_its_range_of_the_keyset_index_there(store: SqlStore) -> None:
    """A page of every shard's due jobs strictly after (next_run_at, id) is a range of
    ``ix_jobs_due_at`` (next_run_at, id) that starts at that key: the index condition holds the
    row comparison, so the jobs sharing the key's second that come before it are not read."""
    async with store.engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            await _fill_postgres(connection)
        plan = await _plan(connection, None, (START + timedelta(seconds=30), "m"))
    assert "ix_jobs_due_at" in plan, plan
    if store.engine.dialect.name == "postgresql":
        assert re.search(r"Index Cond: .*ROW\(next_run_at, \(?id\)?", plan), plan
    else:
        assert re.search(r"USING INDEX ix_jobs_due_at \(\(next_run_at,id\)>\(\?,\?\)", plan), plan
