"""The runs list's filters (``RunQuery``: team, skip reasons, a range of slots, start lateness)
on SQLite and PostgreSQL: each narrows the newest-first page, they combine, the cursor pages
through what they keep, and a range of slots is a range of ``ix_runs_slot_id``."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import insert, text

from cronwheel.model import Job, Run, RunState, SkipReason
from cronwheel.store import RunQuery, codec, schema
from cronwheel.store.sql import SqlStore
from cronwheel.store.sql.runs import _filters

from .support import START, at, make_run, new_job

SECOND = timedelta(seconds=1)


async def _insert(store: SqlStore, runs: list[Run]) -> None:
    async with store.engine.begin() as connection:
        await connection.execute(insert(schema.runs), [codec.run_to_row(run) for run in runs])


def _started(job: Job, minute: int, late_s: float, **fields: object) -> Run:
    slot = at(minute)
    return make_run(job, slot, RunState.SUCCESS, created_at=slot, started_at=slot + late_s * SECOND, **fields)


def _skipped(job: Job, minute: int, reason: SkipReason) -> Run:
    return make_run(job, at(minute), RunState.SKIPPED, created_at=at(minute), reason=reason.value)


async def _slots(store: SqlStore, query: RunQuery) -> list[int]:
    page = await store.list_runs(query)
    return [int((run.slot - START) / timedelta(minutes=1)) for run in page.items]


async def test_each_filter_narrows_the_page_and_they_combine(store: SqlStore) -> None:
    data = await new_job(store, "a", team="data")
    ops = await new_job(store, "b", team="ops")
    await _insert(store, [
        _started(data, 0, 0.2), _started(data, 1, 3.0), _skipped(data, 2, SkipReason.MISFIRE),
        _skipped(data, 3, SkipReason.CALENDAR), _started(ops, 4, 5.0), _skipped(ops, 5, SkipReason.MISFIRE),
        # jittered: due 4 s after its slot, started 4.5 s after the slot: 0.5 s late, not late
        _started(data, 6, 4.5, due_at=at(6) + 4 * SECOND),
    ])  # fmt: skip
    assert await _slots(store, RunQuery()) == [6, 5, 4, 3, 2, 1, 0]
    assert await _slots(store, RunQuery(team="data")) == [6, 3, 2, 1, 0]
    assert await _slots(store, RunQuery(team="data", teams=("ops",))) == []  # within the caller's
    assert await _slots(store, RunQuery(reasons=("misfire",))) == [5, 2]
    assert await _slots(store, RunQuery(reasons=("misfire", "calendar"), team="data")) == [3, 2]
    assert await _slots(store, RunQuery(since=at(2), until=at(5))) == [4, 3, 2]  # [since, until)
    assert await _slots(store, RunQuery(late=True)) == [4, 1]  # over lateness.LATE_START (1 s)
    assert await _slots(store, RunQuery(late=True, team="data", since=at(1))) == [1]
    assert await _slots(store, RunQuery(job_id=ops.id, reasons=("misfire",))) == [5]


async def test_the_cursor_pages_through_the_filtered_runs(store: SqlStore) -> None:
    job = await new_job(store, "a", team="data")
    await _insert(
        store, [_skipped(job, m, SkipReason.OVERLAP if m % 2 else SkipReason.PAUSED) for m in range(9)]
    )
    query = RunQuery(reasons=("overlap",), since=at(2), limit=2)
    first = await store.list_runs(query)
    assert first.next_cursor is not None
    rest = await store.list_runs(
        RunQuery(reasons=("overlap",), since=at(2), limit=2, cursor=first.next_cursor)
    )
    assert [run.slot for run in first.items + rest.items] == [at(7), at(5), at(3)]
    assert rest.next_cursor is None


async def _plan(store: SqlStore, query: RunQuery) -> str:
    statement = (
        schema.runs.select().where(*_filters(query))
        .order_by(schema.runs.c.slot.desc(), schema.runs.c.id.desc()).limit(51)
    )  # fmt: skip
    async with store.engine.begin() as connection:
        sql = str(statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
        if connection.dialect.name == "postgresql":
            await connection.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table: as at scale
            return "\n".join(str(row[0]) for row in await connection.execute(text("EXPLAIN " + sql)))
        return "\n".join(str(row[-1]) for row in await connection.execute(text("EXPLAIN QUERY PLAN " + sql)))


async def test_a_range_of_slots_reads_a_range_of_the_slot_index(store: SqlStore) -> None:
    plan = await _plan(store, RunQuery(since=at(1), until=at(2)))
    if store.engine.dialect.name == "postgresql":
        assert re.search(r"Index Scan Backward using ix_runs_slot_id", plan), plan
        assert re.search(
            r"Index Cond: \(\(slot >= '?\d+'?(::bigint)?\) AND \(slot < '?\d+'?(::bigint)?\)\)", plan
        ), plan
    else:
        assert re.search(r"USING INDEX ix_runs_slot_id \(slot>\? AND slot<\?\)", plan), plan


async def test_reason_and_late_read_the_partial_indexes_of_the_few_runs_they_keep(store: SqlStore) -> None:
    """A page of skipped or late runs never walks the whole history when few (or none) match."""
    for query, index in (
        (RunQuery(reasons=("misfire",)), "ix_runs_reasoned_slot_id"),
        (RunQuery(late=True), "ix_runs_late_slot_id"),
        (RunQuery(late=True, since=at(1)), "ix_runs_late_slot_id"),
    ):
        plan = await _plan(store, query)
        assert index in plan, (query, plan)
        assert "Seq Scan" not in plan, plan
        assert not re.search(r"\bSCAN runs\b(?! USING)", plan), plan
