"""Where a fire's time goes: the scheduler's steps, one after the other, on a herd (a benchmark).

``bench_fire.py`` measures a fire end to end, with the steps overlapped as the scheduler runs them
(batches planned while earlier ones are written, writes in flight side by side). This script runs
the same steps one at a time on one herd, so each can be timed alone, in wall and CPU time of this
process: what the wall time has beyond the CPU time is the time the step waited for the database
or Redis. For each batch of :data:`~cronwheel.scheduler.loop.BATCH` jobs:

* ``plan``: the planner's decisions (``Scheduler._plan``);
* ``store.fire``: the fire transaction, and inside it the bulk statements: the cursor update
  (``advance_cursors``), the runs' insert (``insert runs``), their first events
  (``insert events``) and each job's latest run (``job_last_run``);
* ``publish``: the triggers onto the queue;
* ``mark_queued``: the queued stamp;
* ``advance``: the wheel moved past the fired slots.

Systems: ``embedded`` (SQLite, in-process queue: SQLite's work runs in this process, so it is CPU
here) and ``cluster`` (PostgreSQL, Redis Streams: their work is wall time beyond the CPU). Jobs
are written straight into the store first (not timed), as ``bench_fire.py`` does; loading the
wheel is timed apart (``load``).

    .venv/bin/python benchmarks/bench_fire_phases.py --jobs 20000
    .venv/bin/python benchmarks/bench_fire_phases.py --smoke        # tiny, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import bench_fire
from benchlib import machine, save_results
from cronwheel.clock import SystemClock
from cronwheel.queue import Trigger
from cronwheel.scheduler.loop import BATCH, Scheduler
from cronwheel.store.sql import bulk, last_runs

T = TypeVar("T")
STATEMENTS = ((bulk, "advance_cursors", "advance_cursors"), (bulk, "_insert_returning_ids", "insert runs"),
              (bulk, "insert_events", "insert events"), (last_runs, "record", "job_last_run"))  # fmt: skip


@dataclass
class Phase:
    system: str
    jobs: int
    phase: str
    wall_us_per_fire: float
    cpu_us_per_fire: float


class Timings:
    def __init__(self) -> None:
        self.wall: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.cpu: collections.defaultdict[str, float] = collections.defaultdict(float)

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] += time.perf_counter() - wall
            self.cpu[name] += time.process_time() - cpu

    def wrap(self, name: str, function: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(function)
        async def timed(*args: Any, **kwargs: Any) -> T:
            with self.timed(name):
                return await function(*args, **kwargs)

        return timed


@contextlib.contextmanager
def statements_timed(timings: Timings) -> Iterator[None]:
    """Time the fire transaction's bulk statements (the module's functions, swapped back after)."""
    saved = [(module, name, getattr(module, name)) for module, name, _ in STATEMENTS]
    try:
        for (module, name, label), (_, _, function) in zip(STATEMENTS, saved, strict=True):
            setattr(module, name, timings.wrap(label, function))
        yield
    finally:
        for module, name, function in saved:
            setattr(module, name, function)


async def measure(system: str, jobs: int) -> list[Phase]:
    clock = SystemClock()
    start = float(int(time.time()) - 5)  # a slot in the past: every job is due at once
    plan = bench_fire.Plan("herd", jobs, start, start + 1)
    timings = Timings()
    async with bench_fire.backends(system, clock) as (store, queue, _, _):
        await bench_fire.seed(store, plan)
        scheduler = Scheduler(store, queue, clock, "bench-phases")
        with timings.timed("load"):
            await scheduler.load(clock.now())
        now = clock.now()
        due = scheduler.wheel.pop_due(int(now.timestamp()))
        with statements_timed(timings):
            for first in range(0, len(due), BATCH):
                batch = due[first : first + BATCH]
                with timings.timed("plan"):
                    firings = await scheduler._plan(batch, now)
                with timings.timed("store.fire"):
                    result = await store.fire(firings, now, None)
                with timings.timed("publish"):
                    await queue.publish([Trigger(run.id, run.job_id, run.queue) for run in result.accepted])
                with timings.timed("mark_queued"):
                    await store.mark_queued([run.id for run in result.accepted], clock.now())
                with timings.timed("advance"):
                    by_id = {job.id: job for job in batch}
                    for firing in firings:
                        scheduler._advance(by_id[firing.job_id], firing)
    return [phase(system, jobs, name, timings) for name in timings.wall]


def phase(system: str, jobs: int, name: str, timings: Timings) -> Phase:
    wall, cpu = timings.wall[name] / jobs * 1e6, timings.cpu[name] / jobs * 1e6
    return Phase(system, jobs, name, round(wall, 1), round(cpu, 1))


def report(phases: list[Phase]) -> str:
    lines = ["system | phase | wall us/fire | CPU us/fire | waited us/fire", "--- | --- | --- | --- | ---"]
    for phase in phases:
        waited = round(phase.wall_us_per_fire - phase.cpu_us_per_fire, 1)
        lines.append(
            f"{phase.system} | {phase.phase} | {phase.wall_us_per_fire} | {phase.cpu_us_per_fire} | {waited}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--systems", default="embedded,cluster")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    jobs = 300 if args.smoke else args.jobs
    facts = machine()
    print(f"bench_fire_phases: herd of {jobs} jobs, one step at a time, {facts}")
    phases = [step for system in args.systems.split(",") for step in asyncio.run(measure(system, jobs))]
    print(report(phases))
    save_results(args.json, phases, facts)


if __name__ == "__main__":
    main()
