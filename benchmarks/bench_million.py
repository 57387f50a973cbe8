"""A million jobs in PostgreSQL: bulk load, scheduler memory, shard takeover, API lists.

A benchmark, not a test: every figure is printed (targets beside them), none is asserted, and the
script exits 0 when the runs complete.

Method. A fresh PostgreSQL database is created (and dropped at the end) and migrated with
``open_store``. ``--jobs`` jobs are built as :class:`~cronwheel.model.Job` records with a realistic
mix of schedules: 40% every N minutes (``M-59/N * * * *``, N in 5, 10, 15, 30), 30% hourly
(``M * * * *``), 20% daily (``M H * * *``) and 10% weekly (``M H * * D``), the daily and weekly ones
in a few IANA zones; 12 teams of uneven size; labels ``env`` (3 values) and ``app`` (200 apps of
0.5% of the jobs each, and 10 new ones of 0.01% each); 5% paused; half with a small payload. Each
job's cursor ``next_run_at`` is its first slot after ``anchor + 30 s`` (``anchor``: the last whole
minute when the script starts), so the first slots are at ``anchor + 60 s``, ``anchor + 120 s``,
... Rows come from ``codec.job_to_row`` and ``codec.label_rows`` (exactly what the store writes;
instants as epoch microseconds, JSON as text) and are loaded with asyncpg's
``copy_records_to_table`` in chunks, then ``ANALYZE``d.

1. **load**: building and copying the rows (jobs and job_labels), rows/s. Setup: for information.
2. **memory**: a child process runs a :class:`~cronwheel.scheduler.loop.Scheduler` for all 256
   shards and calls ``load()`` once at ``anchor + 30 s`` (its clock is shifted to that instant):
   the wheel holds every job due within the horizon (default 120 s: the slots at ``anchor + 60 s``
   and ``+ 120 s``). Printed: the child's RSS before and after, its peak RSS (``ru_maxrss``), the
   load time and the number of jobs in the wheel. Target: peak RSS <= 1 GB.
3. **takeover**: a child runs the scheduler loop (``run()``) over PostgreSQL and Redis Streams (a
   private key prefix, deleted afterwards), its clock shifted to just before ``anchor + 60 s``,
   owning ``--owned`` shards through a stub coordinator whose ``owned_shards()`` the benchmark
   changes. Once the owned shards' runs of ``anchor + 60 s`` are all queued, it gains one more shard
   whose jobs of that slot are due and not yet fired (a shard taken over from a dead node), then
   the next, ``--gains`` times. Printed per gain: ownership change -> first and last run of that
   shard queued (``runs.queued_at``, the scheduler's clock). Target: first run within 2 s.
4. **api**: a child serves the real API app (``create_app`` with the store, a ``JobService`` and
   an in-process queue, as ``cronwheel api`` builds it, minus etcd and Redis which the list route
   does not touch) with uvicorn on 127.0.0.1; this process times ``--requests`` sequential
   ``GET /v1/jobs`` of each kind (first page, a deep page by cursor, by team, by a rare and a
   common label, paused only, by exact name: the API has no prefix search), after 3 untimed
   warm-up requests each, over one keep-alive connection. Target: p99 <= 100 ms.

    .venv/bin/python benchmarks/bench_million.py                   # 1,000,000 jobs, several minutes
    .venv/bin/python benchmarks/bench_million.py --jobs 200000 --json million.json
    .venv/bin/python benchmarks/bench_million.py --smoke           # tiny, a few seconds (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvicorn
from sqlalchemy import JSON, Select, Table, select

from benchlib import DB_PREFIX, POSTGRES_ADMIN, REDIS_URL, admin, drop_keys, machine
from cronwheel.api.app import ApiServices, create_app
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.clock import ManualClock, SystemClock
from cronwheel.coordinator.port import Member, ShardLease
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import SHARDS, HttpTarget, Job, Run, RunKind, RunState, new_id
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.scheduler.loop import HORIZON_S, LOAD_PAGE, Scheduler
from cronwheel.scheduler.planner import first_slot
from cronwheel.store import codec
from cronwheel.store.change_listener import RELOAD_ALL
from cronwheel.store.port import JobQuery
from cronwheel.store.schema import JOB_LIVE, Instant, jobs, runs, to_micros
from cronwheel.store.sql import open_store
from cronwheel.store.sql.where import latest_run_of_job

CHUNK = 50_000  # jobs per COPY
TEAMS = {"payments": 30, "search": 20, "ads": 12, "mail": 8, "billing": 6, "growth": 5, "infra": 5,
         "data": 4, "mobile": 4, "security": 3, "support": 2, "legal": 1}  # fmt: skip
ZONES = ("UTC", "America/New_York", "Europe/Berlin", "Asia/Tokyo")
ENVS = (("prod", 6), ("staging", 3), ("dev", 1))
APPS = 200
MB = 1024 * 1024
TEAM_TOKEN = "team legal's token"  # listings filtered to one team in the query
LABEL_COLUMNS = ["job_id", "key", "value"]
LAST_COLUMNS = ["job_id", "team", "slot", "run_id", "state"]


# -- the workload ----------------------------------------------------------------------------------


def expression(rng: random.Random) -> tuple[str, str, str]:
    """(kind, cron expression, zone) of one job, drawn from the mix in the module docstring."""
    draw, minute, hour = rng.random(), rng.randrange(60), rng.randrange(24)
    if draw < 0.4:
        every = rng.choice((5, 10, 15, 30))
        return "every", f"{rng.randrange(every)}-59/{every} * * * *", "UTC"
    if draw < 0.7:
        return "hourly", f"{minute} * * * *", "UTC"
    if draw < 0.9:
        return "daily", f"{minute} {hour} * * *", rng.choice(ZONES)
    return "weekly", f"{minute} {hour} * * {rng.randrange(7)}", rng.choice(ZONES)


def labels(rng: random.Random) -> tuple[tuple[str, str], ...]:
    """``env`` (3 values, uneven) and ``app``: 200 apps of 0.5% of the jobs each and, for 0.1% of
    the jobs, 10 new apps (``app-new-K``: about 0.01% of the jobs each)."""
    env = rng.choices([e for e, _ in ENVS], weights=[w for _, w in ENVS])[0]
    app = f"app-new-{rng.randrange(10)}" if rng.random() < 0.001 else f"app-{rng.randrange(APPS)}"
    return (("env", env), ("app", app))


def make_job(index: int, rng: random.Random, now: datetime) -> Job:
    kind, schedule, zone = expression(rng)
    team = rng.choices(list(TEAMS), weights=list(TEAMS.values()))[0]
    name = f"{kind}-{index:07d}"
    paused = rng.random() < 0.05
    return Job(
        id=new_id(), team=team, name=name, schedule=schedule, timezone=zone,
        target=HttpTarget(f"https://hooks.{team}.example.com/cron/{name}"),
        payload={"report": name, "rows": index % 1000} if index % 2 else None,
        labels=labels(rng),
        paused=paused, paused_at=now if paused else None, pause_note="maintenance" if paused else None,
        created_at=now, updated_at=now,
    )  # fmt: skip


@dataclass
class Cursors:
    """First slot after ``after`` per (expression, zone): computed once, shared by many jobs."""

    after: datetime
    known: dict[tuple[str, str], datetime | None] = field(default_factory=dict)

    def of(self, job: Job) -> datetime | None:
        key = (job.schedule, job.timezone)
        if key not in self.known:
            self.known[key] = first_slot(job, self.after)
        return self.known[key]


def as_record(row: dict[str, Any], table: Table = jobs) -> tuple[Any, ...]:
    """A row of ``codec`` as the PostgreSQL columns hold it: Instant -> epoch microseconds, JSON ->
    its text (what SQLAlchemy binds for those types)."""
    values = []
    for column in table.columns:
        value = row.get(column.name)  # (a run's row leaves out ``epoch``: NULL)
        if value is not None and isinstance(column.type, Instant):
            value = to_micros(value)
        elif value is not None and isinstance(column.type, JSON):
            value = json.dumps(value)
        values.append(value)
    return tuple(values)


def build_chunk(
    start: int, end: int, rng: random.Random, cursors: Cursors
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    now = datetime.now(UTC)
    job_rows, label_rows = [], []
    for index in range(start, end):
        job = make_job(index, rng, now)
        job = dataclasses.replace(job, next_run_at=cursors.of(job))
        job_rows.append(as_record(codec.job_to_row(job)))
        label_rows += [(r["job_id"], r["key"], r["value"]) for r in codec.label_rows(job.id, job.labels)]
    return job_rows, label_rows


@dataclass
class LoadFigures:
    jobs: int
    label_rows: int
    build_s: float
    copy_s: float
    total_s: float
    rows_per_s: float  # jobs per second, end to end (build + copy)
    copy_rows_per_s: float  # jobs per second spent in COPY (jobs and their labels)
    analyze_s: float
    table_mb: float  # jobs + job_labels, with indexes


async def bulk_load(url: str, count: int, anchor: datetime) -> LoadFigures:
    rng, cursors = random.Random(6), Cursors(anchor + timedelta(seconds=30))
    build_s = copy_s = 0.0
    labels = 0
    connection = await asyncpg.connect(url)
    try:
        for start in range(0, count, CHUNK):
            began = time.perf_counter()
            job_rows, label_rows = build_chunk(start, min(count, start + CHUNK), rng, cursors)
            copied = time.perf_counter()
            await connection.copy_records_to_table("jobs", records=job_rows, columns=jobs.columns.keys())
            await connection.copy_records_to_table("job_labels", records=label_rows, columns=LABEL_COLUMNS)
            build_s, copy_s = build_s + copied - began, copy_s + time.perf_counter() - copied
            labels += len(label_rows)
        began = time.perf_counter()
        await connection.execute("ANALYZE jobs; ANALYZE job_labels")
        analyze_s = time.perf_counter() - began
        size = await connection.fetchval(
            "SELECT pg_total_relation_size('jobs') + pg_total_relation_size('job_labels')"
        )
    finally:
        await connection.close()
    total = build_s + copy_s
    return LoadFigures(count, labels, round(build_s, 1), round(copy_s, 1), round(total, 1),
                       round(count / total), round(count / copy_s), round(analyze_s, 1),
                       round(size / MB, 1))  # fmt: skip


# Each job's one past run (slot an hour before the anchor), so that ``last_state`` filters what a
# real history holds: most jobs' last run SUCCESS, some FAILED, a few RUNNING, none RETRYING.
HISTORY = ((RunState.FAILED, 0.02), (RunState.RUNNING, 0.005))


def history_run(job_id: str, slot: datetime, rng: random.Random) -> Run:
    draw, state = rng.random(), RunState.SUCCESS
    for candidate, share in HISTORY:
        if draw < share:
            state = candidate
            break
        draw -= share
    finished = None if state is RunState.RUNNING else slot + timedelta(seconds=2)
    return Run(id=new_id(), job_id=job_id, kind=RunKind.SCHEDULED, slot=slot, state=state,
               queue="default", job_version=1, attempts=1, created_at=slot, queued_at=slot,
               started_at=slot, finished_at=finished)  # fmt: skip


async def load_history(url: str, anchor: datetime) -> dict[str, Any]:
    """One run per job (:func:`history_run`) and each job's ``job_last_run`` row, by COPY (the
    rows the store's own writes would leave: each job's only run is its latest), then ANALYZE."""
    rng, slot, began = random.Random(7), anchor - timedelta(hours=1), time.perf_counter()
    connection = await asyncpg.connect(url)
    try:
        teams = dict(await connection.fetch("SELECT id, team FROM jobs ORDER BY id"))
        job_ids = list(teams)
        states: dict[str, int] = {}
        for start in range(0, len(job_ids), CHUNK):
            made = [history_run(job_id, slot, rng) for job_id in job_ids[start : start + CHUNK]]
            for run in made:
                states[run.state.value] = states.get(run.state.value, 0) + 1
            records = [as_record(codec.run_to_row(run), runs) for run in made]
            await connection.copy_records_to_table("runs", records=records, columns=runs.columns.keys())
            last = [
                (run.job_id, teams[run.job_id], to_micros(run.slot), run.id, run.state.value) for run in made
            ]
            await connection.copy_records_to_table("job_last_run", records=last, columns=LAST_COLUMNS)
        await connection.execute("ANALYZE runs")
        await connection.execute("VACUUM ANALYZE job_last_run")  # as autovacuum would: a statement alone
    finally:
        await connection.close()
    return {"runs": len(job_ids), "states": states, "load_s": round(time.perf_counter() - began, 1)}


# What ``last_state`` ran before ``job_last_run`` (migration 0012): each job's latest run found by
# a correlated subquery (``where.latest_run_of_job``), timed in this process at the store's level
# beside today's statement (``store.list_jobs``), on the same database and history.
CORRELATED = {"FAILED (2%)": ("FAILED", None), "RETRYING (none)": ("RETRYING", None),
              "FAILED, team=legal": ("FAILED", "legal")}  # fmt: skip


def correlated_page(state: str, team: str | None) -> Select[Any]:
    """The first page of ``last_state=state`` (and ``team``) as the store built it before 0012."""
    conditions = [JOB_LIVE, latest_run_of_job(runs.c.state) == state]
    if team is not None:
        conditions.append(jobs.c.team == team)
    return select(jobs).where(*conditions).order_by(jobs.c.id).limit(JobQuery().limit + 1)


async def time_store_query(count: int, query: Callable[[], Awaitable[int]]) -> dict[str, float]:
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        await query()
        samples.append((time.perf_counter() - began) * 1000)
    ordered = sorted(samples)
    return {"p50_ms": round(statistics.median(ordered), 1), "max_ms": round(ordered[-1], 1)}


async def measure_correlated(url: str, count: int) -> dict[str, Any]:
    """p50 and max of ``count`` first pages of each :data:`CORRELATED` filter, the correlated
    query of before against the store's query of today (after one untimed run of each)."""
    if count < 1:
        return {}
    store = await open_store(url)
    found: dict[str, Any] = {}
    try:
        for name, (state, team) in CORRELATED.items():

            async def before(state: str = state, team: str | None = team) -> int:
                async with store.engine.connect() as connection:
                    rows = (await connection.execute(correlated_page(state, team))).mappings().all()
                    return len([codec.job_from_row(row) for row in rows])

            async def today(state: str = state, team: str | None = team) -> int:
                query = JobQuery(team=team, last_state=RunState(state))
                return len((await store.list_jobs(query)).items)

            await before(), await today()
            found[name] = {"before": await time_store_query(count, before),
                           "today": await time_store_query(count, today)}  # fmt: skip
    finally:
        await store.close()
    return found


# -- the scheduler's clock and coordinator -----------------------------------------------------------


class ShiftedClock:
    """Wall-clock time moved so that it reads ``start`` now: the jobs' slots are where the
    benchmark put them, however long the setup took."""

    def __init__(self, start: datetime) -> None:
        self._offset = start - datetime.now(UTC)

    def now(self) -> datetime:
        return datetime.now(UTC) + self._offset


class StubLeases:
    """A :class:`~cronwheel.coordinator.Coordinator` whose leases the benchmark sets (the
    scheduler reads only ``owned_shards()``); every lease has epoch 1 and never lapses."""

    def __init__(self, node: str, shards: range | list[int]) -> None:
        self.node = node
        self.leases = {shard: ShardLease(shard, 1, math.inf) for shard in shards}

    def gain(self, shard: int) -> None:
        self.leases[shard] = ShardLease(shard, 1, math.inf)

    def owned_shards(self) -> dict[int, ShardLease]:
        return dict(self.leases)

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def members(self) -> list[Member]:
        return [Member(self.node, ("scheduler",))]

    async def leader(self) -> str | None:
        return self.node

    async def watchdog(self) -> str | None:
        return self.node

    async def wait_for_change(self, timeout_s: float) -> None:
        await asyncio.sleep(timeout_s)

    def set_health_check(self, healthy: Callable[[], bool]) -> None:
        return None

    def set_watchdog_check(self, able: Callable[[], bool]) -> None:
        return None


# -- 2. scheduler memory (child) -------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def reload_by_ticks(scheduler: Scheduler, now: datetime) -> dict[str, Any]:
    """Tick at ``now`` until the reload in progress is done (a tick returns ``now`` while it
    runs); each tick's wall time is how long a reload held that tick."""
    ticks: list[float] = []
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        wake = await scheduler.tick(now)
        ticks.append(time.perf_counter() - start)
        if wake > now:
            break
    total = time.perf_counter() - began
    ordered = sorted(ticks)
    return {"ticks": len(ticks), "total_s": round(total, 2), "wheel_jobs": len(scheduler.jobs),
            "tick_p50_ms": round(1000 * statistics.median(ordered), 1),
            "tick_p99_ms": round(1000 * ordered[math.ceil(0.99 * len(ordered)) - 1], 1),
            "tick_max_ms": round(1000 * ordered[-1], 1), "rss_mb": round(rss_mb(), 1)}  # fmt: skip


async def measure_memory(url: str, anchor: datetime, horizon_s: float, pages: list[int]) -> dict[str, Any]:
    """The wheel loaded at ``anchor + 30 s`` (a frozen clock: nothing falls due meanwhile) by
    ticks, from empty (start-up), then again over the full wheel (a periodic full reload), each
    tick timed (a reload for each page size of ``pages``)."""
    now = anchor + timedelta(seconds=30)
    clock = ManualClock(now)
    store = await open_store(url, clock=clock)
    try:
        options: dict[str, Any] = {"horizon_s": horizon_s, "shards": range(SHARDS)}
        scheduler = Scheduler(store, MemoryQueue(clock), clock, "bench-memory", **options)
        before = rss_mb()
        cold = await reload_by_ticks(scheduler, now)
        load_s, after = cold["total_s"], rss_mb()
        reloads = {}
        for page in pages:  # the same wheel reloaded with each page size
            scheduler.load_page = page
            await scheduler.job_changed(RELOAD_ALL, now)
            reloads[str(page)] = await reload_by_ticks(scheduler, now)
        return {"horizon_s": horizon_s, "wheel_jobs": len(scheduler.jobs), "load_s": round(load_s, 2),
                "rss_before_mb": round(before, 1), "rss_after_mb": round(after, 1),
                "rss_delta_mb": round(after - before, 1), "page": LOAD_PAGE, "cold_by_ticks": cold,
                "reloads_by_page": reloads,
                "peak_rss_mb": round(peak_mb(), 1)}  # fmt: skip
    finally:
        await store.close()


# -- 3. a newly owned shard (child) ----------------------------------------------------------------


async def due_count(connection: asyncpg.Connection, shards: list[int], slot: datetime) -> dict[int, int]:
    """Active jobs due at ``slot`` per shard of ``shards``."""
    statement = (
        "SELECT shard, count(*) FROM jobs WHERE deleted_at IS NULL AND NOT paused "
        "AND next_run_at = $1 AND shard = ANY($2::int[]) GROUP BY shard"
    )
    rows = await connection.fetch(statement, to_micros(slot), shards)
    return {row[0]: row[1] for row in rows}


async def queued_span(connection: asyncpg.Connection, shard: int, slot: datetime) -> tuple[float, float, int]:
    """The first and last ``queued_at`` (epoch seconds) of the runs of ``slot`` in ``shard``."""
    statement = (
        "SELECT min(r.queued_at), max(r.queued_at), count(*) FROM runs r JOIN jobs j ON j.id = r.job_id "
        "WHERE j.shard = $1 AND r.slot = $2 AND r.queued_at IS NOT NULL"
    )
    first, last, count = await connection.fetchrow(statement, shard, to_micros(slot))
    return (first or 0) / 1e6, (last or 0) / 1e6, count


async def wait_fired(scheduler: Scheduler, count: int, timeout_s: float) -> float:
    """Seconds until the scheduler has queued ``count`` runs (or the timeout)."""
    began = time.perf_counter()
    while scheduler.stats.fired < count and time.perf_counter() - began < timeout_s:
        await asyncio.sleep(0.005)
    return time.perf_counter() - began


async def measure_takeover(url: str, prefix: str, anchor: datetime, owned: int, gains: int) -> dict[str, Any]:
    slot = anchor + timedelta(seconds=60)
    clock = ShiftedClock(slot - timedelta(seconds=1))
    store = await open_store(url, clock=clock)
    queue = RedisStreamQueue(REDIS_URL, clock, prefix=prefix)
    connection = await asyncpg.connect(url)
    try:
        herd = sum((await due_count(connection, list(range(owned)), slot)).values())
        due = await due_count(connection, list(range(owned, SHARDS)), slot)
        leases = StubLeases("bench-takeover", range(owned))
        scheduler = Scheduler(store, queue, clock, leases.node, ownership=leases)
        stop = asyncio.Event()
        task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop))
        await wait_fired(scheduler, herd, 120.0)
        herd_s = (clock.now() - slot).total_seconds()
        takeovers = [await take_over(scheduler, leases, connection, shard, due[shard], slot)
                     for shard in sorted(due)[:gains]]  # fmt: skip
        stop.set()
        await task
    finally:
        await connection.close()
        await queue.close()
        await store.close()
    return {"owned": owned, "herd_runs": herd, "herd_s": round(herd_s, 2),
            "wheel_jobs": len(scheduler.jobs), "takeovers": takeovers}  # fmt: skip


async def take_over(
    scheduler: Scheduler,
    leases: StubLeases,
    connection: asyncpg.Connection,
    shard: int,
    due: int,
    slot: datetime,
) -> dict[str, Any]:
    """Gain ``shard`` (its ``due`` jobs of ``slot`` not fired yet); seconds to its runs queued."""
    fired = scheduler.stats.fired
    changed = scheduler.clock.now().timestamp()
    leases.gain(shard)
    await wait_fired(scheduler, fired + due, 60.0)
    first, last, count = await queued_span(connection, shard, slot)
    return {"shard": shard, "due": due, "queued": count, "first_s": round(first - changed, 3),
            "last_s": round(last - changed, 3)}  # fmt: skip


# -- 4. the API (child serves, parent measures) --------------------------------------------------


async def serve_api(url: str) -> None:
    """The API app as ``cronwheel api`` builds it, on an ephemeral loopback port (printed)."""
    clock = SystemClock()
    store = await open_store(url, clock=clock)
    service = JobService(store, MemoryQueue(clock), ChangeFeed(), clock, TargetPolicy())
    app = create_app(ApiServices(store=store, job_service=service, clock=clock))
    tokens = {}  # every team (no team filter), and one team's (filtered in the query)
    for kind, team in (("admin", None), ("legal", "legal")):
        record, tokens[kind] = issue(f"bench-{kind}", team, [Scope.ADMIN], clock.now())
        await store.create_token(record)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    print(json.dumps({"port": server.servers[0].sockets[0].getsockname()[1], "tokens": tokens}), flush=True)
    try:
        await serving
    finally:
        await store.close()


@dataclass
class Latency:
    query: str
    requests: int
    items: int  # in the last response
    p50_ms: float
    p99_ms: float
    max_ms: float


async def api_queries(url: str) -> dict[str, list[str]]:
    """The request paths of each kind (several values each, taken in turn)."""
    sample = (
        "SELECT id, name FROM jobs TABLESAMPLE BERNOULLI (1) WHERE deleted_at IS NULL "
        "ORDER BY random() LIMIT 20"
    )
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(sample)
    finally:
        await connection.close()
    deep = [f"cursor={codec.encode_cursor(row[0])}" for row in rows]
    return {
        "first page": ["/v1/jobs"],
        "deep page (cursor)": [f"/v1/jobs?{cursor}" for cursor in deep],
        "team": [f"/v1/jobs?team={team}" for team in TEAMS],
        "team, deep page": [f"/v1/jobs?team=legal&{cursor}" for cursor in deep],
        "label env=prod (60%)": ["/v1/jobs?label=env%3Dprod"],
        "label env=prod, deep page": [f"/v1/jobs?label=env%3Dprod&{cursor}" for cursor in deep],
        "label app=app-K (0.5%)": [f"/v1/jobs?label=app%3Dapp-{i}" for i in range(0, APPS, 10)],
        "label app=app-new-K (0.01%)": [f"/v1/jobs?label=app%3Dapp-new-{k}" for k in range(10)],
        "paused=true": ["/v1/jobs?paused=true"],
        "name (exact)": [f"/v1/jobs?name={row[1]}" for row in rows],
        "last_state=FAILED (2%)": ["/v1/jobs?last_state=FAILED"],
        "last_state=FAILED, deep page": [f"/v1/jobs?last_state=FAILED&{cursor}" for cursor in deep],
        "last_state=SUCCESS (97.5%)": ["/v1/jobs?last_state=SUCCESS"],
        "last_state=SUCCESS, deep page": [f"/v1/jobs?last_state=SUCCESS&{cursor}" for cursor in deep],
        "last_state=RETRYING (none)": ["/v1/jobs?last_state=RETRYING"],
        "last_state=FAILED, team": [f"/v1/jobs?last_state=FAILED&team={team}" for team in TEAMS],
        "last_state=FAILED, label app=app-K": [
            f"/v1/jobs?last_state=FAILED&label=app%3Dapp-{i}" for i in range(0, APPS, 10)
        ],
        "last_state=RUNNING, paused=true": ["/v1/jobs?last_state=RUNNING&paused=true"],
        f"{TEAM_TOKEN}: first page": ["/v1/jobs"],
        f"{TEAM_TOKEN}: deep page": [f"/v1/jobs?{cursor}" for cursor in deep],
    }


def time_requests(client: httpx.Client, kind: str, paths: list[str], count: int) -> Latency:
    samples, items = [], 0
    for number in range(count + 3):
        began = time.perf_counter()
        response = client.get(paths[number % len(paths)])
        elapsed = time.perf_counter() - began
        response.raise_for_status()
        items = len(response.json()["items"])
        if number >= 3:
            samples.append(elapsed * 1000)
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, math.ceil(len(ordered) * 0.99) - 1)]
    return Latency(
        kind, count, items, round(statistics.median(ordered), 1), round(p99, 1), round(ordered[-1], 1)
    )


def measure_api(url: str, count: int) -> list[Latency]:
    queries = asyncio.run(api_queries(url))
    with api_server(url) as (base, tokens):
        found = []
        for kind, paths in queries.items():
            token = tokens["legal" if kind.startswith(TEAM_TOKEN) else "admin"]
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=base, timeout=60.0, headers=headers) as client:
                found.append(time_requests(client, kind, paths, count))
        return found


@contextlib.contextmanager
def api_server(url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """The API in a child process: its base URL, and its tokens (``admin``: of every team;
    ``legal``: of team legal only)."""
    command = [sys.executable, __file__, "--child", "api", "--database", url]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        started = json.loads(server.stdout.readline())
        yield f"http://127.0.0.1:{started['port']}", started["tokens"]
    finally:
        server.terminate()
        server.wait(timeout=30)


# -- the parent ------------------------------------------------------------------------------------


def child_json(args: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"child {args[:2]} failed:\n{done.stdout}\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@contextlib.contextmanager
def fresh_database() -> Iterator[str]:
    """A private database, migrated, dropped afterwards (each step on its own event loop)."""
    name = f"{DB_PREFIX}_million_{uuid.uuid4().hex[:10]}"
    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    url = POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        asyncio.run(migrate(url))
        yield url
    finally:
        asyncio.run(admin(f'DROP DATABASE "{name}" WITH (FORCE)'))


async def migrate(url: str) -> None:
    await (await open_store(url)).close()


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    anchor = datetime.now(UTC).replace(second=0, microsecond=0)
    results: dict[str, Any] = {"machine": machine(), "jobs": args.jobs}
    with fresh_database() as url:
        results["load"] = asdict(asyncio.run(bulk_load(url, args.jobs, anchor)))
        print(f"  load: {results['load']}", flush=True)
        common = ["--database", url, "--anchor", anchor.isoformat()]
        memory = ["--horizon", str(args.horizon), "--pages", args.pages]
        if args.scheduler_only:
            results["memory"] = child_json(["--child", "memory", *common, *memory])
            print(f"  memory: {results['memory']}", flush=True)
            return results
        results["history"] = asyncio.run(load_history(url, anchor))
        print(f"  history: {results['history']}", flush=True)
        results["correlated"] = asyncio.run(measure_correlated(url, args.baseline))
        print(f"  the correlated query of before: {results['correlated']}", flush=True)
        if args.api_only:
            results["api"] = [asdict(latency) for latency in measure_api(url, args.requests)]
            return results
        results["memory"] = child_json(["--child", "memory", *common, *memory])
        print(f"  memory: {results['memory']}", flush=True)
        prefix = f"bench-million-{uuid.uuid4().hex[:10]}"
        try:
            sizes = ["--owned", str(args.owned), "--gains", str(args.gains)]
            results["takeover"] = child_json(["--child", "takeover", *common, "--prefix", prefix, *sizes])
        finally:
            asyncio.run(drop_keys(prefix))
        print(f"  takeover: {results['takeover']}", flush=True)
        results["api"] = [asdict(latency) for latency in measure_api(url, args.requests)]
    return results


def report(results: dict[str, Any]) -> str:
    load = results["load"]
    lines = [
        f"load: {load['jobs']} jobs + {load['label_rows']} label rows in {load['total_s']} s "
        f"({load['rows_per_s']} jobs/s end to end; COPY alone {load['copy_rows_per_s']} jobs/s), "
        f"{load['table_mb']} MB",
    ]
    if "history" not in results:
        return "\n".join(lines + scheduler_report(results["memory"], None))
    history = results["history"]
    lines += [
        f"history: {history['runs']} runs (one per job; last states {history['states']}) in "
        f"{history['load_s']} s",
    ]
    for name, figures in results["correlated"].items():
        before, today = figures["before"], figures["today"]
        lines.append(f"last_state={name}, store level: correlated query (before) p50 {before['p50_ms']} ms "
                     f"(max {before['max_ms']}), job_last_run (today) p50 {today['p50_ms']} ms "
                     f"(max {today['max_ms']})")  # fmt: skip
    if "memory" in results:
        lines += scheduler_report(results["memory"], results["takeover"])
    lines += ["", "query | requests | items | p50 ms | p99 ms | max ms", "--- | --- | --- | --- | --- | ---"]
    for row in results["api"]:
        lines.append(
            " | ".join(str(row[k]) for k in ("query", "requests", "items", "p50_ms", "p99_ms", "max_ms"))
        )
    lines.append("API target: p99 <= 100 ms")
    start = results["machine"]["loadavg"][0]
    lines.append(f"1-minute load average: {start} at the start, {os.getloadavg()[0]:.2f} at the end")
    return "\n".join(lines)


def scheduler_report(memory: dict[str, Any], takeover: dict[str, Any] | None) -> list[str]:
    lines = [
        f"memory: {memory['wheel_jobs']} jobs in the wheel (horizon {memory['horizon_s']} s), load "
        f"{memory['load_s']} s, RSS {memory['rss_before_mb']} -> {memory['rss_after_mb']} MB "
        f"(+{memory['rss_delta_mb']}), peak {memory['peak_rss_mb']} MB (target <= 500)",
    ]
    runs = {f"start-up, page {memory['page']}": memory["cold_by_ticks"]}
    runs |= {f"reload, page {page}": ticks for page, ticks in memory["reloads_by_page"].items()}
    for name, ticks in runs.items():
        lines.append(f"  {name}: {ticks['ticks']} ticks in {ticks['total_s']} s, a tick p50 "
                     f"{ticks['tick_p50_ms']} ms, p99 {ticks['tick_p99_ms']} ms, longest "
                     f"{ticks['tick_max_ms']} ms; RSS after {ticks['rss_mb']} MB")  # fmt: skip
    if takeover is None:
        return lines
    lines.append(
        f"takeover: owning {takeover['owned']} shards, {takeover['herd_runs']} runs of one slot queued in "
        f"{takeover['herd_s']} s; gaining a shard -> its first run queued (target <= 2 s):"
    )
    for gain in takeover["takeovers"]:
        lines.append(f"  shard {gain['shard']}: {gain['queued']}/{gain['due']} runs, first "
                     f"{gain['first_s']} s, last {gain['last_s']} s")  # fmt: skip
    return lines


def child(args: argparse.Namespace) -> None:
    if args.child == "api":
        asyncio.run(serve_api(args.database))
        return
    anchor = datetime.fromisoformat(args.anchor)
    if args.child == "memory":
        pages = [int(page) for page in args.pages.split(",")]
        figures = asyncio.run(measure_memory(args.database, anchor, args.horizon, pages))
    else:
        figures = asyncio.run(measure_takeover(args.database, args.prefix, anchor, args.owned, args.gains))
    print(json.dumps(figures))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--horizon", type=float, default=HORIZON_S, help="memory: the wheel's horizon (s)")
    parser.add_argument("--pages", default=str(LOAD_PAGE), help="memory: page sizes of the timed reloads")
    parser.add_argument("--scheduler-only", action="store_true", help="load, then the scheduler's memory")
    parser.add_argument("--owned", type=int, default=64, help="takeover: shards owned before the gains")
    parser.add_argument("--gains", type=int, default=3, help="takeover: shards gained, one after another")
    parser.add_argument("--requests", type=int, default=200, help="api: timed requests per query")
    parser.add_argument("--baseline", type=int, default=5, help="requests of the correlated query (0: none)")
    parser.add_argument("--api-only", action="store_true", help="load, then the API lists (no scheduler)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    for hidden in ("--child", "--database", "--anchor", "--prefix"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.smoke:
        args.jobs, args.owned, args.gains, args.requests, args.baseline = 1000, 16, 1, 10, 2
    print(f"bench_million: {args.jobs} jobs, {machine()}", flush=True)
    results = run_all(args)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
