"""What keeping ``job_last_run`` costs the fire, claim and finish batches.

A benchmark, not a test: every figure is printed, none is asserted, the script exits 0.

Method. A fresh database (PostgreSQL: a private database on the benchmark server, dropped at the
end; SQLite: a file in a temporary directory) holds ``--jobs`` jobs (every minute, each with its
cursor). Each round fires ``--batch`` distinct jobs in one ``store.fire`` (2,000 by default: the
scheduler's batch), then claims all those runs ``--claim`` at a time (``store.claim_runs``, 64: a
worker's receive) and records their outcomes as many at a time (``store.finish_attempts``, SUCCESS).
Rounds alternate between the store as it is (**with**: each batch also writes ``job_last_run``)
and the store with :mod:`cronwheel.store.sql.last_runs`' writes replaced by no-ops (**without**:
the code before the table), ABAB..., in one process on one database, so both see the same table
sizes and the same machine load. Printed: the median and p90 of each batch's wall time per
variant, with - without, and the median time the "with" batches spent inside
``last_runs.record`` (the table's one statement: the added cost itself, less sensitive to the
machine's load than a difference of two medians). Round 0 of each variant is a warm-up.

    .venv/bin/python benchmarks/bench_last_run_writes.py                     # PostgreSQL and SQLite
    .venv/bin/python benchmarks/bench_last_run_writes.py --systems cluster --rounds 20
    .venv/bin/python benchmarks/bench_last_run_writes.py --smoke             # tiny (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from benchlib import admin, database_url, machine
from cronwheel.model import (
    AttemptResult,
    Finish,
    Firing,
    HttpTarget,
    Job,
    Outcome,
    Run,
    RunKind,
    RunState,
    new_id,
)
from cronwheel.store import codec
from cronwheel.store.schema import jobs
from cronwheel.store.sql import SqlStore, last_runs, open_store

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
VARIANTS = ("with", "without")


@dataclass
class Timings:
    fire: list[float] = field(default_factory=list)  # ms per fire batch
    claim: list[float] = field(default_factory=list)  # ms per claim batch
    finish: list[float] = field(default_factory=list)  # ms per finish batch
    # ms of each batch inside ``last_runs.record`` (its one statement), "with" rounds only
    fire_table: list[float] = field(default_factory=list)
    claim_table: list[float] = field(default_factory=list)
    finish_table: list[float] = field(default_factory=list)


class TableClock:
    """Times :func:`last_runs.record` (the table's one statement per batch) while installed."""

    def __init__(self) -> None:
        self.spent_ms = 0.0
        self._record = last_runs.record

    async def record(self, *args: Any) -> None:
        began = time.perf_counter()
        await self._record(*args)
        self.spent_ms += (time.perf_counter() - began) * 1000

    def take(self) -> float:
        spent, self.spent_ms = self.spent_ms, 0.0
        return spent


@contextlib.contextmanager
def timing_table(clock: TableClock) -> Iterator[None]:
    last_runs.record = clock.record  # type: ignore[assignment]
    try:
        yield
    finally:
        last_runs.record = clock._record


@contextlib.contextmanager
def without_table() -> Iterator[None]:
    """The store with :mod:`last_runs`' writes replaced by no-ops (the code before the table)."""

    async def nothing(*args: Any) -> None:
        return None

    saved = last_runs.record, last_runs.record_found
    last_runs.record, last_runs.record_found = nothing, nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        last_runs.record, last_runs.record_found = saved


@contextlib.asynccontextmanager
async def database(system: str) -> AsyncIterator[str]:
    if system == "embedded":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{Path(directory) / 'store.db'}"
        return
    name = f"cronwheel_lastrun_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')


def make_jobs(count: int) -> list[Job]:
    target = HttpTarget("https://example.com/hook")
    return [
        Job(id=new_id(), team="bench", name=f"job-{n}", schedule="* * * * *", target=target,
            created_at=START, updated_at=START, next_run_at=START)
        for n in range(count)
    ]  # fmt: skip


async def load_jobs(store: SqlStore, made: list[Job]) -> None:
    async with store.engine.begin() as connection:
        for start in range(0, len(made), 5000):
            await connection.execute(
                insert(jobs), [codec.job_to_row(job) for job in made[start : start + 5000]]
            )


def firings(batch: list[Job]) -> tuple[list[Firing], list[Job]]:
    """One run at each job's cursor, the cursor one minute on; and the jobs as they will be."""
    fired, moved = [], []
    for job in batch:
        assert job.next_run_at is not None
        run = Run(id=new_id(), job_id=job.id, kind=RunKind.SCHEDULED, slot=job.next_run_at,
                  state=RunState.PENDING, queue=job.queue, job_version=job.version)  # fmt: skip
        following = job.next_run_at + MINUTE
        fired.append(Firing(job.id, job.version, job.next_run_at, following, (run,)))
        moved.append(replace(job, next_run_at=following))
    return fired, moved


async def timed(action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    began = time.perf_counter()
    result = await action()
    return (time.perf_counter() - began) * 1000, result


async def one_round(
    store: SqlStore, batch: list[Job], claim: int, into: Timings, table: TableClock | None
) -> list[Job]:
    def note(kind: str, elapsed: float) -> None:
        getattr(into, kind).append(elapsed)
        if table is not None:
            getattr(into, f"{kind}_table").append(table.take())

    fired, moved = firings(batch)
    elapsed, result = await timed(lambda: store.fire(fired, START))
    note("fire", elapsed)
    now = START + timedelta(days=1)
    run_ids = [run.id for run in result.accepted]
    for start in range(0, len(run_ids), claim):
        chunk = run_ids[start : start + claim]
        elapsed, claimed = await timed(lambda c=chunk: store.claim_runs(c, "bench", now, now + MINUTE))  # type: ignore[misc]
        note("claim", elapsed)
        finishes = [Finish(run.id, run.attempts, AttemptResult(Outcome.SUCCESS)) for run in claimed.values()]
        elapsed, _ = await timed(lambda f=finishes: store.finish_attempts(f, "bench", now))  # type: ignore[misc]
        note("finish", elapsed)
    return moved


async def measure(system: str, count: int, batch: int, claim: int, rounds: int) -> dict[str, Timings]:
    found = {variant: Timings() for variant in VARIANTS}
    async with database(system) as url:
        store = await open_store(url)
        try:
            made = make_jobs(count)
            await load_jobs(store, made)
            for number in range(2 * (rounds + 1)):
                variant = VARIANTS[number % 2] if (number // 2) % 2 == 0 else VARIANTS[1 - number % 2]
                offset = (number * batch) % count
                slice_ = made[offset : offset + batch]
                timings = Timings() if number < 2 else found[variant]  # round 0 of each: warm-up
                table = TableClock() if variant == "with" else None
                with timing_table(table) if table is not None else without_table():
                    made[offset : offset + batch] = await one_round(store, slice_, claim, timings, table)
        finally:
            await store.close()
    return found


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(system: str, found: dict[str, Timings], batch: int, claim: int) -> list[str]:
    lines = [f"{system}: ms per batch, median (p90); with - without (median)"]
    for kind, size in (("fire", batch), ("claim", claim), ("finish", claim)):
        cells = []
        for variant in VARIANTS:
            values = getattr(found[variant], kind)
            cells.append(f"{variant} {statistics.median(values):.2f} ({quantile(values, 0.9):.2f})")
        with_, without = (statistics.median(getattr(found[v], kind)) for v in VARIANTS)
        count = len(getattr(found["with"], kind))
        table = statistics.median(getattr(found["with"], f"{kind}_table"))
        lines.append(f"  {kind} x{size}: {'; '.join(cells)}; +{with_ - without:.2f} ms "
                     f"({with_ / without:.2f}x), {count} batches each; in job_last_run's statement "
                     f"(with): median {table:.2f} ms")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--systems", default="cluster,embedded", help="cluster (PostgreSQL), embedded (SQLite)"
    )
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=2_000, help="firings per fire batch")
    parser.add_argument("--claim", type=int, default=64, help="runs per claim and per finish batch")
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds per variant")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--json", type=Path, default=None, help="also save every batch's time")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.batch, args.claim, args.rounds = 200, 50, 16, 1
    print(f"bench_last_run_writes: {args.jobs} jobs, batches of {args.batch} fires and {args.claim} "
          f"claims/finishes, {args.rounds} rounds per variant; {machine()}", flush=True)  # fmt: skip
    saved: dict[str, Any] = {"machine": machine(), "args": vars(args) | {"json": None}}
    for system in args.systems.split(","):
        found = asyncio.run(measure(system, args.jobs, args.batch, args.claim, args.rounds))
        print("\n".join(report(system, found, args.batch, args.claim)), flush=True)
        saved[system] = {variant: asdict(timings) for variant, timings in found.items()}
    if args.json is not None:
        args.json.write_text(json.dumps(saved, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
