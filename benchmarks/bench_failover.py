"""Failover: what a kill -9 of the leading scheduler costs, in each cluster mode (a benchmark).

For each mode of ``--modes`` (``postgresql``: the database URL alone; ``etcd-redis``: with an etcd
of the run's own and the local Redis), on a fresh database: ``--jobs`` jobs firing every second,
written in bulk, and ``--schedulers`` real ``cronwheel scheduler`` processes with ``--ttl``, started
as an operator would (no worker: the figure is when a run is fired, ``queued_at``). Once every
shard is owned and a leader elected, and after ``--warm`` seconds, the leader is killed with
SIGKILL. Then, for ``--after`` seconds:

* **takeover**: from the kill until no shard is registered to the dead node any more
  (``shard_epochs``, polled every 50 ms);
* **new leader**: from the kill until a survivor logs ``action=lead``;
* **lateness of the dead node's slots**: ``queued_at - slot`` of the runs of its shards' jobs due
  from the kill on (the gap users see), beside the same for the other shards (the control);
* **missed**: slots of the window with no run after a drain (0 expected; the unique key on
  (job, slot) makes doubles impossible to record, so none are counted).

    .venv/bin/python benchmarks/bench_failover.py --modes postgresql,etcd-redis --ttl 5
    .venv/bin/python benchmarks/bench_failover.py --smoke         # tiny (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import redis.asyncio as aioredis

import bench_fire
from bench_etcd_clients import Etcd
from benchlib import DB_PREFIX, REDIS_URL, admin, database_url, machine, save_results
from cronwheel.clock import SystemClock
from cronwheel.model import SHARDS, shard_of
from cronwheel.store.sql import open_store

MODES = ("postgresql", "etcd-redis")
QUEUE = REDIS_URL.rsplit("/", 1)[0] + "/13"  # a Redis database of this benchmark's own, emptied after


@dataclass
class Failover:
    mode: str
    ttl_s: float
    schedulers: int
    jobs: int
    takeover_s: float  # kill -> none of the dead node's shards registered to it
    new_leader_s: float  # kill -> a survivor logs action=lead
    dead_shards: int
    dead_slots: int  # slots of the dead node's shards due in the window
    dead_p50_ms: float
    dead_p99_ms: float
    dead_max_ms: float
    other_p99_ms: float  # the control: the other shards' slots
    other_max_ms: float
    missed: int


class EverySecond(bench_fire.Plan):
    def expression(self, index: int) -> str:
        return "* * * * * *"


@dataclass
class Node:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace")


async def measure(mode: str, args: argparse.Namespace, folder: Path) -> Failover:
    async with database() as url, backends(mode, folder) as urls:
        store = await open_store(url, clock=SystemClock())
        try:
            plan = EverySecond("steady", args.jobs, time.time() + 2, time.time() + 3600)
            await bench_fire.seed(store, replace(plan, start=float(int(time.time()) + 2)))
        finally:
            await store.close()
        env = {**os.environ, "CRONWHEEL_DATABASE_URL": url, "CRONWHEEL_TTL": str(args.ttl), **urls}
        with schedulers(args.schedulers, env, folder) as nodes:
            await until_owned(url, set(nodes), 60.0)
            leader = await until_leader(nodes, 30.0)
            await asyncio.sleep(args.warm)
            dead = await shards_of(url, leader.name)
            killed = time.time()
            leader.process.kill()
            takeover = await until_moved(url, leader.name, args.after)
            await asyncio.sleep(max(0.0, killed + args.after - time.time()))
            new_leader = lead_time([n for n in nodes.values() if n is not leader], killed)
        return await judge(url, mode, args, dead, killed, takeover, new_leader)


async def judge(
    url: str, mode: str, args: argparse.Namespace, dead: set[int], killed: float, takeover: float,
    new_leader: float,
) -> Failover:  # fmt: skip
    """Lateness of the slots from the kill to the end of the window (minus a second of drain)."""
    end = killed + args.after - 2
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT job_id, slot, queued_at FROM runs WHERE slot >= $1 AND slot <= $2",
            int(killed * 1_000_000), int(end * 1_000_000),
        )  # fmt: skip
    finally:
        await connection.close()
    late: dict[bool, list[float]] = {True: [], False: []}
    for row in rows:
        if row["queued_at"] is not None:
            late[shard_of(row["job_id"]) in dead].append((row["queued_at"] - row["slot"]) / 1000)
    expected = args.jobs * (int(end) - int(killed))
    dead_ms, other_ms = sorted(late[True]), sorted(late[False])
    return Failover(
        mode, args.ttl, args.schedulers, args.jobs, round(takeover, 3), round(new_leader, 3),
        len(dead), len(dead_ms), *_percentiles(dead_ms), *_percentiles(other_ms)[1:],
        missed=max(0, expected - len(rows)),
    )  # fmt: skip


def _percentiles(values: list[float]) -> tuple[float, float, float]:
    if not values:
        return float("nan"), float("nan"), float("nan")
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return round(statistics.median(values), 1), round(p99, 1), round(values[-1], 1)


@contextlib.asynccontextmanager
async def database() -> AsyncIterator[str]:
    name = f"{DB_PREFIX}_bench_failover_{uuid.uuid4().hex[:10]}"
    await admin(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(name)
    finally:
        await admin(f'DROP DATABASE "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def backends(mode: str, folder: Path) -> AsyncIterator[dict[str, str]]:
    """The coordinator and queue URLs of ``mode`` (none: PostgreSQL alone)."""
    if mode == "postgresql":
        yield {}
        return
    etcd = Etcd(folder)
    etcd.start()
    try:
        yield {
            "CRONWHEEL_COORDINATOR_URL": etcd.url.replace("http://", "etcd://"),
            "CRONWHEEL_QUEUE_URL": QUEUE,
        }
    finally:
        etcd.stop()
        client = aioredis.Redis.from_url(QUEUE)
        try:
            await client.flushdb()
        finally:
            await client.aclose()


@contextlib.contextmanager
def schedulers(count: int, env: dict[str, str], folder: Path) -> Iterator[dict[str, Node]]:
    nodes: dict[str, Node] = {}
    try:
        for index in range(count):
            name = f"bench-sched-{index + 1}"
            log = folder / f"{name}.log"
            command = [sys.executable, "-m", "cronwheel", "scheduler", "--node-id", name]
            with log.open("ab") as out:
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
            nodes[name] = Node(name, process, log)
        yield nodes
    finally:
        for node in nodes.values():
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in nodes.values():
            try:
                node.process.wait(20)
            except subprocess.TimeoutExpired:
                node.process.kill()


async def owners(url: str) -> dict[int, str]:
    connection = await asyncpg.connect(url)
    try:
        return {
            row["shard"]: row["node"]
            for row in await connection.fetch("SELECT shard, node FROM shard_epochs")
        }
    finally:
        await connection.close()


async def until_owned(url: str, names: set[str], timeout_s: float) -> None:
    """Every shard registered, each to a live scheduler, every scheduler owning some."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await owners(url)
        if len(found) == SHARDS and set(found.values()) == names:
            return
        await asyncio.sleep(0.2)
    raise SystemExit(f"bench_failover: the shards were not spread over {sorted(names)} in {timeout_s} s")


async def until_leader(nodes: dict[str, Node], timeout_s: float) -> Node:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        leading = [node for node in nodes.values() if "action=lead" in node.text()]
        if len(leading) == 1:
            return leading[0]
        await asyncio.sleep(0.2)
    raise SystemExit("bench_failover: no single leader")


async def shards_of(url: str, name: str) -> set[int]:
    return {shard for shard, node in (await owners(url)).items() if node == name}


async def until_moved(url: str, name: str, timeout_s: float) -> float:
    """Seconds until no shard is registered to ``name`` (NaN: not within ``timeout_s``)."""
    started = time.time()
    while time.time() - started < timeout_s:
        if name not in (await owners(url)).values():
            return time.time() - started
        await asyncio.sleep(0.05)
    return float("nan")


def lead_time(survivors: list[Node], killed: float) -> float:
    """Seconds from the kill to the first ``action=lead`` a survivor logged after it."""
    times = []
    for node in survivors:
        for line in node.text().splitlines():
            found = re.search(r"ts=(\S+) .*action=lead\b", line)
            if found:
                at = datetime.fromisoformat(found.group(1)).astimezone(UTC).timestamp()
                if at >= killed:
                    times.append(at - killed)
    return round(min(times), 3) if times else float("nan")


def report(results: list[Failover]) -> str:
    head = ("mode", "TTL s", "schedulers", "jobs/s", "takeover s", "new leader s", "dead shards",
            "dead slots", "dead p50 ms", "p99", "max", "others p99 ms", "max", "missed")  # fmt: skip
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        row = (r.mode, r.ttl_s, r.schedulers, r.jobs, r.takeover_s, r.new_leader_s, r.dead_shards,
               r.dead_slots, r.dead_p50_ms, r.dead_p99_ms, r.dead_max_ms, r.other_p99_ms, r.other_max_ms,
               r.missed)  # fmt: skip
        lines.append(" | ".join(str(value) for value in row))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--schedulers", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1000, help="each firing every second")
    parser.add_argument("--ttl", type=float, default=5.0, help="the coordinator TTL (the server default: 5)")
    parser.add_argument("--warm", type=float, default=5.0, help="seconds of calm before the kill")
    parser.add_argument("--after", type=float, default=None, help="seconds judged after the kill (3 TTL + 6)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args(argv)
    if args.smoke:
        args.jobs, args.ttl, args.warm, args.schedulers = 50, 2.0, 1.0, 2
    args.after = args.after or 3 * args.ttl + 6
    modes = [mode for mode in args.modes.split(",") if mode]
    if set(modes) - set(MODES):
        parser.error(f"--modes: of {', '.join(MODES)}")
    print(f"bench_failover: {args.jobs} jobs/s, TTL {args.ttl} s, {args.schedulers} schedulers, {machine()}")
    results = []
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="cronwheel-bench-failover-") as folder:
            results.append(asyncio.run(measure(mode, args, Path(folder))))
        print(f"  {mode}: {asdict(results[-1])}", flush=True)
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
