"""The backfiller: carries accepted backfills through, at a bounded rate.

Each pass reads the running backfills (oldest first), their jobs and, for jobs whose overlap is
not ``allow``, their active runs; decides each backfill's step with the pure
:func:`cronwheel.scheduler.backfill.step`, within what is left of the pass's budget
(``runs_per_s`` x ``every_s`` runs, all backfills together); writes each step in one store
transaction (its runs and the backfill's progress); then queues the runs it inserted and stamps
them queued. A crash between the write and the queue leaves PENDING runs never queued, which the
sweeper queues (guarantee 3); a crash before the write leaves the cursor where it was, and the
next pass (here or on the next leader) takes the same slots again, each recorded once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from cronwheel.clock import Clock
from cronwheel.errors import TransientError
from cronwheel.model import Backfill, BackfillStep, Job, Overlap, Run, RunState, new_id
from cronwheel.queue import Queue, Trigger
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.scheduler.backfill import BACKFILL_RUNS_PER_S, step
from cronwheel.store.port import BackfillStore
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.backfiller")

RUNNING_PER_PASS = 100  # backfills looked at per pass; the oldest first, the rest next pass


class Backfiller:
    backoff: Backoff = LOOP  # waits after a transient failure of a pass

    def __init__(
        self,
        store: BackfillStore,
        queue: Queue,
        clock: Clock,
        *,
        runs_per_s: float = BACKFILL_RUNS_PER_S,
        every_s: float = 1.0,
        new_run_id: Callable[[], str] = new_id,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.every_s = every_s
        self.budget = max(1, int(runs_per_s * every_s))  # runs per pass
        self.new_run_id = new_run_id

    async def advance(self, now: datetime) -> int:
        """One pass; returns how many runs it recorded."""
        backfills = await self.store.running_backfills(RUNNING_PER_PASS)
        if not backfills:
            return 0
        jobs = await self.store.get_jobs(sorted({backfill.job_id for backfill in backfills}))
        waiting = sorted(job.id for job in jobs.values() if job.overlap is not Overlap.ALLOW)
        active = await self.store.active_runs(waiting) if waiting else {}
        budget = self.budget
        recorded: list[Run] = []
        for backfill in backfills:
            if budget < 1:
                break
            inserted, used = await self._advance_one(backfill, jobs.get(backfill.job_id), active, now, budget)
            active.setdefault(backfill.job_id, []).extend(inserted)  # another backfill of the job waits
            recorded += inserted
            budget -= used
        await self._queue(recorded, now)
        metrics.RUNS_RECORDED.labels(RunState.PENDING.value, "backfill").inc(len(recorded))
        return len(recorded)

    async def _advance_one(
        self, backfill: Backfill, job: Job | None, active: dict[str, list[Run]], now: datetime, budget: int
    ) -> tuple[list[Run], int]:
        """Write ``backfill``'s next step: the runs inserted, and how much budget it used."""
        if job is None:  # deleted: the store ends the backfill (it re-checks in the transaction)
            planned = _ending(backfill)
        else:
            planned = step(backfill, job, active.get(job.id, []), now, budget, self.new_run_id)
        if planned is None:
            return [], 0
        written = await self.store.advance_backfill(planned, now)
        if written is None:
            return [], 0  # another backfiller moved it on: nothing written
        stored, inserted = written
        if stored.state is not backfill.state:
            log.info(
                "backfill ended",
                extra={"action": "backfill", "job_id": stored.job_id, "backfill_id": stored.id,
                       "state": stored.state.value, "runs_created": stored.created,
                       "slots_with_runs": stored.existing},
            )  # fmt: skip
        return inserted, len(planned.runs)

    async def _queue(self, runs: list[Run], now: datetime) -> None:
        if runs:
            await self.queue.publish([Trigger(run.id, run.job_id, run.queue) for run in runs])
            await self.store.mark_queued([run.id for run in runs], now)

    async def run(self, stop: asyncio.Event, leader: Callable[[], Awaitable[bool]] | None = None) -> None:
        """A pass every ``every_s`` seconds; in a cluster only while this node is the leader (one
        backfiller at a time keeps the rate bound cluster-wide). After a transient failure the
        next pass comes as :attr:`backoff` says."""
        tries = self.backoff.tracker()
        while not stop.is_set():
            wait = self.every_s
            try:
                if leader is None or await leader():
                    await self.advance(self.clock.now())
            except TransientError as error:
                wait = tries.failed()
                log.warning(
                    "backfill pass failed",
                    extra={"action": "wait", "attempt": tries.failures, "retry_in_s": round(wait, 3),
                           "error": str(error)},
                )  # fmt: skip
            else:
                tries.succeeded()
            await pause(wait, stop)


def _ending(backfill: Backfill) -> BackfillStep | None:
    """The step of a backfill whose job is gone: nothing recorded (the store cancels it)."""
    if backfill.cursor is None:
        return None
    return BackfillStep(backfill.id, backfill.job_id, backfill.cursor, None)
