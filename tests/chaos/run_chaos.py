"""The chaos suite from the command line (``scripts/chaos``): one profile, one seed, a report.

    scripts/chaos                            the long profile, seed from the clock (printed)
    scripts/chaos --profile short --seed 7   the CI profile, replaying seed 7
    scripts/chaos --profile long-postgresql  the long profile on PostgreSQL alone (no etcd, no Redis)
    scripts/chaos --out reports/chaos        where chaos-<profile>-<seed>.json/.md go
    scripts/chaos --profile short --faults latency,restart_postgres --rounds 3
                                             some faults only, with the profile's workload

Exit status 0 when the checker found nothing and no finding was raised, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from chaos_scenario import ALL_FAULTS, ETCD_REDIS_FAULTS, PROFILES, Outcome, run, write_report

COUNT_KEYS = ("expected_slots", "optional_slots", "delivered_slots", "skipped", "failed", "manual", "runs",
              "deliveries")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=sorted(PROFILES), default="long")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("reports/chaos"))
    parser.add_argument("--faults", help=f"comma-separated, of: {', '.join(ALL_FAULTS)}")
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args(argv)
    profile = PROFILES[args.profile]
    if args.faults:
        unknown = set(args.faults.split(",")) - set(ALL_FAULTS)
        if unknown:
            parser.error(f"unknown faults: {', '.join(sorted(unknown))}")
        if profile.mode == "postgresql" and ETCD_REDIS_FAULTS & set(args.faults.split(",")):
            parser.error(f"profile {args.profile} has no etcd and no Redis to fault")
        profile = dataclasses.replace(profile, faults=tuple(args.faults.split(",")))
    if args.rounds is not None:
        profile = dataclasses.replace(profile, rounds=args.rounds)
    seed = args.seed if args.seed is not None else int(time.time())
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"chaos: profile {args.profile}, seed {seed} (replay with --seed {seed})", flush=True)
    started = time.monotonic()
    workdir = args.out / f"chaos-{args.profile}-{seed}-work"  # logs and history.json, kept
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    outcome = run(profile, seed, workdir, log=lambda line: print(line, flush=True))
    elapsed = time.monotonic() - started
    stem = args.out / f"chaos-{args.profile}-{seed}"
    write_report(outcome, stem.with_suffix(".json"))
    stem.with_suffix(".md").write_text(markdown(outcome, elapsed))
    print(outcome.report.summary())
    print(f"chaos: {'PASSED' if outcome.ok else 'FAILED'} in {elapsed / 60:.1f} min; report {stem}.md")
    return 0 if outcome.ok else 1


def markdown(outcome: Outcome, elapsed_s: float) -> str:
    report = outcome.report.to_dict()
    counts = report["counts"]
    lines = [
        f"# Chaos run: profile `{outcome.profile}`, seed {outcome.seed}",
        "",
        f"Result: **{'passed' if outcome.ok else 'FAILED'}** in {elapsed_s / 60:.1f} min on "
        f"{platform.node()} ({platform.machine()}, Python {platform.python_version()}).",
        f"Replay: `scripts/chaos --profile {outcome.profile} --seed {outcome.seed}`",
        "",
        "| slots checked | optional | delivered | skipped | failed | manual | runs | deliveries |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        "| " + " | ".join(str(counts[key]) for key in COUNT_KEYS) + " |",
        "",
        "Violations: " + ", ".join(f"{name} {len(found)}" for name, found in report["violations"].items()),
        "",
        "| lateness (slot → first arrival) | samples | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, key in (("calm", "lateness_calm"), ("bounded faults", "lateness_faulty"),
                       ("unbounded faults", "lateness_unbounded")):  # fmt: skip
        lines.append(_lateness_row(label, report[key]))
    lines += ["", "| fault | target | duration s | slots due | worst lateness s | median s | bound s |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for row in outcome.figures.get("per_fault", []):
        lines.append(
            f"| {row['fault']} | {row['target']} | {row['duration_s']} | {row['slots']} | "
            f"{row['worst_lateness_s']} | {row['median_lateness_s']} | {_bound(row['bound_s'])} |"
        )
    if outcome.findings:
        lines += ["", "Findings:", *(f"- {finding}" for finding in outcome.findings)]
    return "\n".join(lines) + "\n"


def _lateness_row(label: str, summary: dict[str, Any]) -> str:
    cells = [str(summary["count"])] + [
        "" if summary[key] is None else f"{summary[key]:.3f}" for key in ("p50", "p99", "max")
    ]
    return f"| {label} | " + " | ".join(cells) + " |"


def _bound(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    sys.exit(main())
