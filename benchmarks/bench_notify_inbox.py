"""What the notifications inbox costs a worker's batch of outcomes (a benchmark, not a test).

Every run that reaches SUCCESS or FAILED also gets a row in ``notification_inbox``, in the
transaction of ``finish_attempts`` (``store/sql/bulk.py`` ``note_outcomes``). This records
``--batches`` batches of ``--runs`` outcomes (fire, claim, then the timed ``finish_attempts``) on a
fresh store, with the inbox insert and with it replaced by a no-op, in alternating rounds, and
prints the median milliseconds per batch of each (the best round: a shared machine's noise only
ever slows a round down).

    .venv/bin/python benchmarks/bench_notify_inbox.py                      # SQLite in a temp dir
    .venv/bin/python benchmarks/bench_notify_inbox.py --url postgresql://postgres@127.0.0.1/bench
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

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
from cronwheel.store.sql import SqlStore, bulk, open_store

START = datetime(2026, 3, 2, 12, tzinfo=UTC)
REAL = bulk.note_outcomes


async def _nothing(connection: Any, rows: Any) -> None:
    return None


async def _round(url: str, runs: int, batches: int, note: Callable[..., Awaitable[None]]) -> float:
    bulk.note_outcomes = note  # type: ignore[assignment]  # looked up at each call of insert_events
    store = await open_store(url)
    try:
        await _empty(store)
        jobs = [
            await store.create_job(
                Job(
                    new_id(),
                    "bench",
                    f"j{i}",
                    "* * * * *",
                    HttpTarget("https://example.com/x"),
                    created_at=START,
                    updated_at=START,
                    next_run_at=START,
                )
            )
            for i in range(runs)
        ]
        times = []
        for minute in range(batches):
            slot = START + timedelta(minutes=minute)
            current = await store.get_jobs([job.id for job in jobs])
            fired = [Run(new_id(), job.id, RunKind.SCHEDULED, slot, RunState.PENDING) for job in jobs]
            firings = [
                Firing(run.job_id, current[run.job_id].version, slot, slot + timedelta(minutes=1), (run,))
                for run in fired
            ]
            await store.fire(firings, slot)
            await store.claim_runs([run.id for run in fired], "w", slot, slot + timedelta(seconds=30))
            finishes = [Finish(run.id, 1, AttemptResult(Outcome.FAILURE)) for run in fired]
            began = time.perf_counter()
            await store.finish_attempts(finishes, "w", slot)
            times.append(time.perf_counter() - began)
        return statistics.median(times) * 1000
    finally:
        bulk.note_outcomes = REAL
        await store.close()


async def _empty(store: SqlStore) -> None:
    async with store.engine.begin() as connection:
        for table in ("notification_inbox", "attempts", "run_events", "runs", "job_labels", "jobs"):
            await connection.execute(text(f"DELETE FROM {table}"))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a store URL (default: SQLite in a temp dir); its tables are emptied")
    parser.add_argument("--runs", type=int, default=100, help="outcomes per batch (default 100)")
    parser.add_argument("--batches", type=int, default=60, help="batches per round (default 60)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each variant (default 3)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = options.url or f"sqlite:///{Path(directory) / 'bench.db'}"
        best: dict[str, float] = {}
        for _ in range(options.rounds):
            for name, note in (("with inbox", REAL), ("without", _nothing)):
                median = await _round(url, options.runs, options.batches, note)
                best[name] = min(best.get(name, median), median)
    for name, median in best.items():
        print(f"{name:>10}: {median:7.2f} ms per finish_attempts of {options.runs} outcomes (best median)")


if __name__ == "__main__":
    asyncio.run(main())
