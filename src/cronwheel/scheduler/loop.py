"""The scheduler role: keep the wheel filled from the store, fire what is due in batches.

``tick(now)`` is one pass (drain the wheel, plan, one store transaction per batch, then queue the
triggers) and returns when to wake next; ``run()`` is the thin loop around it that sleeps until
then or until a job changes. Tests call ``load`` / ``job_changed`` / ``tick`` with a manual clock.

The wheel holds the jobs due within the horizon (:data:`HORIZON_S`, an hour) and is a cache of the
store: a full reload (at start, after an outage, a fencing or lost notifications, and every
``full_reload_every_s``) reads the due jobs a page per tick (:class:`Reload`), into the live
wheel, so a tick waits for one page at most and fires between the pages; between full reloads
only the jobs entering the horizon are read (``_extend``).

With ``arm_ahead_s`` (0 here, off; servers pass :data:`~cronwheel.scheduler.ARM_AHEAD_S`) the
scheduler arms ahead and releases at the slot: the jobs with overlap ``allow`` of a coming second
are recorded (the same fire transaction, PENDING, the
cursor moved) up to ``arm_ahead_s`` before it, with a lead that grows with how many jobs that
second holds (:meth:`Scheduler.lead`); at the slot the tick only releases them (queues the
triggers, then stamps them queued). Armed runs are held in a second wheel, by run id; a scheduler
that loads or gains shards reads their armed runs from the store, and a job change drops the held
runs that the change removed from the store (``cronwheel.store.sql.armed``).

Armed runs are released a little ahead of their slot (``release_ahead_s``, at most; the lead of a
second grows with how many runs it releases, :meth:`Scheduler.release_lead`): each trigger carries
its slot, the worker holds it until then and claims it at the slot, and the claim refuses a run
before its slot. A run released ahead is stamped queued when published, before its slot.

A job with jitter fires each slot at its fire time (the slot plus the slot's offset,
:func:`~cronwheel.scheduler.planner.due_at`): the wheels file jobs and armed runs by the second of
that instant, and wherever "its slot" is said above, such a job's fire time is meant (release,
the worker's hold and claim, lateness). A jittered job taken out of the wheel in its second
before its instant goes back in, and the tick wakes at that instant (:attr:`Scheduler._soonest`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cronwheel import failpoints
from cronwheel.clock import Clock
from cronwheel.coordinator import Coordinator
from cronwheel.errors import NotFoundError, TransientError
from cronwheel.model import DueJob, FireResult, Firing, Overlap, Run, RunState, new_id, shard_of
from cronwheel.queue import Queue, Trigger
from cronwheel.retrying import LOOP, Backoff, pause
from cronwheel.scheduler.planner import arm, armable, due_at, plan
from cronwheel.scheduler.wheel import TimingWheel
from cronwheel.store.change_listener import RELOAD_ALL
from cronwheel.store.port import FiringStore
from cronwheel.telemetry import metrics
from cronwheel.telemetry.tracing import OFF, Tracer
from cronwheel.telemetry.tracing.runs import FireSpans

log = logging.getLogger("cronwheel.scheduler")

BATCH = 2000  # firings per store transaction
PLAN_SLICE = 250  # jobs planned between two turns of the event loop (a write in flight goes on)
HORIZON_S = 3600.0  # the wheel holds the jobs due within the next hour
LOAD_PAGE = 2_000  # jobs per read while (re)loading the wheel: one read between two ticks
SWEEP_SLICE = 50_000  # wheel keys checked per tick once a reload's last page is in
ARM_MIN_S = 1.0  # the lead of a second with few jobs
ARMED_READ = 1_000_000  # armed runs read at most on a load (more: the sweep releases the rest)
ARM_S_PER_JOB = 0.0005  # lead per job of a second (a fire's record costs 0.1-0.3 ms here; margin x2)
RELEASE_AHEAD_S = 0.5  # the longest release lead: triggers reach the workers before their slot
RELEASE_MIN_S = 0.1  # the release lead of a second with few runs
RELEASE_S_PER_RUN = 0.00005  # release lead per run (publish + stamp: about 20 us here; margin x2)


@dataclass
class SchedulerStats:
    fired: int = 0
    skipped: int = 0
    stale: int = 0
    fenced: int = 0  # firings the store refused: a newer lease on the shard exists elsewhere
    lateness_s: list[float] = field(default_factory=list)  # queued - slot of recent fires

    def record_lateness(self, seconds: float) -> None:
        self.lateness_s.append(seconds)
        if len(self.lateness_s) > 10_000:
            del self.lateness_s[:5_000]


@dataclass
class Reload:
    """A reload in progress: the wheel is brought to the store's due set up to ``until``, one
    page (keyset on ``next_run_at``, id) per tick. ``seen``: the jobs its pages filed and those
    changed since it began (a job change read, this scheduler's own firing), whose wheel entry
    is as new as the store's or newer; a page's row of a job already seen is stale and left out.
    Once the last page is in, ``unswept`` holds the wheel's keys to check: those not seen are no
    longer due in the store (deleted, paused, moved away unheard of) and leave the wheel."""

    until: datetime
    after: tuple[datetime, str] | None = None
    seen: set[str] = field(default_factory=set)
    unswept: list[str] | None = None


class Scheduler:
    backoff: Backoff = LOOP  # waits after a transient failure of a tick

    def __init__(
        self,
        store: FiringStore,
        queue: Queue,
        clock: Clock,
        node: str,
        *,
        horizon_s: float = HORIZON_S,
        reload_every_s: float = 30.0,
        full_reload_every_s: float | None = None,
        load_page: int = LOAD_PAGE,
        shards: Sequence[int] | None = None,
        ownership: Coordinator | None = None,
        new_run_id: Callable[[], str] = new_id,
        stall_s: float = 5.0,
        tracer: Tracer = OFF,
        arm_ahead_s: float = 0.0,
        release_ahead_s: float = RELEASE_AHEAD_S,
    ) -> None:
        self.store = store
        self.queue = queue
        self.clock = clock
        self.node = node
        self.horizon = timedelta(seconds=horizon_s)
        self.reload_every = timedelta(seconds=reload_every_s)
        self.full_reload_every = timedelta(
            seconds=10 * reload_every_s if full_reload_every_s is None else full_reload_every_s
        )
        self.shards: frozenset[int] | None = None if shards is None else frozenset(shards)
        self.ownership = ownership  # cluster: fire only the shards leased to this node, fenced
        self.epochs: dict[int, int] = {}
        self.new_run_id = new_run_id
        self.wheel: TimingWheel[DueJob] = TimingWheel(_due_second)  # the jobs due within the horizon
        self.stats = SchedulerStats()
        self.load_page = load_page
        self._next_reload: datetime | None = None  # None: a full reload is due
        self._next_full = clock.now()
        self._loaded_until = clock.now()  # the wheel holds every job due up to here
        self._reload: Reload | None = None  # a reload in progress, a page a tick
        self.stall = timedelta(seconds=stall_s)
        self._progress_at = clock.now()  # the store last answered this scheduler
        self.tracer = tracer  # off: the fire path checks ``enabled`` once per batch, nothing more
        self.writers = store.write_concurrency  # fire batches written at once
        self.arm_ahead_s = arm_ahead_s if arm_ahead_s >= ARM_MIN_S else 0.0  # the longest lead; 0: off
        self.release_ahead_s = max(0.0, release_ahead_s)  # the longest release lead; 0: at the slot
        self.armed: TimingWheel[Held] = TimingWheel(_held_second)  # recorded ahead, not yet released
        self._armed_of: dict[str, set[str]] = {}  # job id -> ids of its runs in ``armed``
        # the earliest fire time of the jittered jobs (and held runs) put back in the wheels by
        # the last tick, due later in the second the wheels woke it for: when to wake instead
        self._soonest: datetime | None = None
        self._soonest_release: datetime | None = None

    @property
    def jobs(self) -> Mapping[str, DueJob]:
        """The jobs in the wheel, by id (slim records: a million fit in a few hundred MB)."""
        return self.wheel.entries

    # -- feeding the wheel ----------------------------------------------------------------------

    async def load(self, now: datetime) -> None:
        """(Re)read every job due within the horizon from the store, all pages at once (start-up
        of a benchmark or a test); :meth:`tick` does the same a page per tick."""
        await self._begin_reload(now)
        while self._reload is not None:
            await self._reload_step()

    async def _begin_reload(self, now: datetime) -> None:
        """Start the full pass: at start, after an outage or a change of shards, and every
        ``full_reload_every_s`` as a safety net for job changes this scheduler may not have heard
        of. The wheel stays live meanwhile: ticks fire from it between the pages."""
        until = now + self.horizon
        self._reload = Reload(until)
        self._loaded_until = until
        if self.arm_ahead_s:
            self.armed.clear()
            self._armed_of.clear()
            await self._read_armed(self.shards)
        self._next_reload = now + self.reload_every
        self._next_full = now + self.full_reload_every

    async def _reload_step(self) -> None:
        """One page of the reload in progress into the wheel, or, after the last page, one slice
        of the sweep."""
        reload = self._reload
        assert reload is not None
        if reload.unswept is not None:
            self._sweep(reload)
            return
        asked = self.shards
        listed = None if asked is None else sorted(asked)
        page = await self.store.due_jobs(reload.until, listed, self.load_page, after=reload.after)
        if self._reload is not reload:  # superseded while the page was read
            return
        self._file_page(reload, page, None if self.shards is asked else self.shards)
        last = page[-1] if len(page) == self.load_page else None
        if last is None or last.next_run_at is None:
            reload.unswept = list(self.wheel.entries)
            self._sweep(reload)
        else:
            reload.after = (last.next_run_at, last.id)

    def _file_page(self, reload: Reload, page: list[DueJob], owned: frozenset[int] | None) -> None:
        """File a page's jobs; ``owned``: the shards held now, when they changed while the page
        was read (None: they did not, and every job of the page is of a held shard)."""
        seen, entries, wheel = reload.seen, self.wheel.entries, self.wheel
        for job in page:
            if job.id in seen or (owned is not None and job.shard not in owned):
                continue  # changed since the page was read, or of a shard let go meanwhile
            held = entries.get(job.id)
            if held == job:
                seen.add(held.id)  # the wheel's own id: the page's copy is let go
            else:
                seen.add(job.id)
                wheel.add(job.id, job)

    def _sweep(self, reload: Reload) -> None:
        """Drop up to :data:`SWEEP_SLICE` wheel entries the reload did not see; the last slice
        ends the reload."""
        keys = reload.unswept
        assert keys is not None
        seen, remove = reload.seen, self.wheel.remove
        for key in keys[-SWEEP_SLICE:]:
            if key not in seen:
                remove(key)
        del keys[-SWEEP_SLICE:]
        if not keys:
            self._reload = None

    def _saw(self, job_id: str) -> None:
        """The wheel's entry of ``job_id`` is as new as the store's: a reload page read earlier
        must not overwrite it, nor its sweep drop it."""
        if self._reload is not None:
            self._reload.seen.add(job_id)

    async def _extend(self, now: datetime) -> None:
        """Read only the jobs that came within the horizon since the last read (every
        ``reload_every_s``, and before half the horizon is used up): jobs already in the wheel
        stay there, moved by this scheduler's own firings and by change notifications, so a big
        wheel is not read again every time."""
        until = now + self.horizon
        arrived = await self._read_due(until, (self._loaded_until, ""))
        self._loaded_until = until
        for job in arrived:
            self.wheel.remove(job.id)
            self._into_wheel(job)
        self._next_reload = now + self.reload_every

    async def _read_due(
        self, until: datetime, after: tuple[datetime, str] | None, shards: Iterable[int] | None = None
    ) -> list[DueJob]:
        """Every due job up to ``until`` (after ``after``) of ``shards`` (default: those owned),
        page by page."""
        shards = self.shards if shards is None else shards
        listed = None if shards is None else sorted(shards)
        found: list[DueJob] = []
        while True:
            page = await self.store.due_jobs(until, listed, self.load_page, after=after)
            found += page
            last = page[-1] if len(page) == self.load_page else None
            if last is None or last.next_run_at is None:
                return found
            after = (last.next_run_at, last.id)

    async def job_changed(self, job_id: str, now: datetime) -> None:
        """A job was created, edited, paused, resumed or deleted: re-read it at once. ``"*"``
        means notifications may have been lost (the listener reconnected): reload everything."""
        if job_id == RELOAD_ALL:
            self._next_reload = None
            return
        self._saw(job_id)
        self.wheel.remove(job_id)
        if self.shards is not None and shard_of(job_id) not in self.shards:
            self._drop_armed(job_id, None, None)
            return  # another scheduler's job: no need to read it (a job's shard never changes)
        try:
            job = await self.store.get_job(job_id)
        except NotFoundError:
            self._drop_armed(job_id, None, now)
            return
        self._drop_armed(job_id, job.version, now)
        if self.shards is not None and job.shard not in self.shards:
            return
        self._into_wheel(DueJob.of(job))

    def _into_wheel(self, job: DueJob) -> None:
        """Into the wheel if due within what was loaded; a job due later is read when the
        horizon reaches it."""
        if job.paused or job.deleted_at is not None or job.next_run_at is None:
            return
        if job.next_run_at <= self._loaded_until:
            self.wheel.add(job.id, job)

    async def _ownership_changed(self, now: datetime) -> set[int] | None:
        """Take in the coordinator's current leases: register new epochs with the store (which
        refuses them if a newer owner exists). Returns None when nothing changed, else the shards
        whose jobs must be read again: gained, or held again under a new epoch (someone else may
        have fired them meanwhile)."""
        assert self.ownership is not None
        leases = self.ownership.owned_shards()
        wanted = {shard: lease.epoch for shard, lease in leases.items()}
        if wanted == self.epochs:
            return None
        fresh = {shard: epoch for shard, epoch in wanted.items() if self.epochs.get(shard) != epoch}
        accepted = await self.store.claim_shards(fresh, self.node, now) if fresh else set()
        metrics.SHARD_CLAIMS_REFUSED.inc(len(fresh) - len(accepted))
        self.epochs = {
            shard: epoch for shard, epoch in wanted.items() if shard not in fresh or shard in accepted
        }
        self.shards = frozenset(self.epochs)
        log.info("shards", extra={"action": "own", "node": self.node, "shards": len(self.shards)})
        return set(accepted)

    async def _reload_shards(self, shards: set[int]) -> None:
        """Bring the wheel in line with the owned shards without reading the others again:
        forget the jobs of shards no longer held (and of ``shards``), then read ``shards``' jobs
        due up to where the wheel is loaded. A scheduler gaining a few shards fires them after
        reading only those (measured by ``benchmarks/bench_million.py``: a full reload of 64
        shards took longer than the 2 s a gained shard should wait)."""
        owned = self.shards or frozenset()
        for job_id in [
            job_id for job_id, job in self.jobs.items() if job.shard in shards or job.shard not in owned
        ]:
            self.wheel.remove(job_id)
        if self.arm_ahead_s:
            for job_id in [
                job_id
                for job_id in self._armed_of
                if shard_of(job_id) in shards or shard_of(job_id) not in owned
            ]:
                self._drop_armed(job_id, None, None)
        if not shards:
            return
        for job in await self._read_due(self._loaded_until, None, shards):
            self._saw(job.id)
            self._into_wheel(job)
        if self.arm_ahead_s:
            await self._read_armed(shards)

    # -- armed runs ---------------------------------------------------------------------------

    async def _read_armed(self, shards: Iterable[int] | None) -> None:
        """Hold the armed runs of ``shards`` (None: every shard) that the store has: armed by
        this scheduler before a reload, or by another that lost the shards (or died) before
        releasing them. Those whose slot has passed are released by the next release."""
        listed = None if shards is None else sorted(shards)
        for run in await self.store.unreleased_runs(listed, ARMED_READ):
            self._hold(run, shard_of(run.job_id))

    def _hold(self, run: Run, shard: int) -> None:
        self.armed.add(run.id, (run, shard))
        self._armed_of.setdefault(run.job_id, set()).add(run.id)

    def _drop_armed(self, job_id: str, version: int | None, now: datetime | None) -> None:
        """Forget held runs of ``job_id``: with ``now``, those still ahead that the job's
        current ``version`` (None: the job is gone) no longer has (a version bump removes them
        from the store in its own transaction); without, all of them (another node's shard)."""
        held = self._armed_of.get(job_id)
        if not held:
            return
        for run_id in list(held):
            entry = self.armed.entries.get(run_id)
            run = None if entry is None else entry[0]
            if run is None or now is None or (run.job_version != version and run.due > now):
                self.armed.remove(run_id)
                held.discard(run_id)
        if not held:
            del self._armed_of[job_id]

    def lead(self, count: int) -> float:
        """How long before its second a second holding ``count`` jobs is armed: enough to record
        them all (:data:`ARM_S_PER_JOB` each), at least :data:`ARM_MIN_S`, at most
        ``arm_ahead_s``."""
        return min(self.arm_ahead_s, max(ARM_MIN_S, count * ARM_S_PER_JOB))

    def _arm_until(self, now: datetime) -> int | None:
        """The last coming second whose jobs are to be armed by ``now`` (None: none yet); the
        seconds before it are armed with it."""
        current = _second(now)
        until = None
        for second in range(current + 1, current + math.ceil(self.arm_ahead_s) + 1):
            count = self.wheel.count_at(second)
            if count and second - self.lead(count) <= now.timestamp():
                until = second
        return until

    async def _arm(self, now: datetime) -> None:
        """Record ahead the armable jobs due up to :meth:`_arm_until`; the others go back into
        the wheel, to fire at their slot."""
        until = self._arm_until(now)
        if until is None:
            return
        coming = self.wheel.pop_due(until)
        owns = self._owner()
        ready: list[DueJob] = []
        for job in coming:
            if armable(job) and owns(job.shard):
                ready.append(job)
            else:
                self.wheel.add(job.id, job)
        await self._fire(ready, now, arming=True)

    def _owner(self) -> Callable[[int], bool]:
        """Whether a shard is held now, under the epoch this scheduler registered."""
        if self.ownership is None:
            return lambda shard: True
        valid = {shard: lease.epoch for shard, lease in self.ownership.owned_shards().items()}
        epochs = self.epochs
        return lambda shard: shard in valid and valid[shard] == epochs.get(shard)

    def release_lead(self, count: int) -> float:
        """How long before its slot a second holding ``count`` armed runs is released: enough to
        publish and stamp them all (:data:`RELEASE_S_PER_RUN` each), at least
        :data:`RELEASE_MIN_S`, at most ``release_ahead_s``."""
        return min(self.release_ahead_s, max(RELEASE_MIN_S, count * RELEASE_S_PER_RUN))

    def _release_until(self, now: datetime) -> datetime:
        """The latest slot released at ``now``: ``now`` plus the coming second's lead."""
        if not self.release_ahead_s:
            return now
        lead = self.release_lead(self.armed.count_at(_second(now) + 1))
        return now + timedelta(seconds=lead)

    async def _release(self, now: datetime) -> None:
        """Queue the triggers of the held runs whose release time has come (their slot, less the
        lead; each trigger carries its slot), then stamp them queued. Runs of shards no longer
        held are left to their new owner."""
        until = self._release_until(now)
        due = self.armed.pop_due(_second(until))
        owns = None if self.ownership is None else self._owner()
        ready: list[Run] = []
        self._soonest_release = None
        for entry in due:
            run, shard = entry
            if run.due > until:  # later in this second (a jittered fire time)
                self.armed.add(run.id, entry)
                self._soonest_release = _earliest(self._soonest_release, run.due)
            elif owns is None or owns(shard):
                ready.append(run)
        if ready:
            failpoints.hit("scheduler.before_release")  # armed runs recorded, triggers not queued
            await self._publish(ready, ahead=until > now)
        armed_of = self._armed_of
        for run, _ in due:
            held = armed_of.get(run.job_id)
            if held is not None and run.id not in self.armed:
                held.discard(run.id)
                if not held:
                    del armed_of[run.job_id]
        if ready:
            self._progressed()

    def healthy(self) -> bool:
        """False once the store has not answered for ``stall_s`` (unreachable, or a link that
        drops packets and hangs every call): the coordinator then stops heartbeating for this
        node, so that its shards move to schedulers that can fire them."""
        return self.clock.now() - self._progress_at < self.stall

    def _progressed(self) -> None:
        self._progress_at = self.clock.now()

    # -- firing -------------------------------------------------------------------------------

    async def tick(self, now: datetime) -> datetime:
        """Fire everything due at ``now``; return when the next tick should run."""
        taken = await self._ownership_changed(now) if self.ownership is not None else None
        if self._next_reload is None or now >= self._next_full:
            await self._begin_reload(now)  # every owned shard, the gained ones too
        else:
            if taken is not None:
                await self._reload_shards(taken)
            if self._reload is None and (
                now >= self._next_reload or self._loaded_until - now < self.horizon / 2
            ):
                await self._extend(now)
        if self._reload is not None:
            await self._reload_step()  # the tick waits for one page at most
        if self.arm_ahead_s:
            await self._release(now)  # the herd's second costs only this
        due = self.wheel.pop_due(_second(now))
        if self.ownership is not None:  # a lease may have lapsed since the last tick
            valid = self.ownership.owned_shards()
            due = [
                job
                for job in due
                if job.shard in valid and valid[job.shard].epoch == self.epochs.get(job.shard)
            ]
        self._progressed()
        self._soonest = None
        await self._fire(due, now)
        if self.arm_ahead_s:
            await self._arm(now)
        return self._wake_at(now)

    async def _fire(self, due: list[DueJob], now: datetime, *, arming: bool = False) -> None:
        """Fire ``due`` in batches of :data:`BATCH`, each planned while earlier ones are being
        written, with up to ``writers`` writes in flight: planning is this process' CPU, writing
        mostly the database's, and a database that runs transactions side by side (PostgreSQL)
        works on two batches at once. A tick's batches hold distinct jobs (a job is due once), so
        their writes commute. A write in flight is never cut short: if anything fails, every
        write in flight is waited for before the error goes on. ``arming``: record the jobs'
        coming slots ahead (:func:`~cronwheel.scheduler.planner.arm`) and hold the runs for
        their release instead of queueing them."""
        writing: list[asyncio.Task[None]] = []
        try:
            for start in range(0, len(due), BATCH):
                batch = due[start : start + BATCH]
                firings = await self._plan(batch, now, arming)
                while len(writing) >= self.writers:
                    await writing.pop(0)
                    self._progressed()
                if firings:
                    writing.append(asyncio.create_task(self._write(batch, firings, now, arming)))
            while writing:
                await writing.pop(0)
                self._progressed()
        except BaseException:
            if writing:
                await asyncio.wait(writing)
                for task in writing:  # retrieved: only the first error goes on
                    if not task.cancelled():
                        task.exception()
            raise

    async def _plan(self, jobs: list[DueJob], now: datetime, arming: bool = False) -> list[Firing]:
        """The batch's firings; lets the loop run every :data:`PLAN_SLICE` jobs, so that the
        previous batch's write goes on meanwhile."""
        if arming:
            armed: list[Firing] = []
            for start in range(0, len(jobs), PLAN_SLICE):
                await asyncio.sleep(0)
                for job in jobs[start : start + PLAN_SLICE]:
                    firing = arm(job, now, self.new_run_id)
                    if firing is not None:
                        armed.append(firing)
            return armed
        guarded = [job.id for job in jobs if job.overlap is not Overlap.ALLOW]
        active = await self.store.active_runs(guarded) if guarded else {}
        firings: list[Firing] = []
        for start in range(0, len(jobs), PLAN_SLICE):
            await asyncio.sleep(0)
            for job in jobs[start : start + PLAN_SLICE]:
                firing = plan(job, now, active.get(job.id, []), self.new_run_id)
                if firing is not None:
                    firings.append(firing)
                elif job.jitter_s:
                    self._put_back(job, now)
        return firings

    def _put_back(self, job: DueJob, now: datetime) -> None:
        """A jittered job taken out in the second of its fire time, before that instant: back
        into the wheel, and the tick wakes at the earliest such instant."""
        if job.paused or job.deleted_at is not None or job.next_run_at is None:
            return
        fires = due_at(job, job.next_run_at)
        if fires > now:
            self.wheel.add(job.id, job)
            self._soonest = _earliest(self._soonest, fires)

    async def _write(
        self, jobs: list[DueJob], firings: list[Firing], now: datetime, arming: bool = False
    ) -> None:
        """Record a batch's firings, queue its triggers, move the wheel; with tracing on, each
        recorded run's trace starts here (:class:`~cronwheel.telemetry.tracing.runs.FireSpans`)."""
        if not self.tracer.enabled:
            await self._record(jobs, firings, now, arming)
            return
        spans = FireSpans.begin(self.tracer, firings, {job.id: job.team for job in jobs}, now)
        try:
            result, queued = await self._record(jobs, spans.firings, now, arming)
        except BaseException as error:
            spans.fail(error, self.clock.now())
            raise
        spans.end(result, queued, armed=arming)

    async def _record(
        self, jobs: list[DueJob], firings: list[Firing], now: datetime, arming: bool = False
    ) -> tuple[FireResult, datetime]:
        """:meth:`_write` itself; returns what the store recorded and when it was queued (armed:
        when it was recorded; the runs are held for their release)."""
        by_id = {job.id: job for job in jobs}
        epochs = None if self.ownership is None else {job.shard: self.epochs[job.shard] for job in jobs}
        result = await self.store.fire(firings, now, epochs)
        if arming:
            failpoints.hit("scheduler.after_arm")  # runs recorded ahead, not held for release yet
            for run in result.accepted:
                self._hold(run, by_id[run.job_id].shard)
            queued = now
            if result.accepted:
                log.info("armed", extra={"action": "arm_batch", "runs": len(result.accepted)})
        else:
            failpoints.hit("scheduler.after_commit")  # runs recorded, triggers not yet queued
            queued = await self._publish(result.accepted)
        if result.fenced_job_ids:  # another node holds a newer lease on these shards: let go
            self.stats.fenced += len(result.fenced_job_ids)
            metrics.FENCED_FIRINGS.inc(len(result.fenced_job_ids))
            log.warning(
                "fenced", extra={"action": "fenced", "jobs": len(result.fenced_job_ids), "node": self.node}
            )
            self._next_reload = None
        fenced = set(result.fenced_job_ids)
        firings = [firing for firing in firings if firing.job_id not in fenced]
        stale = set(result.stale_job_ids)
        for firing in firings:
            if firing.job_id not in stale:
                self._advance(by_id[firing.job_id], firing)
        await self._reread([firing.job_id for firing in firings if firing.job_id in stale])
        self.stats.fired += len(result.accepted)
        self.stats.skipped += len(result.skipped)
        self.stats.stale += len(stale)
        metrics.STALE_FIRINGS.inc(len(stale))
        for run in result.skipped:
            metrics.RUNS_RECORDED.labels("SKIPPED", run.reason or "").inc()
        if not arming:
            _log_fires(result.accepted, result.skipped, now)
        return result, queued

    async def _reread(self, job_ids: list[str]) -> None:
        """Jobs whose firing the store refused as stale (edited, paused, deleted or fired by
        another scheduler since they were read): forget them and read them again, all in one
        store call (a herd that another scheduler fired first can make a whole batch stale),
        as :meth:`job_changed` does for one."""
        for job_id in job_ids:
            self._saw(job_id)
            self.wheel.remove(job_id)
        ours = [job_id for job_id in job_ids if self.shards is None or shard_of(job_id) in self.shards]
        if not ours:
            return
        for job in (await self.store.get_jobs(ours)).values():
            if self.shards is None or job.shard in self.shards:
                self._into_wheel(DueJob.of(job))

    async def _publish(self, runs: list[Run], *, ahead: bool = False) -> datetime:
        """Queue the runs' triggers (``ahead``: with their slots, for the workers to hold until
        then) and stamp them queued; returns when (now, with none). A run queued before its slot
        counts as on time (lateness 0)."""
        if not runs:
            return self.clock.now()
        await self.queue.publish(
            [Trigger(run.id, run.job_id, run.queue, run.due if ahead else None) for run in runs]
        )
        failpoints.hit("scheduler.after_publish")  # triggers queued, not yet marked queued
        queued = self.clock.now()
        await self.store.mark_queued([run.id for run in runs], queued)
        metrics.RUNS_RECORDED.labels("PENDING", "").inc(len(runs))
        for run in runs:
            lateness = max(0.0, (queued - run.due).total_seconds())
            self.stats.record_lateness(lateness)
            metrics.FIRE_LATENESS.observe(lateness)
        return queued

    def _advance(self, job: DueJob, firing: Firing) -> None:
        self._saw(job.id)
        if firing.next_run_at is None:
            return
        self._into_wheel(job.moved(firing.next_run_at))

    def _wake_at(self, now: datetime) -> datetime:
        if self._reload is not None:
            return now  # the next page, after what changed meanwhile
        wake = now + timedelta(seconds=1)
        if self._next_reload is not None:
            wake = min(wake, self._next_reload) if len(self.wheel) == 0 else wake
        next_due = self.wheel.next_due()
        if next_due is not None:
            at = datetime.fromtimestamp(next_due, now.tzinfo)
            if self._soonest is not None and next_due <= _second(now):  # put back: later this second
                at = self._soonest
            wake = max(min(wake, at), now)
        release = self.armed.next_due()
        if release is not None:
            lead = self.release_lead(self.armed.count_at(release)) if self.release_ahead_s else 0.0
            release_at = datetime.fromtimestamp(release - lead, now.tzinfo)
            if self._soonest_release is not None and release_at <= now:  # held back this second
                release_at = self._soonest_release - timedelta(seconds=lead)
            wake = max(min(wake, release_at), now)
        arm_at = self._next_arm_at(now) if self.arm_ahead_s else None
        if arm_at is not None:
            wake = min(wake, datetime.fromtimestamp(arm_at, now.tzinfo))
        return wake

    def _next_arm_at(self, now: datetime) -> float | None:
        """When (Unix seconds) the next coming second is to be armed, if after ``now``: a tick
        that releases ahead of one second comes too soon to arm the next."""
        current, stamp = _second(now), now.timestamp()
        times = [
            second - self.lead(count)
            for second in range(current + 1, current + math.ceil(self.arm_ahead_s) + 2)
            if (count := self.wheel.count_at(second))
        ]
        later = [at for at in times if at > stamp]
        return min(later) if later else None

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, changes: asyncio.Queue[str], stop: asyncio.Event) -> None:
        """Tick, then sleep until the next due second, a job change, or ``stop``. After a
        transient failure, wait as :attr:`backoff` says; any other error stops the scheduler."""
        tries = self.backoff.tracker()
        while not stop.is_set():
            try:
                await self._pass(changes, stop)
            except TransientError as error:  # a backend is down: what was written is the truth
                self._next_reload = None  # the wheel (or a change being read) is out of step: reload
                delay = tries.failed()
                log.warning(
                    "backend unavailable",
                    extra={
                        "action": "wait",
                        "node": self.node,
                        "attempt": tries.failures,
                        "retry_in_s": round(delay, 3),
                        "error": str(error),
                    },
                )
                await pause(delay, stop)
            else:
                tries.succeeded()

    async def _pass(self, changes: asyncio.Queue[str], stop: asyncio.Event) -> None:
        """One tick, the job changes that arrived meanwhile, then the wait for the next."""
        wake = await self.tick(self.clock.now())
        while not changes.empty():
            await self.job_changed(changes.get_nowait(), self.clock.now())
        delay = (wake - self.clock.now()).total_seconds()
        if delay > 0:
            await _wait_for_change(changes, stop, delay, self, self.clock)


async def _wait_for_change(
    changes: asyncio.Queue[str], stop: asyncio.Event, delay: float, scheduler: Scheduler, clock: Clock
) -> None:
    """Sleep up to ``delay``; wake early for a job change (read it), ``stop``, or (cluster) a
    change of shard ownership, so that a gained shard fires without waiting for the next tick."""
    getter = asyncio.ensure_future(changes.get())
    waiters = {getter, asyncio.ensure_future(stop.wait())}
    if scheduler.ownership is not None:
        waiters.add(asyncio.ensure_future(scheduler.ownership.wait_for_change(delay)))
    try:
        done, _ = await asyncio.wait(waiters, timeout=delay, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            await scheduler.job_changed(getter.result(), clock.now())
    finally:
        for task in waiters:
            if not task.done():
                task.cancel()


def _second(moment: datetime) -> int:
    return int(moment.timestamp())


Held = tuple[Run, int]  # an armed run and its job's shard


def _held_second(held: Held) -> int:
    return _second(held[0].due)


def _due_second(job: DueJob) -> int:
    """The wheel's second of a job: that of its cursor's fire time (a job in the wheel always
    has a cursor)."""
    assert job.next_run_at is not None
    return _second(job.next_run_at if not job.jitter_s else due_at(job, job.next_run_at))


def _earliest(known: datetime | None, moment: datetime) -> datetime:
    return moment if known is None or moment < known else known


def _log_fires(accepted: list[Run], skipped: list[Run], now: datetime) -> None:
    """One INFO fact per batch (how many fired, how late the latest was); each fire is a DEBUG
    fact, since the run's own record holds it (measured: a line per fire at INFO cost about a
    tenth of the fire path's CPU). Skips stay INFO, one per run: they are the news."""
    if accepted:
        latest = max((now - run.due).total_seconds() for run in accepted)
        log.info(
            "fired",
            extra={"action": "fire_batch", "runs": len(accepted), "max_lateness_ms": round(latest * 1000, 1)},
        )
    if log.isEnabledFor(logging.DEBUG):
        for run in accepted:
            log.debug(
                "fired",
                extra={
                    "action": "fire",
                    "job_id": run.job_id,
                    "run_id": run.id,
                    "slot": run.slot.isoformat(),
                    "lateness_ms": round((now - run.due).total_seconds() * 1000, 1),
                },
            )
    for run in skipped:
        if run.state is RunState.SKIPPED:
            log.info(
                "skipped",
                extra={"action": "skip", "job_id": run.job_id, "run_id": run.id, "reason": run.reason},
            )
