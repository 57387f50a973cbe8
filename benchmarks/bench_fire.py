"""The fire path at scale, beside APScheduler 3.11 (a benchmark, not a test).

Workloads (issue #6):

* ``steady``: N jobs each firing once a minute, spread evenly over the seconds (``S * * * * *``
  with S = i mod 60), so N/60 fires per second; measured over ``--seconds``.
* ``herd``: N jobs all due in the same second.

Systems, each in a fresh child process, one after the other in one run:

* ``embedded``: cronwheel's scheduler over SQLite and the in-process queue (what
  ``cronwheel server`` runs with zero configuration);
* ``cluster``: cronwheel's scheduler over PostgreSQL and Redis Streams (one scheduler owning every
  shard: the fire path of a cluster, without etcd, which is not on it);
* ``apscheduler``: APScheduler 3.11, AsyncIOScheduler, in-memory job store, a no-op coroutine.

For cronwheel, *queued lateness* is ``queued_at - slot`` as the store recorded it (the trigger is
on the queue); for APScheduler it is the moment the job is submitted to its executor
(``EVENT_JOB_SUBMITTED``) minus its scheduled run time. Workers are not part of this benchmark:
start lateness and deliveries are measured by ``bench_embedded.py`` and, at scale, by a later
workload. CPU seconds and peak memory are the child process's own (PostgreSQL's and Redis' CPU is
not included). Jobs are written to the store in bulk before the clock starts; that setup is not
measured, but loading them into the scheduler is (``load_s``: start to first tick).

    .venv/bin/python benchmarks/bench_fire.py --workload steady --jobs 100000 --seconds 60
    .venv/bin/python benchmarks/bench_fire.py --workload herd --jobs 100000
    .venv/bin/python benchmarks/bench_fire.py --smoke          # tiny, a few seconds (CI)

Prints a table and the ratios APScheduler / cronwheel; ``--json PATH`` saves every figure.
Always exits 0 when the runs complete: targets are printed for information.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import redis.asyncio as aioredis
from apscheduler.events import EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import insert, select

from cronwheel.clock import SystemClock
from cronwheel.model import Job, PythonTarget, new_id
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.planner import first_slot
from cronwheel.store import codec
from cronwheel.store.schema import jobs, runs
from cronwheel.store.sql import SqlStore, open_store

SYSTEMS = ("embedded", "cluster", "apscheduler")
POSTGRES_ADMIN = os.environ.get("CRONWHEEL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("CRONWHEEL_BENCH_REDIS", "redis://127.0.0.1:6379/0")
SEED_CHUNK = 2000


@dataclass
class Figures:
    system: str
    workload: str
    jobs: int
    fires: int
    expected: int
    window_s: float
    fires_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    load_s: float
    cpu_s_per_1000: float
    peak_rss_mb: float
    setup_overran: bool  # loading ended after the window began: raise --settle


# -- the workload ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    workload: str
    jobs: int
    start: float  # window start (Unix seconds, a whole second)
    end: float  # window end, exclusive

    def expression(self, index: int) -> str:
        if self.workload == "steady":
            return f"{index % 60} * * * * *"
        due = datetime.fromtimestamp(self.start, UTC)
        return f"{due.second} {due.minute} {due.hour} * * *"

    def expected(self) -> int:
        if self.workload == "herd":
            return self.jobs
        seconds = int(self.end - self.start)
        per_second = [0] * 60
        for index in range(self.jobs):
            per_second[index % 60] += 1
        return sum(per_second[int(self.start + s) % 60] for s in range(seconds))


def make_plan(workload: str, jobs: int, seconds: float, settle_s: float) -> Plan:
    start = float(int(time.time() + settle_s) + 1)
    end = start + (1 if workload == "herd" else seconds)
    return Plan(workload, jobs, start, end)


def summary(
    system: str, plan: Plan, lateness_s: Sequence[float], load_s: float, cpu_s: float, overran: bool
) -> Figures:
    ordered = sorted(lateness_s) or [float("nan")]
    fires = len(lateness_s)
    window = plan.end - plan.start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return Figures(
        system=system,
        workload=plan.workload,
        jobs=plan.jobs,
        fires=fires,
        expected=plan.expected(),
        window_s=window,
        fires_per_s=round(fires / window, 1),
        p50_ms=round(statistics.median(ordered) * 1000, 2),
        p99_ms=round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        max_ms=round(ordered[-1] * 1000, 2),
        load_s=round(load_s, 3),
        cpu_s_per_1000=round(cpu_s / max(fires, 1) * 1000, 4),
        peak_rss_mb=round(peak_kb / 1024, 1),
        setup_overran=overran,
    )


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- cronwheel -------------------------------------------------------------------------------------


async def run_cronwheel(system: str, plan: Plan) -> Figures:
    clock = SystemClock()
    async with backends(system, clock) as (store, queue):
        await seed(store, plan)
        scheduler = Scheduler(store, queue, clock, "bench")
        stop = asyncio.Event()
        cpu_before = cpu_now()
        started = time.monotonic()
        await scheduler.load(clock.now())
        load_s = time.monotonic() - started
        overran = time.time() > plan.start
        task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop), name="scheduler")
        await asyncio.sleep(max(0.0, plan.end - time.time()) + 1.0)  # the last batch's mark_queued
        stop.set()
        await task
        cpu_s = cpu_now() - cpu_before
        lateness = await queued_lateness(store, plan)
    return summary(system, plan, lateness, load_s, cpu_s, overran)


@contextlib.asynccontextmanager
async def backends(system: str, clock: SystemClock) -> AsyncIterator[tuple[SqlStore, Queue]]:
    """The store and queue of ``system`` on fresh, private storage, removed afterwards."""
    if system == "embedded":
        with tempfile.TemporaryDirectory(prefix="cronwheel-bench-") as folder:
            store = await open_store(f"sqlite:///{folder}/bench.db", clock=clock)
            queue = MemoryQueue(clock, visibility_timeout_s=60.0)
            try:
                yield store, queue
            finally:
                await store.close()
        return
    name = f"cronwheel_bench_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    store = await open_store(POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}", clock=clock)
    streams = RedisStreamQueue(REDIS_URL, clock, prefix=f"bench-{name}")
    try:
        yield store, streams
    finally:
        await streams.close()
        await store.close()
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')
        await drop_keys(f"bench-{name}")


async def admin(sql: str) -> None:
    connection = await asyncpg.connect(POSTGRES_ADMIN)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def drop_keys(prefix: str) -> None:
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def seed(store: SqlStore, plan: Plan) -> None:
    """Write the jobs straight into the jobs table, in chunks (setup: not measured)."""
    now = datetime.now(UTC)
    after = datetime.fromtimestamp(plan.start, UTC) - timedelta(microseconds=1)
    rows = []
    for index in range(plan.jobs):
        job = Job(new_id(), "bench", f"job-{index}", plan.expression(index), PythonTarget("bench:noop"),
                  created_at=now, updated_at=now)  # fmt: skip
        rows.append(codec.job_to_row(dataclasses.replace(job, next_run_at=first_slot(job, after))))
    for start in range(0, len(rows), SEED_CHUNK):
        async with store.engine.begin() as connection:
            await connection.execute(insert(jobs), rows[start : start + SEED_CHUNK])


async def queued_lateness(store: SqlStore, plan: Plan) -> list[float]:
    start = datetime.fromtimestamp(plan.start, UTC)
    end = datetime.fromtimestamp(plan.end, UTC)
    statement = select(runs.c.slot, runs.c.queued_at).where(runs.c.slot >= start, runs.c.slot < end)
    async with store.engine.connect() as connection:
        rows = (await connection.execute(statement)).all()
    return [(queued - slot).total_seconds() for slot, queued in rows if queued is not None]


# -- APScheduler 3.11 ------------------------------------------------------------------------------


async def _noop() -> None:
    return None


async def run_apscheduler(plan: Plan) -> Figures:
    lateness: list[float] = []
    start, end = plan.start, plan.end

    def submitted(event: JobSubmissionEvent) -> None:
        now = time.time()
        for scheduled in event.scheduled_run_times:
            moment = scheduled.timestamp()
            if start <= moment < end:
                lateness.append(now - moment)

    scheduler = AsyncIOScheduler(timezone=UTC, job_defaults={"misfire_grace_time": None, "coalesce": False})
    scheduler.add_listener(submitted, EVENT_JOB_SUBMITTED)
    due = datetime.fromtimestamp(start, UTC)
    for index in range(plan.jobs):
        trigger: Any = (
            CronTrigger(second=index % 60, timezone=UTC) if plan.workload == "steady" else DateTrigger(due)
        )
        scheduler.add_job(_noop, trigger, id=str(index))
    cpu_before = cpu_now()
    started = time.monotonic()
    scheduler.start()  # adds the pending jobs to the store
    load_s = time.monotonic() - started
    overran = time.time() > start
    await asyncio.sleep(max(0.0, end - time.time()) + 1.0)
    scheduler.shutdown(wait=False)
    cpu_s = cpu_now() - cpu_before
    return summary("apscheduler", plan, lateness, load_s, cpu_s, overran)


# -- the parent: one child per system --------------------------------------------------------------


def child(system: str, plan: Plan) -> Figures:
    runner = run_apscheduler(plan) if system == "apscheduler" else run_cronwheel(system, plan)
    return asyncio.run(runner)


def spawn(system: str, args: argparse.Namespace) -> Figures:
    settle = args.settle if args.settle is not None else 5.0 + args.jobs / 5_000
    command = [sys.executable, __file__, "--child", system, "--workload", args.workload,
               "--jobs", str(args.jobs), "--seconds", str(args.seconds), "--settle", str(settle)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{system} failed:\n{done.stdout}\n{done.stderr}")
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def report(results: list[Figures]) -> str:
    head = ("system", "fires", "expected", "fires/s", "p50 ms", "p99 ms", "max ms", "load s",
            "CPU s/1000", "peak MB")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        lines.append(" | ".join(str(v) for v in (r.system, r.fires, r.expected, r.fires_per_s, r.p50_ms,
                                                  r.p99_ms, r.max_ms, r.load_s, r.cpu_s_per_1000,
                                                  r.peak_rss_mb)))  # fmt: skip
    by_system = {r.system: r for r in results}
    peer = by_system.get("apscheduler")
    for name in ("embedded", "cluster"):
        ours = by_system.get(name)
        if peer and ours and ours.p99_ms > 0:
            lines.append(f"p99 queued lateness, apscheduler / {name}: {peer.p99_ms / ours.p99_ms:.1f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("steady", "herd"), default="steady")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="steady: the measured window")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--settle", type=float, default=None, help="seconds before the window starts")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        plan = make_plan(args.workload, args.jobs, args.seconds, args.settle)
        print(json.dumps(asdict(child(args.child, plan))))
        return 0
    if args.smoke:
        args.jobs, args.seconds, args.settle = 120, 2.0, 2.0
    systems = [name for name in args.systems.split(",") if name]
    print(f"bench_fire: {args.workload}, {args.jobs} jobs, {machine()}", flush=True)
    results = []
    for system in systems:
        results.append(spawn(system, args))
        print(f"  {system}: {asdict(results[-1])}", flush=True)
    print(report(results))
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine(), "results": [asdict(r) for r in results]}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
