"""Fire lateness while retention purges a million old runs (a benchmark, not a test).

Two runs of the same steady load, each in a fresh child process on fresh storage, one after the
other in one session:

* ``calm``: cronwheel's scheduler fires ``--jobs`` jobs (each once a minute, spread evenly over
  the seconds, as ``bench_fire.py --workload steady``) for ``--seconds``;
* ``purge``: the same, while the retention loop (:class:`cronwheel.scheduler.purger.Purger`, as
  the embedded server and a cluster's leader run it: same process, same event loop, batches of
  100 runs on SQLite and 500 on PostgreSQL, each followed by a pause at least as long as the
  batch took) deletes ``--old-runs`` old runs (SUCCESS, 60 days ago, each
  with its attempt and two events) of ``--old-jobs`` paused jobs under a 30-day default
  policy. The window lasts until the purge is done (at most ``--max-seconds``).

Fire lateness is ``queued_at - slot`` as the store recorded it (no workers: the scheduler's own
path). Printed: p50 / p99 / max of each run, the ratio purge / calm, the purge's duration and
rate, and whether every old run (but each job's latest) went. ``--systems embedded,cluster``:
SQLite with the in-process queue, and PostgreSQL with Redis Streams. Setup (seeding the old runs)
is not measured.

    .venv/bin/python benchmarks/bench_retention.py                       # 1,000,000 old runs
    .venv/bin/python benchmarks/bench_retention.py --systems cluster
    .venv/bin/python benchmarks/bench_retention.py --smoke               # tiny, for CI
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, insert, select

from bench_fire import Plan, backends, make_plan, percentiles_ms, seed, window_runs
from benchlib import machine, save_results
from cronwheel.clock import SystemClock
from cronwheel.model import Job, PythonTarget, RetentionPolicy, Run, RunKind, RunState, new_id
from cronwheel.node.server import tune_collector
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.purger import BATCH, EMBEDDED_BATCH, Purger
from cronwheel.store import codec
from cronwheel.store.schema import attempts, jobs, run_events, runs
from cronwheel.store.sql import SqlStore
from cronwheel.telemetry import logs

SYSTEMS = ("embedded", "cluster")
MODES = ("calm", "purge")
CHUNK = 5_000  # old runs per seeding transaction


@dataclass
class Figures:
    system: str
    mode: str
    jobs: int
    fires: int
    window_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    old_runs: int = 0
    purged: int = 0
    purge_s: float = float("nan")
    purged_per_s: float = float("nan")
    left: int = 0  # old runs still there at the end (each old job's latest SUCCESS stays)
    seed_s: float = 0.0


async def seed_old(store: SqlStore, old_jobs: int, old_runs: int) -> None:
    """``old_runs`` SUCCESS runs 60 days old, each with an attempt and two events, spread over
    ``old_jobs`` paused jobs (setup: not measured)."""
    now = datetime.now(UTC)
    start = now - timedelta(days=60)
    per_job = max(1, old_runs // old_jobs)
    made = 0
    for index in range(old_jobs):
        job = Job(new_id(), "old", f"old-{index}", "* * * * *", PythonTarget("bench_fire:noop"), paused=True,
                  created_at=start, updated_at=start)  # fmt: skip
        async with store.engine.begin() as connection:
            await connection.execute(insert(jobs), [codec.job_to_row(job)])
        count = min(per_job, old_runs - made) if index < old_jobs - 1 else old_runs - made
        for first in range(0, count, CHUNK):
            await _seed_chunk(store, job, start, first, min(CHUNK, count - first))
        made += count


async def _seed_chunk(store: SqlStore, job: Job, start: datetime, first: int, count: int) -> None:
    run_rows, attempt_rows, event_rows = [], [], []
    for number in range(first, first + count):
        slot = start + timedelta(minutes=number)
        run = Run(new_id(), job.id, RunKind.SCHEDULED, slot, RunState.SUCCESS, attempts=1, created_at=slot,
                  queued_at=slot, started_at=slot, finished_at=slot)  # fmt: skip
        run_rows.append(codec.run_to_row(run))
        attempt_rows.append({"run_id": run.id, "number": 1, "worker": "w", "started_at": slot,
                             "finished_at": slot, "outcome": "success", "output": "ok"})  # fmt: skip
        for state, previous in (("RUNNING", "PENDING"), ("SUCCESS", "RUNNING")):
            event_rows.append(
                {"run_id": run.id, "at": slot, "state": state, "previous": previous, "attempt": 1}
            )
    async with store.engine.begin() as connection:
        await connection.execute(insert(runs), run_rows)
        await connection.execute(insert(attempts), attempt_rows)
        await connection.execute(insert(run_events), event_rows)


async def count_old(store: SqlStore) -> int:
    statement = select(func.count()).select_from(runs).join(jobs, jobs.c.id == runs.c.job_id)
    async with store.engine.connect() as connection:
        return int((await connection.execute(statement.where(jobs.c.team == "old"))).scalar_one())


async def run_child(system: str, mode: str, args: argparse.Namespace) -> Figures:
    clock = SystemClock()
    async with backends(system, clock) as (store, queue, _url, _prefix):
        seeded = time.monotonic()
        if mode == "purge":
            await seed_old(store, args.old_jobs, args.old_runs)
        seed_s = time.monotonic() - seeded
        plan = make_plan(
            "steady", args.jobs, args.seconds if mode == "calm" else args.max_seconds, args.settle
        )
        await seed(store, plan)
        scheduler = Scheduler(store, queue, clock, "bench")
        stop = asyncio.Event()
        await scheduler.load(clock.now())
        await asyncio.sleep(max(0.0, plan.start - time.time()))
        task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop), name="scheduler")
        purged, purge_s = 0, float("nan")
        if mode == "purge":
            batch = EMBEDDED_BATCH if system == "embedded" else BATCH  # as the server chooses
            purger = Purger(store, clock, RetentionPolicy(keep_days=30), batch=batch)
            began = time.monotonic()
            purged = (await purger.purge(clock.now(), stop)).purged
            purge_s = time.monotonic() - began
            window_end = time.time()
        else:
            await asyncio.sleep(max(0.0, plan.end - time.time()))
            window_end = plan.end
        await asyncio.sleep(1.0)  # the last batch's mark_queued
        stop.set()
        await task
        lateness = [late for late, slot in await lateness_by_slot(store, plan) if slot < window_end]
        left = await count_old(store) if mode == "purge" else 0
    p50, p99, worst = percentiles_ms(lateness)
    return Figures(
        system, mode, args.jobs, len(lateness), round(window_end - plan.start, 1), p50, p99, worst,
        old_runs=args.old_runs if mode == "purge" else 0, purged=purged, purge_s=round(purge_s, 1),
        purged_per_s=round(purged / purge_s) if purged else float("nan"), left=left, seed_s=round(seed_s, 1),
    )  # fmt: skip


async def lateness_by_slot(store: SqlStore, plan: Plan) -> list[tuple[float, float]]:
    """(queued lateness, slot as Unix seconds) of the window's runs."""
    rows = await window_runs(store, plan, runs.c.queued_at)
    return [((queued - slot).total_seconds(), slot.timestamp()) for slot, queued in rows]


def spawn(system: str, mode: str, args: argparse.Namespace) -> Figures:
    command = [sys.executable, __file__, "--child", system, "--mode", mode, "--jobs", str(args.jobs),
               "--seconds", str(args.seconds), "--max-seconds", str(args.max_seconds), "--settle",
               str(args.settle), "--old-runs", str(args.old_runs),
               "--old-jobs", str(args.old_jobs)]  # fmt: skip
    with tempfile.TemporaryFile("w+") as errors:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=errors, text=True, check=False)
        if done.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{system}/{mode} failed:\n{done.stdout}\n{errors.read()[-20_000:]}")
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


def report(results: list[Figures]) -> str:
    head = ("system", "mode", "fires", "window s", "queued p50 ms", "p99", "max", "purged", "purge s",
            "runs/s", "old runs left")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        row = (r.system, r.mode, r.fires, r.window_s, r.p50_ms, r.p99_ms, r.max_ms, r.purged, r.purge_s,
               r.purged_per_s, r.left)  # fmt: skip
        lines.append(" | ".join(str(value) for value in row))
    by = {(r.system, r.mode): r for r in results}
    for system in SYSTEMS:
        calm, purge = by.get((system, "calm")), by.get((system, "purge"))
        if calm and purge and calm.p99_ms > 0:
            lines.append(f"{system}: p99 queued lateness purge / calm: {purge.p99_ms / calm.p99_ms:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=6_000, help="firing jobs (jobs/60 fires a second)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the calm run's window")
    parser.add_argument("--max-seconds", type=float, default=900.0, help="the purge run's longest window")
    parser.add_argument("--old-runs", type=int, default=1_000_000)
    parser.add_argument("--old-jobs", type=int, default=100)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--systems", default="embedded")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        tune_collector()
        logs.configure("INFO")  # as a node logs (to stderr, which the parent discards)
        print(json.dumps(asdict(asyncio.run(run_child(args.child, args.mode, args)))))
        return 0
    if args.smoke:
        args.jobs, args.seconds, args.max_seconds, args.settle = 60, 2.0, 60.0, 1.0
        args.old_runs, args.old_jobs = 1_200, 6  # more than two batches of either store
    print(f"bench_retention: {args.jobs} jobs, {args.old_runs} old runs, {machine()}", flush=True)
    results = []
    for system in [name for name in args.systems.split(",") if name]:
        for mode in MODES:
            results.append(spawn(system, mode, args))
            print(f"  {system}/{mode}: {asdict(results[-1])}", flush=True)
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
