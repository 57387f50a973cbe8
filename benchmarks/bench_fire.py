"""The fire path at scale, beside APScheduler 3.11 (a benchmark, not a test).

Workloads:

* ``steady``: N jobs each firing once a minute, spread evenly over the seconds (``S * * * * *``
  with S = i mod 60), so N/60 fires per second; measured over ``--seconds``.
* ``herd``: N jobs all due in the same second.

Systems, each in a fresh child process, one after the other in one run:

* ``embedded``: cronwheel's scheduler over SQLite and the in-process queue (what
  ``cronwheel server`` runs with zero configuration);
* ``cluster``: cronwheel's scheduler over PostgreSQL and Redis Streams (one scheduler owning every
  shard: the fire path of a cluster, without etcd, which is not on it);
* ``cluster-postgresql``: the same over PostgreSQL alone, triggers queued in its ``triggers``
  table (the fire path of a PostgreSQL-only cluster; its coordinator is not on it either);
* ``apscheduler``: APScheduler 3.11, AsyncIOScheduler, in-memory job store, a no-op coroutine.
* ``apscheduler4`` (herd only, when named in ``--systems``): APScheduler 4 on PostgreSQL, the
  durable peer that records its runs (``peer_apscheduler4.py`` says how it is set up; it runs
  from ``.venv-peer-apscheduler4``, created on first use).

For cronwheel, *queued lateness* is ``queued_at - slot`` as the store recorded it (the trigger is
on the queue) and *start lateness* is ``started_at - slot`` (a worker claimed the run and began its
first attempt; the target is ``bench_fire:noop``, a Python coroutine that does nothing). Embedded
runs one worker task in the scheduler's process, as ``cronwheel server`` does; cluster runs
``--workers`` worker processes (default 1) on the same database and stream; ``--workers 0``
measures the scheduler alone. After the window, workers get up to 60 s to start what was fired;
runs not started by then are left out of ``started``. For APScheduler, queued lateness is the moment
the job is submitted to its executor (``EVENT_JOB_SUBMITTED``) minus its scheduled run time (it has
no separate start). CPU seconds and peak memory are each process's own (PostgreSQL's and Redis' CPU
is not included; embedded includes its worker task); for cluster, the CPU of the benchmark
database's PostgreSQL backends and of the whole Redis server (others' use of it included) over the
same span is printed beside it, per 1,000 fires. Jobs are written to the store in bulk before
the clock starts; that setup is not measured, but loading them into the scheduler is (``load_s``:
start to first tick).

    .venv/bin/python benchmarks/bench_fire.py --workload steady --jobs 100000 --seconds 60
    .venv/bin/python benchmarks/bench_fire.py --workload herd --jobs 100000
    .venv/bin/python benchmarks/bench_fire.py --smoke          # tiny, a few seconds (CI)
    .venv/bin/python benchmarks/bench_fire.py --workload herd --jobs 10000 --workers 0 \
        --systems embedded --tracing encode                     # the cost of tracing (docs/performance.md)
    .venv/bin/python benchmarks/bench_fire.py --workload steady --jobs 10000 --seconds 60 \
        --systems cluster --arm-ahead 2 --release-ahead 0      # calm start lateness, released at the slot

``--tracing`` (cronwheel only): ``off`` (the default, as ``cronwheel server`` runs); ``encode``:
the OpenTelemetry SDK as ``--tracing otlp`` sets it up (a batch span processor), whose exporter
encodes every batch as OTLP protobuf and drops it (all of an export's CPU but the network send);
``otlp``: the real exporter, to ``OTEL_EXPORTER_OTLP_ENDPOINT``. The scheduler and the embedded
worker are traced; cluster worker processes are not.

Prints a table and the ratios APScheduler / cronwheel; ``--json PATH`` saves every figure.
Always exits 0 when the runs complete: targets are printed for information.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import resource
import signal
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

from apscheduler.events import EVENT_JOB_SUBMITTED, JobSubmissionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger
from sqlalchemy import func, insert, select

from benchlib import (
    DB_PREFIX,
    REDIS_URL,
    admin,
    cpu_now,
    database_cpu_s,
    database_url,
    drop_keys,
    machine,
    peak_rss_mb,
    peer_python,
    redis_cpu_s,
    save_results,
)
from cronwheel.clock import SystemClock
from cronwheel.model import Job, PythonTarget, new_id
from cronwheel.node.server import tune_collector
from cronwheel.queue import Queue
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.postgres import PostgresQueue
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.scheduler import ARM_AHEAD_S
from cronwheel.scheduler.loop import RELEASE_AHEAD_S, Scheduler
from cronwheel.scheduler.planner import first_slot
from cronwheel.store import codec
from cronwheel.store.schema import jobs, runs
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.telemetry import logs
from cronwheel.telemetry.tracing import OFF, Tracer
from cronwheel.telemetry.tracing import started as tracing_started
from cronwheel.worker.executors import Executors
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.loop import CONCURRENCY, Worker

SYSTEMS = ("embedded", "cluster", "cluster-postgresql", "apscheduler")
CLUSTERS = ("cluster", "cluster-postgresql")  # worker processes; PostgreSQL's CPU measured
PEERS = ("apscheduler4",)  # run only when named in --systems (a side venv, herd only)
TRACING = ("off", "encode", "otlp")
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
    started: int = 0  # runs a worker started by the end (0: run without workers)
    start_p50_ms: float = float("nan")
    start_p99_ms: float = float("nan")
    start_max_ms: float = float("nan")
    workers: int = 0
    worker_cpu_s_per_1000: float = float("nan")  # all worker processes' CPU per 1,000 starts
    worker_peak_rss_mb: float = float("nan")  # the largest worker process
    tracing: str = "off"  # --tracing
    spans: int = 0  # spans the encoding exporter was handed (--tracing encode)
    db_cpu_s_per_1000: float = float("nan")  # cluster: the bench database's backends, per 1,000 fires
    redis_cpu_s_per_1000: float = float("nan")  # cluster: the whole Redis server's, per 1,000 fires


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


def percentiles_ms(values: Sequence[float]) -> tuple[float, float, float]:
    """p50, p99 and max of ``values`` (seconds) in milliseconds."""
    ordered = sorted(values) or [float("nan")]
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return round(statistics.median(ordered) * 1000, 2), round(p99 * 1000, 2), round(ordered[-1] * 1000, 2)


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


# -- cronwheel -------------------------------------------------------------------------------------


async def run_cronwheel(
    system: str,
    plan: Plan,
    workers: int,
    tracing: str = "off",
    arm_ahead_s: float = 0.0,
    release_ahead_s: float = RELEASE_AHEAD_S,
    concurrency: int = CONCURRENCY,
) -> Figures:
    clock = SystemClock()
    encoded = EncodeOnly()
    async with (
        backends(system, clock) as (store, queue, url, prefix),
        bench_tracer(tracing, encoded) as tracer,
    ):
        await seed(store, plan)
        scheduler = Scheduler(store, queue, clock, "bench", tracer=tracer, arm_ahead_s=arm_ahead_s)
        scheduler.release_ahead_s = release_ahead_s
        stop = asyncio.Event()
        backend = (store, queue, url, prefix)
        async with worker_pool(system, workers, backend, clock, tracer, concurrency) as usage:
            cpu_before = cpu_now()
            services_before = await services_cpu(url, bool(prefix))
            started = time.monotonic()
            await scheduler.load(clock.now())
            load_s = time.monotonic() - started
            overran = time.time() > plan.start
            task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop), name="scheduler")
            await asyncio.sleep(max(0.0, plan.end - time.time()) + 1.0)  # the last batch's mark_queued
            stop.set()
            await task
            cpu_s = cpu_now() - cpu_before
            db_cpu_s, redis_s = services_used(services_before, await services_cpu(url, bool(prefix)))
            lateness = await queued_lateness(store, plan)
            if workers:
                await until_started(store, plan, len(lateness), DRAIN_S)
        starts = await start_lateness(store, plan) if workers else []
    figures = summary(system, plan, lateness, load_s, cpu_s, overran)
    start_p50, start_p99, start_max = percentiles_ms(starts)
    worker_cpu = usage.get("cpu_s", float("nan")) / max(len(starts), 1) * 1000
    return dataclasses.replace(
        figures, started=len(starts), start_p50_ms=start_p50, start_p99_ms=start_p99, start_max_ms=start_max,
        workers=workers, worker_cpu_s_per_1000=round(worker_cpu, 4),
        worker_peak_rss_mb=usage.get("peak_rss_mb", float("nan")), tracing=tracing, spans=encoded.spans,
        db_cpu_s_per_1000=round(db_cpu_s / max(figures.fires, 1) * 1000, 4),
        redis_cpu_s_per_1000=round(redis_s / max(figures.fires, 1) * 1000, 4),
    )  # fmt: skip


Services = tuple[dict[int, float], float]


async def services_cpu(url: str, redis: bool) -> Services | None:
    """The CPU used so far by the bench database's backends and by Redis (cluster, NaN without
    Redis; None: embedded)."""
    if not url:
        return None
    return await database_cpu_s(url.rsplit("/", 1)[1]), await redis_cpu_s() if redis else float("nan")


def services_used(before: Services | None, after: Services | None) -> tuple[float, float]:
    """(PostgreSQL, Redis) CPU seconds between two :func:`services_cpu` (NaN: embedded)."""
    if before is None or after is None:
        return float("nan"), float("nan")
    backends = sum(used - before[0].get(pid, 0.0) for pid, used in after[0].items())
    return backends, after[1] - before[1]


class EncodeOnly:
    """A span exporter that encodes each batch as an OTLP/HTTP export would, then drops it."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        encode_spans(spans).SerializeToString()
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


@contextlib.asynccontextmanager
async def bench_tracer(mode: str, encoded: EncodeOnly) -> AsyncIterator[Tracer]:
    """The scheduler's (and embedded worker's) tracer for ``--tracing`` (see the docstring)."""
    if mode == "off":
        yield OFF
        return
    if mode == "otlp":
        async with tracing_started("otlp", "bench", ("scheduler", "worker")) as tracer:
            yield tracer
        return
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from cronwheel.telemetry.tracing.otel import OtelTracer, provider_for

    provider = provider_for("bench", ("scheduler", "worker"))
    provider.add_span_processor(BatchSpanProcessor(encoded))  # type: ignore[arg-type]
    traced = OtelTracer(provider)
    try:
        yield traced
    finally:
        await traced.close()


# -- workers -----------------------------------------------------------------------------------------

DRAIN_S = 60.0  # after the window, how long workers get to start what was fired


async def noop(payload: object, ctx: object) -> None:
    """The benchmark's target: a Python function that does nothing (``bench_fire:noop``)."""


def bench_executors() -> Executors:
    return Executors(WorkerSettings(python_allow=("bench_fire:noop",)))


@contextlib.asynccontextmanager
async def worker_pool(
    system: str,
    count: int,
    backend: tuple[SqlStore, Queue, str, str],
    clock: SystemClock,
    tracer: Tracer = OFF,
    concurrency: int = CONCURRENCY,
) -> AsyncIterator[dict[str, float]]:
    """``count`` workers for the run: embedded, one worker task in this process (as ``cronwheel
    server`` runs it; its CPU is this process'); cluster, ``count`` worker processes on the same
    PostgreSQL database and Redis stream. Yields the usage figures, filled in at exit."""
    usage: dict[str, float] = {}
    if count == 0:
        yield usage
        return
    store, queue, url, prefix = backend
    if system == "embedded":
        executors, stop = bench_executors(), asyncio.Event()
        worker = Worker(
            store, queue, executors, clock, "bench-worker", tracer=tracer, concurrency=concurrency
        )
        task = asyncio.create_task(worker.run(stop, drain_s=1.0), name="worker")
        try:
            yield usage
        finally:
            stop.set()
            await task
            await executors.close()
        return
    command = [
        sys.executable,
        __file__,
        "--child-worker",
        url,
        f"--prefix={prefix}",
        "--concurrency",
        str(concurrency),
    ]
    nodes = [f"bench-worker-{n}" for n in range(count)]
    processes = [
        subprocess.Popen([*command, "--node", node], stdout=subprocess.PIPE, text=True) for node in nodes
    ]
    for process in processes:  # started (imports, connections) before the window: not measured
        assert process.stdout is not None
        await asyncio.to_thread(process.stdout.readline)
    try:
        yield usage
    finally:
        reports = [stop_worker(process) for process in processes]
        usage["cpu_s"] = sum(report["cpu_s"] for report in reports)
        usage["peak_rss_mb"] = max(report["peak_rss_mb"] for report in reports)


def stop_worker(process: subprocess.Popen[str]) -> dict[str, float]:
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=60)
    return dict(json.loads(out.strip().splitlines()[-1]))


async def worker_main(url: str, prefix: str, node: str, concurrency: int) -> None:
    """A cluster worker process: works the bench queue until SIGTERM, then prints its usage."""
    clock = SystemClock()
    store = await open_store(url, clock=clock)
    queue = cluster_queue(url, prefix, clock)
    tune_collector()
    logs.configure("INFO")  # to stderr, which the scheduler child discards (DEVNULL)
    executors, stop = bench_executors(), asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await queue.ping()
    print("ready", flush=True)  # the parent waits for this line
    try:
        await Worker(store, queue, executors, clock, node, concurrency=concurrency).run(stop, drain_s=1.0)
    finally:
        await executors.close()
        await queue.close()
        await store.close()
    print(json.dumps(worker_usage()), flush=True)


def worker_usage() -> dict[str, float]:
    """A worker process' CPU seconds and peak RSS. The peak is ``VmHWM``, not ``ru_maxrss``: on
    Linux a process' ``ru_maxrss`` starts at its parent's RSS at the fork (it survives exec), so
    it said what the scheduler process held once it was seeded, not what the worker used."""
    return {"cpu_s": cpu_now(), "peak_rss_mb": peak_rss_mb()}


async def until_started(store: SqlStore, plan: Plan, fired: int, timeout_s: float) -> None:
    """Wait (up to ``timeout_s``) until the workers have started every run of the window."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and await count_started(store, plan) < fired:
        await asyncio.sleep(0.5)


async def count_started(store: SqlStore, plan: Plan) -> int:
    """How many of the window's runs have started: a count, so that polling while the workers
    run costs the database one aggregate, not a transfer of every row."""
    statement = select(func.count()).where(*in_window(plan), runs.c.started_at.is_not(None))
    async with store.engine.connect() as connection:
        return int((await connection.execute(statement)).scalar_one())


async def start_lateness(store: SqlStore, plan: Plan) -> list[float]:
    return [
        (started - slot).total_seconds()
        for slot, started in await window_runs(store, plan, runs.c.started_at)
    ]


def cluster_queue(url: str, prefix: str, clock: SystemClock) -> RedisStreamQueue | PostgresQueue:
    """A cluster's queue: Redis Streams under ``prefix``, or (no prefix) the database's table."""
    if prefix:
        return RedisStreamQueue(REDIS_URL, clock, prefix=prefix)
    return PostgresQueue(url, clock, visibility_timeout_s=60.0)


@contextlib.asynccontextmanager
async def backends(system: str, clock: SystemClock) -> AsyncIterator[tuple[SqlStore, Queue, str, str]]:
    """The store and queue of ``system`` on fresh, private storage, removed afterwards."""
    if system == "embedded":
        with tempfile.TemporaryDirectory(prefix="cronwheel-bench-") as folder:
            store = await open_store(f"sqlite:///{folder}/bench.db", clock=clock)
            memory = MemoryQueue(clock, visibility_timeout_s=60.0)
            try:
                yield store, memory, "", ""
            finally:
                await store.close()
        return
    name = f"{DB_PREFIX}_bench_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    url = database_url(name)
    store = await open_store(url, clock=clock)
    prefix = f"bench-{name}" if system == "cluster" else ""  # no prefix: the database's queue
    queue = cluster_queue(url, prefix, clock)
    try:
        yield store, queue, url, prefix
    finally:
        await queue.close()
        await store.close()
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')
        await drop_keys(f"bench-{name}")


async def seed(store: SqlStore, plan: Plan) -> None:
    """Write the jobs straight into the jobs table, in chunks (setup: not measured)."""
    now = datetime.now(UTC)
    after = datetime.fromtimestamp(plan.start, UTC) - timedelta(microseconds=1)
    rows = []
    for index in range(plan.jobs):
        job = Job(new_id(), "bench", f"job-{index}", plan.expression(index), PythonTarget("bench_fire:noop"),
                  created_at=now, updated_at=now)  # fmt: skip
        rows.append(codec.job_to_row(dataclasses.replace(job, next_run_at=first_slot(job, after))))
    for start in range(0, len(rows), SEED_CHUNK):
        async with store.engine.begin() as connection:
            await connection.execute(insert(jobs), rows[start : start + SEED_CHUNK])


async def queued_lateness(store: SqlStore, plan: Plan) -> list[float]:
    return [
        (queued - slot).total_seconds() for slot, queued in await window_runs(store, plan, runs.c.queued_at)
    ]


def in_window(plan: Plan) -> tuple[Any, Any]:
    """The conditions "the run's slot lies in the measured window"."""
    return runs.c.slot >= datetime.fromtimestamp(plan.start, UTC), runs.c.slot < datetime.fromtimestamp(
        plan.end, UTC
    )


async def window_runs(store: SqlStore, plan: Plan, column: Any) -> list[tuple[datetime, datetime]]:
    """(slot, ``column``) of the window's runs where ``column`` is set."""
    statement = select(runs.c.slot, column).where(*in_window(plan), column.is_not(None))
    async with store.engine.connect() as connection:
        return [(slot, moment) for slot, moment in (await connection.execute(statement)).all()]


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


def child(system: str, plan: Plan, workers: int, args: argparse.Namespace) -> Figures:
    if system == "apscheduler":
        return asyncio.run(run_apscheduler(plan))
    tune_collector()  # as ``cronwheel server`` runs (APScheduler keeps Python's defaults, as its users do)
    logs.configure("INFO")  # as a node logs (to stderr, which the parent discards): its cost counts
    return asyncio.run(
        run_cronwheel(
            system, plan, workers, args.tracing, args.arm_ahead, args.release_ahead, args.concurrency
        )
    )


def spawn_peer(args: argparse.Namespace) -> Figures:
    """APScheduler 4 on a fresh PostgreSQL database, from its side venv."""
    python = peer_python("apscheduler4")
    name = f"{DB_PREFIX}_bench_peer_{uuid.uuid4().hex[:10]}"
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    url = database_url(name).replace("postgresql://", "postgresql+asyncpg://", 1)
    settle = args.settle if args.settle is not None else 10.0 + args.jobs / 250  # it adds ~400/s
    command = [str(python), str(Path(__file__).with_name("peer_apscheduler4.py")), "--database-url", url,
               "--jobs", str(args.jobs), "--settle", str(settle), "--workers", str(args.workers)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        asyncio.run(admin(f'DROP DATABASE "{name}" WITH (FORCE)'))
    if done.returncode != 0:
        raise SystemExit(f"apscheduler4 failed:\n{done.stdout}\n{done.stderr[-20_000:]}")
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


def spawn(system: str, args: argparse.Namespace) -> Figures:
    if system in PEERS:
        return spawn_peer(args)
    settle = args.settle if args.settle is not None else 5.0 + args.jobs / 5_000
    command = [sys.executable, __file__, "--child", system, "--workload", args.workload,
               "--jobs", str(args.jobs), "--seconds", str(args.seconds), "--settle", str(settle),
               "--workers", str(args.workers), "--tracing", args.tracing,
               "--arm-ahead", str(args.arm_ahead), "--release-ahead", str(args.release_ahead),
               "--concurrency", str(args.concurrency)]  # fmt: skip
    with tempfile.TemporaryFile("w+") as errors:  # the child's logs: shown only if it fails
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=errors, text=True, check=False)
        if done.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{system} failed:\n{done.stdout}\n{errors.read()[-20_000:]}")
    return Figures(**json.loads(done.stdout.strip().splitlines()[-1]))


def report(results: list[Figures]) -> str:
    head = ("system", "fires", "expected", "fires/s", "queued p50 ms", "p99", "max", "started",
            "start p50 ms", "p99", "max", "load s", "CPU s/1000", "peak MB", "worker CPU s/1000",
            "worker MB", "PostgreSQL CPU s/1000", "Redis CPU s/1000")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        row = (r.system, r.fires, r.expected, r.fires_per_s, r.p50_ms, r.p99_ms, r.max_ms, r.started,
               r.start_p50_ms, r.start_p99_ms, r.start_max_ms, r.load_s, r.cpu_s_per_1000, r.peak_rss_mb,
               r.worker_cpu_s_per_1000, r.worker_peak_rss_mb, r.db_cpu_s_per_1000,
               r.redis_cpu_s_per_1000)  # fmt: skip
        lines.append(" | ".join(str(value) for value in row))
    by_system = {r.system: r for r in results}
    for peer_name in ("apscheduler", "apscheduler4"):
        peer = by_system.get(peer_name)
        for name in ("embedded", *CLUSTERS):
            ours = by_system.get(name)
            if peer and ours and ours.p99_ms > 0:
                lines.append(f"p99 queued lateness, {peer_name} / {name}: {peer.p99_ms / ours.p99_ms:.1f}x")
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
    parser.add_argument("--workers", type=int, default=1, help="worker processes (cluster); 0: none")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="each worker's (server default)")
    parser.add_argument("--tracing", choices=TRACING, default="off", help="cronwheel's spans (see above)")
    parser.add_argument(
        "--arm-ahead",
        type=float,
        default=ARM_AHEAD_S,
        help="cronwheel: the scheduler's arm_ahead_s, as --arm-ahead of a server (0: fire at the slot)",
    )
    parser.add_argument(
        "--release-ahead",
        type=float,
        default=RELEASE_AHEAD_S,
        help="cronwheel, with --arm-ahead: the scheduler's release_ahead_s (0: release at the slot)",
    )
    parser.add_argument("--child", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--child-worker", metavar="DATABASE_URL", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    parser.add_argument("--node", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_worker:
        asyncio.run(worker_main(args.child_worker, args.prefix, args.node, args.concurrency))
        return 0
    if args.child:
        plan = make_plan(args.workload, args.jobs, args.seconds, args.settle)
        workers = args.workers if args.child != "apscheduler" else 0
        print(json.dumps(asdict(child(args.child, plan, workers, args))))
        return 0
    if args.smoke:
        args.jobs, args.seconds, args.settle = 120, 2.0, 2.0
    systems = [name for name in args.systems.split(",") if name]
    unknown = sorted(set(systems) - set(SYSTEMS) - set(PEERS))
    if unknown or (args.workload != "herd" and set(systems) & set(PEERS)):
        parser.error(f"--systems: {', '.join(unknown) or 'apscheduler4'} (peers run the herd only)")
    print(
        f"bench_fire: {args.workload}, {args.jobs} jobs, tracing {args.tracing}, "
        f"arm ahead {args.arm_ahead} s, release ahead {args.release_ahead} s, "
        f"{machine()}",
        flush=True,
    )
    results = []
    for system in systems:
        results.append(spawn(system, args))
        print(f"  {system}: {asdict(results[-1])}", flush=True)
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
