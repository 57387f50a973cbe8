"""etcd's native gRPC client (aetcd 1.0) against cronwheel's JSON-gateway client.

A benchmark, not a test: every figure and finding is printed, none is asserted, the script exits 0.
It starts its own etcd (Debian's ``etcd-server``; ``$ETCD_BIN``, else ``etcd`` on PATH) on free
loopback ports with a data directory in a temporary directory, kills and restarts it on the same
ports and data, and stops it at the end whatever happens. Both clients talk to that one server.

**Latency.** ``--rounds`` rounds; in each, each client (in alternating order: gateway then aetcd,
then aetcd then gateway ...) runs ``--ops`` of each operation one after the other: ``get`` (one
key), ``put``, ``txn`` (the session's kind: compare the key's create revision, its lease and its
value, then put it again with the lease; a failure branch that reads the key), ``grant`` (a lease
of 60 s; revoked afterwards, untimed), ``keepalive`` (one renewal of a lease: what the
coordinator sends every ttl/3; aetcd's ``refresh_lease`` opens a LeaseKeepAlive stream per call,
and the row ``keepalive-stream`` renews on one long-lived stream through aetcd's stub, what an
adapter would do) and ``watch`` (a put by a common writer, a third client object, to the moment
the client's own watch of that prefix hands over the event). Printed per operation and client:
the median over rounds of each round's median, the p90 of all samples, the client's CPU per
operation (this process's CPU: etcd's is not in it) and aetcd / gateway.

**Watch across restarts.** Each client keeps a watch on a prefix with the loop the coordinator
has (``EtcdCoordinator._watch_loop``): resume from the last revision seen + 1 after a broken
stream (same backoff for both: 0.1 s doubling to 2 s, jittered), read everything again when etcd
says the start revision was compacted. A writer puts a new key every ``--write-every-s``; etcd is
killed (SIGKILL), started again on the same data dir and port, and the writer keeps writing.
Then ground truth is read from etcd and each watcher's record checked: events lost, events
repeated, out of order, how long after the kill it noticed, and how long after etcd answered
again its first event arrived (beside the writer's first acknowledged write: the floor). Scenario
``restart`` does just that; ``restart+compaction`` holds both watchers back after the kill until
etcd is up again, more keys are written and the history compacted to the latest revision: a
correct client reports the compaction (ErrCompacted) so the caller reads everything again and
ends with the same keys as etcd.

**Gaps.** What the coordinator needs beyond the calls above, checked live where it can be:
``transaction(failure=None)``, a lease compare, a lease-not-found error the caller can tell from
others, failover to a second endpoint, authentication (and after a restart, whose simple tokens
etcd forgets, and after ``--auth-token-ttl``), TLS with client certificates, compact, lease
time-to-live and revoke.

    .venv/bin/python benchmarks/bench_etcd_clients.py                 # about a minute
    .venv/bin/python benchmarks/bench_etcd_clients.py --rounds 9 --ops 400 --json etcd.json
    .venv/bin/python benchmarks/bench_etcd_clients.py --smoke         # a few seconds (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aetcd  # type: ignore[import-untyped]  # no py.typed: everything it returns is Any here
import grpc
from aetcd import rpc as aetcd_rpc

from benchlib import machine
from cronwheel.coordinator.etcd_api import (
    EtcdConfig,
    EtcdRequestError,
    EtcdUnavailableError,
    Json,
    LeaseNotFoundError,
    b64,
    cmp_create,
    cmp_lease,
    op_get,
    op_put,
    prefix_end,
)
from cronwheel.coordinator.etcd_client import EtcdClient
from cronwheel.retrying import Backoff

CLIENTS = ("gateway", "aetcd")
OPERATIONS = ("get", "put", "txn", "grant", "keepalive", "keepalive-stream", "watch")
PASSWORD = "bench-only-password"  # a throwaway etcd of this run


# -- an etcd of our own ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def etcd_binary() -> str:
    for candidate in (os.environ.get("ETCD_BIN"), shutil.which("etcd"), "/usr/bin/etcd"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("bench_etcd_clients: no etcd binary (scripts/etcd install, or set ETCD_BIN)")


class Etcd:
    """One etcd member on loopback, killed and started again on the same ports and data."""

    def __init__(self, directory: Path) -> None:
        self.binary = etcd_binary()
        self.directory = directory
        self.port = _free_port()
        self.peer_port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *args: str) -> float:
        """Start it and wait until it answers /health; the monotonic time it did."""
        peer = f"http://127.0.0.1:{self.peer_port}"
        with (self.directory / "etcd.log").open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    "--name=bench",
                    f"--data-dir={self.directory / 'bench.etcd'}",
                    f"--listen-client-urls={self.url}",
                    f"--advertise-client-urls={self.url}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster=bench={peer}",
                    "--log-level=warn",
                    *args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"etcd exited at start (log: {self.directory / 'etcd.log'})")
            if self._healthy():
                return time.monotonic()
            time.sleep(0.02)
        self.stop()
        raise SystemExit("etcd did not answer /health within 30 s")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=0.5) as response:
                return b'"health":"true"' in response.read()
        except OSError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


# -- the two clients -----------------------------------------------------------------------------


def gateway_client(etcd: Etcd, *, user: str | None = None) -> EtcdClient:
    return EtcdClient(EtcdConfig((etcd.url,), user=user, password=PASSWORD if user else ""))


def aetcd_client(etcd: Etcd, *, user: str | None = None) -> Any:
    return aetcd.Client("127.0.0.1", etcd.port, timeout=2, username=user, password=PASSWORD if user else None)


class LeaseCompare(aetcd.transactions.BaseCompare):  # type: ignore[misc]
    """What aetcd lacks: ``lease(key) == id`` (its compares are value, version, create, mod)."""

    def build_compare(self, compare: Any) -> None:
        compare.target = aetcd_rpc.Compare.LEASE
        compare.lease = int(self.value)


def cmp_value(key: str, value: bytes) -> Json:
    return {"target": "VALUE", "result": "EQUAL", "key": b64(key), "value": b64(value)}


class KeepaliveStream:
    """Lease renewals on one long-lived LeaseKeepAlive stream (aetcd's stub, no helper of its)."""

    def __init__(self, client: Any) -> None:
        self.call = client.leasestub.LeaseKeepAlive(metadata=client.metadata)

    async def renew(self, lease: int) -> int:
        await self.call.write(aetcd_rpc.LeaseKeepAliveRequest(ID=lease))
        reply = await self.call.read()
        return int(reply.TTL)

    def close(self) -> None:
        self.call.cancel()


class Watched:
    """A watch on ``prefix`` whose arrivals are timed (for the watch row)."""

    def __init__(self) -> None:
        self.waiting: dict[str, asyncio.Future[float]] = {}

    def arrived(self, key: str) -> None:
        future = self.waiting.pop(key, None)
        if future is not None and not future.done():
            future.set_result(time.perf_counter())

    async def gateway(self, client: EtcdClient, prefix: str, start: int) -> None:
        async for batch in client.watch(prefix, prefix_end(prefix), start):
            for event in batch.events:
                self.arrived(event.kv.key)

    async def aetcd(self, client: Any, prefix: str, start: int) -> None:
        watch = await client.watch_prefix(prefix.encode(), start_revision=start)
        async for event in watch:
            self.arrived(event.kv.key.decode())


@dataclass
class Samples:
    ms: list[list[float]] = field(default_factory=list)  # per round
    cpu_us: list[float] = field(default_factory=list)  # per round, per operation


async def _timed(samples: Samples, count: int, step: Callable[[int], Awaitable[object]]) -> None:
    times: list[float] = []
    cpu = time.process_time()
    for index in range(count):
        began = time.perf_counter()
        await step(index)
        times.append((time.perf_counter() - began) * 1000)
    samples.cpu_us.append((time.process_time() - cpu) / count * 1e6)
    samples.ms.append(times)


class Bench:
    """The operations of the latency table, for one client."""

    def __init__(self, name: str, etcd: Etcd, writer: EtcdClient, run: str) -> None:
        self.name = name
        self.gateway = gateway_client(etcd) if name == "gateway" else None
        self.aetcd: Any = aetcd_client(etcd) if name == "aetcd" else None
        self.writer = writer
        self.prefix = f"/bench/{run}/{name}/"
        self.watched = Watched()
        self.watch_task: asyncio.Task[None] | None = None
        self.lease = 0
        self.create_revision = 0
        self.stream: KeepaliveStream | None = None
        self.watch_ms = 0.0  # the last watch sample: the writer's put -> the event out of the watch

    async def setup(self) -> None:
        key = self.prefix + "txn"
        self.lease = (await self.writer.grant(600))[0]
        revision = await self.writer.put(key, b"v", self.lease)
        self.create_revision = revision
        start = revision + 1
        if self.gateway is not None:
            self.watch_task = asyncio.create_task(
                self.watched.gateway(self.gateway, self.prefix + "w/", start)
            )
        else:
            await self.aetcd.connect()
            self.watch_task = asyncio.create_task(self.watched.aetcd(self.aetcd, self.prefix + "w/", start))
            self.stream = KeepaliveStream(self.aetcd)
        await asyncio.sleep(0.2)  # the watch is open

    async def close(self) -> None:
        if self.watch_task is not None:
            self.watch_task.cancel()
            await asyncio.gather(self.watch_task, return_exceptions=True)
        if self.stream is not None:
            self.stream.close()
        if self.gateway is not None:
            await self.gateway.close()
        if self.aetcd is not None:
            await self.aetcd.close()
        with contextlib.suppress(EtcdRequestError, EtcdUnavailableError):
            await self.writer.revoke(self.lease)

    async def run(self, operation: str, count: int, samples: Samples) -> None:
        if operation == "keepalive-stream" and self.stream is None:
            return
        if operation == "grant":
            granted: list[int] = []

            async def grant(_: int) -> None:
                granted.append(await self.grant())

            await _timed(samples, count, grant)
            for lease in granted:
                await self.writer.revoke(lease)
            return
        await _timed(samples, count, getattr(self, operation.replace("-", "_")))

    async def get(self, _: int) -> None:
        if self.gateway is not None:
            await self.gateway.range(self.prefix + "txn")
        else:
            await self.aetcd.get((self.prefix + "txn").encode())

    async def put(self, index: int) -> None:
        key = f"{self.prefix}p{index % 50}"
        if self.gateway is not None:
            await self.gateway.put(key, b"value")
        else:
            await self.aetcd.put(key.encode(), b"value")

    async def txn(self, _: int) -> None:
        key = self.prefix + "txn"
        if self.gateway is not None:
            result = await self.gateway.txn(
                [cmp_create(key, self.create_revision), cmp_lease(key, self.lease), cmp_value(key, b"v")],
                [op_put(key, b"v", self.lease)],
                [op_get(key)],
            )
            succeeded = result.succeeded
        else:
            tx = self.aetcd.transactions
            raw = key.encode()
            succeeded, _responses = await self.aetcd.transaction(
                compare=[
                    tx.create(raw) == self.create_revision,
                    LeaseCompare(raw) == self.lease,
                    tx.value(raw) == b"v",
                ],
                success=[tx.put(raw, b"v", lease=self.lease)],
                failure=[tx.get(raw)],
            )
        assert succeeded, "the session's transaction did not hold"

    async def grant(self) -> int:
        if self.gateway is not None:
            return (await self.gateway.grant(60))[0]
        return int((await self.aetcd.lease(60)).id)

    async def keepalive(self, _: int) -> None:
        if self.gateway is not None:
            ttl = await self.gateway.keepalive(self.lease)
        else:
            ttl = int((await self.aetcd.refresh_lease(self.lease)).TTL)
        assert ttl > 0

    async def keepalive_stream(self, _: int) -> None:
        assert self.stream is not None
        assert await self.stream.renew(self.lease) > 0

    async def watch(self, index: int) -> None:
        key = f"{self.prefix}w/{index}"
        arrived = asyncio.get_running_loop().create_future()
        self.watched.waiting[key] = arrived
        began = time.perf_counter()
        await self.writer.put(key, b"x")
        landed = await asyncio.wait_for(arrived, 5)
        self.watch_ms = (landed - began) * 1000


async def latency(etcd: Etcd, rounds: int, ops: int) -> dict[str, dict[str, Samples]]:
    writer = gateway_client(etcd)
    run = str(time.monotonic_ns())
    benches = {name: Bench(name, etcd, writer, run) for name in CLIENTS}
    samples = {name: {operation: Samples() for operation in OPERATIONS} for name in CLIENTS}
    try:
        for bench in benches.values():
            await bench.setup()
        for round_ in range(rounds + 1):  # round 0 warms up
            order = CLIENTS if round_ % 2 == 0 else CLIENTS[::-1]
            for name in order:
                for operation in OPERATIONS:
                    target = samples[name][operation] if round_ else Samples()
                    if operation == "watch":
                        await _watch_round(benches[name], ops, target)
                    else:
                        await benches[name].run(operation, ops, target)
    finally:
        for bench in benches.values():
            await bench.close()
        await writer.close()
    return samples


async def _watch_round(bench: Bench, count: int, samples: Samples) -> None:
    times: list[float] = []
    cpu = time.process_time()
    for index in range(count):
        await bench.watch(index)
        times.append(bench.watch_ms)
    samples.cpu_us.append((time.process_time() - cpu) / count * 1e6)
    samples.ms.append(times)


def latency_table(samples: dict[str, dict[str, Samples]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for operation in OPERATIONS:
        row: dict[str, Any] = {"operation": operation}
        for name in CLIENTS:
            found = samples[name][operation]
            if not found.ms:
                continue
            flat = sorted(value for each in found.ms for value in each)
            row[name] = {
                "median_ms": round(statistics.median(statistics.median(each) for each in found.ms), 3),
                "p90_ms": round(flat[int(0.9 * (len(flat) - 1))], 3),
                "cpu_us": round(statistics.median(found.cpu_us), 1),
                "samples": len(flat),
            }
        rows.append(row)
    return rows


def print_latency(rows: list[dict[str, Any]]) -> None:
    print(f"{'operation':<17} {'gateway ms':>11} {'p90':>7} {'cpu µs':>7}   {'aetcd ms':>9} {'p90':>7} "
          f"{'cpu µs':>7}   {'aetcd/gw':>8}")  # fmt: skip
    for row in rows:
        cells = []
        for name in CLIENTS:
            figures = row.get(name)
            if figures is None:
                cells.append(
                    f"{'-':>11} {'-':>7} {'-':>7}" if name == "gateway" else f"{'-':>9} {'-':>7} {'-':>7}"
                )
                continue
            width = 11 if name == "gateway" else 9
            cells.append(
                f"{figures['median_ms']:>{width}.3f} {figures['p90_ms']:>7.3f} {figures['cpu_us']:>7.0f}"
            )
        ratio = "-"
        if "gateway" in row and "aetcd" in row:
            ratio = f"{row['aetcd']['median_ms'] / row['gateway']['median_ms']:.2f}"
        elif row["operation"] == "keepalive-stream" and "aetcd" in row:
            ratio = "(vs gw keepalive)"
        print(f"{row['operation']:<17} {cells[0]}   {cells[1]}   {ratio:>8}")


# -- watches across restarts --------------------------------------------------------------------


@dataclass
class WatchRecord:
    client: str
    events: list[tuple[str, int]] = field(default_factory=list)  # (key, mod revision) as they came
    mirror: dict[str, int] = field(default_factory=dict)  # key -> mod revision, the caller's copy
    errors: list[str] = field(default_factory=list)
    failed_at: list[float] = field(default_factory=list)  # monotonic times of the failures
    compactions: list[int] = field(default_factory=list)
    full_reads: int = 0
    broke_at: float | None = None
    first_event_after: dict[str, float] = field(default_factory=dict)  # mark -> monotonic time
    marks: dict[str, float] = field(default_factory=dict)

    def event(self, key: str, revision: int) -> None:
        self.events.append((key, revision))
        self.mirror[key] = revision
        now = time.monotonic()
        for mark, at in self.marks.items():
            if now >= at and mark not in self.first_event_after:
                self.first_event_after[mark] = now

    def failed(self, error: BaseException) -> None:
        self.errors.append(type(error).__name__)
        self.failed_at.append(time.monotonic())
        if self.broke_at is None:
            self.broke_at = time.monotonic()


class WatchLoop:
    """The coordinator's watch loop (``EtcdCoordinator._watch_loop``) around either client."""

    def __init__(self, record: WatchRecord, prefix: str, gate: asyncio.Event) -> None:
        self.record = record
        self.prefix = prefix
        self.gate = gate
        self.revision = 0  # events up to here are in the mirror; 0: read everything

    async def run(self, client: Any) -> None:
        retries = Backoff(first_s=0.1, multiplier=2.0, cap_s=2.0, jitter=0.25).tracker()
        while True:
            await self.gate.wait()
            try:
                if not self.revision:
                    await self.full_read(client)
                async for key, revision in self.stream(client):
                    self.record.event(key, revision)
                    self.revision = max(self.revision, revision)
                    retries.succeeded()
            except CompactedError as compacted:
                self.record.compactions.append(compacted.revision)
                self.revision = 0
            except (EtcdUnavailableError, aetcd.ClientError) as error:
                self.record.failed(error)
                await asyncio.sleep(retries.failed())

    async def full_read(self, client: Any) -> None:
        if isinstance(client, EtcdClient):
            revision, kvs = await client.range(self.prefix, prefix_end(self.prefix))
            mirror = {kv.key: kv.mod_revision for kv in kvs}
        else:
            found = await client.get_prefix(self.prefix.encode())
            revision = found.header.revision
            mirror = {kv.key.decode(): kv.mod_revision for kv in found.kvs}
        self.record.mirror = mirror
        self.record.full_reads += 1
        self.revision = revision

    async def stream(self, client: Any) -> AsyncIterator[tuple[str, int]]:
        start = self.revision + 1
        if isinstance(client, EtcdClient):
            async for batch in client.watch(self.prefix, prefix_end(self.prefix), start):
                if batch.canceled:
                    raise CompactedError(batch.compact_revision)
                for event in batch.events:
                    yield event.kv.key, event.kv.mod_revision
            return
        try:
            watch = await client.watch_prefix(self.prefix.encode(), start_revision=start)
            async for event in watch:
                yield event.kv.key.decode(), event.kv.mod_revision
        except aetcd.RevisionCompactedError as error:
            raise CompactedError(error.compacted_revision) from error
        raise aetcd.ClientError("the watch ended")  # a normal end never happens: treat as a break


class CompactedError(Exception):
    def __init__(self, revision: int) -> None:
        super().__init__(f"compacted at {revision}")
        self.revision = revision


@dataclass
class RestartResult:
    scenario: str
    client: str
    events: int
    expected: int  # events a lossless watch delivers (restart) / keys in etcd (compaction)
    lost: int
    repeated: int
    out_of_order: int
    compaction_reported: bool
    full_reads: int
    mirror_matches_etcd: bool
    noticed_break_ms: float | None
    events_again_ms: float | None  # after etcd answered again (or the watchers were let go)
    writer_again_ms: float | None  # the writer's first acknowledged write after the same instant
    errors: dict[str, int]
    failures_ms: list[float]  # when each failure was, after etcd answered again (negative: before)


# The restart's watchers: our client, aetcd as it comes, and aetcd with gRPC's reconnect backoff
# (1 s first, then x1.6 up to 120 s) shortened through its channel options (an adapter could).
WATCHERS = ("gateway", "aetcd", "aetcd-fast-reconnect")
FAST_RECONNECT = {
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
}


def watcher_client(name: str, etcd: Etcd) -> Any:
    if name == "gateway":
        return gateway_client(etcd)
    options = FAST_RECONNECT if name == "aetcd-fast-reconnect" else None
    return aetcd.Client("127.0.0.1", etcd.port, timeout=2, options=options)


class Writer:
    """Puts a new key under ``prefix`` every ``every_s``, through the gateway client, and keeps
    trying while etcd is down; remembers when each write was acknowledged."""

    def __init__(self, etcd: Etcd, prefix: str, every_s: float) -> None:
        self.client = gateway_client(etcd)
        self.prefix = prefix
        self.every_s = every_s
        self.sequence = 0
        self.acked: list[float] = []

    async def write_for(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.sequence += 1
            with contextlib.suppress(EtcdUnavailableError):
                await self.client.put(f"{self.prefix}{self.sequence:06d}", b"x")
                self.acked.append(time.monotonic())
            await asyncio.sleep(self.every_s)

    async def state(self) -> tuple[int, dict[str, int]]:
        revision, kvs = await self.client.range(self.prefix, prefix_end(self.prefix))
        return revision, {kv.key: kv.mod_revision for kv in kvs}


@dataclass(frozen=True)
class Timeline:
    start_revision: int
    killed: float
    up: float  # etcd answered again (restart), or the watchers were let go (restart+compaction)


async def restart_scenario(
    etcd: Etcd, *, compaction: bool, before_s: float, down_s: float, after_s: float, write_every_s: float
) -> list[RestartResult]:
    prefix = f"/restart/{time.monotonic_ns()}/"
    writer = Writer(etcd, prefix, write_every_s)
    start_revision, _ = await writer.state()
    gate = asyncio.Event()
    gate.set()
    records = {name: WatchRecord(name) for name in WATCHERS}
    loops = {name: WatchLoop(records[name], prefix, gate) for name in WATCHERS}
    for loop in loops.values():
        loop.revision = start_revision  # watch from now on, as after a full read
    clients = {name: watcher_client(name, etcd) for name in WATCHERS}
    tasks = [asyncio.create_task(loops[name].run(clients[name])) for name in WATCHERS]
    try:
        await asyncio.sleep(0.2)  # every watch open
        await writer.write_for(before_s)
        if compaction:
            gate.clear()  # the watchers wait, after the break, until the history is compacted
        killed = time.monotonic()
        etcd.stop(kill=True)
        await writer.write_for(down_s)
        up = await asyncio.to_thread(etcd.start)
        if compaction:
            await writer.write_for(after_s / 2)
            await writer.client.compact((await writer.state())[0])
            up = time.monotonic()
            gate.set()
        for record in records.values():
            record.marks["up"] = up
        await writer.write_for(after_s)
        truth_revision, truth = await writer.state()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and min(loop.revision for loop in loops.values()) < truth_revision:
            await asyncio.sleep(0.05)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in clients.values():
            await client.close()
        await writer.client.close()
    timeline = Timeline(start_revision, killed, up)
    writer_again = next((at for at in writer.acked if at >= up), None)
    return [judge(records[name], truth, timeline, writer_again, compaction=compaction) for name in WATCHERS]


def judge(
    record: WatchRecord,
    truth: dict[str, int],
    timeline: Timeline,
    writer_again: float | None,
    *,
    compaction: bool,
) -> RestartResult:
    """What a watcher got against what etcd holds: every key written after the start revision is
    one event (restart), or the caller's copy equals etcd (restart+compaction: the events between
    the start revision and the compaction are gone from etcd's history; the copy is read again)."""
    seen = Counter(record.events)
    expected = {(key, revision) for key, revision in truth.items() if revision > timeline.start_revision}
    revisions = [revision for _, revision in record.events]
    if compaction:
        lost, same = len(set(truth) - set(record.mirror)), record.mirror == truth
    else:
        lost, same = len(expected - set(seen)), set(seen) == expected
    return RestartResult(
        scenario="restart+compaction" if compaction else "restart",
        client=record.client,
        events=len(record.events),
        expected=len(truth) if compaction else len(expected),
        lost=lost,
        repeated=sum(count - 1 for count in seen.values()),
        out_of_order=sum(1 for a, b in itertools.pairwise(revisions) if b <= a),
        compaction_reported=bool(record.compactions),
        full_reads=record.full_reads,
        mirror_matches_etcd=same,
        noticed_break_ms=_ms(record.broke_at, timeline.killed),
        events_again_ms=_ms(record.first_event_after.get("up"), timeline.up),
        writer_again_ms=_ms(writer_again, timeline.up),
        errors=dict(Counter(record.errors)),
        failures_ms=[round((at - timeline.up) * 1000, 1) for at in record.failed_at],
    )


def _ms(at: float | None, since: float) -> float | None:
    return None if at is None else round((at - since) * 1000, 1)


def print_restarts(results: list[RestartResult]) -> None:
    print(f"{'scenario':<19} {'client':<21} {'events':>6} {'expect':>6} {'lost':>5} {'repeat':>6} "
          f"{'disorder':>8} {'compaction':>10} {'reads':>5} {'same as etcd':>12} {'noticed ms':>10} "
          f"{'events again ms':>15} {'writer ms':>9}  errors")  # fmt: skip
    for r in results:
        print(f"{r.scenario:<19} {r.client:<21} {r.events:>6} {r.expected:>6} {r.lost:>5} {r.repeated:>6} "
              f"{r.out_of_order:>8} {'reported' if r.compaction_reported else 'no':>10} {r.full_reads:>5} "
              f"{'yes' if r.mirror_matches_etcd else 'NO':>12} {_cell(r.noticed_break_ms):>10} "
              f"{_cell(r.events_again_ms):>15} {_cell(r.writer_again_ms):>9}  {r.errors}")  # fmt: skip


def _cell(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f}"


# -- gaps -----------------------------------------------------------------------------------------


@dataclass
class Gap:
    need: str
    gateway: str
    aetcd: str


async def _outcome(call: Awaitable[Any]) -> str:
    try:
        await call
    except Exception as error:
        return f"raises {type(error).__name__}: {str(error)[:90]}"
    return "works"


TRANSIENT = (EtcdUnavailableError, aetcd.ConnectionFailedError, aetcd.ConnectionTimeoutError)


async def _retried(call: Callable[[], Awaitable[Any]], attempts: int = 5) -> str:
    """``call()`` as a caller that retries what is transient would see it (0.1 s apart)."""
    transient: list[str] = []
    for _ in range(attempts):
        try:
            await call()
        except TRANSIENT as error:
            transient.append(type(error).__name__)
            await asyncio.sleep(0.1)
            continue
        except Exception as error:
            return f"raises {type(error).__name__}: {str(error)[:90]}" + (
                f" (after {', '.join(transient)})" if transient else ""
            )
        return "works" + (
            f" (on try {len(transient) + 1}; before: {', '.join(transient)})" if transient else ""
        )
    return f"still failing after {attempts} tries: {', '.join(transient)}"


async def gaps(etcd: Etcd) -> list[Gap]:
    found: list[Gap] = []
    gateway, native = gateway_client(etcd), aetcd_client(etcd)
    try:
        await native.connect()
        key = f"/gaps/{time.monotonic_ns()}"
        await gateway.put(key, b"1")
        tx = native.transactions
        found.append(
            Gap(
                "txn without a failure branch",
                await _outcome(gateway.txn([cmp_value(key, b"1")], [op_put(key, b"2")])),
                await _outcome(native.transaction(compare=[tx.value(key.encode()) == b"2"], success=[])),
            )
        )
        found.append(
            Gap(
                "compare on a key's lease",
                "cmp_lease (etcd_api.py)",
                "no builder (value, version, create, mod): a BaseCompare subclass setting "
                "Compare.LEASE works (LeaseCompare here)",
            )
        )
        found.append(await _lease_not_found(gateway, native, key))
        found.append(await _lease_calls(gateway, native))
        compact_mine = await _outcome(gateway.compact(await gateway.put(key, b"3")))
        compact_theirs = await _outcome(native.compact(await gateway.put(key, b"4"), physical=True))
        found.append(Gap("compact", compact_mine, compact_theirs))
        found.append(await _failover(etcd))
        found.append(_tls())
    finally:
        await gateway.close()
        await native.close()
    found.extend(await _auth(etcd))
    return found


async def _lease_not_found(gateway: EtcdClient, native: Any, key: str) -> Gap:
    try:
        await gateway.put(key, b"x", lease=0x7FFF_FFFF)
        mine = "no error"
    except LeaseNotFoundError:
        mine = "LeaseNotFoundError (by gRPC code NOT_FOUND)"
    try:
        await native.put(key.encode(), b"x", lease=0x7FFF_FFFF)
        theirs = "no error"
    except aetcd.ClientError as error:
        cause = error.__cause__
        code = cause.code().name if isinstance(cause, grpc.aio.AioRpcError) else "?"
        theirs = f"generic {type(error).__name__} ({error}); the code ({code}) only on __cause__"
    return Gap("put on an unknown lease", mine, theirs)


async def _lease_calls(gateway: EtcdClient, native: Any) -> Gap:
    mine = []
    lease, _ = await gateway.grant(30)
    mine.append(f"ttl={(await gateway.time_to_live(lease))[0]}")
    await gateway.revoke(lease)
    mine.append(f"after revoke ttl={(await gateway.time_to_live(lease))[0]}")
    mine.append(f"keepalive={await gateway.keepalive(lease)}")
    theirs = []
    granted = await native.lease(30)
    theirs.append(f"ttl={(await native.get_lease_info(granted.id)).TTL}")
    await native.revoke_lease(granted.id)
    theirs.append(f"after revoke ttl={(await native.get_lease_info(granted.id)).TTL}")
    theirs.append(f"keepalive={(await native.refresh_lease(granted.id)).TTL}")
    theirs.append(f"revoke again: {await _outcome(native.revoke_lease(granted.id))}")
    return Gap("lease time-to-live, revoke, keepalive of a revoked lease", ", ".join(mine), ", ".join(theirs))


async def _failover(etcd: Etcd) -> Gap:
    """A dead endpoint first, the live one second."""
    dead = _free_port()
    mine = EtcdClient(EtcdConfig((f"http://127.0.0.1:{dead}", etcd.url)))
    first = await _outcome(mine.range("/x"))
    second = await _outcome(mine.range("/x"))
    await mine.close()
    # aetcd takes one host and port; a gRPC target of several addresses can be slipped in through
    # ``host`` (``ipv4:a:p1,b`` + port p2): gRPC's pick_first then fails over by itself.
    theirs = aetcd.Client(f"ipv4:127.0.0.1:{dead},127.0.0.1", etcd.port, timeout=2)
    outcome = await _outcome(theirs.get(b"/x"))
    await theirs.close()
    return Gap(
        "several endpoints (first one dead)",
        f"1st call {first.split(':')[0]}, 2nd call {second} (moves to the next endpoint after a failure)",
        f"one host:port only; through a multi-address target in `host` (a hack): {outcome}",
    )


def _tls() -> Gap:
    parameters = list(inspect.signature(aetcd.Client).parameters)
    insecure = "insecure_channel" in inspect.getsource(aetcd.Client.connect)
    return Gap(
        "TLS with a client certificate",
        "https endpoints, CA file, client cert and key (tests/coordinator/test_secure.py)",
        f"none: Client({', '.join(parameters)}); connect() always opens "
        f"{'an insecure channel' if insecure else 'a channel'}",
    )


async def _auth(etcd: Etcd) -> list[Gap]:
    """Authentication on; then a restart (etcd forgets simple tokens) with a 1 s token TTL."""
    admin = gateway_client(etcd)
    await admin.call("auth/user/add", {"name": "root", "password": PASSWORD})
    await admin.call("auth/user/grant", {"user": "root", "role": "root"})
    await admin.call("auth/enable", {})
    await admin.close()
    gateway, native = gateway_client(etcd, user="root"), aetcd_client(etcd, user="root")

    async def both() -> tuple[str, str]:
        return await _retried(lambda: gateway.range("/a")), await _retried(lambda: native.get(b"/a"))

    try:
        before = await both()
        token = gateway._token  # whether it had to authenticate again
        etcd.stop(kill=True)
        etcd.start("--auth-token-ttl=1")
        after = await both()
        renewed = gateway._token != token
        after = (f"{after[0]}; new token: {'yes' if renewed else 'no'}", after[1])
        await asyncio.sleep(2.5)  # idle for longer than the tokens' TTL
        idle = await both()
    finally:
        await gateway.close()
        await native.close()
    return [
        Gap("user/password", *before),
        Gap("token after etcd restarted (tokens forgotten)", *after),
        Gap("token after --auth-token-ttl idle", *idle),
    ]


def print_gaps(found: list[Gap]) -> None:
    for gap in found:
        print(f"- {gap.need}\n    gateway: {gap.gateway}\n    aetcd:   {gap.aetcd}")


# -- code -----------------------------------------------------------------------------------------


def code_lines() -> dict[str, int]:
    """Lines of the gateway client and its protocol module (non-blank, comments and docstrings in)."""
    root = Path(__file__).resolve().parent.parent / "src" / "cronwheel" / "coordinator"
    counts = {}
    for name in ("etcd_client.py", "etcd_api.py"):
        lines = (root / name).read_text().splitlines()
        counts[name] = len(lines)
        counts[f"{name} non-blank"] = sum(1 for line in lines if line.strip())
    return counts


# -- main -------------------------------------------------------------------------------------------


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-etcd-") as directory:
        etcd = Etcd(Path(directory))
        etcd.start()
        try:
            print(f"etcd {etcd.url} ({etcd.binary}); aetcd {version('aetcd')}, grpcio {version('grpcio')}")
            print(f"\n== latency: {args.rounds} rounds x {args.ops} operations, interleaved")
            rows = latency_table(await latency(etcd, args.rounds, args.ops))
            print_latency(rows)
            print("\n== watch across an etcd restart (SIGKILL, same data dir and port)")
            restarts: list[RestartResult] = []
            for compaction in (False, True):
                restarts += await restart_scenario(
                    etcd,
                    compaction=compaction,
                    before_s=args.before_s,
                    down_s=args.down_s,
                    after_s=args.after_s,
                    write_every_s=args.write_every_s,
                )
            print_restarts(restarts)
            print("\n== gaps (what the coordinator needs)")
            found = await gaps(etcd)
            print_gaps(found)
        finally:
            etcd.stop()
    lines = code_lines()
    print("\n== code: " + ", ".join(f"{name} {count}" for name, count in lines.items()))
    return {
        "latency": rows,
        "restarts": [asdict(result) for result in restarts],
        "gaps": [asdict(gap) for gap in found],
        "lines": lines,
    }


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ops", type=int, default=200, help="operations of each kind per client per round")
    parser.add_argument("--before-s", type=float, default=1.0, help="writing before the kill")
    parser.add_argument("--down-s", type=float, default=1.0, help="etcd down (the writer keeps trying)")
    parser.add_argument("--after-s", type=float, default=3.0, help="writing after etcd is back")
    parser.add_argument("--write-every-s", type=float, default=0.01)
    parser.add_argument("--json", type=Path, help="also save the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, a few seconds (CI)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.ops = 1, 10
        args.before_s, args.down_s, args.after_s = 0.2, 0.2, 0.6
    return args


if __name__ == "__main__":
    arguments = parse()
    figures = asyncio.run(main(arguments))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps({"machine": machine(), **figures}, indent=1))
