"""Scale-out: does throughput add up with more scheduler and worker processes? (a benchmark)

A steady load (``--rate`` fires per second: ``rate x 60`` jobs each firing once a minute at second
``i mod 60``) on one PostgreSQL database and one Redis stream, fired by ``S`` scheduler processes
that split the 256 shards between them (process ``k`` owns shards ``k, k+S, ...``: the split the
coordinator makes, without etcd, which only decides it) and worked by ``W`` worker processes (the
real ``Worker``, ``bench_fire:noop`` Python target). Each shape in ``--shapes`` (``SxW``, e.g.
``1x1,3x3``) runs in turn on a fresh database over the same window.

Per shape it prints the runs queued in the window and per second, queued lateness p50/p99, the
runs started and per second by the end of a drain, start lateness, and each role's CPU seconds per
1,000 runs with the total CPU used against the CPU the machine has (cores x seconds): on this
2-core machine several processes only add up while the CPU they need fits in it (see the model in
docs/performance.md).

    .venv/bin/python benchmarks/bench_scaleout.py --rate 2000 --seconds 60 --shapes 1x1,3x3
    .venv/bin/python benchmarks/bench_scaleout.py --smoke        # tiny (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import bench_fire
from benchlib import REDIS_URL, admin, cpu_now, database_url, drop_keys, machine, save_results
from cronwheel.clock import SystemClock
from cronwheel.model import SHARDS
from cronwheel.node.server import tune_collector
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.sql import open_store
from cronwheel.telemetry import logs

DRAIN_S = 30.0  # after the window, how long the workers get to start what was fired
SETTLE_S = 12.0  # before the window (plus the time the jobs take to write): processes start


@dataclass
class Shape:
    schedulers: int
    workers: int
    rate: int
    window_s: float
    queued: int
    queued_per_s: float
    queued_p50_ms: float
    queued_p99_ms: float
    started: int
    started_per_s: float
    start_p50_ms: float
    start_p99_ms: float
    scheduler_cpu_s_per_1000: float
    worker_cpu_s_per_1000: float
    cpu_used_of_machine: float  # CPU seconds of every cronwheel process / (cores x window)


async def scheduler_main(url: str, prefix: str, index: int, of: int, until: float) -> None:
    """A scheduler process owning shards ``index, index + of, ...`` until ``until`` (Unix time)."""
    tune_collector()
    logs.configure("INFO")
    clock = SystemClock()
    store = await open_store(url, clock=clock)
    queue = RedisStreamQueue(REDIS_URL, clock, prefix=prefix)
    stop = asyncio.Event()
    scheduler = Scheduler(store, queue, clock, f"sched-{index}", shards=range(index, SHARDS, of))
    task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop), name="scheduler")
    await asyncio.sleep(max(0.0, until - time.time()))
    stop.set()
    await task
    await queue.close()
    await store.close()
    print(json.dumps({"cpu_s": cpu_now()}), flush=True)


def started(command: list[str]) -> subprocess.Popen[str]:
    """A child process; its log (INFO, as a node logs) is discarded, as bench_fire's are."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def cpu_of(processes: list[subprocess.Popen[str]], *, terminate: bool) -> list[float]:
    """Each process' CPU seconds, as it prints them on exit: schedulers end by themselves at
    ``--until``; workers are sent SIGTERM (``terminate``) and drain."""
    if terminate:
        for process in processes:
            process.send_signal(signal.SIGTERM)
    outputs = [process.communicate(timeout=180)[0] for process in processes]
    if not all(outputs):
        codes = [process.returncode for process in processes]
        raise SystemExit(f"bench_scaleout: a child process printed nothing (exit codes {codes})")
    return [float(json.loads(output.splitlines()[-1])["cpu_s"]) for output in outputs]


async def measure(schedulers: int, workers: int, rate: int, window_s: float) -> Shape:
    name = f"cronwheel_scaleout_{uuid.uuid4().hex[:10]}"
    prefix = f"bench-{name}"
    await admin(f'CREATE DATABASE "{name}"')
    url = database_url(name)
    try:
        store = await open_store(url)
        # the window opens once the jobs are written and every process has started (imports)
        plan = bench_fire.make_plan("steady", rate * 60, window_s, SETTLE_S + rate * 60 / 5_000)
        await bench_fire.seed(store, plan)
        until = plan.end + 1.0
        work = [sys.executable, bench_fire.__file__, "--child-worker", url, "--prefix", prefix]
        worker_processes = [started([*work, "--node", f"worker-{n}"]) for n in range(workers)]
        for process in worker_processes:  # "ready": its SIGTERM handler is set (a slow start is no crash)
            assert process.stdout is not None
            await asyncio.to_thread(process.stdout.readline)
        here = [sys.executable, __file__, "--database", url, "--prefix", prefix, "--until", str(until)]
        scheduler_processes = [
            started([*here, "--child-scheduler", str(k), "--of", str(schedulers)]) for k in range(schedulers)
        ]
        scheduler_cpu = cpu_of(scheduler_processes, terminate=False)
        queued = await bench_fire.queued_lateness(store, plan)
        await bench_fire.until_started(store, plan, len(queued), DRAIN_S)
        worker_cpu = cpu_of(worker_processes, terminate=True)
        starts = await bench_fire.start_lateness(store, plan)
        await store.close()
    finally:
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')
        await drop_keys(prefix)
    queued_p50, queued_p99, _ = bench_fire.percentiles_ms(queued)
    start_p50, start_p99, _ = bench_fire.percentiles_ms(starts)
    cores = os.cpu_count() or 1
    return Shape(
        schedulers, workers, rate, window_s, len(queued), round(len(queued) / window_s, 1), queued_p50,
        queued_p99, len(starts), round(len(starts) / window_s, 1), start_p50, start_p99,
        round(sum(scheduler_cpu) / max(len(queued), 1) * 1000, 4),
        round(sum(worker_cpu) / max(len(starts), 1) * 1000, 4),
        round((sum(scheduler_cpu) + sum(worker_cpu)) / (cores * (window_s + DRAIN_S)), 2),
    )  # fmt: skip


def report(shapes: list[Shape]) -> str:
    head = ("schedulers x workers", "offered/s", "queued/s", "queued p50 ms", "p99", "started/s",
            "start p50 ms", "p99", "sched CPU s/1000", "worker CPU s/1000",
            "CPU used of machine")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for s in shapes:
        row = (f"{s.schedulers}x{s.workers}", s.rate, s.queued_per_s, s.queued_p50_ms, s.queued_p99_ms,
               s.started_per_s, s.start_p50_ms, s.start_p99_ms, s.scheduler_cpu_s_per_1000,
               s.worker_cpu_s_per_1000, s.cpu_used_of_machine)  # fmt: skip
        lines.append(" | ".join(str(value) for value in row))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=int, default=2000, help="fires per second offered")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window")
    parser.add_argument("--shapes", default="1x1,3x3", help="SCHEDULERSxWORKERS, comma-separated")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--child-scheduler", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--of", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_scheduler is not None:
        asyncio.run(scheduler_main(args.database, args.prefix, args.child_scheduler, args.of, args.until))
        return
    if args.smoke:
        args.rate, args.seconds, args.shapes = 5, 2.0, "2x2"  # several schedulers and workers: every path
    facts = machine(started=datetime.now(UTC).isoformat(timespec="seconds"))
    print(
        f"bench_scaleout: {args.rate} fires/s for {args.seconds} s, shapes {args.shapes}, {facts}", flush=True
    )
    shapes = []
    for shape in args.shapes.split(","):
        schedulers, workers = (int(part) for part in shape.split("x"))
        shapes.append(asyncio.run(measure(schedulers, workers, args.rate, args.seconds)))
        print(f"  {shape}: {asdict(shapes[-1])}", flush=True)
    print(report(shapes))
    save_results(args.json, shapes, facts)


if __name__ == "__main__":
    main()
