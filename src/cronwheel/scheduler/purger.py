"""The retention loop: removes run history that no retention policy keeps.

Run by the embedded server, and in a cluster by the leader only (as the :class:`Sweeper`). Each
pass walks every job (live or deleted) by id; for a job whose effective policy limits anything,
it reads the job's :class:`~cronwheel.retention.HistoryBounds` and its runs oldest first, a page
at a time, and lets :func:`cronwheel.retention.purgeable` say which may go. Ids to delete are
gathered across jobs and deleted ``batch`` at a time, each batch one short write transaction
(:meth:`Store.purge_runs`), with a pause after each of ``pause_s`` or as long as the batch took,
whichever is longer, so that the scheduler's fire transactions are never kept waiting long and the
purge takes at most half of the store's time (measured: ``benchmarks/bench_retention.py``). A pass
logs one line (``action=purge purged=... jobs=... seconds=...``) and counts what it deleted in
``cronwheel_runs_purged_total``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from cronwheel.clock import Clock, monotonic_of
from cronwheel.errors import TransientError
from cronwheel.model import RetentionPolicy
from cronwheel.retention import RunStub, effective, purgeable
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.store.port import PurgeStore
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.retention")

BATCH = 500  # runs per delete transaction on PostgreSQL (rows locked one batch at a time)
# ... on SQLite, whose one writer the scheduler's fire transactions wait for: a batch of 500
# held it ~0.36 s on a loaded 2-core VM (benchmarks/bench_retention.py), one of 100 a fifth of that
EMBEDDED_BATCH = 100


@dataclass(frozen=True, slots=True)
class PurgeReport:
    purged: int  # runs deleted (with their attempts and events)
    jobs: int  # jobs that lost at least one run
    seconds: float


def _stopped(stop: asyncio.Event | None) -> bool:
    return stop is not None and stop.is_set()


class Purger:
    backoff: Backoff = LOOP  # waits after a transient failure of a pass

    def __init__(
        self,
        store: PurgeStore,
        clock: Clock,
        default: RetentionPolicy | None,
        *,
        every_s: float = 300.0,
        batch: int = BATCH,
        pause_s: float = 0.05,
    ) -> None:
        self.store = store
        self.clock = clock
        self._monotonic = monotonic_of(clock)
        self.default = default
        self.every_s = every_s
        self.batch = batch
        self.pause_s = pause_s
        self._going: list[str] = []
        self._purged = 0

    async def purge(self, now: datetime, stop: asyncio.Event | None = None) -> PurgeReport:
        """One pass over every job (see the module docstring); ``stop`` ends it early."""
        started = self._monotonic.monotonic()
        self._purged, jobs, after = 0, 0, None
        while not _stopped(stop) and (page := await self.store.retention_jobs(after, self.batch)):
            for job_id, own in page:
                if _stopped(stop):
                    break
                policy = effective(own, self.default)
                if policy is not None and await self._job(job_id, policy, now):
                    jobs += 1
            after = page[-1][0]
        await self._flush(final=True)
        report = PurgeReport(self._purged, jobs, round(self._monotonic.monotonic() - started, 3))
        counts = {"purged": report.purged, "jobs": report.jobs, "seconds": report.seconds}
        log.info("purged", extra={"action": "purge", **counts})
        return report

    async def _job(self, job_id: str, policy: RetentionPolicy, now: datetime) -> bool:
        """Gather the job's runs that may go (deleting full batches as they fill); whether any."""
        bounds = await self.store.history_bounds(job_id, policy.keep_runs)
        after: tuple[datetime, str] | None = None
        found = False
        while True:
            page: list[RunStub] = await self.store.oldest_runs(job_id, after, self.batch)
            going, done = purgeable(page, policy, now, bounds)
            found = found or bool(going)
            self._going += going
            await self._flush()
            if done or len(page) < self.batch:
                return found
            after = page[-1].key

    async def _flush(self, *, final: bool = False) -> None:
        while len(self._going) >= self.batch or (final and self._going):
            chunk, self._going = self._going[: self.batch], self._going[self.batch :]
            started = self._monotonic.monotonic()
            deleted = await self.store.purge_runs(chunk)
            took = self._monotonic.monotonic() - started
            self._purged += deleted
            metrics.RUNS_PURGED.inc(deleted)
            # let the scheduler's fire transactions in: at least as long as the batch took, so
            # that the purge holds the store (SQLite's one writer, CPU) at most half of the time
            await asyncio.sleep(max(self.pause_s, took))

    async def run(self, stop: asyncio.Event, leader: Callable[[], Awaitable[bool]] | None = None) -> None:
        """A pass every ``every_s`` seconds (the first at once); in a cluster only while this node
        is the leader. After a transient failure the next pass comes as :attr:`backoff` says."""
        tries = self.backoff.tracker()
        while not stop.is_set():
            wait = self.every_s
            try:
                if leader is None or await leader():
                    await self.purge(self.clock.now(), stop)
            except TransientError as error:
                self._going = []
                wait = tries.failed()
                log.warning(
                    "purge failed",
                    extra={"action": "wait", "retry_in_s": round(wait, 3), "error": str(error)},
                )
            else:
                tries.succeeded()
            await pause(wait, stop)
