"""Benchmark: the scheduler's timing wheel, the hierarchical rings beside the heap of seconds.

Two measures, in fresh processes each (docs/performance.md "The wheel"):

  memory  a wheel of ``--jobs`` ``DueJob`` records built as the store builds them
          (``codec.due_job_from_row``), due within an hour (``--horizon``): RSS before, after the
          records and after the wheel, and bytes a job (the records and the wheel together);
  speed   per wheel and size (``--sizes``): ``add`` of every entry into an empty wheel, ``add``
          that moves an entry (a tenth of them, to a later second), ``remove`` (a tenth),
          ``pop_due`` second by second through the whole horizon (everything drained; the cost of
          an empty second is in it), ``next_due`` and ``count_at`` once a second; medians of
          ``--repeats`` runs, in ns per operation (``pop_due``: per entry drained, and the
          longest single ``pop_due``).

The entries are the scheduler's own: ``DueJob`` filed by ``loop._due_second``. Cron cursors fall
on whole minutes (``--spread minute``, what bench_million's jobs do) or on any second
(``--spread second``). ``heap`` is the wheel the scheduler used before the rings (a dict of
second -> keys and a heap of seconds), kept here to compare.

    .venv/bin/python benchmarks/bench_wheel.py                      # 100k and 1M, both wheels
    .venv/bin/python benchmarks/bench_wheel.py --only memory --jobs 1000000
    .venv/bin/python benchmarks/bench_wheel.py --smoke              # 2k entries, seconds (CI)

A benchmark, not a test: it asserts nothing and always exits 0.
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from benchlib import machine
from cronwheel.model import DueJob
from cronwheel.node.server import tune_collector
from cronwheel.scheduler.loop import _due_second
from cronwheel.scheduler.wheel import TimingWheel
from cronwheel.store.codec import due_job_from_row

T = TypeVar("T")
START = int(datetime(2026, 12, 4, 10, 0, 30, tzinfo=UTC).timestamp())  # mid-minute


class HeapWheel(Generic[T]):
    """The scheduler's wheel before the rings: a dict of entries, a dict of second -> keys and a
    heap of those seconds."""

    def __init__(self, due_of: Callable[[T], int]) -> None:
        self._due_of = due_of
        self._entries: dict[str, T] = {}
        self._buckets: dict[int, set[str]] = {}
        self._keys: list[int] = []

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> Mapping[str, T]:
        return self._entries

    def add(self, key: str, entry: T) -> None:
        self.remove(key)
        due = self._due_of(entry)
        bucket = self._buckets.get(due)
        if bucket is None:
            bucket = self._buckets[due] = set()
            heapq.heappush(self._keys, due)
        bucket.add(key)
        self._entries[key] = entry

    def remove(self, key: str) -> T | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            due = self._due_of(entry)
            bucket = self._buckets[due]
            bucket.discard(key)
            if not bucket:
                del self._buckets[due]
        return entry

    def pop_due(self, now: int) -> list[T]:
        out: list[T] = []
        keys, entries = self._keys, self._entries
        while keys and keys[0] <= now:
            second = heapq.heappop(keys)
            bucket = self._buckets.pop(second, None)
            if bucket:
                out.extend(entries.pop(key) for key in bucket)
        return out

    def next_due(self) -> int | None:
        keys = self._keys
        while keys and keys[0] not in self._buckets:
            heapq.heappop(keys)
        return keys[0] if keys else None

    def count_at(self, second: int) -> int:
        bucket = self._buckets.get(second)
        return 0 if bucket is None else len(bucket)


class Wheel(Protocol):
    def __len__(self) -> int: ...
    def add(self, key: str, entry: DueJob) -> None: ...
    def remove(self, key: str) -> DueJob | None: ...
    def pop_due(self, now: int) -> list[DueJob]: ...
    def next_due(self) -> int | None: ...
    def count_at(self, second: int) -> int: ...


WHEELS: dict[str, Callable[[], Wheel]] = {
    "heap": lambda: HeapWheel(_due_second),
    "hierarchical": lambda: TimingWheel(_due_second),
}


def rows(jobs: int, horizon: int, spread: str, seed: int = 7) -> Iterator[dict[str, Any]]:
    """``jobs`` rows of the store's due columns, cursors within ``horizon`` seconds of START."""
    rng = random.Random(seed)
    first_minute = START // 60 + 1
    for index in range(jobs):
        if spread == "minute":
            due = (first_minute + rng.randrange(horizon // 60)) * 60
        else:
            due = START + 1 + rng.randrange(horizon)
        yield {
            "id": f"{index:08d}-{rng.getrandbits(64):016x}-bench",  # 31 characters, as a ULID-ish id
            "team": f"team-{index % 12}", "version": 1,
            "next_run_at": datetime.fromtimestamp(due, UTC), "schedule": "*/5 * * * *",
            "timezone": "Europe/Berlin", "dst_gap": None, "dst_fold": None,
            "misfire": '{"mode": "skip", "grace_s": 60.0, "max_catch_up": 10}', "overlap": "allow",
            "queue": "default", "start_at": None, "end_at": None, "paused": False, "deleted_at": None,
            "jitter_s": 0.0, "calendar_spec": None, "calendar_shift": "none",
        }  # fmt: skip


def due_jobs(jobs: int, horizon: int, spread: str) -> list[DueJob]:
    return [due_job_from_row(row) for row in rows(jobs, horizon, spread)]


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


# -- memory (child) -------------------------------------------------------------------------------


def memory(wheel_name: str, jobs: int, horizon: int, spread: str) -> dict[str, Any]:
    tune_collector()
    base = rss_mb()
    wheel = WHEELS[wheel_name]()
    for job in map(due_job_from_row, rows(jobs, horizon, spread)):  # built as they are filed
        wheel.add(job.id, job)
    gc.collect()
    full = rss_mb()
    return {"measure": "memory", "wheel": wheel_name, "jobs": len(wheel), "horizon_s": horizon,
            "spread": spread, "rss_base_mb": round(base, 1), "rss_mb": round(full, 1),
            "bytes_per_job": round((full - base) * 2**20 / jobs)}  # fmt: skip


# -- speed (child) --------------------------------------------------------------------------------


def once(
    wheel: Wheel,
    entries: list[DueJob],
    some: list[DueJob],
    moved: list[DueJob],
    horizon: int,
    runs: dict[str, list[float]],
) -> None:
    """One run of each operation on ``wheel``, ns per operation appended to ``runs``."""

    def timed(name: str, count: int, action: Callable[[], object]) -> None:
        began = time.perf_counter_ns()
        action()
        runs.setdefault(name, []).append((time.perf_counter_ns() - began) / max(count, 1))

    add = wheel.add
    timed("add", len(entries), lambda: [add(job.id, job) for job in entries])
    timed("move", len(moved), lambda: [add(job.id, job) for job in moved])
    timed("remove", len(some), lambda: [wheel.remove(job.id) for job in some])
    for job in some:
        add(job.id, job)
    ticks = range(START, START + horizon + 200)
    timed("next_due", len(ticks), lambda: [wheel.next_due() for _ in ticks])
    timed("count_at", len(ticks), lambda: [wheel.count_at(second) for second in ticks])
    longest = 0
    drained = 0
    began = time.perf_counter_ns()
    for second in ticks:
        one = time.perf_counter_ns()
        drained += len(wheel.pop_due(second))
        longest = max(longest, time.perf_counter_ns() - one)
    runs.setdefault("pop_due", []).append((time.perf_counter_ns() - began) / drained)
    runs.setdefault("pop_due_longest_ms", []).append(longest / 1e6)
    assert drained == len(entries)
    assert len(wheel) == 0


def speed(wheel_name: str, jobs: int, horizon: int, spread: str, repeats: int) -> dict[str, Any]:
    tune_collector()
    entries = due_jobs(jobs, horizon, spread)
    rng = random.Random(11)
    some = rng.sample(entries, max(1, jobs // 10))
    moved = [job.moved(datetime.fromtimestamp(_due_second(job) + 97, UTC)) for job in some]
    runs: dict[str, list[float]] = {}
    for _ in range(repeats):
        once(WHEELS[wheel_name](), entries, some, moved, horizon, runs)
        gc.collect()
    medians = {f"{name}_ns": round(statistics.median(values), 1) for name, values in runs.items()}
    medians["pop_due_longest_ms"] = round(statistics.median(runs["pop_due_longest_ms"]), 2)
    del medians["pop_due_longest_ms_ns"]
    return {"measure": "speed", "wheel": wheel_name, "jobs": jobs, "horizon_s": horizon, "spread": spread,
            "repeats": repeats, **medians}  # fmt: skip


# -- the parent -----------------------------------------------------------------------------------


def child(*args: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(done.returncode)
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100000,1000000", help="speed: wheel sizes")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="memory: jobs in the wheel")
    parser.add_argument("--horizon", type=int, default=3600, help="seconds the cursors spread over")
    parser.add_argument("--spread", choices=["minute", "second"], default="minute")
    parser.add_argument("--wheels", default="heap,hierarchical")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["memory", "speed"])
    parser.add_argument("--smoke", action="store_true", help="2,000 entries, one repeat")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        measure, wheel_name, jobs, horizon, spread, repeats = args.child
        if measure == "memory":
            result = memory(wheel_name, int(jobs), int(horizon), spread)
        else:
            result = speed(wheel_name, int(jobs), int(horizon), spread, int(repeats))
        print(json.dumps(result))
        return 0
    if args.smoke:
        args.sizes, args.jobs, args.repeats = "2000", 2_000, 1
    facts = machine()
    print(f"bench_wheel: {facts}", flush=True)
    results: list[dict[str, Any]] = []
    wheels = args.wheels.split(",")
    common = [str(args.horizon), args.spread]
    if args.only in (None, "memory"):
        for name in wheels:
            result = child("memory", name, str(args.jobs), *common, "1")
            results.append(result)
            print(f"memory {name:>12}: {result['jobs']:,} jobs, horizon {args.horizon} s, "
                  f"RSS {result['rss_base_mb']} -> {result['rss_mb']} MB, "
                  f"{result['bytes_per_job']} bytes a job", flush=True)  # fmt: skip
    if args.only in (None, "speed"):
        print("speed (median ns per operation; pop_due per entry drained, longest pop in ms)")
        for size in [int(size) for size in args.sizes.split(",")]:
            for name in wheels:
                result = child("speed", name, str(size), *common, str(args.repeats))
                results.append(result)
                timed = {key: value for key, value in result.items() if key.endswith(("_ns", "_ms"))}
                figures = ", ".join(f"{key.removesuffix('_ns')} {value}" for key, value in timed.items())
                print(f"{size:>9,} {name:>12}: {figures}", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"machine": facts, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
