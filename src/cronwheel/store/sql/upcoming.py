"""The upcoming fires' read: live jobs grouped in the database by what their fires depend on.

One row per team and distinct (expression, zone, DST options, bounds, calendars): a herd of
100,000 jobs on a few expressions comes back as a few thousand rows, not 100,000. A job whose
fires are its own (a jitter window, or an expression that may hash its id: ``H``, as
:func:`cronwheel.schedule.may_hash` judges it) is grouped by its id, so it comes alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, Text, and_, case, cast, func, not_, or_, select

from cronwheel.model import FireGroup
from cronwheel.store import codec
from cronwheel.store.schema import JOB_DUE, jobs
from cronwheel.store.sql.tx import Transactions

# may_hash in SQL: no "@" (macros, @every, @at) and an "h" in any case
_MAY_HASH = and_(
    not_(jobs.c.schedule.contains("@", autoescape=True)), func.lower(jobs.c.schedule).contains("h")
)
_OWN = case((or_(jobs.c.jitter_s != 0, _MAY_HASH), jobs.c.id), else_=None).label("own")
_SPEC = cast(jobs.c.calendar_spec, Text).label("calendar_spec")  # JSON has no equality in PostgreSQL
_KEY: tuple[ColumnElement[Any], ...] = (
    jobs.c.team, jobs.c.schedule, jobs.c.timezone, jobs.c.dst_gap, jobs.c.dst_fold, jobs.c.start_at,
    jobs.c.end_at, _SPEC, jobs.c.calendar_shift, _OWN,
)  # fmt: skip


def fire_groups_statement(teams: Sequence[str] | None) -> Select[Any]:
    """Live, unpaused jobs with a cursor (``JOB_DUE``, ``next_run_at`` set: not complete), of
    ``teams`` (None: every team), grouped by :data:`_KEY` with their count and jitter."""
    statement = select(*_KEY, func.count().label("jobs"), func.max(jobs.c.jitter_s).label("jitter_s"))
    statement = statement.where(JOB_DUE, jobs.c.next_run_at.is_not(None))
    if teams is not None:
        statement = statement.where(jobs.c.team.in_(sorted(set(teams))))
    return statement.group_by(*_KEY)


async def fire_groups(tx: Transactions, teams: Sequence[str] | None) -> list[FireGroup]:
    if teams is not None and not teams:
        return []
    async with tx.read() as connection:
        rows = (await connection.execute(fire_groups_statement(teams))).mappings().all()
    return [codec.fire_group_from_row(row) for row in rows]
