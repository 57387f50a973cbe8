"""The roles wired as in production, over a real SqlStore (a tmp SQLite file) and a real
MemoryQueue, all driven by one ManualClock: the tests move time, the roles never sleep for it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import (
    LEGAL_TRANSITIONS,
    Attempt,
    Job,
    PythonTarget,
    Run,
    RunEvent,
    RunState,
)
from cronwheel.queue import Delivery
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.sweeper import Sweeper
from cronwheel.store.port import RunQuery
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker

from . import targets

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday, on the minute
MINUTE = timedelta(minutes=1)
RECORD = f"{targets.__name__}:record"
ALLOW = (f"{targets.__name__}:*",)


def at(minutes: float = 0.0, seconds: float = 0.0) -> datetime:
    return START + timedelta(minutes=minutes, seconds=seconds)


def minutes(*offsets: int) -> list[datetime]:
    return [at(offset) for offset in offsets]


@dataclass
class Roles:
    clock: ManualClock
    store: SqlStore
    queue: MemoryQueue
    feed: ChangeFeed
    changes: asyncio.Queue[str]
    service: JobService
    executors: Executors
    scheduler: Scheduler
    worker: Worker
    sweeper: Sweeper
    extra_workers: list[Worker] = field(default_factory=list)

    @property
    def now(self) -> datetime:
        return self.clock.now()

    # -- jobs -------------------------------------------------------------------------------------

    async def create(self, name: str = "job", schedule: str = "* * * * *", **fields: Any) -> Job:
        """Create a python-target job through JobService and tell the scheduler (as ChangeFeed does)."""
        job = Job(id="", team="ops", name=name, schedule=schedule, target=PythonTarget(RECORD), **fields)
        created = await self.service.create(job)
        await self.notify()
        return created

    async def notify(self, scheduler: Scheduler | None = None) -> None:
        """Deliver the pending change notifications to the scheduler, as its loop would."""
        while not self.changes.empty():
            await (scheduler or self.scheduler).job_changed(self.changes.get_nowait(), self.now)

    # -- time -------------------------------------------------------------------------------------

    async def tick(self, instant: datetime, scheduler: Scheduler | None = None) -> datetime:
        self.clock.set(instant)
        return await (scheduler or self.scheduler).tick(instant)

    # -- workers ----------------------------------------------------------------------------------

    def new_worker(self, node: str, **options: Any) -> Worker:
        options.setdefault("rng", random.Random(1))
        worker = Worker(self.store, self.queue, self.executors, self.clock, node, **options)
        self.extra_workers.append(worker)
        return worker

    def new_scheduler(self, node: str, store: SqlStore | None = None, **options: Any) -> Scheduler:
        return Scheduler(store or self.store, self.queue, self.clock, node, **options)

    async def receive(self, limit: int = 1000, queue: str = "default") -> list[Delivery]:
        """What the queue hands out right now (never waits)."""
        return await self.queue.receive(queue, "test", limit, 0.0)

    async def work(self, worker: Worker | None = None) -> list[Run | None]:
        """Handle and ack everything the queue hands out now, as ``Worker.run`` would."""
        handler = worker or self.worker
        deliveries = await self.receive()
        outcomes: list[Run | None] = []
        for delivery in deliveries:
            outcomes.append(await handler.handle(delivery))
            await self.queue.ack(delivery.trigger.queue, [delivery])
        return outcomes

    # -- reading back -----------------------------------------------------------------------------

    async def runs(self, job_id: str | None = None) -> list[Run]:
        """Every run (of ``job_id``), oldest slot first."""
        found: list[Run] = []
        cursor: str | None = None
        while True:
            page = await self.store.list_runs(RunQuery(job_id=job_id, limit=500, cursor=cursor))
            found.extend(page.items)
            if page.next_cursor is None:
                return sorted(found, key=lambda run: (run.slot, run.id))
            cursor = page.next_cursor

    async def table(self, job_id: str) -> list[tuple[datetime, RunState, str | None]]:
        return [(run.slot, run.state, run.reason) for run in await self.runs(job_id)]

    async def attempts(self, run_id: str) -> list[Attempt]:
        return await self.store.list_attempts(run_id)

    async def history(self, run_id: str) -> list[RunState]:
        """The run's states in order, after checking that its events form a legal chain that
        ends in the run's current state."""
        events = await self.store.list_events(run_id)
        check_chain(events)
        run = await self.store.get_run(run_id)
        assert events[-1].state is run.state, (events, run)
        return [event.state for event in events]

    async def audit(self, *, terminal: bool = True) -> list[Run]:
        """Every run in the store has a legal history; with ``terminal``, every run ended."""
        everything = await self.runs()
        for run in everything:
            await self.history(run.id)
            if terminal:
                assert run.state.terminal, run
                assert run.lease_owner is None, run
        return everything


def check_chain(events: list[RunEvent]) -> None:
    assert events, "a run without history"
    previous: RunState | None = None
    last_at: datetime | None = None
    for event in events:
        assert event.previous is previous, events
        assert event.state in LEGAL_TRANSITIONS[previous], f"illegal {previous} -> {event.state}"
        if last_at is not None:
            assert event.at >= last_at, events
        previous, last_at = event.state, event.at


def build(clock: ManualClock, store: SqlStore, **worker_options: Any) -> Roles:
    queue = MemoryQueue(clock)
    feed = ChangeFeed()
    changes = feed.subscribe()
    policy = TargetPolicy(python_allow=ALLOW)
    service = JobService(store, queue, feed, clock, policy)
    executors = Executors(WorkerSettings(python_allow=ALLOW), clock=clock)
    scheduler = Scheduler(store, queue, clock, "scheduler-1")
    worker_options.setdefault("rng", random.Random(1))
    worker = Worker(store, queue, executors, clock, "worker-1", **worker_options)
    sweeper = Sweeper(store, queue, clock)
    return Roles(clock, store, queue, feed, changes, service, executors, scheduler, worker, sweeper)


async def wait_until(condition: Callable[[], bool], timeout: float = 3.0) -> None:
    """Real-time wait, only for attempts that run on the event loop (never for the scheduler)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)
