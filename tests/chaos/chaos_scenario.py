"""One chaos run: start the cluster, create the workload, let the nemesis loose while the API is
used, heal, wait for quiet, collect the history and judge it with the independent checker.

``run(profile, seed, workdir)`` is shared by the CI test (the short profile) and the long profile's
command (``scripts/chaos``), which also writes the report.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
from chaos_backplane import Backplane
from chaos_checker import (
    Delivery,
    EventRow,
    FaultWindow,
    History,
    JobPlan,
    ManualTrigger,
    Report,
    RunRow,
    Version,
    Window,
    check,
)
from chaos_cluster import ChaosCluster
from chaos_nemesis import FaultRecord, Nemesis
from chaos_witness import Error, Slow, WitnessProcess, read_command_lines
from chaos_workload import JobRecord, Mix, Workload

from cronwheel.model import shard_of

# The CI profiles share the short faults between the two modes (the union is every short fault):
# the etcd+Redis one keeps the faults of its own backends and of the scheduler's leases, the
# PostgreSQL-only one the rest; the long profiles run every fault of their mode.
SHORT_FAULTS = (
    "herd",
    "kill_scheduler",
    "kill_scheduler_between_commit_and_publish",
    "pause_scheduler",
    "kill_worker_mid_http",
    "blackhole_scheduler_postgres",
    "blackhole_scheduler_etcd",
    "restart_redis",
    "kill_etcd_member",
    "clock_jump",
)
ALL_FAULTS = (  # in this order: a seed replays the long profiles' shuffled order
    "herd",
    "kill_scheduler",
    "kill_scheduler_between_commit_and_publish",
    "move_shard_in_window",
    "edit_in_arming_window",
    "pause_scheduler",
    "kill_worker_mid_http",
    "kill_worker_mid_command",
    "kill_worker_before_herd",
    "blackhole_scheduler_postgres",
    "blackhole_scheduler_etcd",
    "restart_redis",
    "kill_etcd_member",
    "clock_jump",
    "target_faults",
    "pause_worker",
    "latency",
    "restart_postgres",
    "lose_etcd_quorum",
)
# faults of the backends only the etcd+Redis mode has
ETCD_REDIS_FAULTS = frozenset(
    {"blackhole_scheduler_etcd", "restart_redis", "kill_etcd_member", "lose_etcd_quorum"}
)
# the PostgreSQL-only mode's CI profile: kill -9 and SIGSTOP of schedulers and workers, a scheduler
# cut off from the database, and a crash of the database itself
SHORT_POSTGRESQL_FAULTS = (
    "herd",
    "kill_scheduler",
    "move_shard_in_window",
    "edit_in_arming_window",
    "pause_scheduler",
    "kill_worker_mid_command",
    "kill_worker_before_herd",
    "pause_worker",
    "blackhole_scheduler_postgres",
    "restart_postgres",
    "target_faults",
)


@dataclass(frozen=True)
class Profile:
    name: str
    faults: tuple[str, ...]
    rounds: int
    mix: Mix
    calm_s: float = 4.0  # between faults
    calm_first_s: float = 15.0  # before the first fault
    shuffle: bool = False
    mode: str = "postgresql+etcd+redis"  # or "postgresql": no etcd, no Redis (chaos_cluster)


SHORT = Profile("short", SHORT_FAULTS, rounds=1, mix=Mix(), calm_first_s=10.0)
LONG = Profile(
    "long", ALL_FAULTS, rounds=3, mix=Mix(steady=240, herd=2000, round_herd=100), calm_s=8.0, shuffle=True
)
CALM = Profile("calm", (), rounds=1, mix=Mix(), calm_s=60.0)  # the baseline: no fault at all
HERD = Profile("herd", ("herd",), rounds=1, mix=Mix(), calm_s=10.0)  # load alone, for measuring
# faults that aim a herd of their own: no round herd beside them
HERDED = frozenset({"herd", "move_shard_in_window", "kill_worker_before_herd"})
SHORT_POSTGRESQL = Profile(
    "short-postgresql", SHORT_POSTGRESQL_FAULTS, rounds=1, mix=Mix(), mode="postgresql"
)
LONG_POSTGRESQL = replace(
    LONG,
    name="long-postgresql",
    faults=tuple(fault for fault in ALL_FAULTS if fault not in ETCD_REDIS_FAULTS),
    mode="postgresql",
)
PROFILES = {
    "short": SHORT,
    "long": LONG,
    "calm": CALM,
    "herd": HERD,
    "short-postgresql": SHORT_POSTGRESQL,
    "long-postgresql": LONG_POSTGRESQL,
}

CALM_BOUND_S = 1.5
TTL_S = 2.0
LEASE_S = 4.0


@dataclass
class Outcome:
    profile: str
    seed: int
    report: Report
    faults: list[FaultRecord]
    findings: list[str]
    api_errors: list[str]
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.report.ok and not self.findings

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "seed": self.seed,
            "ok": self.ok,
            "figures": self.figures,
            "faults": [asdict(fault) for fault in self.faults],
            "findings": self.findings,
            "api_errors": self.api_errors[:50],
            "report": self.report.to_dict(),
        }


def run(profile: Profile, seed: int, workdir: Path, log: Callable[[str], None] = print) -> Outcome:
    rng = random.Random(seed)
    append_file = workdir / "commands.log"
    with Backplane() as plane:
        witness = WitnessProcess(workdir / "witness.log")
        witness.behave("/slow", Slow(1.0))
        witness.behave("/fail", Error(500))
        cluster = ChaosCluster(workdir, plane, ttl_s=TTL_S, lease_s=LEASE_S, mode=profile.mode)
        try:
            started = time.monotonic()
            cluster.start_backends()
            api = cluster.start_api("api-1")
            cluster.start_api("api-2")
            for index, faketime in ((1, False), (2, False), (3, True)):
                cluster.start_scheduler(f"sched-{index}", faketime=faketime)
            for index in (1, 2):
                cluster.start_worker(f"worker-{index}")
            workload = Workload(api.url, witness.url, append_file, rng, cluster.token, witness.grpc_address)
            workload.create(profile.mix)
            took = time.monotonic() - started
            log(f"chaos: cluster up and {len(workload.jobs)} jobs created in {took:.1f} s")
            time.sleep(4)
            nemesis = Nemesis(cluster, witness, append_file, rng, log=log)
            nemesis.workload, nemesis.herd_size = workload, profile.mix.herd
            nemesis.round_herd_size = profile.mix.round_herd
            window_start = time.time()
            time.sleep(profile.calm_first_s)  # a calm phase: the bound without faults is checked too
            _unleash(profile, nemesis, workload, rng, log)
            time.sleep(profile.calm_s)
            nemesis.revive()
            window_end = time.time()
            log("chaos: healed; waiting for every run of the window to finish")
            _quiet(cluster, window_end, deadline_s=90)
            history = _history(cluster, workload, witness, append_file, nemesis, window_start, window_end)
            workload.close()
            _dump(history, workdir / "history.json")
            report = check(history)
            figures = _figures(history, report, nemesis.faults)
            figures["scheduler_logs"] = _log_facts(cluster)
            return Outcome(
                profile.name, seed, report, nemesis.faults, nemesis.findings, workload.errors, figures
            )
        finally:
            cluster.close()
            witness.close()


def _unleash(
    profile: Profile, nemesis: Nemesis, workload: Workload, rng: random.Random, log: Callable[[str], None]
) -> None:
    for round_number in range(profile.rounds):
        faults = list(profile.faults)
        if profile.shuffle:
            rng.shuffle(faults)
        for fault in faults:
            nemesis.revive()
            log(f"chaos: round {round_number + 1}: edit {workload.random_edit()}")
            herd = None if fault in HERDED or not profile.mix.round_herd else nemesis.round_herd()
            getattr(nemesis, fault)()
            if herd is not None:
                herd.join()
            time.sleep(profile.calm_s)
            log(f"chaos: edit {workload.random_edit()}")


def _quiet(cluster: ChaosCluster, window_end: float, deadline_s: float) -> None:
    """Wait until no run of the window (and no manual run) is PENDING, RUNNING or RETRYING, or
    the deadline passes (the checker then reports what is left). The cluster keeps firing later
    slots meanwhile: those are outside the history."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if asyncio.run(_count_active(cluster.database_url, window_end)) == 0:
            return
        time.sleep(1)


async def _count_active(url: str, window_end: float) -> int:
    connection = await asyncpg.connect(url)
    try:
        count: int = await connection.fetchval(
            "SELECT count(*) FROM runs WHERE state IN ('PENDING', 'RUNNING', 'RETRYING')"
            " AND (slot <= $1 OR kind = 'manual')",
            int(window_end * 1_000_000),
        )
        return count
    finally:
        await connection.close()


def _micros(value: int | None) -> datetime | None:
    return None if value is None else _instant(value)


def _instant(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1_000_000, UTC)


async def _store_rows(url: str) -> tuple[list[RunRow], list[EventRow]]:
    """Runs and their events as of one snapshot (one REPEATABLE READ transaction)."""
    connection = await asyncpg.connect(url)
    try:
        await connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        runs = [
            RunRow(
                id=row["id"],
                job_id=row["job_id"],
                kind=row["kind"],
                slot=_instant(row["slot"]),
                state=row["state"],
                reason=row["reason"],
                attempts=row["attempts"],
                idempotency_key=row["idempotency_key"],
                created_at=_micros(row["created_at"]),
                queued_at=_micros(row["queued_at"]),
                started_at=_micros(row["started_at"]),
                finished_at=_micros(row["finished_at"]),
                epoch=row["epoch"],
            )
            for row in await connection.fetch("SELECT * FROM runs")
        ]
        events = [
            EventRow(
                id=row["id"],
                run_id=row["run_id"],
                state=row["state"],
                previous=row["previous"],
                at=_instant(row["at"]),
                node=row["node"],
            )
            for row in await connection.fetch("SELECT * FROM run_events ORDER BY id")
        ]
        return runs, events
    finally:
        await connection.close()


def _plan(job: JobRecord) -> JobPlan:
    versions = []
    for index, version in enumerate(job.versions):
        following = job.versions[index + 1] if index + 1 < len(job.versions) else None
        versions.append(
            Version(
                version.expression,
                version.zone,
                since=version.acknowledged,
                until=None if following is None else following.acknowledged,
                requested=version.requested,
                committed=version.committed,
            )
        )
    return JobPlan(
        job_id=job.job_id,
        shard=shard_of(job.job_id),
        versions=versions,
        misfire=job.misfire,
        grace_s=job.grace_s,
        max_catch_up=1000,
        overlap=job.overlap,
        paused=[
            Window(p.requested, p.acknowledged, p.end_requested, p.end_acknowledged, p.committed)
            for p in job.pauses
        ],
        deleted=None if job.deleted is None else Window(job.deleted[0], job.deleted[1]),
        expect_failure=job.expect_failure,
        jitter_s=job.jitter_s,
        closed_dates=job.closed_dates,
    )


def _history(
    cluster: ChaosCluster,
    workload: Workload,
    witness: WitnessProcess,
    append_file: Path,
    nemesis: Nemesis,
    window_start: float,
    window_end: float,
) -> History:
    """The store first, then the witness: every delivery of a run in the snapshot is seen. Only
    slots up to ``window_end`` (and manual runs) are judged; later ones were still in flight."""
    runs, events = asyncio.run(_store_rows(cluster.database_url))
    deliveries = [
        Delivery(d.execution_id, d.job_id, d.slot, d.attempt, d.arrived, d.answered)
        for d in witness.deliveries()
    ]
    deliveries += [
        Delivery(line.execution_id, line.job_id, line.slot, line.attempt, line.at, 0)
        for line in read_command_lines(append_file)
        if line.kind == "start"
    ]
    manual = {run.id for run in runs if run.kind == "manual"}
    runs = [run for run in runs if run.kind == "manual" or run.slot.timestamp() <= window_end]
    kept = {run.id for run in runs}
    events = [event for event in events if event.run_id in kept]
    deliveries = [d for d in deliveries if d.execution_id in manual or d.slot.timestamp() <= window_end]
    return History(
        jobs=[_plan(job) for job in workload.jobs.values()],
        deliveries=deliveries,
        runs=runs,
        events=events,
        window_start=window_start,
        window_end=window_end,
        faults=[FaultWindow(f.kind, f.start, f.end or f.start, f.bound_s) for f in nemesis.faults],
        manual=[ManualTrigger(m.job_id, m.idempotency_key, m.run_ids) for m in workload.manual],
        calm_bound_s=CALM_BOUND_S,
    )


def _figures(history: History, report: Report, faults: list[FaultRecord]) -> dict[str, Any]:
    """Per fault: the worst lateness of a slot due while it lasted (what a user would see)."""
    first: dict[tuple[str, datetime], float] = {}
    for delivery in history.deliveries:
        key = (delivery.job_id, delivery.slot)
        first[key] = min(first.get(key, delivery.arrived), delivery.arrived)
    per_fault = []
    for fault in faults:
        end = fault.end or fault.start
        late = [
            arrived - slot.timestamp()
            for (_, slot), arrived in first.items()
            if fault.start <= slot.timestamp() <= end
        ]
        per_fault.append(
            {
                "fault": fault.kind,
                "target": fault.target,
                "duration_s": round(end - fault.start, 2),
                "slots": len(late),
                "worst_lateness_s": round(max(late), 3) if late else None,
                "median_lateness_s": round(statistics.median(late), 3) if late else None,
                "bound_s": fault.bound_s,
            }
        )
    return {"per_fault": per_fault, "counts": report.to_dict().get("counts", {})}


def _log_facts(cluster: ChaosCluster) -> dict[str, int]:
    """What the schedulers' logs say they did about the faults (the checker does not rely on it)."""
    facts = {"fenced_firings": 0, "step_downs": 0, "clock_reports": 0, "leases_lost": 0}
    for node in cluster.of_role("scheduler"):
        text = node.text()
        facts["fenced_firings"] += sum(int(n) for n in re.findall(r"action=fenced jobs=(\d+)", text))
        facts["step_downs"] += text.count("action=step_down")
        facts["clock_reports"] += text.count("action=clock")
        facts["leases_lost"] += text.count("lost the lease")
    return facts


def _dump(history: History, path: Path) -> None:
    """The raw history beside the run, for a post-mortem (the seed replays the faults, not the
    exact interleaving)."""
    path.write_text(json.dumps(asdict(history), default=str))


def write_report(outcome: Outcome, path: Path) -> None:
    path.write_text(json.dumps(outcome.to_dict(), indent=2, default=str))
