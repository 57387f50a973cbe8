"""The scheduler's reload, a page per tick, on every backend: ticks fire between the pages, and
the wheel ends equal to the store's due set although jobs are created, edited, paused, moved and
deleted while it runs, some while a page is being read (that page then holds their old row)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, cast

import pytest

from cronwheel.clock import ManualClock
from cronwheel.model import DueJob
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.change_listener import RELOAD_ALL
from cronwheel.store.sql import SqlStore

from .support import START, at, new_job

HORIZON = timedelta(hours=1)


class PagedStore:
    """The store, counting the due reads, and running ``during_read`` after a page was read and
    before the scheduler gets it: a change committed (and heard of) while the page was in flight."""

    def __init__(self, inner: SqlStore) -> None:
        self._inner = inner
        self.reads = 0
        self.during_read: Callable[[], Awaitable[None]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def due_jobs(self, *args: Any, **kwargs: Any) -> list[DueJob]:
        page = await self._inner.due_jobs(*args, **kwargs)
        self.reads += 1
        if self.during_read is not None:
            await self.during_read()
        return page


def scheduler_over(store: PagedStore, clock: ManualClock, page: int) -> Scheduler:
    return Scheduler(
        cast(SqlStore, store), MemoryQueue(clock), clock, "paged", load_page=page, reload_every_s=3600.0
    )


async def test_a_tick_fires_between_the_pages_of_a_reload(store: SqlStore, clock: ManualClock) -> None:
    due_now = [await new_job(store, f"now-{n}", next_run_at=START) for n in range(5)]
    for n in range(20):
        await new_job(store, f"later-{n}", next_run_at=at(1))
    paged = PagedStore(store)
    scheduler = scheduler_over(paged, clock, page=10)
    assert await scheduler.tick(START) == START  # one page read, then at once the next tick
    assert paged.reads == 1
    assert scheduler.stats.fired == 5  # the first page held the jobs due now: fired before the rest is read
    assert len(scheduler.jobs) == 10  # the five fired, moved to 12:01, and five of the later ones
    assert await scheduler.tick(START) == START
    assert paged.reads == 2
    assert await scheduler.tick(START) > START  # the third page was the last: the reload is done
    assert paged.reads == 3
    assert len(scheduler.jobs) == 25  # the five fired jobs, moved to 12:01, and the twenty
    assert {job.id for job in due_now} <= set(scheduler.jobs)
    clock.set(at(1))
    await scheduler.tick(at(1))
    assert scheduler.stats.fired == 30


async def _due_set(store: SqlStore, until: datetime) -> dict[str, DueJob]:
    return {job.id: job for job in await store.due_jobs(until, None, 1_000_000)}


class Edits:
    """Random changes to the store's jobs, each told to the scheduler or not."""

    def __init__(self, store: SqlStore, scheduler: Scheduler, clock: ManualClock, rng: random.Random) -> None:
        self.store, self.scheduler, self.clock, self.rng = store, scheduler, clock, rng
        self.count = 0

    def offset(self) -> datetime:
        return START + timedelta(minutes=self.rng.randrange(1, 75))  # some beyond the horizon

    async def one(self, *, told: bool) -> None:
        live = [job.id for job in await self.store.due_jobs(START + 2 * HORIZON, None, 100_000)]
        kind = self.rng.choice(["create", "edit", "move", "pause", "delete"])
        self.count += 1
        if kind == "create" or not live:
            job_id = (await new_job(self.store, f"new-{self.count}", next_run_at=self.offset())).id
        else:
            job_id = self.rng.choice(live)
            await self._change(kind, job_id)
        if told:
            await self.scheduler.job_changed(job_id, self.clock.now())

    async def _change(self, kind: str, job_id: str) -> None:
        if kind == "delete":
            await self.store.delete_job(job_id, self.clock.now())
            return
        job = await self.store.get_job(job_id)
        if kind == "edit":
            changed = dataclasses.replace(job, payload={"n": self.count})
            await self.store.update_job(changed, job.version)
        elif kind == "move":
            await self.store.update_job(
                dataclasses.replace(job, next_run_at=self.offset()), job.version, move_cursor=True
            )
        else:
            await self.store.update_job(dataclasses.replace(job, paused=True), job.version)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_paged_reload_converges_to_the_store_under_changes(
    store: SqlStore, clock: ManualClock, seed: int
) -> None:
    rng = random.Random(seed)
    for n in range(60):
        minute = 1 if n < 6 else rng.randrange(1, 75)
        await new_job(store, f"job-{n}", next_run_at=START + timedelta(minutes=minute))
    clock.set(START + timedelta(seconds=40))
    paged = PagedStore(store)
    scheduler = scheduler_over(paged, clock, page=7)
    await scheduler.load(clock.now())
    edits = Edits(store, scheduler, clock, rng)
    for _ in range(8):  # unheard of: only the reload can find these
        await edits.one(told=False)
    await scheduler.job_changed(RELOAD_ALL, clock.now())
    until = clock.now() + HORIZON

    async def heard_mid_read() -> None:
        await edits.one(told=True)

    paged.during_read = heard_mid_read
    reads = paged.reads
    while await scheduler.tick(clock.now()) == clock.now():
        paged.during_read = None
        for _ in range(rng.randrange(3)):
            await edits.one(told=True)
        paged.during_read = heard_mid_read
        clock.advance(10)  # jobs of 12:01 fire during the reload
    paged.during_read = None
    assert paged.reads - reads >= 6  # some 45 due jobs and more, 7 a page
    assert scheduler.stats.fired > 0
    assert dict(scheduler.jobs) == await _due_set(store, until)
