"""How should one asyncio process share a SQLite store among concurrent writers?

Compares, on the same workload (``--tasks`` coroutines, each firing one run of its own job, then
claiming and finishing it, ``--cycles`` times):

* ``lock``: write transactions serialized by an asyncio.Lock, ``BEGIN IMMEDIATE`` (the default);
* ``busy``: no lock, ``BEGIN IMMEDIATE``: writers wait in SQLite's busy handler (busy_timeout);
* ``deferred``: no lock, plain deferred ``BEGIN`` (what the driver does by default).

Prints throughput, write latency percentiles and the number of failed writes per mode.
Run: ``.venv/bin/python tests/store/bench_sqlite_writes.py [--tasks 16] [--cycles 30]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from cronwheel.errors import CronwheelError
from cronwheel.model import AttemptResult, Firing, HttpTarget, Job, Outcome, Run, RunKind, RunState, new_id
from cronwheel.store.driver import create_engine
from cronwheel.store.migrate import upgrade_database
from cronwheel.store.sql import SqlStore

T = TypeVar("T")
START = datetime(2026, 1, 1, tzinfo=UTC)
MODES = {"lock": (True, True), "busy": (False, True), "deferred": (False, False)}


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)

    async def timed(self, call: Callable[[], Awaitable[T]]) -> T | None:
        began = time.perf_counter()
        try:
            return await call()
        except CronwheelError as error:
            key = f"{type(error).__name__}: {str(error.__cause__ or error)[:60]}"
            self.failures[key] = self.failures.get(key, 0) + 1
            return None
        finally:
            self.latencies.append(time.perf_counter() - began)


async def _worker(store: SqlStore, job: Job, cycles: int, tally: Tally) -> None:
    cursor = job.next_run_at
    assert cursor is not None
    for _ in range(cycles):
        following = cursor + timedelta(minutes=1)
        run = Run(id=new_id(), job_id=job.id, kind=RunKind.SCHEDULED, slot=cursor, state=RunState.PENDING)
        firing = Firing(job.id, job.version, cursor, following, runs=(run,))
        fired = await tally.timed(partial(store.fire, [firing], START))
        if fired is not None and fired.accepted:
            cursor = following
        claimed = await tally.timed(
            partial(store.claim_run, run.id, "w", START, START + timedelta(minutes=1))
        )
        if claimed is not None:
            done = AttemptResult(Outcome.SUCCESS)
            await tally.timed(partial(store.finish_attempt, run.id, 1, "w", done, START, None))


async def measure(mode: str, tasks: int, cycles: int, directory: Path) -> dict[str, Any]:
    serialize, immediate = MODES[mode]
    url = f"sqlite+aiosqlite:///{directory / f'{mode}.db'}"
    await upgrade_database(url)
    store = SqlStore(create_engine(url, sqlite_begin_immediate=immediate), serialize_writes=serialize)
    jobs = [
        await store.create_job(
            Job(new_id(), "bench", f"job-{n}", "* * * * *", HttpTarget("https://x"), next_run_at=START)
        )
        for n in range(tasks)
    ]
    tally = Tally()
    began = time.perf_counter()
    await asyncio.gather(*(_worker(store, job, cycles, tally) for job in jobs))
    elapsed = time.perf_counter() - began
    await store.close()
    latencies = sorted(tally.latencies)
    return {
        "mode": mode,
        "writes/s": round(len(latencies) / elapsed),
        "p50 ms": round(statistics.median(latencies) * 1000, 2),
        "p99 ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 2),
        "max ms": round(latencies[-1] * 1000, 2),
        "failed": sum(tally.failures.values()),
        "failures": tally.failures,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=16)
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for mode in args.modes.split(","):
            print(await measure(mode, args.tasks, args.cycles, Path(directory)))


if __name__ == "__main__":
    asyncio.run(main())
