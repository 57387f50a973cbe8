"""Cancellation flags on runs: asked for by ``overlap=replace``, a deleted job and the API, read by
workers at each heartbeat. A flag is not a state change, so it writes no run event."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, true, update
from sqlalchemy.ext.asyncio import AsyncConnection

from cronwheel import failpoints
from cronwheel.store.schema import runs
from cronwheel.store.sql.tx import CHUNK, Transactions, chunks
from cronwheel.store.sql.where import ACTIVE_VALUES


async def request_cancel(connection: AsyncConnection, run_ids: Sequence[str]) -> None:
    """Flag the unfinished runs of ``run_ids`` to stop (``cancel_requested``; not a state change,
    so no event): their workers see it at the next heartbeat or cancellation check."""
    failpoints.hit("store.before_cancel_flags")
    for chunk in chunks(list(run_ids), CHUNK):
        await connection.execute(
            update(runs)
            .where(runs.c.id.in_(chunk), runs.c.state.in_(ACTIVE_VALUES))
            .values(cancel_requested=true())
        )


async def cancel_active(connection: AsyncConnection, job_id: str) -> None:
    """Flag every unfinished run of the job to stop (it was deleted)."""
    failpoints.hit("store.before_cancel_flags")
    await connection.execute(
        update(runs)
        .where(runs.c.job_id == job_id, runs.c.state.in_(ACTIVE_VALUES))
        .values(cancel_requested=true())
    )


async def cancel_requested(tx: Transactions, run_ids: Sequence[str]) -> set[str]:
    found: set[str] = set()
    async with tx.read() as connection:
        for chunk in chunks(sorted(set(run_ids)), CHUNK):
            result = await connection.execute(
                select(runs.c.id).where(runs.c.id.in_(chunk), runs.c.cancel_requested == true())
            )
            found.update(result.scalars())
    return found
