"""The textbook due-job claim beside cronwheel's shards and timing wheel, on PostgreSQL alone (a
benchmark, not a test).

Two ways for K scheduler processes to fire the jobs of one PostgreSQL database, run one after the
other on the same machine, each on a fresh database migrated with cronwheel's schema and seeded
the way ``bench_fire.py`` seeds (the jobs written in bulk before the clock starts: not measured):

* ``due-claim`` (the textbook design, no shards, no leases, no warm-up): each of ``--schedulers``
  processes loops over one transaction per batch, on the store's own engine:

  1. ``SELECT <the scheduler's due columns> FROM jobs WHERE <live, not paused> AND next_run_at <=
     now ORDER BY next_run_at, id LIMIT --batch FOR UPDATE SKIP LOCKED`` (the partial index
     ``ix_jobs_due_at``), so concurrent claimers never take the same job;
  2. each claimed job planned by cronwheel's own planner and schedule engine
     (``scheduler.planner.plan``: its run and its next fire time), in Python;
  3. the writes of cronwheel's fire transaction, with cronwheel's statements
     (``store.sql.bulk`` and ``last_runs``): the conditional cursor ``UPDATE jobs``, the runs'
     ``INSERT ... ON CONFLICT DO NOTHING`` (the unique (job, slot) key makes a duplicate
     harmless: it is counted, not written) with ``queued_at`` stamped in the row, their first
     ``run_events`` rows, each job's ``job_last_run`` row;
  4. the triggers inserted into ``PostgresQueue``'s table (the rows ``PostgresQueue.publish``
     writes) in the same transaction, then COMMIT: at commit the trigger is on the queue, which
     is what cronwheel's ``queued_at`` means. The stamp is taken before the writes, so
     ``queued_at`` is early by the transaction's writes; each claimer also notes when each
     batch's commit returned, and ``committed`` lateness (that instant minus the slot) is printed
     beside it: the figure to read against the wheel's ``queued_at``, which is stamped after
     the publish committed.

  A batch that came back full is followed at once by the next; otherwise the claimer sleeps
  ``--poll-ms`` (100 ms): polling is the loop's only way to see a job that became due, so it
  adds up to a poll interval (over K unsynchronized claimers, about poll / K) to every slot.
* ``wheel``: cronwheel's scheduler (``scheduler.loop.Scheduler``) with the server's defaults
  (arm ahead 30 s at most, release 0.5 s ahead at most; ``--arm-ahead 0`` fires at the slot),
  publishing to ``PostgresQueue`` on the same database. With K > 1, process ``k`` owns shards
  ``k, k + K, ...`` as ``bench_scaleout.py`` splits them (the coordinator's split, without a
  coordinator: leases and fencing epochs are not exercised).

* ``claim-ahead`` (only when named in ``--systems``): the due-claim loop, whose claim also takes
  the jobs due within ``--claim-ahead`` (30 s, the wheel's longest arm lead) and arms them with
  cronwheel's planner (``planner.arm``: the coming slot's PENDING run, the cursor moved on; every
  job here is ``overlap=allow``, which arming needs), their triggers inserted due at their slots
  (``available_at`` = the slot, as ``PostgresQueue.publish_at`` would): still no shards and no
  leases, and the slot's record written before the slot, as the wheel does it.

Workloads: ``herd`` (``--jobs`` N jobs due in the same second) and ``steady`` (N jobs each firing
once a minute, spread over the seconds, measured over ``--seconds``). No workers: triggers stay on
the queue. Per system and shape: runs queued in the window against those expected, fires/s,
queued lateness (``queued_at - slot`` from the run records) p50/p99/max, the scheduler processes'
CPU ms per fire (from "go" to "stop": the wheel's load and arming included) and the CPU ms per
fire of the benchmark database's PostgreSQL backends (``benchlib.database_cpu_s``; this script's
own polling excluded), and two correctness counts that must be 0: duplicate runs of one (job,
slot), and missed slots (expected, not recorded). ``refused`` counts the runs a claimer's insert
found already there (none are expected either: the row lock keeps claimers apart).

Failover (due-claim, steady, when a shape has K > 1): the same run again with one claimer killed
with SIGKILL halfway through the window, at whatever point of its loop it is (its transaction,
if one is open, rolls back when PostgreSQL sees the connection go); reported: the lateness of the
slots due in the ``--failover-s`` seconds after the kill, worst and p99. There is no lease to
expire: the others take its jobs on their next poll.

    .venv/bin/python benchmarks/bench_due_claim.py --workloads herd,steady --jobs 20000
    .venv/bin/python benchmarks/bench_due_claim.py --workloads herd --jobs 100000 --shapes 1,3
    .venv/bin/python benchmarks/bench_due_claim.py --smoke       # 300 jobs, 2 claimers, about a minute (CI)

Prints the machine (with its load average) and a table; ``--json PATH`` saves every figure.
Asserts nothing and exits 0 when the runs complete.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy import func, insert, select, text

import bench_fire
from benchlib import admin, cpu_now, database_cpu_s, database_url, machine, save_results
from cronwheel.clock import SystemClock
from cronwheel.model import SHARDS, Firing, Run, RunState, new_id
from cronwheel.node.server import tune_collector
from cronwheel.queue.postgres import PostgresQueue
from cronwheel.scheduler import ARM_AHEAD_S
from cronwheel.scheduler.loop import RELEASE_AHEAD_S, Scheduler
from cronwheel.scheduler.planner import arm
from cronwheel.scheduler.planner import plan as plan_job
from cronwheel.store import codec
from cronwheel.store.schema import JOB_DUE, jobs, runs, triggers
from cronwheel.store.sql import SqlStore, bulk, last_runs, open_store
from cronwheel.store.sql.firing import DUE_COLUMNS
from cronwheel.telemetry import logs

SYSTEMS = ("due-claim", "wheel")
CLAIM_AHEAD = "claim-ahead"  # run only when named in --systems: the due-claim loop, arming ahead
DB_PREFIX = os.environ.get("CRONWHEEL_BENCH_DB_PREFIX", "bench") + "_dueclaim"  # of the databases made
STOP_AFTER_S = 180.0  # after the window, the longest wait for every expected run to be queued


@dataclass
class Figures:
    system: str
    workload: str
    schedulers: int
    jobs: int
    fires: int
    expected: int
    window_s: float
    fires_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    last_queued_s: float  # the last run of the window queued, after the window's start
    # due-claim: commit's end - slot, as the claimers saw it (queued_at is stamped before the writes)
    committed_p99_ms: float
    committed_max_ms: float
    scheduler_cpu_ms_per_fire: float  # every scheduler process, "go" to "stop", per run made
    db_cpu_ms_per_fire: float  # the bench database's PostgreSQL backends over the same span, per run made
    runs_made: int  # every run recorded from "go" to "stop", in the window or not (the CPU's divisor)
    duplicates: int  # runs of a (job, slot) beyond the first: must be 0
    missed: int  # slots of the window expected and not recorded PENDING: must be 0
    skipped: int  # slots of the window recorded SKIPPED (misfire)
    refused: int  # due-claim: runs whose insert found the (job, slot) already recorded
    batches: int  # due-claim: claim transactions that claimed something
    setup_overran: bool  # "go" came after the window began: raise --settle
    killed: bool = False  # failover: one claimer got SIGKILL mid-window
    after_kill_slots: int = 0  # slots due in the --failover-s seconds after the kill
    after_kill_p99_ms: float = float("nan")
    after_kill_max_ms: float = float("nan")


# -- the claimer: one due-claim scheduler process ----------------------------------------------------


class Claimer:
    """One process of the textbook design: claim due jobs, plan, record, enqueue, commit.
    With ``ahead_s`` (the ``claim-ahead`` system) it also claims the jobs due within that lead and
    arms them as cronwheel's scheduler does (``planner.arm``), their triggers due at their slots."""

    def __init__(self, store: SqlStore, clock: SystemClock, batch: int, ahead_s: float = 0.0) -> None:
        self.store = store
        self.clock = clock
        self.batch = batch
        self.ahead = timedelta(seconds=ahead_s)
        self.claimed = 0
        self.refused = 0
        self.batches = 0
        self.committed: list[tuple[float, float]] = []  # (slot, commit's end), Unix seconds, a run each

    async def claim_once(self) -> int:
        """One transaction: returns how many jobs it claimed."""
        now = self.clock.now()
        statement = (
            select(*DUE_COLUMNS)
            .where(JOB_DUE, jobs.c.next_run_at <= now + self.ahead)
            .order_by(jobs.c.next_run_at, jobs.c.id)
            .limit(self.batch)
            .with_for_update(skip_locked=True, of=jobs)
        )
        async with self.store.engine.begin() as connection:
            rows = (await connection.execute(statement)).mappings().all()
            if not rows:
                return 0
            firings = [firing for firing in (self.decide(row, now) for row in rows) if firing is not None]
            stamp = self.clock.now()  # on the queue at this transaction's commit, a few ms on
            firings = [
                dataclasses.replace(f, runs=tuple(dataclasses.replace(r, queued_at=stamp) for r in f.runs))
                for f in firings
            ]
            await bulk.advance_cursors(connection, firings, None)
            new_runs = [run for firing in firings for run in firing.runs]
            inserted = await bulk.insert_runs(connection, new_runs, stamp)
            await last_runs.record(connection, inserted)
            pending = [run for run in inserted if run.state is RunState.PENDING]
            if pending:
                await connection.execute(insert(triggers), [trigger_row(run, stamp) for run in pending])
        self.claimed += len(rows)
        self.refused += len(new_runs) - len(inserted)
        self.batches += 1
        done = time.time()
        self.committed.extend((slot, done) for slot in (run.slot.timestamp() for run in pending))
        return len(rows)

    @staticmethod
    def decide(row: Any, now: datetime) -> Firing | None:
        """cronwheel's planner: the due slot's run (``plan``), or a coming slot's (``arm``)."""
        job = codec.due_job_from_row(row)
        if job.next_run_at is not None and job.next_run_at > now:
            return arm(job, now, new_id)
        return plan_job(job, now, (), new_id)

    async def run(self, stop: asyncio.Event, poll_s: float) -> None:
        while not stop.is_set():
            if await self.claim_once() >= self.batch:
                continue  # a full batch: more may be due
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), poll_s)


def trigger_row(run: Run, now: datetime) -> dict[str, Any]:
    """A trigger as ``PostgresQueue.publish`` inserts it (not claimed): due ``now``, or, armed
    ahead, due at its slot and carrying it (as ``publish_at`` would insert it)."""
    ahead = run.due > now
    return {"queue": run.queue, "run_id": run.id, "job_id": run.job_id, "slot": run.due if ahead else None,
            "available_at": run.due if ahead else now, "deliveries": 0, "claimed_until": None,
            "consumer": None}  # fmt: skip


# -- the child processes -----------------------------------------------------------------------------


async def child_main(kind: str, url: str, index: int, of: int, args: argparse.Namespace) -> None:
    """A scheduler process. Protocol on stdin/stdout: prints ``ready`` once connected; starts at a
    ``go`` line; stops at a ``stop`` line and prints its figures as JSON; then keeps its
    connections open (so the parent can read their PostgreSQL CPU) until stdin closes."""
    tune_collector()
    logs.configure("INFO")  # to stderr, discarded: as a node logs
    clock = SystemClock()
    store = await open_store(url, clock=clock, migrate=False)
    queue = PostgresQueue(url, clock, visibility_timeout_s=60.0)
    async with store.engine.connect() as connection:  # connect before "go"
        await connection.execute(text("SELECT 1"))
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # go
    cpu_before = cpu_now()
    stop = asyncio.Event()
    figures: dict[str, float] = {}
    claimer = Claimer(store, clock, args.batch, args.claim_ahead if kind == CLAIM_AHEAD else 0.0)
    if kind != "wheel":
        task = asyncio.create_task(claimer.run(stop, args.poll_ms / 1000), name="claimer")
    else:
        shards = None if of == 1 else range(index, SHARDS, of)
        scheduler = Scheduler(store, queue, clock, f"bench-{index}", shards=shards,
                              arm_ahead_s=args.arm_ahead, release_ahead_s=args.release_ahead)  # fmt: skip
        task = asyncio.create_task(scheduler.run(asyncio.Queue(), stop), name="scheduler")
    await asyncio.to_thread(sys.stdin.readline)  # stop
    stop.set()
    await task
    figures["cpu_s"] = cpu_now() - cpu_before
    if kind != "wheel":
        figures.update(claimed=claimer.claimed, refused=claimer.refused, batches=claimer.batches)
    committed = claimer.committed if kind != "wheel" else []
    print(json.dumps({**figures, "committed": committed}), flush=True)
    await asyncio.to_thread(sys.stdin.read)  # until the parent closes stdin
    await queue.close()
    await store.close()


def spawn(kind: str, url: str, index: int, of: int, args: argparse.Namespace) -> subprocess.Popen[str]:
    command = [sys.executable, __file__, "--child", kind, "--database", url, "--index", str(index),
               "--of", str(of), "--batch", str(args.batch), "--poll-ms", str(args.poll_ms),
               "--arm-ahead", str(args.arm_ahead), "--release-ahead", str(args.release_ahead),
               "--claim-ahead", str(args.claim_ahead)]  # fmt: skip
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def tell(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


async def read_line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = await asyncio.to_thread(process.stdout.readline)
    if not line:
        raise SystemExit(f"bench_due_claim: a child process ended early (exit code {process.wait()})")
    return line.strip()


# -- the parent: one measurement ---------------------------------------------------------------------


async def measure(
    system: str, workload: str, schedulers: int, args: argparse.Namespace, *, kill: bool
) -> Figures:
    name = f"{DB_PREFIX}_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    url = database_url(name)
    processes: list[subprocess.Popen[str]] = []
    try:
        store = await open_store(url)
        processes = [spawn(system, url, k, schedulers, args) for k in range(schedulers)]
        for process in processes:
            await read_line(process)  # ready: imports and connections are not measured
        settle = args.settle if args.settle is not None else 3.0 + args.jobs / 4_000 + args.jobs / 2_500
        plan = bench_fire.make_plan(workload, args.jobs, args.seconds, settle)
        await bench_fire.seed(store, plan)
        poller = await asyncpg.connect(url)
        poller_pid = await poller.fetchval("SELECT pg_backend_pid()")
        db_before = await database_cpu_s(name)
        overran = time.time() > plan.start
        for process in processes:
            tell(process, "go")
        killed_at = None
        if kill:
            await asyncio.sleep(max(0.0, plan.start + (plan.end - plan.start) / 2 - time.time()))
            processes[0].send_signal(signal.SIGKILL)
            killed_at = time.time()
            processes[0].wait()
        await until_queued(poller, plan, args.failover_s if kill else 0.0)
        alive = [process for process in processes if process.poll() is None]
        for process in alive:
            tell(process, "stop")
        reports = [json.loads(await read_line(process)) for process in alive]
        db_after = await database_cpu_s(name)
        await poller.close()
        for process in alive:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=60)
        db_cpu_s = sum(used - db_before.get(pid, 0.0) for pid, used in db_after.items() if pid != poller_pid)
        figures = await tally(store, plan, system, schedulers, reports, db_cpu_s, overran, killed_at, args)
        await store.close()
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')
    return figures


async def until_queued(poller: asyncpg.Connection, plan: bench_fire.Plan, extra_s: float) -> None:
    """Wait past the window's end (and ``extra_s``), then until every expected run is queued."""
    await asyncio.sleep(max(0.0, plan.end + 1.0 + extra_s - time.time()))
    start, end = (int(moment * 1_000_000) for moment in (plan.start, plan.end))
    deadline = time.time() + STOP_AFTER_S
    expected = plan.expected()
    while time.time() < deadline:
        queued = await poller.fetchval(
            "SELECT count(*) FROM runs WHERE slot >= $1 AND slot < $2 AND queued_at IS NOT NULL", start, end
        )
        if queued >= expected:
            return
        await asyncio.sleep(0.5)


async def tally(
    store: SqlStore,
    plan: bench_fire.Plan,
    system: str,
    schedulers: int,
    reports: Sequence[dict[str, Any]],
    db_cpu_s: float,
    overran: bool,
    killed_at: float | None,
    args: argparse.Namespace,
) -> Figures:
    rows = await bench_fire.window_runs(store, plan, runs.c.queued_at)
    visible = [
        done - slot for r in reports for slot, done in r.get("committed", ()) if plan.start <= slot < plan.end
    ]
    _, committed_p99, committed_max = bench_fire.percentiles_ms(visible)
    lateness = [(queued - slot).total_seconds() for slot, queued in rows]
    counts = select(runs.c.state, runs.c.job_id, runs.c.slot).where(*bench_fire.in_window(plan))
    async with store.engine.connect() as connection:
        recorded = (await connection.execute(counts)).all()
        made = int((await connection.execute(select(func.count()).select_from(runs))).scalar_one())
    keys = [(job_id, slot) for _, job_id, slot in recorded]
    pending = {(job_id, slot) for state, job_id, slot in recorded if RunState(state) is RunState.PENDING}
    skipped = sum(1 for state, _, _ in recorded if RunState(state) is RunState.SKIPPED)
    p50, p99, worst = bench_fire.percentiles_ms(lateness)
    fires = len(lateness)
    window = plan.end - plan.start
    last = max((queued.timestamp() - plan.start for _, queued in rows), default=float("nan"))
    figures = Figures(
        system=system, workload=plan.workload, schedulers=schedulers, jobs=plan.jobs, fires=fires,
        expected=plan.expected(), window_s=window, fires_per_s=round(fires / window, 1), p50_ms=p50,
        p99_ms=p99, max_ms=worst, last_queued_s=round(last, 3), committed_p99_ms=committed_p99,
        committed_max_ms=committed_max,
        scheduler_cpu_ms_per_fire=round(sum(r["cpu_s"] for r in reports) / max(made, 1) * 1000, 4),
        db_cpu_ms_per_fire=round(db_cpu_s / max(made, 1) * 1000, 4), runs_made=made,
        duplicates=len(keys) - len(set(keys)), missed=max(0, plan.expected() - len(pending)), skipped=skipped,
        refused=int(sum(r.get("refused", 0) for r in reports)),
        batches=int(sum(r.get("batches", 0) for r in reports)), setup_overran=overran,
    )  # fmt: skip
    if killed_at is None:
        return figures
    after = [
        (queued - slot).total_seconds()
        for slot, queued in rows
        if killed_at <= slot.timestamp() < killed_at + args.failover_s
    ]
    _, after_p99, after_max = bench_fire.percentiles_ms(after)
    return dataclasses.replace(
        figures,
        killed=True,
        after_kill_slots=len(after),
        after_kill_p99_ms=after_p99,
        after_kill_max_ms=after_max,
    )


# -- the report --------------------------------------------------------------------------------------


def report(results: list[Figures]) -> str:
    head = ("workload", "system", "K", "fires", "expected", "fires/s", "queued p50 ms", "p99", "max",
            "last queued s", "committed p99 ms", "max", "sched CPU ms/fire", "PostgreSQL CPU ms/fire",
            "duplicates", "missed", "skipped", "refused", "batches", "overran", "after kill: slots",
            "p99 ms", "max ms")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        system = f"{r.system}, 1 killed" if r.killed else r.system
        row = (r.workload, system, r.schedulers, r.fires, r.expected, r.fires_per_s, r.p50_ms, r.p99_ms,
               r.max_ms, r.last_queued_s, r.committed_p99_ms, r.committed_max_ms, r.scheduler_cpu_ms_per_fire,
               r.db_cpu_ms_per_fire, r.duplicates, r.missed, r.skipped, r.refused, r.batches, r.setup_overran,
               r.after_kill_slots if r.killed else "", r.after_kill_p99_ms if r.killed else "",
               r.after_kill_max_ms if r.killed else "")  # fmt: skip
        lines.append(" | ".join(str(value) for value in row))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", default="herd,steady", help="herd, steady or both")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--shapes", default="1,3", help="scheduler processes per run, comma-separated")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=30.0, help="steady: the measured window")
    parser.add_argument("--settle", type=float, default=None, help="seconds from seeding to the window")
    parser.add_argument("--batch", type=int, default=500, help="due-claim: jobs claimed per transaction")
    parser.add_argument("--poll-ms", type=float, default=100.0, help="due-claim: sleep after a short batch")
    parser.add_argument(
        "--arm-ahead", type=float, default=ARM_AHEAD_S, help="wheel: the server's --arm-ahead"
    )
    parser.add_argument("--release-ahead", type=float, default=RELEASE_AHEAD_S, help="wheel: --release-ahead")
    parser.add_argument(
        "--failover-s", type=float, default=5.0, help="due-claim: slots measured after the kill"
    )
    parser.add_argument("--no-failover", action="store_true", help="skip the kill -9 run")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument(
        "--claim-ahead",
        type=float,
        default=ARM_AHEAD_S,
        help="claim-ahead: the lead its claim looks ahead by",
    )
    parser.add_argument("--child", choices=(*SYSTEMS, CLAIM_AHEAD), help=argparse.SUPPRESS)
    parser.add_argument("--database", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--of", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        asyncio.run(child_main(args.child, args.database, args.index, args.of, args))
        return 0
    if args.smoke:
        args.jobs, args.seconds, args.settle, args.shapes, args.failover_s = 300, 2.0, 2.0, "2", 1.0
    workloads = [name for name in args.workloads.split(",") if name]
    systems = [name for name in args.systems.split(",") if name]
    shapes = [int(shape) for shape in args.shapes.split(",") if shape]
    if (
        set(workloads) - {"herd", "steady"}
        or set(systems) - {*SYSTEMS, CLAIM_AHEAD}
        or min(shapes, default=0) < 1
    ):
        parser.error(
            "--workloads herd,steady; --systems due-claim,wheel,claim-ahead; --shapes K,... (K >= 1)"
        )
    print(
        f"bench_due_claim: workloads {workloads}, {args.jobs} jobs, shapes {shapes}, batch {args.batch}, "
        f"poll {args.poll_ms} ms, wheel arm ahead {args.arm_ahead} s, release ahead {args.release_ahead} s, "
        f"claim-ahead {args.claim_ahead} s, "
        f"{machine()}",
        flush=True,
    )
    runs_to_make = [
        (workload, system, k, False) for workload in workloads for system in systems for k in shapes
    ]
    most = max(shapes)
    if "steady" in workloads and "due-claim" in systems and most > 1 and not args.no_failover:
        runs_to_make.append(("steady", "due-claim", most, True))
    results = []
    for workload, system, k, kill in runs_to_make:
        results.append(asyncio.run(measure(system, workload, k, args, kill=kill)))
        print(
            f"  {workload} {system} x{k}{' (kill -9 one)' if kill else ''}: {asdict(results[-1])}", flush=True
        )
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
