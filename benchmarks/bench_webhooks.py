"""Webhook deliveries per second per worker process (a benchmark, not a test).

Method. A local HTTP sink (aiohttp, on 127.0.0.1, in its own process, so its CPU is not the
worker's) answers ``200 ok`` and counts arrivals by ``Idempotency-Key`` (the run id). Setup, not
timed: N jobs with an HTTP target to the sink are written to the store, one PENDING run each is
recorded by ``store.fire`` (the scheduler's own path), its trigger published to the queue and the
run marked queued. Then the worker process is told to go, and the parent times from "go" until
the store counts all N runs SUCCESS (it polls ``count_runs`` every 50 ms on its own connection).
The worker is the real :class:`~cronwheel.worker.loop.Worker` with the real executors; the SSRF
guard allows loopback the way the tests do it (``WorkerSettings(allowed_networks=("127.0.0.0/8",))``),
and the worker process tunes its collector as every node does (``server.tune_collector``).

Scenarios, each in fresh child processes, one after the other:

* ``embedded``: SqlStore over a temp SQLite file + MemoryQueue; setup and worker in one process
  (the in-process queue lives there), as ``cronwheel server`` runs it.
* ``cluster``: SqlStore over a fresh PostgreSQL database + RedisStreamQueue with a private key
  prefix (both removed afterwards); the parent does the setup, one worker process delivers.
* ``consumers``: the cluster backends with 1,000 Worker instances (distinct node and consumer
  names, small concurrency each) spread over a few processes (4 x 250 by default). Each worker
  is its own Redis client, as separate nodes are (a redis-py pool holds at most 100 connections
  and every waiting receiver holds one); the workers of a process share one store pool and one
  HTTP session. Reports total deliveries/s,
  whether every run reached the sink exactly once (by ``Idempotency-Key``), runs attempted
  more than once, how many workers delivered, and the consumer group as Redis sees it (XINFO).
* ``clients``: the raw HTTP client ceiling: the worker's own client (``wire``, the SSRF guard
  on), aiohttp and httpx each POST the same
  small JSON body to the same sink at the same concurrency, to read the worker's figure against.
* ``steps``: one delivery at a time in this process, on both backends, with the CPU and wall ms
  of each step of ``Worker.handle`` (receive, claim with the job, ack, HTTP attempt, finish).

Reported per scenario: deliveries (runs SUCCESS) and deliveries/s, the worker processes' CPU
seconds per 1,000 deliveries and peak RSS (``VmHWM``, reset at "go"), sink arrivals, distinct run
ids and duplicates (arrivals beyond one per run: at-least-once allows some, this workload should
show none). PostgreSQL's, Redis' and the sink's CPU is not included; on a 2-core machine they all
compete with the worker for the same cores, so read the figures as this machine's, not as limits.

``--profile DIR`` runs the worker processes under py-spy (``record -r 200 -f raw``) and prints where
their CPU went, in ms per delivery, by worker step (claim transaction, job read, queue ack, HTTP
attempt, finish transaction, receive, cancellation watch, event loop, ...). SQLAlchemy runs its
statements inside greenlets, whose samples do not show which step they serve: the ``steps``
scenario splits that time by timing each step of one delivery at a time, in one process.

    .venv/bin/python benchmarks/bench_webhooks.py                       # all scenarios, ~1.5 minutes
    .venv/bin/python benchmarks/bench_webhooks.py --scenarios cluster --runs 10000 --json out.json
    .venv/bin/python benchmarks/bench_webhooks.py --scenarios embedded,cluster --profile /tmp/prof
    .venv/bin/python benchmarks/bench_webhooks.py --smoke               # tiny sizes (CI)

Prints the machine and a table; ``--json PATH`` saves every figure. Always exits 0: the issue's
target (3,000 deliveries/s per worker process) is printed for information.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import aiohttp
import httpx
import redis.asyncio as aioredis
import yarl
from aiohttp import web
from sqlalchemy import func, insert, select

from benchlib import (
    REDIS_URL,
    TAG,
    admin,
    cpu_now,
    database_url,
    drop_keys,
    peak_rss_mb,
    peer_python,
    reset_peak_rss,
    save_results,
    tell,
)
from benchlib import machine as base_machine
from cronwheel.clock import SystemClock
from cronwheel.model import Firing, HttpTarget, Job, Run, RunKind, RunState, new_id
from cronwheel.queue import Queue, Trigger
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.store import codec
from cronwheel.store.schema import attempts, jobs, runs
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.telemetry import logs
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.http import GuardedResolver, guarded_socket_factory, parse_networks
from cronwheel.worker.executors.wire import HttpPool
from cronwheel.worker.loop import CONCURRENCY, Worker

SCENARIOS = ("embedded", "cluster", "consumers", "clients", "steps")
PEERS = ("taskiq", "dramatiq")  # benchmarks/peer_webhooks.py, in .venv-peer-webhooks
HERE = Path(__file__).resolve().parent
PEERS_VENV = HERE.parent / ".venv-peer-webhooks"  # benchlib.peer_python("webhooks")
PY_SPY = os.environ.get("CRONWHEEL_BENCH_PY_SPY") or shutil.which("py-spy") or "/tmp/tools/bin/py-spy"
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))  # as the tests allow the sink
TARGET_PER_S = 3000.0
DB_PREFIX = os.environ.get("CRONWHEEL_BENCH_DB_PREFIX", "cronwheel")  # of the databases made and dropped
SEED_CHUNK = 1000
BODY = b'{"bench":"webhooks"}'
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback stays loopback


@dataclass
class Figures:
    scenario: str
    processes: int
    workers: int
    concurrency: int  # per worker (per client: in-flight requests)
    runs: int
    delivered: int  # runs SUCCESS (clients: 2xx responses)
    seconds: float
    per_s: float
    cpu_s_per_1000: float
    peak_rss_mb: float  # largest of the processes
    arrivals: int
    distinct: int
    duplicates: int
    extra: dict[str, Any] = field(default_factory=dict)


# -- child-process plumbing ------------------------------------------------------------------------


async def hear(word: str) -> None:
    """Wait for ``word`` on stdin (read in a thread; the loop keeps running)."""
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    if line.strip() != word:
        raise SystemExit(f"expected {word!r} from the parent, got {line!r}")


class Child:
    """A child process of this script, spoken to over its stdin/stdout with tagged lines."""

    def __init__(
        self, *args: str, profile: Path | None = None, script: str = __file__, python: str = sys.executable
    ) -> None:
        command = [python, script, *args]
        if profile is not None:
            command = [PY_SPY, "record", "-r", "200", "-f", "raw", "-o", str(profile), "--", *command]
        self.errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in result()
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errors, text=True
        )

    def expect(self, word: str) -> Any:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(TAG + word + " "):
                return json.loads(line[len(TAG) + len(word) + 1 :])
        self.errors.seek(0)
        raise SystemExit(f"child {self.process.pid} ended before {word!r}:\n{self.errors.read()[-4000:]}")

    def send(self, word: str) -> None:
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write(word + "\n")
        stdin.flush()

    def result(self) -> Any:
        """The child's result; what it wrote to stderr (warnings, errors) is summarised."""
        found = self.expect("result")
        self.process.wait(60)
        self.errors.seek(0)
        lines = self.errors.read().splitlines()
        self.errors.close()
        if lines:
            print(
                f"  (child {self.process.pid} wrote {len(lines)} lines to stderr; the last:)", file=sys.stderr
            )
            for line in lines[-3:]:
                print(f"    {line[:300]}", file=sys.stderr)
        return found


# -- the sink (its own process) --------------------------------------------------------------------


async def sink_main() -> None:
    seen: Counter[str] = Counter()
    total = 0

    async def hook(request: web.Request) -> web.Response:
        nonlocal total
        await request.read()
        seen[request.headers.get("Idempotency-Key", "")] += 1
        total += 1
        return web.Response(text="ok")

    async def stats(_: web.Request) -> web.Response:
        duplicates = total - len(seen)
        return web.json_response({"arrivals": total, "distinct": len(seen), "duplicates": duplicates})

    async def reset(_: web.Request) -> web.Response:
        nonlocal total
        seen.clear()
        total = 0
        return web.Response(text="reset")

    app = web.Application()
    app.router.add_post("/hook", hook)
    app.router.add_get("/stats", stats)
    app.router.add_post("/reset", reset)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
    tell("ready", runner.addresses[0][1])
    await hear("stop")
    await runner.cleanup()
    tell("result", None)


class Sink:
    """The sink process, seen from the parent (its control calls bypass any proxy settings)."""

    def __init__(self) -> None:
        self.child = Child("--child", "sink")
        self.base = f"http://127.0.0.1:{self.child.expect('ready')}"
        self.hook = f"{self.base}/hook"

    def _call(self, path: str, method: str) -> Any:
        with NO_PROXY.open(urllib.request.Request(self.base + path, method=method)) as answer:
            return json.loads(answer.read()) if method == "GET" else None

    def reset(self) -> None:
        self._call("/reset", "POST")

    def stats(self) -> dict[str, int]:
        found: dict[str, int] = self._call("/stats", "GET")
        return found

    def stop(self) -> None:
        self.child.send("stop")
        self.child.result()


def sink_counts(sink: Sink) -> dict[str, Any]:
    """The sink's arrivals, distinct run ids and duplicates, as Figures fields."""
    return dict(sink.stats())


# -- setup: jobs, runs recorded PENDING by store.fire, triggers published -----------------------


async def seed(store: SqlStore, queue: Queue, hook: str, count: int) -> None:
    now = datetime.now(UTC)
    slot = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    made = [Job(new_id(), "bench", f"hook-{index}", "* * * * *", HttpTarget(hook), created_at=now,
                updated_at=now, next_run_at=slot) for index in range(count)]  # fmt: skip
    for start in range(0, count, SEED_CHUNK):
        await record_pending(store, queue, made[start : start + SEED_CHUNK], slot, now)


async def record_pending(
    store: SqlStore, queue: Queue, made: list[Job], slot: datetime, now: datetime
) -> None:
    """Write ``made`` and one PENDING run of each at ``slot``, as the scheduler records and queues
    them: the jobs, ``store.fire``, the triggers published, the runs stamped queued."""
    async with store.engine.begin() as connection:
        await connection.execute(insert(jobs), [codec.job_to_row(job) for job in made])
    firings = [Firing(job.id, job.version, slot, slot + timedelta(minutes=1),
                      runs=(Run(new_id(), job.id, RunKind.SCHEDULED, slot, RunState.PENDING),))
               for job in made]  # fmt: skip
    fired = await store.fire(firings, now)
    await queue.publish([Trigger(run.id, run.job_id, run.queue) for run in fired.accepted])
    await store.mark_queued([run.id for run in fired.accepted], now)


@contextlib.asynccontextmanager
async def cluster_backends() -> AsyncIterator[tuple[SqlStore, RedisStreamQueue, str, str]]:
    """A fresh database and key prefix, removed afterwards: (store, queue, url, prefix)."""
    name = f"{DB_PREFIX}_hooks_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    prefix = f"bench-{name}"
    try:
        store = await open_store(database_url(name), clock=SystemClock())
        queue = RedisStreamQueue(REDIS_URL, SystemClock(), prefix=prefix)
        try:
            yield store, queue, database_url(name), prefix
        finally:
            await queue.close()
            await store.close()
    finally:
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')
        await drop_keys(prefix)


# -- the worker process ----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def worker_backends(args: argparse.Namespace) -> AsyncIterator[tuple[SqlStore, list[Queue], Any]]:
    """The store (one pool per process) and one queue client per worker: cluster workers are each
    their own Redis client, as separate nodes are (one redis-py pool holds 100 connections, and
    every waiting receiver holds one); embedded workers share the process' in-process queue."""
    clock = SystemClock()
    if args.db is not None:  # cluster: the parent made and seeded them
        store = await open_store(args.db, migrate=False, clock=clock)
        queues: list[Queue] = [
            RedisStreamQueue(REDIS_URL, clock, prefix=args.prefix, visibility_timeout_s=60.0)
            for _ in range(args.workers)
        ]
        try:
            yield store, queues, None
        finally:
            await asyncio.gather(*(queue.close() for queue in queues))
            await store.close()
        return
    with tempfile.TemporaryDirectory(prefix="cronwheel-hooks-") as folder:
        path = f"{folder}/bench.db"
        store = await open_store(f"sqlite:///{path}", clock=clock)
        queue = MemoryQueue(clock, visibility_timeout_s=60.0)  # the server's: 2 x lease_s
        try:
            await seed(store, queue, args.hook, args.runs)
            yield store, [queue] * args.workers, path
        finally:
            await store.close()


def quiet_logs() -> None:
    """Log as a node does (INFO, logfmt), into /dev/null: the cost counts, the text is dropped."""
    logs.configure("INFO")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - for the life of the process


def executor_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """``--kafka-without-idempotence`` (bench_deliveries.py): the Kafka executor's producer without
    a producer id, which the one Kafka-protocol broker installable here (Tansu) refuses."""
    if not args.kafka_without_idempotence:
        return {}
    from cronwheel.worker.executors.kafka import KafkaExecutor, producer_config

    def config(target: Any) -> dict[str, Any]:
        return {**producer_config(target), "enable_idempotence": False}

    return {"kafka": KafkaExecutor(LOOPBACK, config=config)}


async def worker_main(args: argparse.Namespace) -> None:
    # a worker node's modules, the API's among them (the sink and client children need none of them)
    from cronwheel.node.server import tune_collector

    async with worker_backends(args) as (store, queues, info):
        executors = Executors(LOOPBACK, overrides=executor_overrides(args))  # one HTTP session, as a server
        workers = [Worker(store, queue, executors, SystemClock(), f"{args.node}-{index}",
                          concurrency=args.concurrency) for index, queue in enumerate(queues)]  # fmt: skip
        tune_collector()  # as every node does (``cronwheel server``, ``cronwheel worker``)
        quiet_logs()  # a node's INFO lines, formatted: their cost, not their text
        tell("ready", info)
        await hear("go")
        reset_peak_rss()
        cpu_before, stop = cpu_now(), asyncio.Event()
        tasks = [asyncio.create_task(worker.run(stop, drain_s=5.0)) for worker in workers]
        await hear("stop")
        stop.set()
        await asyncio.gather(*tasks)
        cpu_s = cpu_now() - cpu_before
        await executors.close()
    tell("result", {"cpu_s": cpu_s, "peak_rss_mb": peak_rss_mb()})


# -- the parent: one worker scenario ----------------------------------------------------------------


@dataclass
class Shape:
    scenario: str
    runs: int
    processes: int
    workers: int  # per process
    concurrency: int  # per worker


async def wait_done(store: SqlStore, count: int, timeout_s: float) -> tuple[int, float]:
    """Poll the store until ``count`` runs are SUCCESS: (runs SUCCESS, seconds since now)."""
    started = time.monotonic()
    done = 0
    while time.monotonic() - started < timeout_s:
        done = (await store.count_runs([RunState.SUCCESS])).get(RunState.SUCCESS, 0)
        if done >= count:
            break
        await asyncio.sleep(0.05)
    return done, time.monotonic() - started


def worker_args(shape: Shape, sink: Sink, index: int, db: str | None, prefix: str | None) -> list[str]:
    args = ["--child", "worker", "--hook", sink.hook, "--runs", str(shape.runs), "--workers",
            str(shape.workers), "--concurrency", str(shape.concurrency), "--node", f"p{index}"]  # fmt: skip
    return args + (["--db", db, "--prefix", prefix or ""] if db else [])


async def timed(
    shape: Shape, sink: Sink, children: list[Child], store: SqlStore, timeout_s: float
) -> Figures:
    """Go, wait until every run is SUCCESS (or the timeout), stop, and sum up."""
    sink.reset()
    for child in children:
        child.send("go")
    done, seconds = await wait_done(store, shape.runs, timeout_s)
    for child in children:
        child.send("stop")
    results = [child.result() for child in children]
    stats = sink.stats()
    cpu = sum(result["cpu_s"] for result in results)
    return Figures(
        scenario=shape.scenario, processes=shape.processes, workers=shape.processes * shape.workers,
        concurrency=shape.concurrency, runs=shape.runs, delivered=done, seconds=round(seconds, 3),
        per_s=round(done / seconds, 1), cpu_s_per_1000=round(cpu / max(done, 1) * 1000, 3),
        peak_rss_mb=max(result["peak_rss_mb"] for result in results), arrivals=stats["arrivals"],
        distinct=stats["distinct"], duplicates=stats["duplicates"],
    )  # fmt: skip


async def run_embedded(shape: Shape, sink: Sink, timeout_s: float, profile: Path | None) -> Figures:
    child = Child(*worker_args(shape, sink, 0, None, None), profile=raw_path(profile, 0))
    path = child.expect("ready")
    store = await open_store(f"sqlite:///{path}", migrate=False)  # the parent's poller
    try:
        figures = await timed(shape, sink, [child], store, timeout_s)
    finally:
        await store.close()
    return figures


async def run_cluster(shape: Shape, sink: Sink, timeout_s: float, profile: Path | None) -> Figures:
    async with cluster_backends() as (store, queue, url, prefix):
        await seed(store, queue, sink.hook, shape.runs)
        children = [Child(*worker_args(shape, sink, index, url, prefix), profile=raw_path(profile, index))
                    for index in range(shape.processes)]  # fmt: skip
        for child in children:
            child.expect("ready")
        figures = await timed(shape, sink, children, store, timeout_s)
        figures.extra = await observe(store, queue)
    return figures


async def observe(store: SqlStore, queue: RedisStreamQueue) -> dict[str, Any]:
    """What the store and Redis say after a cluster run: re-attempts, who delivered, the group."""
    async with store.engine.connect() as connection:
        again = (await connection.execute(select(func.count()).where(runs.c.attempts > 1))).scalar_one()
        per_worker = (await connection.execute(
            select(attempts.c.worker, func.count()).group_by(attempts.c.worker))).all()  # fmt: skip
    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        groups: Any = await client.xinfo_groups(queue.stream_key("default"))
        length = await client.xlen(queue.stream_key("default"))
    finally:
        await client.aclose()
    counts = [count for _, count in per_worker]
    return {
        "runs_attempted_more_than_once": again,
        "workers_that_delivered": len(counts),
        "most_by_one_worker": max(counts, default=0),
        "xinfo_groups": [
            {key: group.get(key) for key in ("name", "consumers", "pending", "lag")} for group in groups
        ],
        "stream_length_after": length,
    }


# -- the peers: taskiq and dramatiq, one worker process each (benchmarks/peer_webhooks.py) --------


def peers_python() -> str:
    """The interpreter of the peers' venv (:func:`benchlib.peer_python`)."""
    return str(peer_python("webhooks"))


async def wait_arrivals(sink: Sink, count: int, timeout_s: float) -> tuple[int, float]:
    """Poll the sink until ``count`` distinct keys arrived: (distinct keys, seconds since now)."""
    started, seen = time.monotonic(), 0
    while time.monotonic() - started < timeout_s:
        seen = (await asyncio.to_thread(sink.stats))["distinct"]
        if seen >= count:
            break
        await asyncio.sleep(0.05)
    return seen, time.monotonic() - started


async def run_peer(system: str, sink: Sink, runs: int, concurrency: int, timeout_s: float) -> Figures:
    """One peer worker process: enqueue ``runs`` tasks (not timed), then time from go until the
    sink saw them all."""
    prefix = f"bench-peer-{uuid.uuid4().hex[:10]}"
    child = Child(system, "--hook", sink.hook, "--redis", REDIS_URL, "--prefix", prefix, "--runs", str(runs),
                  "--concurrency", str(concurrency), script=str(HERE / "peer_webhooks.py"),
                  python=peers_python())  # fmt: skip
    try:
        child.expect("ready")
        sink.reset()
        child.send("go")
        done, seconds = await wait_arrivals(sink, runs, timeout_s)
        child.send("stop")
        result = child.result()
    finally:
        await drop_keys(prefix)
    return Figures(
        scenario=system, processes=1, workers=1, concurrency=concurrency, runs=runs, delivered=done,
        seconds=round(seconds, 3), per_s=round(done / seconds, 1),
        cpu_s_per_1000=round(result["cpu_s"] / max(done, 1) * 1000, 3), peak_rss_mb=result["peak_rss_mb"],
        **sink_counts(sink),
    )  # fmt: skip


# -- one delivery's steps, one at a time -----------------------------------------------------------


class StepClock:
    """CPU and wall milliseconds spent in each named step."""

    def __init__(self) -> None:
        self.cpu: defaultdict[str, float] = defaultdict(float)
        self.wall: defaultdict[str, float] = defaultdict(float)

    async def __call__(self, name: str, work: Awaitable[Any]) -> Any:
        cpu, wall = time.process_time(), time.perf_counter()
        result = await work
        self.cpu[name] += time.process_time() - cpu
        self.wall[name] += time.perf_counter() - wall
        return result

    def table(self, count: int) -> dict[str, list[float]]:
        return {name: [round(self.cpu[name] / count * 1000, 3), round(self.wall[name] / count * 1000, 3)]
                for name in self.cpu}  # fmt: skip


async def deliver_one_by_one(store: SqlStore, queue: Queue, executors: Executors, count: int) -> StepClock:
    """What ``Worker.handle`` does for each trigger, step by step, one trigger at a time."""
    step, clock, done = StepClock(), SystemClock(), 0
    while done < count:
        for delivery in await step("queue receive", queue.receive("default", "steps", 64, 1.0)):
            now, run_id = clock.now(), delivery.trigger.run_id
            claim = store.claim_runs_with_jobs([run_id], "steps", now, now + timedelta(seconds=30))
            claimed = await step("claim_runs_with_jobs", claim)
            await step("queue ack", queue.ack("default", [delivery]))
            run, job = claimed[run_id]
            assert job is not None
            result = await step(
                "HTTP attempt", executors.execute(job.target, AttemptContext.for_run(job, run, 1))
            )
            await step("finish_attempt", store.finish_attempt(run.id, 1, "steps", result, clock.now(), None))
            done += 1
    return step


async def run_steps(system: str, sink: Sink, count: int) -> Figures:
    """Per-step CPU and wall ms of one delivery, sequential, in this (the parent) process."""
    executors = Executors(LOOPBACK)
    queue: Queue
    async with contextlib.AsyncExitStack() as stack:
        if system == "cluster":
            store, queue, *_ = await stack.enter_async_context(cluster_backends())
        else:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="cronwheel-hooks-"))
            store, queue = await open_store(f"sqlite:///{folder}/steps.db"), MemoryQueue(SystemClock(), 60.0)
            stack.push_async_callback(store.close)
        await seed(store, queue, sink.hook, count)
        sink.reset()
        step = await deliver_one_by_one(store, queue, executors, count)
    await executors.close()
    seconds = sum(step.wall.values())
    return Figures(
        scenario=f"steps:{system}", processes=1, workers=1, concurrency=1, runs=count, delivered=count,
        seconds=round(seconds, 3), per_s=round(count / seconds, 1),
        cpu_s_per_1000=round(sum(step.cpu.values()) / count * 1000, 3), peak_rss_mb=peak_rss_mb(),
        **sink_counts(sink), extra={"cpu_ms_wall_ms_per_delivery": step.table(count)},
    )  # fmt: skip


# -- the raw HTTP client ceiling -------------------------------------------------------------------


async def drive(send: Callable[[str], Awaitable[int]], total: int, concurrency: int) -> int:
    """``total`` calls of ``send`` (one per key), ``concurrency`` at a time; how many got a 2xx."""
    keys: Iterator[str] = iter([uuid.uuid4().hex for _ in range(total)])
    ok = 0

    async def lane() -> None:
        nonlocal ok
        for key in keys:
            status = await send(key)
            ok += 200 <= status < 300

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return ok


def headers(key: str) -> dict[str, str]:
    return {"Content-Type": "application/json", "Idempotency-Key": key}


async def client_main(args: argparse.Namespace) -> None:
    total, lanes, hook = args.runs, args.concurrency, args.hook
    await asyncio.sleep(0)
    cpu_before, started = cpu_now(), time.monotonic()
    if args.client == "aiohttp":
        connector = aiohttp.TCPConnector(limit=lanes)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def post(key: str) -> int:
                async with session.post(hook, data=BODY, headers=headers(key)) as response:
                    await response.read()
                    return response.status

            ok = await drive(post, total, lanes)
    elif args.client == "wire":  # the worker's own client, guarded as a worker's is
        networks = parse_networks(LOOPBACK.allowed_networks)
        pool = HttpPool(
            GuardedResolver(aiohttp.DefaultResolver(), networks), guarded_socket_factory(networks)
        )
        url = yarl.URL(hook)

        async def request(key: str) -> int:
            response, _ = await pool.request("POST", url, list(headers(key).items()), BODY, 1024)
            return response.status

        ok = await drive(request, total, lanes)
        await pool.close()
    else:
        limits = httpx.Limits(max_connections=lanes, max_keepalive_connections=lanes)
        async with httpx.AsyncClient(limits=limits, trust_env=False) as client:

            async def send(key: str) -> int:
                return (await client.post(hook, content=BODY, headers=headers(key))).status_code

            ok = await drive(send, total, lanes)
    seconds = time.monotonic() - started
    tell(
        "result",
        {"ok": ok, "seconds": seconds, "cpu_s": cpu_now() - cpu_before, "peak_rss_mb": peak_rss_mb()},
    )


def run_client(kind: str, sink: Sink, total: int, concurrency: int) -> Figures:
    sink.reset()
    child = Child("--child", "client", "--client", kind, "--hook", sink.hook, "--runs", str(total),
                  "--concurrency", str(concurrency))  # fmt: skip
    result = child.result()
    return Figures(
        scenario=f"client:{kind}", processes=1, workers=0, concurrency=concurrency, runs=total,
        delivered=result["ok"], seconds=round(result["seconds"], 3),
        per_s=round(result["ok"] / result["seconds"], 1),
        cpu_s_per_1000=round(result["cpu_s"] / max(result["ok"], 1) * 1000, 3),
        peak_rss_mb=result["peak_rss_mb"], **sink_counts(sink),
    )  # fmt: skip


# -- the profile -----------------------------------------------------------------------------------

# Worker steps, by the outermost frame of a sampled stack that names one (in this order). SQLAlchemy
# runs statements inside greenlets, whose sampled stacks start at the greenlet (no worker frame).
STEPS = (
    ("seed (", None),  # setup: not counted
    ("_find_and_load (", None),  # imports: not counted
    ("concurrent/futures/thread.py", None),  # the thread blocked reading stdin: not counted
    ("claim_run", "claim transaction, jobs included (store.claim_runs_with_jobs)"),
    ("finish_attempt", "finish transaction (store.finish_attempt/finish_attempts)"),
    ("cronwheel/worker/finisher.py", "finish batching, other (worker/finisher.py)"),
    ("get_job", "job read (store.get_job/get_jobs)"),
    ("Queue.ack (", "queue ack"),
    ("Queue.receive (", "queue receive"),
    ("check_cancellations (", "cancellation watch (store.cancel_requested)"),
    ("execute (cronwheel/worker/executors", "HTTP attempt"),
    ("cronwheel/worker/loop.py", "worker loop, other (tasks, logs, metrics)"),
    ("_run_once (", "event loop (callbacks, wake-ups)"),
)


def step_of(stack: str, idle_leaf: str) -> str | None:
    """The worker step a sampled stack belongs to; None for samples not counted."""
    if not stack:
        return "no Python frame (GC, C extensions)"
    if "_connection_worker_thread (" in stack:  # one of aiosqlite's threads (one per connection)
        return None if stack.endswith(idle_leaf) else "SQLite (aiosqlite threads)"
    if stack.rpartition(";")[2].startswith(("EpollSelector.select (", "PollSelector.select (")):
        return "event loop waiting in select() (partly idle: py-spy cannot always tell)"
    for needle, label in STEPS:
        if needle in stack:
            return label
    if "sqlalchemy/" in stack and not stack.startswith("<module>"):
        return "SQLAlchemy inside greenlets (statements of claim, finish, job read)"
    return "other"


def aiosqlite_wait() -> str:
    """The frame of an aiosqlite thread waiting for work (``tx.get()``, a blocking C call that
    py-spy does not see as idle), as py-spy names it."""
    import inspect

    from aiosqlite import core

    lines, first = inspect.getsourcelines(core._connection_worker_thread)
    found = [first + offset for offset, text in enumerate(lines) if "tx.get()" in text]
    return f"_connection_worker_thread (aiosqlite/core.py:{found[0]})" if found else "(not found)"


def raw_path(stem: Path | None, index: int) -> Path | None:
    """Where worker process ``index`` of a profiled scenario writes its stacks."""
    return None if stem is None else stem.with_name(f"{stem.name}-{index}.raw")


def profile_table(raws: Sequence[Path], deliveries: int, rate: int = 200) -> list[tuple[str, float, float]]:
    """(step, ms of CPU per delivery, share) from py-spy's raw (collapsed) stacks of the worker
    processes, all of them together."""
    samples: Counter[str] = Counter()
    idle_leaf = aiosqlite_wait()
    for line in [line for raw in raws for line in raw.read_text().splitlines()]:
        stack, _, count = line.rpartition(" ")
        label = step_of(stack, idle_leaf)
        if label is not None and count.isdigit():
            samples[label] += int(count)
    total = sum(samples.values()) or 1
    per = 1000 / rate / max(deliveries, 1)
    return [(label, round(n * per, 4), round(n / total, 3)) for label, n in samples.most_common()]


# -- the parent ------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return base_machine(aiohttp=aiohttp.__version__, httpx=httpx.__version__)


def report(results: Sequence[Figures]) -> str:
    head = ("scenario", "procs", "workers", "conc.", "runs", "delivered", "s", "per s", "CPU s/1000",
            "peak MB", "arrivals", "distinct", "dupes")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        lines.append(" | ".join(str(v) for v in (r.scenario, r.processes, r.workers, r.concurrency, r.runs,
                     r.delivered, r.seconds, r.per_s, r.cpu_s_per_1000, r.peak_rss_mb, r.arrivals,
                     r.distinct, r.duplicates)))  # fmt: skip
    for r in results:
        lines += notes(r)
    return "\n".join(lines + medians(results))


def notes(r: Figures) -> list[str]:
    """The lines under the table about one scenario: verdicts, observations, the profile."""
    extra = dict(r.extra)
    profile = extra.pop("profile_ms_per_delivery", [])
    lines = [f"{r.scenario}: {json.dumps(extra)}"] if extra else []
    if r.scenario in ("embedded", "cluster"):
        verdict = "PASS" if r.per_s / r.processes >= TARGET_PER_S else "MISS"
        lines.append(f"{r.scenario}: {r.per_s / r.processes:.0f} deliveries/s per worker process "
                     f"(target {TARGET_PER_S:.0f}: {verdict}, for information)")  # fmt: skip
    if r.scenario in ("cluster", "consumers"):
        once = r.delivered == r.runs == r.distinct and r.duplicates == 0
        lines.append(f"{r.scenario}: every run delivered exactly once to the sink: {once}")
    lines += [
        f"  profile {r.scenario}: {ms:7.4f} ms/delivery {share:6.1%}  {step}" for step, ms, share in profile
    ]
    return lines


def shapes(args: argparse.Namespace) -> dict[str, Shape]:
    per_process = max(1, args.consumers // args.consumer_procs)
    return {
        "embedded": Shape("embedded", args.runs, 1, 1, args.concurrency),
        "cluster": Shape("cluster", args.runs, 1, 1, args.concurrency),
        "consumers": Shape(
            "consumers", args.consumer_runs, args.consumer_procs, per_process, args.consumer_concurrency
        ),
    }


async def scenario(name: str, args: argparse.Namespace, sink: Sink) -> list[Figures]:
    if name == "clients":
        kinds = ("wire", "aiohttp", "httpx")
        return [run_client(kind, sink, args.client_posts, args.concurrency) for kind in kinds]
    if name == "steps":
        return [await run_steps(system, sink, args.step_runs) for system in ("embedded", "cluster")]
    if name in PEERS:
        return [await run_peer(name, sink, args.runs, args.concurrency, args.timeout)]
    shape = shapes(args)[name]
    stem = None
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        stem = args.profile / name
    runner = run_embedded if name == "embedded" else run_cluster
    figures = await runner(shape, sink, args.timeout, stem)
    raws = [] if stem is None else [raw_path(stem, index) for index in range(shape.processes)]
    if raws:
        found = [raw for raw in raws if raw is not None and raw.exists()]
        figures.extra["profile_ms_per_delivery"] = profile_table(found, figures.delivered)
    return [figures]


async def parent(args: argparse.Namespace) -> list[Figures]:
    sink = Sink()
    results: list[Figures] = []
    try:
        for _ in range(args.repeat):
            for name in [name for name in args.scenarios.split(",") if name]:
                results += await scenario(name, args, sink)
                for figures in results[-2:] if name in ("clients", "steps") else results[-1:]:
                    print(f"  {name}: {asdict(figures)}", flush=True)
    finally:
        sink.stop()
    return results


def medians(results: Sequence[Figures]) -> list[str]:
    """Per scenario: the median deliveries/s and CPU ms per delivery over the rounds; per peer,
    the median of each round's ratio cronwheel cluster / peer (rounds ran back to back)."""
    by: defaultdict[str, list[Figures]] = defaultdict(list)
    for figures in results:
        by[figures.scenario].append(figures)
    lines = [f"median of {len(runs)}: {name}: {statistics.median(f.per_s for f in runs):.1f} deliveries/s, "
             f"{statistics.median(f.cpu_s_per_1000 for f in runs):.3f} CPU ms/delivery"
             for name, runs in by.items() if len(runs) > 1]  # fmt: skip
    for peer in [peer for peer in PEERS if peer in by and "cluster" in by]:
        pairs = list(zip(by["cluster"], by[peer], strict=False))
        speed = statistics.median(ours.per_s / theirs.per_s for ours, theirs in pairs)
        cpu = statistics.median(theirs.cpu_s_per_1000 / ours.cpu_s_per_1000 for ours, theirs in pairs)
        lines.append(f"cluster / {peer} (median of {len(pairs)} rounds): {speed:.2f}x the deliveries/s, "
                     f"{cpu:.2f}x less CPU per delivery")  # fmt: skip
    return lines


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--runs", type=int, default=2000, help="embedded, cluster: runs to deliver")
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY, help="the worker's (server default)")
    parser.add_argument("--consumers", type=int, default=1000, help="consumers: Worker instances")
    parser.add_argument("--consumer-procs", type=int, default=4)
    parser.add_argument("--consumer-concurrency", type=int, default=2)
    parser.add_argument("--consumer-runs", type=int, default=3000)
    parser.add_argument("--step-runs", type=int, default=500, help="steps: runs delivered one by one")
    parser.add_argument("--client-posts", type=int, default=5000, help="clients: POSTs per client")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="the workers' loop")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every scenario (medians)")
    parser.add_argument("--timeout", type=float, default=50.0, help="give up waiting after (s)")
    parser.add_argument("--profile", type=Path, default=None, help="py-spy the worker processes here")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--child", choices=("sink", "worker", "client"), help=argparse.SUPPRESS)
    for hidden in ("--hook", "--node", "--db", "--prefix", "--client"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--kafka-without-idempotence", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def use_uvloop() -> None:
    """The worker process on uvloop's event loop, taken from the peers' venv (``--loop uvloop``:
    a measurement, cronwheel does not depend on it); this venv's packages come first."""
    site = next((PEERS_VENV / "lib").glob("python*/site-packages"))
    sys.path.append(str(site))
    importlib.import_module("uvloop").install()


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.child:
        if args.child == "worker" and os.environ.get("CRONWHEEL_BENCH_LOOP") == "uvloop":
            use_uvloop()
        if args.child == "sink":
            asyncio.run(sink_main())
        else:
            asyncio.run(worker_main(args) if args.child == "worker" else client_main(args))
        return 0
    if args.smoke:
        args.runs, args.consumer_runs, args.client_posts, args.timeout = 60, 60, 100, 15.0
        args.step_runs = 20
        args.consumers, args.consumer_procs = 20, 2
    if args.loop == "uvloop":
        peers_python()  # the venv that holds uvloop
        os.environ["CRONWHEEL_BENCH_LOOP"] = "uvloop"  # the worker processes read it
    print(f"bench_webhooks: {machine()}", flush=True)
    results = asyncio.run(parent(args))
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
