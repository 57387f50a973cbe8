"""APScheduler 4 on PostgreSQL: the durable peer beside ``bench_fire.py --workload herd``.

APScheduler 4 keeps its schedules and jobs in a database, as cronwheel does, so it is the closest
peer that records its runs. It cannot share cronwheel's environment (cronwheel's tests pin
APScheduler 3.11), so ``bench_fire.py`` runs this file with its own interpreter from a side venv
built from ``requirements/peer-apscheduler4.lock`` (``--systems apscheduler4``), and reads the
figures it prints as one JSON line, with the fields of ``bench_fire.Figures``.

How it is set up, to give it its best showing on one process:

* ``SQLAlchemyDataStore`` on asyncpg, in a fresh database; the in-process ``LocalEventBroker``
  (one process: no PostgreSQL NOTIFY round trips);
* one ``AsyncScheduler``, role ``scheduler`` with ``--workers 0`` (it makes jobs and runs none,
  as cronwheel's ``--workers 0``), role ``both`` otherwise, running a no-op coroutine;
* N schedules, each a ``DateTrigger`` at the herd's second, added before the clock starts
  (16 at a time; not measured).

*Queued lateness* is a ``JobAdded`` event's timestamp (the job is in the store) minus the slot;
*start lateness* is ``JobReleased.started_at`` minus the slot. Herd only: every schedule shares
the slot, so no per-job bookkeeping is needed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from datetime import UTC, datetime
from typing import Any


async def noop() -> None:
    return None


def _ms(values: list[float]) -> tuple[float, float, float]:
    ordered = sorted(values) or [float("nan")]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return (round(statistics.median(ordered) * 1000, 2), round(p99 * 1000, 2), round(ordered[-1] * 1000, 2))


def _started(event: Any, slot: float, started: list[float]) -> None:
    if event.started_at is not None:
        started.append(event.started_at.timestamp() - slot)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _seed(scheduler: Any, jobs: int, due: datetime) -> None:
    from apscheduler.triggers.date import DateTrigger

    gate = asyncio.Semaphore(16)

    async def add(index: int) -> None:
        async with gate:
            await scheduler.add_schedule("noop", DateTrigger(due), id=f"s{index}")

    await asyncio.gather(*(add(index) for index in range(jobs)))


async def run(url: str, jobs: int, settle_s: float, workers: int) -> dict[str, Any]:
    from apscheduler import AsyncScheduler, JobAdded, JobReleased, SchedulerRole
    from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(url, pool_size=20)
    role = SchedulerRole.both if workers else SchedulerRole.scheduler
    start = float(int(time.time() + settle_s) + 1)
    due = datetime.fromtimestamp(start, UTC)
    queued: list[float] = []
    started: list[float] = []
    async with AsyncScheduler(SQLAlchemyDataStore(engine), role=role, max_concurrent_jobs=64) as scheduler:
        await scheduler.configure_task("noop", func=noop)
        loaded = time.monotonic()
        await _seed(scheduler, jobs, due)
        load_s = time.monotonic() - loaded
        overran = time.time() > start
        scheduler.subscribe(lambda event: queued.append(event.timestamp.timestamp() - start), {JobAdded})
        scheduler.subscribe(lambda event: _started(event, start, started), {JobReleased})
        cpu_before = _cpu()
        await scheduler.start_in_background()
        deadline = start + 60.0 + jobs / 500
        while time.time() < deadline and (len(queued) < jobs or (workers and len(started) < jobs)):
            await asyncio.sleep(0.2)
        cpu_s = _cpu() - cpu_before
        await scheduler.stop()
    await engine.dispose()
    p50, p99, worst = _ms(queued)
    s50, s99, smax = _ms(started)
    return {
        "system": "apscheduler4", "workload": "herd", "jobs": jobs, "fires": len(queued),
        "expected": jobs, "window_s": 1.0, "fires_per_s": float(len(queued)), "p50_ms": p50,
        "p99_ms": p99, "max_ms": worst, "load_s": round(load_s, 3),
        "cpu_s_per_1000": round(cpu_s / max(len(queued), 1) * 1000, 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "setup_overran": overran, "started": len(started), "start_p50_ms": s50,
        "start_p99_ms": s99, "start_max_ms": smax, "workers": workers,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--database-url", required=True, help="postgresql+asyncpg://... (a fresh database)")
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds from start to the herd's slot")
    parser.add_argument("--workers", type=int, default=0, help="0: make jobs only; else run them too")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args.database_url, args.jobs, args.settle, args.workers))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
