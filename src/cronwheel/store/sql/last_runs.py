"""Each job's latest run and its state (table ``job_last_run``), kept by the store's own writes.

``list_jobs(last_state=...)`` joins this narrow table (:func:`in_state`) instead of finding every
job's latest run (:func:`~cronwheel.store.sql.where.latest_run_of_job`, a correlated subquery per
job: 1.2 s over a million jobs without runs, 4.8 s with one run each; ``docs/performance.md``).
A job's row names its latest run by (slot, id), as that query does, and the run's state; a job
without runs has no row.

Who writes it: no trigger, but the store's statements that change runs, each with one call here
in its own transaction (a worker's claim or outcome batch on PostgreSQL: in the same statement,
:func:`noted_from`). :func:`record` takes the runs a statement inserted or moved to another
state (fire, manual runs, SKIPPED slots, claims, outcomes, failures, expired leases): for each job,
the newest of them becomes its row if it is at least as new as the run recorded, so a new run
replaces an older one, a state change of the recorded run updates its state, and a state change
of an older run changes nothing. :func:`forget` corrects the jobs whose recorded run retention
deleted. The row also holds a copy of the job's team, for the index (a team's filter, which every
team-scoped token's list has, reads it there): :func:`move_team` follows a job moved to another
team. A job's row goes with the job row (``ON DELETE CASCADE``; deleting a job only marks it, and
lists read live jobs only).

Lock order: why this cannot deadlock. Every call is the last write of its transaction on jobs,
runs or this table: after the cursor UPDATE, the runs' INSERT, the cancel flags (fire), after
every chunk of a claim or outcome batch (``Transactions.write_batches(..., then=...)``), after the
DELETE of runs (retention). So a transaction that holds a lock on this table waits for nothing
but other rows of this table, and it takes those in one order: one statement per transaction,
whose rows are inserted in job id order (PostgreSQL: ``ORDER BY job_id`` in the statement itself,
whatever the plan; SQLite has one writer). A cycle of waits would need a transaction that holds a
row here and waits for a lock elsewhere, or two that take rows here in opposite orders: there is
neither. Two writes differ. Retention's :func:`forget` deletes rows, then inserts rows for only
those jobs, whose keys it alone holds (in practice it finds none: retention keeps every job's
latest run). A job moved to another team updates its row in the job's edit (or resume), after
locking the job's row: a fire of that job waits for that lock before it writes anything, and the
SKIPPED runs a resume then inserts are new rows no other writer holds, so the edit never waits
for a transaction that waits for it. (This is why the row is not kept in ``jobs`` by a trigger
on ``runs``: claim and finish would lock a run, then its job, while a fire with overlap=replace
locks the job, then the runs it cancels: opposite orders, a deadlock.)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.model import Run, RunState
from cronwheel.store.driver import flavor_of
from cronwheel.store.schema import job_last_run, jobs, runs, to_micros
from cronwheel.store.sql.tx import CHUNK, chunks
from cronwheel.store.sql.where import latest_run_of_job

Row = tuple[str, int, str, str]  # job_id, slot (epoch microseconds), run_id, state

SQLITE_ROWS = 500  # rows per SQLite statement (4 variables each)

# The newest row of each job, in job id order (the lock order), ``<=``: the recorded run itself
# (a state change) or a newer one replaces it; an older one changes nothing.
_NEWER = "WHERE (job_last_run.slot, job_last_run.run_id) <= (excluded.slot, excluded.run_id)"
_SET = "SET slot = excluded.slot, run_id = excluded.run_id, state = excluded.state"
# The team by primary key, row by row (a join let PostgreSQL hash the whole jobs table: 25 ms of a
# 2,000-row statement at 20,000 jobs).
_TEAM = "(SELECT jobs.team FROM jobs WHERE jobs.id = changed.{column})"
_RECORD_POSTGRESQL = f"""
INSERT INTO job_last_run (job_id, team, slot, run_id, state)
SELECT job_id, {_TEAM.format(column="job_id")}, slot, run_id, state
FROM (SELECT DISTINCT ON (job_id) job_id, slot, run_id, state
      FROM unnest(CAST(:jobs AS varchar[]), CAST(:slots AS bigint[]), CAST(:runs AS varchar[]),
                  CAST(:states AS varchar[])) AS given(job_id, slot, run_id, state)
      ORDER BY job_id, slot DESC, run_id DESC) AS changed
ORDER BY job_id
ON CONFLICT (job_id) DO UPDATE
"""  # noqa: S608 (constants only)
_RECORD_SQLITE = f"""
INSERT INTO job_last_run (job_id, team, slot, run_id, state)
SELECT changed.column1, {_TEAM.format(column="column1")}, changed.column2, changed.column3, changed.column4
FROM (VALUES {{values}}) AS changed WHERE true
ON CONFLICT (job_id) DO UPDATE
"""  # noqa: S608 (constants only)


def in_state(state: RunState, teams: Sequence[str] | None, after: str | None) -> ColumnElement[bool]:
    """The job's latest run is in ``state``. ``teams``: the query's teams (the job's own filter
    still applies; this one lets the index answer it), ``after``: the page's cursor (a job id), so
    that the (state, job_id, team) index range starts there."""
    found = [job_last_run.c.job_id == jobs.c.id, job_last_run.c.state == state.value]
    if teams is not None:
        found.append(job_last_run.c.team.in_(sorted(set(teams))))
    if after is not None:
        found.append(job_last_run.c.job_id > after)
    return exists().where(*found)


async def move_team(connection: AsyncConnection, job_id: str, team: str) -> None:
    """The job moved to ``team``: its row's copy of the team follows (in the job's write)."""
    await connection.execute(update(job_last_run).where(job_last_run.c.job_id == job_id).values(team=team))


async def record(connection: AsyncConnection, changed: Iterable[Run]) -> None:
    """Note the runs this transaction inserted or moved to another state (see the module
    docstring); call it after the transaction's last write of jobs and runs."""
    rows = [(run.job_id, to_micros(run.slot), run.id, run.state.value) for run in changed]
    await _upsert(connection, rows)


async def record_found(connection: AsyncConnection, found: Mapping[str, Run]) -> None:
    """:func:`record` of what a batch write of runs returned (``Transactions.write_batches``)."""
    await record(connection, found.values())


async def record_claimed(connection: AsyncConnection, found: Mapping[str, tuple[Run, Any]]) -> None:
    """:func:`record` of the runs a claim batch returned with their jobs."""
    await record(connection, [run for run, _ in found.values()])


async def forget(connection: AsyncConnection, gone: Sequence[tuple[str, str]]) -> None:
    """After the runs ``gone`` ((job_id, run_id) pairs) were deleted: each job whose recorded run
    is among them gets its latest remaining run, or no row. (Retention keeps every job's latest
    run, so this changes nothing in its passes; ``Store.purge_runs`` itself allows it.)"""
    orphaned: list[str] = []
    for chunk in chunks(sorted(gone), CHUNK):
        listed = [job_last_run.c.job_id.in_({job_id for job_id, _ in chunk}),
                  job_last_run.c.run_id.in_({run_id for _, run_id in chunk})]  # fmt: skip
        gone_rows = delete(job_last_run).where(*listed).returning(job_last_run.c.job_id)
        result = await connection.execute(gone_rows)
        orphaned.extend(result.scalars())
    await _upsert(connection, await _latest_rows(connection, sorted(orphaned)))


async def rebuild(connection: AsyncConnection) -> None:
    """Every job's row again from its runs (what migration 0012 does; for tools that load runs
    without the store, such as the benchmarks)."""
    await connection.execute(delete(job_last_run))
    latest = select(jobs.c.id).where(exists().where(runs.c.job_id == jobs.c.id))
    job_ids = list((await connection.execute(latest.order_by(jobs.c.id))).scalars())
    await _upsert(connection, await _latest_rows(connection, job_ids))


async def _latest_rows(connection: AsyncConnection, job_ids: Sequence[str]) -> list[Row]:
    """The latest run of each of ``job_ids`` (those with runs), as rows of this table."""
    rows: list[Row] = []
    for chunk in chunks(job_ids, CHUNK):
        latest_ids = select(latest_run_of_job(runs.c.id)).where(jobs.c.id.in_(chunk))
        result = await connection.execute(
            select(runs.c.job_id, runs.c.slot, runs.c.id, runs.c.state).where(runs.c.id.in_(latest_ids))
        )
        rows.extend((row.job_id, to_micros(row.slot), row.id, row.state) for row in result)
    return rows


async def _upsert(connection: AsyncConnection, rows: Sequence[Row]) -> None:
    if not rows:
        return
    if flavor_of(connection.dialect).arrays:
        columns: dict[str, list[Any]] = {"jobs": [], "slots": [], "runs": [], "states": []}
        for row in rows:
            for name, value in zip(columns, row, strict=True):
                columns[name].append(value)
        await connection.execute(_record_postgresql(), columns)
        return
    newest = sorted(_newest_of_each_job(rows).values())  # SQLite compares text as Python does
    for start in range(0, len(newest), SQLITE_ROWS):
        chunk = newest[start : start + SQLITE_ROWS]
        flat = tuple(value for row in chunk for value in row)
        await connection.exec_driver_sql(_record_sqlite(len(chunk)), flat)


def noted_from_select(source: str) -> str:
    """SQLite: :func:`record` in one statement, of the runs rows that ``source`` (a SELECT of
    ``job_id, slot, id, state``) selects (:mod:`cronwheel.store.sql.lite`). A job named twice
    is upserted twice, in the same statement: the newer-only condition keeps the newest."""
    return f"""
INSERT INTO job_last_run (job_id, team, slot, run_id, state)
SELECT changed.job_id, {_TEAM.format(column="job_id")}, changed.slot, changed.id, changed.state
FROM ({source}) AS changed WHERE true
ON CONFLICT (job_id) DO UPDATE {_SET} {_NEWER}"""  # noqa: S608 (constants, and a SELECT of the caller's)


def _newest_of_each_job(rows: Iterable[Row]) -> dict[str, Row]:
    """One row per job, the newest by (slot, run id): a statement may not upsert a row twice."""
    newest: dict[str, Row] = {}
    for row in rows:
        kept = newest.get(row[0])
        if kept is None or (row[1], row[2]) > (kept[1], kept[2]):
            newest[row[0]] = row
    return newest


def noted_from(source: str) -> str:
    """PostgreSQL: :func:`record` as the body of a data-modifying ``WITH`` of the statement that
    changed the runs, noting the rows ``source`` (a ``WITH`` of that statement, runs rows as
    ``RETURNING runs.*`` gives them) returns. It must be that statement's only write here and
    its transaction's last: the statement is then a whole transaction of its own (autocommit),
    whose runs are all locked before the upsert's sort lets it take a row of this table."""
    return f"""
  INSERT INTO job_last_run (job_id, team, slot, run_id, state)
  SELECT job_id, {_TEAM.format(column="job_id")}, slot, run_id, state
  FROM (SELECT DISTINCT ON (job_id) job_id, slot, id AS run_id, state FROM {source}
        ORDER BY job_id, slot DESC, id DESC) AS changed
  ORDER BY job_id
  ON CONFLICT (job_id) DO UPDATE {_SET} {_NEWER}"""  # noqa: S608 (constants, and a WITH name)


@functools.cache
def _record_postgresql() -> Any:
    return text(f"{_RECORD_POSTGRESQL}{_SET} {_NEWER}")


@functools.lru_cache(maxsize=16)
def _record_sqlite(count: int) -> str:
    values = ", ".join(["(?, ?, ?, ?)"] * count)
    return f"{_RECORD_SQLITE.format(values=values)}{_SET} {_NEWER}"
