"""The conditions the store's statements share, and the checks of what it is given.

Most are plain SQLAlchemy expressions; :func:`runs_listed` is the one condition whose SQL differs
by database (the :class:`~cronwheel.store.driver.Flavor`'s ``arrays``). Several of them exist for
PostgreSQL's planner: a list of runs must be found by primary key, whatever statistics from before
a burst of new runs suggest (``docs/performance.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    ScalarSelect,
    String,
    and_,
    case,
    cast,
    false,
    func,
    literal,
    select,
    true,
    tuple_,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel.errors import InvalidInputError
from cronwheel.model import LEGAL_TRANSITIONS, Run, RunState
from cronwheel.store.driver import flavor_of
from cronwheel.store.schema import Instant, jobs, runs
from cronwheel.store.sql.tx import CHUNK

ACTIVE_STATES = (RunState.PENDING, RunState.RUNNING, RunState.RETRYING)
ACTIVE_VALUES = [state.value for state in ACTIVE_STATES]
CLAIMABLE = frozenset({RunState.PENDING, RunState.RETRYING})
CLAIMABLE_VALUES = sorted(state.value for state in CLAIMABLE)


def checked_per_row(condition: ColumnElement[bool]) -> ColumnElement[bool]:
    """``condition``, checked on each row found by primary key and never used to find rows: as
    ``CASE WHEN condition THEN true ELSE false END`` no index can answer it. PostgreSQL, with
    statistics from before a burst of new runs (a herd, a fresh database), otherwise answers
    ``id in (64 ids) AND state = 'PENDING'`` by scanning the state index and hashing every PENDING
    run against the list: measured 19 ms for one 64-run claim among 60,000 PENDING runs, against
    2 ms by primary key."""
    return case((condition, true()), else_=false())


def runs_listed(
    connection: AsyncConnection, run_ids: list[str], attempts: list[int] | None = None
) -> ColumnElement[bool]:
    """``runs.id`` among ``run_ids`` (and ``runs.attempts`` the matching one of ``attempts``).
    PostgreSQL: joined with the ids as one array, which it matches by primary key whatever its
    statistics say (with ``id IN (...500 ids...) AND state IN (...)``, misled by statistics from
    before a burst of inserts, it scanned the state index and filtered every PENDING run against
    the list: most of a second per ``mark_queued`` with 40,000 PENDING runs). SQLite: an IN list
    of ids or of (id, attempts)."""
    if not flavor_of(connection.dialect).arrays:
        if attempts is None:
            return runs.c.id.in_(run_ids)
        return tuple_(runs.c.id, runs.c.attempts).in_(list(zip(run_ids, attempts, strict=True)))
    if attempts is None:
        listed = func.unnest(literal(run_ids, ARRAY(String))).table_valued("id").render_derived(name="listed")
        return runs.c.id == listed.c.id
    arrays = (literal(run_ids, ARRAY(String)), literal(attempts, ARRAY(Integer)))
    listed = func.unnest(*arrays).table_valued("id", "attempt").render_derived(name="listed")
    return and_(runs.c.id == listed.c.id, runs.c.attempts == listed.c.attempt)


def listed_per_statement(connection: AsyncConnection, count: int) -> int:
    """How many of ``count`` ids one :func:`runs_listed` statement takes: all of them as one
    array (PostgreSQL), :data:`~cronwheel.store.sql.tx.CHUNK` in an IN list (SQLite)."""
    return max(count, 1) if flavor_of(connection.dialect).arrays else CHUNK


def lease_held(run_id: str, attempt: int, worker: str) -> list[ColumnElement[bool]]:
    """The run is RUNNING attempt ``attempt`` under ``worker``'s lease."""
    return [
        runs.c.id == run_id,
        runs.c.state == RunState.RUNNING.value,
        runs.c.lease_owner == worker,
        runs.c.attempts == attempt,
    ]


def latest_run_of_job(column: Any) -> ScalarSelect[Any]:
    """``column`` of the job's most recent run (by slot, then id), correlated to ``jobs``."""
    latest = runs.alias("latest")
    return (
        select(latest.c[column.name])
        .where(latest.c.job_id == jobs.c.id)
        .order_by(latest.c.slot.desc(), latest.c.id.desc())
        .limit(1)
        .correlate(jobs)
        .scalar_subquery()
    )


def instant(value: datetime | None) -> ColumnElement[datetime]:
    """A typed, explicitly cast instant parameter (PostgreSQL cannot infer the type of a bare
    parameter inside CASE)."""
    return cast(literal(value, Instant()), Instant())


# -- checks of the caller's input (before anything is written) -----------------------------------


def check_limit(limit: int) -> None:
    if limit < 1:
        raise InvalidInputError(f"limit must be at least 1, not {limit}")


def require_legal(previous: RunState | None, state: RunState) -> None:
    if state not in LEGAL_TRANSITIONS[previous]:
        raise InvalidInputError(f"illegal run transition {previous} -> {state}")


def check_new_run(run: Run, job_id: str) -> None:
    if run.job_id != job_id:
        raise InvalidInputError(f"run {run.id} belongs to job {run.job_id}, not {job_id}")
    require_legal(None, run.state)


def check_skipped(new_runs: Sequence[Run], method: str) -> None:
    """``new_runs`` are SKIPPED runs (slots missed while paused) for ``method`` to record."""
    for run in new_runs:
        if run.state is not RunState.SKIPPED:
            raise InvalidInputError(f"{method} takes SKIPPED runs, not {run.state} ({run.id})")
