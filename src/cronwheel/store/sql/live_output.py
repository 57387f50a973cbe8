"""A running attempt's output so far: written by the worker holding the run's lease, read by the
live events of the api (:mod:`cronwheel.api.events.hub`).

The output so far goes in ``attempts.output`` with the instant of the write in
``attempts.output_at``; the attempt's final record (:mod:`.leases`) replaces both. A worker that
no longer holds the lease of the run at that attempt (a stale one: guarantee 4) writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import exists, select, update

from cronwheel.model import LIVE_OUTPUT_MOST, LiveOutput, OutputChange
from cronwheel.store.schema import attempts, jobs, runs
from cronwheel.store.sql.tx import Transactions, chunks
from cronwheel.store.sql.where import lease_held


async def write(tx: Transactions, outputs: Sequence[LiveOutput], worker: str, now: datetime) -> set[str]:
    """Write each output so far whose run ``worker`` holds at that attempt, in one transaction;
    the run ids written."""
    written: set[str] = set()
    async with tx.write() as connection:
        for one in sorted(outputs, key=lambda o: o.run_id):  # id order: one lock order
            held = exists().where(*lease_held(one.run_id, one.attempt, worker))
            result = await connection.execute(
                update(attempts)
                .where(
                    attempts.c.run_id == one.run_id,
                    attempts.c.number == one.attempt,
                    attempts.c.finished_at.is_(None),
                    held,
                )
                .values(output=one.output[-LIVE_OUTPUT_MOST:], output_at=now)
            )
            if result.rowcount:
                written.add(one.run_id)
    return written


async def changes(tx: Transactions, run_ids: Sequence[str]) -> list[OutputChange]:
    """The output so far of the running attempts of ``run_ids`` that have one written."""
    found: list[OutputChange] = []
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(run_ids)), 500):
            statement = (
                select(attempts.c.run_id, runs.c.job_id, jobs.c.team, attempts.c.number,
                       attempts.c.output, attempts.c.output_at)
                .join(runs, runs.c.id == attempts.c.run_id)
                .join(jobs, jobs.c.id == runs.c.job_id)
                .where(attempts.c.run_id.in_(list(chunk)), attempts.c.finished_at.is_(None),
                       attempts.c.output_at.is_not(None))
            )  # fmt: skip
            rows = (await connection.execute(statement)).all()
            found.extend(
                OutputChange(row[0], row[1], row[2], int(row[3]), row[4] or "", row[5]) for row in rows
            )
    return found
