"""The store-side backstop of at-least-once delivery (guarantee 3, docs/guarantees.md).

Redis (or the in-process queue) is never the record. Periodically the sweeper asks the store for
runs the queue may have lost and queues them again:

* RUNNING runs whose lease expired (their worker died): the attempt is recorded LOST and the run
  goes back to RETRYING with the same execution id, or, at its last lost attempt, to FAILED: a
  finished run, counted in ``cronwheel_runs_finished_total`` as a worker counts its own;
* PENDING runs that were never queued (created, and due, more than ``unqueued_after_s`` ago:
  younger ones are being published by their scheduler right now, and an armed run whose slot is
  ahead is its scheduler's to release), or queued long ago without being claimed;
* RETRYING runs whose next attempt is overdue.

A trigger queued twice is harmless: the claim is a conditional write.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

from cronwheel.clock import Clock
from cronwheel.errors import TransientError
from cronwheel.model import Run, RunState
from cronwheel.queue import Queue, Trigger
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.store.port import SweepStore
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.sweeper")

FAR_FUTURE = datetime(9000, 1, 1, tzinfo=UTC)


class Sweeper:
    backoff: Backoff = LOOP  # waits after a transient failure of a pass

    def __init__(
        self,
        store: SweepStore,
        queue: Queue,
        clock: Clock,
        *,
        every_s: float = 5.0,
        requeue_after_s: float = 30.0,
        unqueued_after_s: float = 2.0,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.every_s = every_s
        self.requeue_after = timedelta(seconds=requeue_after_s)
        self.unqueued_after = timedelta(seconds=unqueued_after_s)

    async def recover_after_restart(self, now: datetime) -> int:
        """Embedded mode, at start: this process is the only one using the store, so every lease
        belongs to a process that died and every queued trigger was lost with it."""
        expired = await self.store.expire_leases(now, expired_before=FAR_FUTURE)
        await self._count_failed(expired)
        runs = await self.store.runs_to_dispatch(FAR_FUTURE, now, limit=1_000_000, unqueued_before=now)
        await self._queue(runs, now)
        metrics.REQUEUED.inc(len(runs))
        log.info(
            "recovered",
            extra={"action": "recover", "expired_leases": len(expired), "requeued": len(runs)},
        )
        return len(runs)

    async def sweep(self, now: datetime) -> int:
        """One pass; returns how many runs were queued again."""
        expired = await self.store.expire_leases(now)
        await self._count_failed(expired)
        overdue = now - self.requeue_after
        runs = [run for run in expired if run.state is RunState.RETRYING]
        known = {run.id for run in runs}
        lost = await self.store.runs_to_dispatch(overdue, overdue, unqueued_before=now - self.unqueued_after)
        runs += [run for run in lost if run.id not in known]
        await self._queue(runs, now)
        if runs:
            metrics.REQUEUED.inc(len(runs))
            log.warning("requeued", extra={"action": "requeue", "runs": len(runs)})
        return len(runs)

    async def _count_failed(self, expired: list[Run]) -> None:
        """The runs the sweep just failed (lost too many attempts) finished: count them by team
        and queue, as the worker counts the runs it finishes (their jobs read only when any did)."""
        failed = [run for run in expired if run.state is RunState.FAILED]
        if not failed:
            return
        jobs = await self.store.get_jobs(sorted({run.job_id for run in failed}))
        for run in failed:
            job = jobs.get(run.job_id)
            team = metrics.team_label(None if job is None else job.team)
            metrics.RUNS_FINISHED.labels(RunState.FAILED.value, team, run.queue).inc()

    async def _queue(self, runs: list[Run], now: datetime) -> None:
        if runs:
            await self.queue.publish([Trigger(run.id, run.job_id, run.queue) for run in runs])
            await self.store.mark_queued([run.id for run in runs], now)

    async def run(self, stop: asyncio.Event, leader: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Sweep every ``every_s`` seconds; in a cluster only while this node is the leader. After
        a transient failure the next pass comes as :attr:`backoff` says."""
        tries = self.backoff.tracker()
        while not stop.is_set():
            wait = self.every_s
            try:
                if leader is None or await leader():
                    await self.sweep(self.clock.now())
            except TransientError as error:
                wait = tries.failed()
                log.warning(
                    "sweep failed",
                    extra={
                        "action": "wait",
                        "attempt": tries.failures,
                        "retry_in_s": round(wait, 3),
                        "error": str(error),
                    },
                )
            else:
                tries.succeeded()
            await pause(wait, stop)
