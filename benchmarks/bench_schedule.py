"""Benchmark: cronwheel's schedule engine side by side with croniter and cronsim, in one process.

Workloads (details in benchmarks/README.md):

  (a) parse + first fire time for N distinct realistic expressions, America/New_York;
  (b) 1,000 consecutive fire times of an already-parsed ``*/5 * * * *``;
  (c) ``parse_schedule`` of the same (expression, zone) a second time: the cache hit.

Run ``.venv/bin/python benchmarks/bench_schedule.py [--smoke] [--json PATH]``. Targets are printed
as PASS/MISS for information only: this is a benchmark, not a test, and it always exits 0.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from importlib import metadata
from itertools import islice, zip_longest
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim

from cronwheel.schedule import fields as cw_fields
from cronwheel.schedule import parse as cw_parse
from cronwheel.schedule import parse_schedule
from cronwheel.schedule import zone as cw_zone

T = TypeVar("T")
Fires = Sequence[datetime | None]
Thunk = Callable[[], Fires]
Setup = Callable[[], Thunk]  # untimed preparation that returns the call to time

ZONE_NAME = "America/New_York"
ZONE = ZoneInfo(ZONE_NAME)
START = datetime(2026, 1, 14, 10, 17, 23, tzinfo=ZONE)  # an ordinary Wednesday, far from DST
# Starts inside New York's DST changes, where cron engines differ by policy: the agreement check.
DST_STARTS = {
    "gap, from 01:58 EST 2026-03-08": datetime(2026, 3, 8, 1, 58, tzinfo=ZONE),
    "fold, from 01:58 EDT 2026-11-01 (1st pass)": datetime(2026, 11, 1, 1, 58, tzinfo=ZONE),
    "fold, from 01:58 EST 2026-11-01 (2nd pass)": datetime(2026, 11, 1, 1, 58, fold=1, tzinfo=ZONE),
}
ITER_EXPRESSION = "*/5 * * * *"
ENGINES = ("cronwheel", "croniter", "cronsim")
PEERS = ("croniter", "cronsim")
TARGET_A = {"croniter": 10.0, "cronsim": 3.0}  # minimum speed-up of cronwheel over each peer
TARGET_B_US = 5.0  # maximum median microseconds per consecutive fire time

# Every cache that parse_schedule fills. zone._available_zones (the set of installed zone names,
# listed once per process) is left warm: it is start-up cost, not per-expression work.
CRONWHEEL_CACHES: tuple[Any, ...] = (
    cw_parse._parse_cached,
    cw_parse.day_rule,
    cw_parse.can_fire,
    cw_parse._lookup_zone,
    cw_fields.parse_values,
    cw_fields.parse_day_of_month,
    cw_fields.parse_day_of_week,
    cw_zone.zone_model,
)


@dataclass(frozen=True)
class Sizes:
    expressions: int  # (a) distinct expressions
    fires: int  # (b) consecutive fire times
    cached: int  # (c) expressions parsed twice; must fit the parse cache
    dst_sample: int  # expressions checked for agreement inside DST changes
    repeats: int


FULL = Sizes(expressions=100_000, fires=1_000, cached=10_000, dst_sample=5_000, repeats=5)
SMOKE = Sizes(expressions=500, fires=100, cached=500, dst_sample=200, repeats=1)


# -- the expressions ----------------------------------------------------------------------------


def families() -> dict[str, list[str]]:
    """Every distinct expression of each realistic family."""
    clock = [(m, h) for h in range(24) for m in range(60)]
    hour_pairs = [(a, b) for a in range(24) for b in range(a + 1, 24)]
    weekdays = [str(d) for d in range(7)] + ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]
    return {
        "daily M H * * *": [f"{m} {h} * * *" for m, h in clock],
        "every N minutes": [f"*/{n} * * * *" for n in range(1, 60)]
        + [f"{m}-59/{n} * * * *" for n in range(2, 31) for m in range(1, n)],
        "hourly M * * * *": [f"{m} * * * *" for m in range(60)],
        "every N hours": [f"{m} */{n} * * *" for n in (2, 3, 4, 6, 8, 12) for m in range(60)],
        "weekdays": [f"{m} {h} * * {d}" for m, h in clock for d in ("1-5", "MON-FRI")],
        "weekly": [f"{m} {h} * * {d}" for m, h in clock for d in weekdays],
        "monthly M H D * *": [f"{m} {h} {d} * *" for m, h in clock for d in range(1, 32)],
        "twice daily": [f"{m} {a},{b} * * *" for m in range(60) for a, b in hour_pairs],
        "business hours": [f"{m} {a}-{b} * * 1-5" for m in range(60) for a, b in hour_pairs],
    }


def workload(n: int, seed: int = 2026) -> tuple[list[str], Counter[str]]:
    """``n`` distinct expressions taken round-robin from the shuffled families, and the mix."""
    rng = random.Random(seed)
    pools = [[(name, e) for e in rng.sample(pool, len(pool))] for name, pool in families().items()]
    mixed = [pair for group in zip_longest(*pools) for pair in group if pair is not None][:n]
    if len(mixed) < n:
        sys.exit(f"only {len(mixed)} distinct expressions available, {n} asked for")
    expressions = [e for _, e in mixed]
    assert len(set(expressions)) == n
    return expressions, Counter(name for name, _ in mixed)


# -- timing ---------------------------------------------------------------------------------------


def timed(run: Callable[[], T]) -> tuple[int, T]:
    """Nanoseconds for one call (garbage collected first, left enabled: real programs pay it)."""
    gc.collect()
    begin = time.perf_counter_ns()
    result = run()
    return time.perf_counter_ns() - begin, result


def measure(setups: dict[str, Setup], repeats: int) -> tuple[dict[str, list[int]], dict[str, Fires]]:
    """Each engine ``repeats`` times, interleaved within each repetition; the last results."""
    samples: dict[str, list[int]] = {name: [] for name in setups}
    results: dict[str, Fires] = {}
    for _ in range(repeats):
        for name, setup in setups.items():
            elapsed, results[name] = timed(setup())
            samples[name].append(elapsed)
    return samples, results


def clear_cronwheel_caches() -> None:
    for cache in CRONWHEEL_CACHES:
        cache.cache_clear()


# -- (a) parse + first fire time ----------------------------------------------------------------


def first_cronwheel(expressions: Sequence[str], start: datetime) -> Fires:
    return [parse_schedule(e, ZONE_NAME).next_after(start) for e in expressions]


def first_croniter(expressions: Sequence[str], start: datetime) -> Fires:
    return [croniter(e, start).get_next(datetime) for e in expressions]


def first_cronsim(expressions: Sequence[str], start: datetime) -> Fires:
    return [next(CronSim(e, start)) for e in expressions]


FIRST_FIRE = {"cronwheel": first_cronwheel, "croniter": first_croniter, "cronsim": first_cronsim}


def first_fire_setups(expressions: Sequence[str], start: datetime) -> dict[str, Setup]:
    def cold_cronwheel() -> Thunk:
        clear_cronwheel_caches()
        return partial(first_cronwheel, expressions, start)

    return {
        "cronwheel": cold_cronwheel,
        "croniter": lambda: partial(first_croniter, expressions, start),
        "cronsim": lambda: partial(first_cronsim, expressions, start),
    }


# -- (b) consecutive fire times -----------------------------------------------------------------


def take(iterator: Iterator[datetime], n: int) -> Thunk:
    return lambda: list(islice(iterator, n))


def iteration_setups(expression: str, start: datetime, n: int) -> dict[str, Setup]:
    """Fresh iterators of already-parsed schedules; only the iteration is timed."""
    schedule = parse_schedule(expression, ZONE_NAME)
    return {
        "cronwheel": lambda: take(schedule.iter_after(start), n),
        "croniter": lambda: take(croniter(expression, start, ret_type=datetime), n),
        "cronsim": lambda: take(CronSim(expression, start), n),
    }


# -- (c) the same parse again ---------------------------------------------------------------------


def parse_setups(expressions: Sequence[str], start: datetime) -> dict[str, Callable[[], list[object]]]:
    """Parsing alone: ``parse_schedule`` for cronwheel, the constructor for the peers (no cache)."""
    return {
        "cronwheel": lambda: [parse_schedule(e, ZONE_NAME) for e in expressions],
        "croniter": lambda: [croniter(e, start) for e in expressions],
        "cronsim": lambda: [CronSim(e, start) for e in expressions],
    }


def measure_reparse(expressions: Sequence[str], start: datetime, repeats: int) -> dict[str, Any]:
    """First and second parse of the same expressions, per engine, caches cleared before the first."""
    first: dict[str, list[int]] = {name: [] for name in ENGINES}
    second: dict[str, list[int]] = {name: [] for name in ENGINES}
    same_objects = True
    for _ in range(repeats):
        for name, run in parse_setups(expressions, start).items():
            clear_cronwheel_caches()
            miss, parsed = timed(run)
            hit, again = timed(run)
            first[name].append(miss)
            second[name].append(hit)
            if name == "cronwheel":
                same_objects &= all(a is b for a, b in zip(parsed, again, strict=True))
    return {"first": first, "second": second, "same_objects": same_objects}


# -- agreement ------------------------------------------------------------------------------------


def instant(fire: datetime | None) -> float | None:
    """POSIX seconds: comparing aware datetimes that share a tzinfo would ignore ``fold``."""
    return None if fire is None else fire.timestamp()


def disagreements(results: dict[str, Fires]) -> list[int]:
    """Indices where a peer's fire time is a different instant from cronwheel's."""
    ours = [instant(f) for f in results["cronwheel"]]
    theirs = [[instant(f) for f in results[p]] for p in PEERS]
    return [i for i, mine in enumerate(ours) if any(other[i] != mine for other in theirs)]


def dst_check(expressions: Sequence[str], start: datetime) -> dict[str, Any]:
    """First fire times from inside a DST change (untimed): which peers differ, with examples."""
    results = {name: FIRST_FIRE[name](expressions, start) for name in ENGINES}
    kinds = {i: _who_differs(results, i) for i in disagreements(results)}
    first_of_kind: dict[str, int] = {}
    for i, kind in kinds.items():
        first_of_kind.setdefault(kind, i)
    return {
        "start": start.isoformat(),
        "checked": len(expressions),
        "disagree": len(kinds),
        "who_differs": dict(Counter(kinds.values())),
        "not_after_start": {name: _not_after(results[name], start) for name in ENGINES},
        "examples": [_example(expressions[i], results, i) for i in first_of_kind.values()],
    }


def _who_differs(results: dict[str, Fires], i: int) -> str:
    mine = instant(results["cronwheel"][i])
    return " and ".join(p for p in PEERS if instant(results[p][i]) != mine)


def _not_after(fires: Fires, start: datetime) -> int:
    """How many fire times are not strictly after the start (an engine error, not a policy)."""
    return sum(1 for f in fires if f is not None and f.timestamp() <= start.timestamp())


def _example(expression: str, results: dict[str, Fires], i: int) -> str:
    times = ", ".join(f"{name} {_iso(results[name][i])}" for name in ENGINES)
    return f"{expression!r}: {times}"


def _iso(fire: datetime | None) -> str | None:
    return None if fire is None else fire.isoformat()


# -- report ---------------------------------------------------------------------------------------


def median_us(samples_ns: list[int], items: int) -> float:
    return statistics.median(samples_ns) / items / 1000


def per_item(samples: dict[str, list[int]], items: int) -> dict[str, float]:
    return {name: median_us(ns, items) for name, ns in samples.items()}


def ratios(medians: dict[str, float]) -> dict[str, float]:
    """How many times faster cronwheel is than each peer."""
    return {peer: medians[peer] / medians["cronwheel"] for peer in PEERS}


def status_a(speedups: dict[str, float]) -> str:
    return "PASS" if all(speedups[p] >= TARGET_A[p] for p in PEERS) else "MISS"


def status_b(medians: dict[str, float]) -> str:
    return "PASS" if medians["cronwheel"] <= TARGET_B_US else "MISS"


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "unknown",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "cpu_count": os.cpu_count(),
        "versions": {name: metadata.version(name) for name in ENGINES},
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'workload (median µs per item)':<40}{'cronwheel':>10}{'croniter':>10}{'cronsim':>10}"
    print(f"{head}{'croniter/cw':>13}{'cronsim/cw':>12}  {'target':<28}status")
    print("-" * (len(head) + 25 + 28 + 6))
    for row in rows:
        us, speedup = row["median_us"], ratios(row["median_us"])
        cells = "".join(f"{us[name]:>10.2f}" for name in ENGINES)
        times = "".join(f"{speedup[p]:>{w}.2f}x" for p, w in zip(PEERS, (12, 11), strict=True))
        print(f"{row['label']:<40}{cells}{times}  {row['target']:<28}{row['status']}")


def print_machine(info: dict[str, Any], sizes: Sizes, mix: Counter[str]) -> None:
    print(f"machine: {info['platform']} ({info['machine']}, {info['processor']}), {info['cpu_count']} CPUs")
    versions = ", ".join(f"{name} {version}" for name, version in info["versions"].items())
    print(f"python:  {info['python']}; {versions}")
    print(f"sizes:   {sizes}")
    print(f"start:   {START.isoformat()} ({ZONE_NAME}); mix of the (a) expressions:")
    for name, count in mix.most_common():
        print(f"    {count:>7,}  {name}")
    print()


def print_agreement(sanity: dict[str, Any]) -> None:
    print(f"\nagreement: (a) {sanity['a_disagree']} of {sanity['a_checked']:,} first fire times differ")
    print(f"           (b) {ITER_EXPRESSION!r}: {sanity['b_disagree']} of {sanity['b_checked']:,} differ")
    print("           inside DST changes (expected to differ by policy, see below):")
    for name, check in sanity["dst"].items():
        who = ", ".join(f"{peer}: {n}" for peer, n in check["who_differs"].items()) or "-"
        wrong = ", ".join(f"{e}: {n}" for e, n in check["not_after_start"].items() if n) or "none"
        print(f"             {name}: {check['disagree']} of {check['checked']:,} differ ({who})")
        print(f"                 fire time not after the start: {wrong}")
        for example in check["examples"]:
            print(f"                 e.g. {example}")
    print(DST_NOTE)


DST_NOTE = """\
           Why they differ inside DST changes: cronwheel's defaults (parse_schedule docstring) fire a
           fixed-time job whose local time the spring-forward gap skips once, when the gap ends, and
           one the fall-back fold repeats on the first pass only; jobs with '*' or '*/N' in the
           minute or hour field skip the gap and fire on both passes of the fold. croniter moves
           skipped times to the end of the gap even for '*/N' hours, and fires a fixed time again
           on the second pass of the fold (twice in one night). cronsim follows cronwheel's rules
           here, but from the second pass it can answer the first-pass time, which is before the
           start ("not after the start")."""


# -- main -----------------------------------------------------------------------------------------


def run_a(sizes: Sizes) -> tuple[dict[str, Any], Counter[str], dict[str, Fires], list[str]]:
    expressions, mix = workload(sizes.expressions)
    samples, results = measure(first_fire_setups(expressions, START), sizes.repeats)
    medians = per_item(samples, sizes.expressions)
    speedup = ratios(medians)
    row = {
        "label": f"(a) parse + first fire, {sizes.expressions:,} distinct",
        "median_us": medians,
        "samples_ns": samples,
        "target": "≥10x croniter, ≥3x cronsim",
        "status": status_a(speedup),
    }
    return row, mix, results, expressions


def run_b(sizes: Sizes) -> tuple[dict[str, Any], dict[str, Fires]]:
    setups = iteration_setups(ITER_EXPRESSION, START, sizes.fires)
    samples, results = measure(setups, sizes.repeats)
    medians = per_item(samples, sizes.fires)
    row = {
        "label": f"(b) {ITER_EXPRESSION} x {sizes.fires:,} consecutive",
        "median_us": medians,
        "samples_ns": samples,
        "target": f"cronwheel ≤ {TARGET_B_US:g} µs per fire",
        "status": status_b(medians),
    }
    return row, results


def run_c(sizes: Sizes, expressions: Sequence[str]) -> list[dict[str, Any]]:
    maxsize = cw_parse._parse_cached.cache_info().maxsize
    assert maxsize is None or sizes.cached <= maxsize, "(c) must fit the parse cache"
    found = measure_reparse(expressions[: sizes.cached], START, sizes.repeats)
    rows = []
    for key, label in (("first", "first parse (cold)"), ("second", "same (expr, zone) again")):
        rows.append(
            {
                "label": f"(c) {label}, {sizes.cached:,}",
                "median_us": per_item(found[key], sizes.cached),
                "samples_ns": found[key],
                "target": "info (peers have no cache)",
                "status": "info",
            }
        )
    rows[1]["same_objects"] = found["same_objects"]
    return rows


def sanity_checks(sizes: Sizes, a: dict[str, Fires], b: dict[str, Fires], exprs: list[str]) -> dict[str, Any]:
    sample = random.Random(7).sample(exprs, min(sizes.dst_sample, len(exprs)))
    return {
        "a_checked": len(a["cronwheel"]),
        "a_disagree": len(disagreements(a)),
        "b_checked": len(b["cronwheel"]),
        "b_disagree": len(disagreements(b)),
        "dst": {name: dst_check(sample, start) for name, start in DST_STARTS.items()},
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition (CI)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args(argv)
    sizes = SMOKE if args.smoke else FULL
    info = machine()

    row_a, mix, results_a, expressions = run_a(sizes)
    print_machine(info, sizes, mix)
    row_b, results_b = run_b(sizes)
    rows_c = run_c(sizes, expressions)
    print_table([row_a, row_b, *rows_c])
    hit, miss = rows_c[1]["median_us"]["cronwheel"], rows_c[0]["median_us"]["cronwheel"]
    same = "same object" if rows_c[1]["same_objects"] else "NOT the same object"
    print(f"\n(c) cronwheel cache hit: {hit:.3f} µs vs {miss:.2f} µs cold ({miss / hit:.0f}x), {same}")
    sanity = sanity_checks(sizes, results_a, results_b, expressions)
    print_agreement(sanity)
    if args.smoke:
        print("\n(smoke mode: sizes too small for the numbers to mean anything)")
    if args.json:
        report = {"machine": info, "sizes": sizes.__dict__, "rows": [row_a, row_b, *rows_c]}
        args.json.write_text(json.dumps({**report, "sanity": sanity}, indent=2) + "\n")
        print(f"\nresults written to {args.json}")


if __name__ == "__main__":
    main()
