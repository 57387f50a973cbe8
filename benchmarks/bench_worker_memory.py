"""A cluster worker's memory as it works through many runs (a benchmark, not a test).

Method. One real :class:`~cronwheel.worker.loop.Worker` in a child process, on the cluster
backends of ``bench_fire`` (a fresh PostgreSQL database, a private Redis Streams key prefix, both
removed afterwards), with the collector tuned as every node tunes it (``server.tune_collector``).
The parent feeds it as a scheduler would, at the rate it takes them: new jobs with one PENDING
run each, recorded by ``store.fire``, their triggers published and the runs marked queued, a chunk
whenever the queue holds fewer than ``--backlog`` triggers. Each job is a new one, as in the steady
600k workload (every run of a window belongs to a different job). The target is either the no-op
loopback HTTP sink of ``bench_webhooks`` (``--target http``, in its own process) or ``bench_fire``'s
no-op Python function (``--target python``, what ``bench_fire``'s cluster workers run).

At each checkpoint (runs the worker finished, by its own ``cronwheel_attempts_total``) the worker
samples itself: resident memory (``VmRSS``) and its peak (``VmHWM``), the objects the collector
tracks by type (``gc.get_objects()``: garbage not yet collected counts too), the collector's
generation counts, the SQLAlchemy compiled-statement cache and the asyncpg prepared-statement
caches of its pooled connections. ``--tracemalloc`` also records allocations (slow: read its
figures for their shape) and prints the tracebacks that grew most since the first checkpoint.
After the last checkpoint the worker runs one full collection and samples again: what it freed
was garbage the tuned collector had not reached yet, what stays is held.

    .venv/bin/python benchmarks/bench_worker_memory.py --runs 100000           # ~2 minutes
    .venv/bin/python benchmarks/bench_worker_memory.py --runs 20000 --tracemalloc
    .venv/bin/python benchmarks/bench_worker_memory.py --smoke                 # seconds (CI)

Prints a table per checkpoint and the types that grew; ``--json PATH`` saves every figure.
Always exits 0: the target (RSS at the last checkpoint within 1.5x of that at 10k runs) is
printed for information.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import time
import tracemalloc
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench_webhooks import LOOPBACK, Sink, record_pending
from benchlib import REDIS_URL, TAG, admin, database_url, drop_keys, machine, save_results, tell
from cronwheel.clock import SystemClock
from cronwheel.model import HttpTarget, Job, PythonTarget, Target, new_id
from cronwheel.node.server import tune_collector
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.telemetry import logs, metrics
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker

CHECKPOINTS = (10_000, 20_000, 50_000, 100_000, 200_000, 400_000, 600_000)
SEED_CHUNK = 1000
TARGET_RATIO = 1.5
TOP_TYPES = 12
TOP_TRACES = 10


@dataclass
class Sample:
    runs: int
    seconds: float
    rss_mb: float
    peak_rss_mb: float
    gc_objects: int
    gc_counts: tuple[int, int, int]
    compiled_cache: int  # SQLAlchemy's compiled statements (the engine's LRU cache)
    asyncpg_statements: int  # prepared statements cached, summed over the pooled connections
    traced_mb: float | None = None  # tracemalloc's current total, with --tracemalloc
    types: dict[str, int] = field(default_factory=dict)  # tracked objects by type (the top ones)
    collected: bool = False  # taken after a full gc.collect()


# -- the worker process ----------------------------------------------------------------------------


def status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def finished_runs() -> int:
    value = metrics.REGISTRY.get_sample_value("cronwheel_attempts_total", {"outcome": "success"})
    return int(value or 0)


def statement_caches(store: SqlStore) -> tuple[int, int]:
    """(SQLAlchemy compiled cache entries, asyncpg prepared statements over the idle pool)."""
    engine = store.engine.sync_engine
    compiled = len(engine._compiled_cache or {})
    prepared = 0
    idle = engine.pool._pool  # type: ignore[attr-defined]  # the idle connections
    for record in list(getattr(idle, "queue", None) or idle._queue._queue):
        driver = getattr(record.dbapi_connection, "driver_connection", None)
        cache = getattr(driver, "_stmt_cache", None)
        prepared += len(cache) if cache is not None else 0
    return compiled, prepared


def sample(store: SqlStore, runs: int, started: float, collected: bool = False) -> Sample:
    types = Counter(type(thing).__name__ for thing in gc.get_objects())
    compiled, prepared = statement_caches(store)
    traced = round(tracemalloc.get_traced_memory()[0] / 2**20, 1) if tracemalloc.is_tracing() else None
    return Sample(
        runs=runs,
        seconds=round(time.monotonic() - started, 1),
        rss_mb=status_mb("VmRSS"),
        peak_rss_mb=status_mb("VmHWM"),
        gc_objects=sum(types.values()),
        gc_counts=gc.get_count(),
        compiled_cache=compiled,
        asyncpg_statements=prepared,
        traced_mb=traced,
        types=dict(types.most_common(40)),
        collected=collected,
    )


def trace_growth(first: tracemalloc.Snapshot, last: tracemalloc.Snapshot) -> list[str]:
    stats = last.compare_to(first, "traceback")[:TOP_TRACES]
    lines = []
    for stat in stats:
        frames = [f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}" for frame in stat.traceback]
        lines.append(
            f"+{stat.size_diff / 2**20:.1f} MB +{stat.count_diff} blocks  " + " < ".join(frames[-6:])
        )
    return lines


def garbage_types() -> dict[str, int]:
    """Collect everything, and count what the collection found unreachable (cyclic garbage the
    tuned collector had not reached yet), by type."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    gc.collect()
    found = Counter(type(thing).__name__ for thing in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.collect()
    return dict(found.most_common(TOP_TYPES))


async def sampler(store: SqlStore, checkpoints: list[int], stop: asyncio.Event) -> None:
    started, first = time.monotonic(), None
    for checkpoint in checkpoints:
        while finished_runs() < checkpoint:
            await asyncio.sleep(0.05)
        taken = sample(store, finished_runs(), started)
        tell("sample", taken.__dict__)
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot()
            first = first or snapshot
            if snapshot is not first:
                tell("traces", trace_growth(first, snapshot))
    await asyncio.sleep(0.5)  # the last finishes recorded
    tell("garbage", garbage_types())
    tell("sample", sample(store, finished_runs(), started, collected=True).__dict__)
    stop.set()


async def worker_main(args: argparse.Namespace) -> None:
    clock = SystemClock()
    store = await open_store(args.db, clock=clock, migrate=False)
    queue = RedisStreamQueue(REDIS_URL, clock, prefix=args.prefix)
    executors = Executors(WorkerSettings(allowed_networks=LOOPBACK.allowed_networks, python_allow=(NOOP,)))
    if not args.untuned:
        tune_collector()  # as every node does (``cronwheel server``, ``cronwheel worker``)
    logs.configure("INFO")  # as bench_fire's workers: every line formatted, to stderr (discarded)
    if args.tracemalloc:
        tracemalloc.start(8)
    stop = asyncio.Event()
    worker = Worker(store, queue, executors, clock, "memory-worker", concurrency=args.concurrency)
    checkpoints = [int(point) for point in args.checkpoints.split(",")]
    tell("ready")
    try:
        await asyncio.gather(worker.run(stop, drain_s=5.0), sampler(store, checkpoints, stop))
    finally:
        await executors.close()
        await queue.close()
        await store.close()
    tell("result", None)


NOOP = "bench_worker_memory:noop"


async def noop(payload: object, ctx: object) -> None:
    """The Python target: a function that does nothing (``bench_worker_memory:noop``)."""


# -- the parent ------------------------------------------------------------------------------------


async def feed(store: SqlStore, queue: RedisStreamQueue, target: Target) -> None:
    """One chunk of new jobs, one PENDING run each, as the scheduler records and queues them."""
    now = datetime.now(UTC)
    slot = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    made = [Job(new_id(), "bench", f"mem-{uuid.uuid4().hex[:12]}", "* * * * *", target, created_at=now,
                updated_at=now, next_run_at=slot) for _ in range(SEED_CHUNK)]  # fmt: skip
    await record_pending(store, queue, made, slot, now)


class WorkerChild:
    """The worker process; its tagged lines are read in a thread, so the parent keeps feeding."""

    def __init__(self, *args: str, quiet: bool = True) -> None:
        command = [sys.executable, __file__, "--child", *args]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if quiet else None, text=True
        )
        self.samples: list[Sample] = []
        self.traces: list[list[str]] = []
        self.garbage: dict[str, int] = {}
        self.done = False

    def expect_ready(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(TAG + "ready"):
                return
        raise SystemExit("the worker process ended before it was ready")

    def read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if not line.startswith(TAG):
                continue
            word, _, data = line[len(TAG) :].partition(" ")
            if word == "sample":
                found = json.loads(data)
                found["gc_counts"] = tuple(found["gc_counts"])
                self.samples.append(Sample(**found))
                print(f"  {row(self.samples[-1])}", flush=True)
            elif word == "garbage":
                self.garbage = json.loads(data)
            elif word == "traces":
                self.traces.append(json.loads(data))
            elif word == "result":
                break
        self.done = True


@contextlib.asynccontextmanager
async def cluster() -> AsyncIterator[tuple[SqlStore, RedisStreamQueue, str, str]]:
    name = f"cronwheel_bench_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    prefix = f"bench-{name}"
    store = await open_store(database_url(name), clock=SystemClock())
    queue = RedisStreamQueue(REDIS_URL, SystemClock(), prefix=prefix)
    try:
        yield store, queue, database_url(name), prefix
    finally:
        await queue.close()
        await store.close()
        await drop_keys(prefix)
        await admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def parent(args: argparse.Namespace, checkpoints: list[int]) -> WorkerChild:
    sink = Sink() if args.target == "http" else None
    target: Target = HttpTarget(sink.hook) if sink is not None else PythonTarget(NOOP)
    try:
        async with cluster() as (store, queue, url, prefix):
            points = ",".join(str(point) for point in checkpoints)
            child = WorkerChild("--db", url, "--prefix", prefix, "--checkpoints", points,
                                "--concurrency", str(args.concurrency),
                                *(["--tracemalloc"] if args.tracemalloc else []),
                                *(["--untuned"] if args.untuned else []),
                                quiet=not args.worker_logs)  # fmt: skip
            child.expect_ready()
            reader = asyncio.get_running_loop().run_in_executor(None, child.read)
            fed = 0
            while fed < checkpoints[-1] and not child.done:
                if await queue.depth("default") < args.backlog:
                    await feed(store, queue, target)
                    fed += SEED_CHUNK
                else:
                    await asyncio.sleep(0.05)
            await reader
            child.process.wait(60)
    finally:
        if sink is not None:
            sink.stop()
    return child


def row(s: Sample) -> str:
    counts = "/".join(str(n) for n in s.gc_counts)
    return (f"{s.runs:>8} runs {s.seconds:>7}s  RSS {s.rss_mb:>7} MB  peak {s.peak_rss_mb:>7} MB  "
            f"gc objects {s.gc_objects:>9} ({counts})  compiled {s.compiled_cache:>4}  "
            f"asyncpg stmts {s.asyncpg_statements:>5}  traced {s.traced_mb}"
            + ("  [after gc.collect()]" if s.collected else ""))  # fmt: skip


def report(child: WorkerChild, target: str) -> str:
    samples = child.samples
    lines = [f"worker memory ({target} target):", *[row(s) for s in samples]]
    measured = [s for s in samples if not s.collected]
    if len(measured) >= 2:
        first, last = measured[0], measured[-1]
        grew = Counter(last.types)
        grew.subtract(first.types)
        lines.append(f"tracked objects that grew from {first.runs} to {last.runs} runs:")
        lines += [f"  {name:<32} +{n}" for name, n in grew.most_common(TOP_TYPES) if n > 0]
        ratio = last.rss_mb / first.rss_mb
        verdict = "PASS" if ratio <= TARGET_RATIO else "MISS"
        lines.append(f"RSS at {last.runs} runs / at {first.runs} runs: {ratio:.2f} "
                     f"(target {TARGET_RATIO}: {verdict}, for information)")  # fmt: skip
    lines.append(
        f"cyclic garbage found by a full collection at the end: {sum(child.garbage.values())} "
        f"objects, by type: {json.dumps(child.garbage)}"
    )
    if child.traces:
        lines.append("tracemalloc, grown most since the first checkpoint (at the last):")
        lines += [f"  {line}" for line in child.traces[-1]]
    return "\n".join(lines)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100_000, help="the last checkpoint")
    parser.add_argument(
        "--checkpoints", default=None, help="runs at which to sample (default: 10k, 20k, ...)"
    )
    parser.add_argument("--target", choices=("http", "python"), default="http")
    parser.add_argument("--concurrency", type=int, default=64, help="the worker's (the server default)")
    parser.add_argument("--backlog", type=int, default=5000, help="triggers kept on the queue")
    parser.add_argument("--tracemalloc", action="store_true", help="record allocations (slow)")
    parser.add_argument(
        "--worker-logs", action="store_true", help="the worker's stderr: shown, not discarded"
    )
    parser.add_argument(
        "--untuned", action="store_true", help="the worker keeps CPython's collector defaults"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--db", "--prefix"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.child:
        asyncio.run(worker_main(args))
        return 0
    if args.smoke:
        args.checkpoints, args.backlog = "1000,2000", 1000
    checkpoints = [int(p) for p in args.checkpoints.split(",")] if args.checkpoints else [
        point for point in CHECKPOINTS if point <= args.runs]  # fmt: skip
    print(f"bench_worker_memory: {machine()}", flush=True)
    child = asyncio.run(parent(args, checkpoints))
    print(report(child, args.target))
    save_results(
        args.json, child.samples, machine(target=args.target, traces=child.traces, garbage=child.garbage)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
