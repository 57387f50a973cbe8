"""A real cluster on loopback: etcd (its own process), PostgreSQL (a fresh database on the suite's
server), Redis (a dedicated key prefix in the suite's database; both named in ``suite_backends``),
and cronwheel api / scheduler / worker processes started as a user would, plus a webhook sink that
records every delivery. The ``any_cluster`` fixture's second cluster has no etcd and no Redis: its
processes are given the database URL alone."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

import suite_workers
from suite_backends import POSTGRES_ENV, postgres_url_with, suite_postgres_url

EVERY = 3  # each job of create_jobs fires every EVERY seconds, spread over the seconds
TTL = 2.0  # the coordinator TTL of the test clusters


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


@dataclass
class Etcd:
    data_dir: Path
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"etcd://127.0.0.1:{self.client_port}"

    def start(self) -> None:
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(binary).exists():
            raise AssertionError("etcd is not installed: run scripts/etcd (installs Debian's etcd-server)")
        client, peer = f"http://127.0.0.1:{self.client_port}", f"http://127.0.0.1:{self.peer_port}"
        command = [binary, "--data-dir", str(self.data_dir), "--name", "test",
                   "--listen-client-urls", client, "--advertise-client-urls", client,
                   "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                   "--initial-cluster", f"test={peer}"]  # fmt: skip
        log = (self.data_dir.parent / "etcd.log").open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{client}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("etcd did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@dataclass
class Redis:
    """A private redis-server (no persistence) that a test may restart with its data gone."""

    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not Path(binary).exists():
            raise AssertionError("redis-server is not installed")
        command = [binary, "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(self.workdir)]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # no persistence: everything it held is gone
            self.process.wait(10)


@dataclass
class Node:
    role: str
    name: str
    log: Path
    process: subprocess.Popen[bytes]
    url: str = ""

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)


@dataclass
class Cluster:
    workdir: Path
    etcd: Etcd | None  # None, and no queue URL: PostgreSQL alone
    database_url: str
    queue_url: str
    ttl_s: float = 2.0
    redis: Redis | None = None
    nodes: list[Node] = field(default_factory=list)
    token: str = ""  # the admin token `cronwheel tokens create --bootstrap` made (on first client)

    def bootstrap(self) -> str:
        """An admin token of every team, written straight to the database as an operator does for
        a new cluster (made once)."""
        if not self.token:
            made = subprocess.run(
                [sys.executable, "-m", "cronwheel", "tokens", "create", "--bootstrap", "--name", "tests"],
                env=self.env(), capture_output=True, text=True, check=False, timeout=120,
            )  # fmt: skip
            assert made.returncode == 0, made.stderr
            self.token = made.stdout.strip()
        return self.token

    def client(self, node: Node) -> httpx.AsyncClient:
        """An API client of ``node``, authenticated with the bootstrap token."""
        headers = {"Authorization": f"Bearer {self.bootstrap()}"}
        return httpx.AsyncClient(base_url=node.url, headers=headers, timeout=30)

    def env(self) -> dict[str, str]:
        elsewhere = ("CRONWHEEL_COORDINATOR_URL", "CRONWHEEL_QUEUE_URL")
        urls = {elsewhere[0]: self.etcd.url, elsewhere[1]: self.queue_url} if self.etcd else {}
        return {
            **{name: value for name, value in os.environ.items() if name not in elsewhere},
            **urls,
            "PYTHONUNBUFFERED": "1",
            "CRONWHEEL_DATABASE_URL": self.database_url,
            "CRONWHEEL_TTL": str(self.ttl_s),
        }

    def start(self, role: str, name: str, *args: str) -> Node:
        log = self.workdir / f"{name}.log"
        port = ("--port", "0") if role == "api" else ()  # a scheduler or worker has no API port
        command = [sys.executable, "-m", "cronwheel", role, "--node-id", name, *port,
                   "--allow-network", "127.0.0.0/8", *args]  # fmt: skip
        process = subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=self.env())
        node = Node(role, name, log, process)
        self.nodes.append(node)
        pattern = r"serving on (http://\S+)" if role == "api" else r"running \(node"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(pattern, node.text())
            if found:
                node.url = found.group(1) if role == "api" else ""
                return node
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{node.text()}")
            time.sleep(0.05)
        raise AssertionError(f"{name} did not start:\n{node.text()}")

    def stop_all(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
                node.process.terminate()
        for node in self.nodes:
            try:
                node.process.wait(15)
            except subprocess.TimeoutExpired:
                node.process.kill()


async def create_database() -> tuple[str, Callable[[], Any]]:
    """A fresh PostgreSQL database on the suite's server; returns its URL and an async function
    that drops it."""
    import asyncpg

    admin_url = await suite_postgres_url()
    if admin_url is None:
        pytest.skip(f"PostgreSQL opted out ({POSTGRES_ENV} is set empty)")
    name = f"cronwheel_cluster_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()

    async def drop() -> None:
        admin = await asyncpg.connect(admin_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()

    return postgres_url_with(admin_url, database=name), drop


@dataclass
class Delivery:
    run_id: str
    job_id: str
    slot: str
    attempt: int
    at: float
    path: str = ""
    body: bytes = b""
    traceparent: str | None = None  # with --tracing on: the attempt span's W3C context


@dataclass
class Sink:
    url: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    delay_s: dict[str, float] = field(default_factory=dict)  # path -> answer delay

    def at(self, path: str) -> list[Delivery]:
        """The deliveries to ``path``, in arrival order."""
        return [delivery for delivery in self.deliveries if delivery.path == path]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        headers = request.headers
        self.deliveries.append(
            Delivery(
                headers["Idempotency-Key"],
                headers["X-Cronwheel-Job-Id"],
                headers["X-Cronwheel-Scheduled-At"],
                int(headers["X-Cronwheel-Attempt"]),
                time.time(),
                request.path,
                body,
                headers.get("traceparent"),
            )
        )
        delay = self.delay_s.get(request.path, 0.0)
        if delay:
            await asyncio.sleep(delay)
        return web.Response(text="ok")


async def start_sink() -> tuple[Sink, web.AppRunner]:
    sink = Sink()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", sink.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    sink.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    return sink, runner


async def create_jobs(api: httpx.AsyncClient, url: str, count: int) -> list[str]:
    """``count`` webhook jobs to ``url``, one every EVERY seconds each, spread over the seconds."""
    ids = []
    for index in range(count):
        schedule = f"{index % EVERY}/{EVERY} * * * * *"
        body = {
            "team": "c",
            "name": f"job-{index}",
            "schedule": schedule,
            "target": {"type": "http", "url": url},
        }
        response = await api.post("/v1/jobs", json=body)
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


# Fixtures (registered under their ``name`` by the test modules that import them)


@contextlib.asynccontextmanager
async def running_cluster(tmp_path: Path, mode: str) -> AsyncIterator[tuple[Cluster, Sink]]:
    """A fresh database and a webhook sink, and in the ``postgresql+etcd+redis`` mode an etcd and
    a Redis of the cluster's own (``postgresql``: the database alone); no node started yet."""
    etcd = redis_server = None
    if mode != "postgresql":
        etcd = Etcd(tmp_path / "etcd-data")
        etcd.start()
        redis_server = Redis(tmp_path)
        redis_server.start()
    database_url, drop = await create_database()
    sink, runner = await start_sink()
    queue_url = redis_server.url if redis_server else ""
    cluster = Cluster(tmp_path, etcd, database_url, queue_url, ttl_s=TTL, redis=redis_server)
    try:
        yield cluster, sink
    finally:
        cluster.stop_all()
        for server in (etcd, redis_server):
            if server is not None:
                server.stop()
        await runner.cleanup()
        await drop()


@pytest.fixture(name="cluster")
async def cluster_fixture(tmp_path: Path) -> AsyncIterator[tuple[Cluster, Sink]]:
    """etcd and Redis of the test's own, a fresh database, a webhook sink; no node started yet."""
    async with running_cluster(tmp_path, "postgresql+etcd+redis") as cluster:
        yield cluster


@pytest.fixture(name="any_cluster", params=["postgresql+etcd+redis", "postgresql"])
async def any_cluster_fixture(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Cluster, Sink]]:
    """The cluster of ``cluster``, and one on PostgreSQL alone (no etcd, no Redis)."""
    async with running_cluster(tmp_path, request.param) as cluster:
        yield cluster


@pytest.fixture(name="database_url")
async def database_url_fixture() -> AsyncIterator[str]:
    """A fresh, empty PostgreSQL database, dropped afterwards."""
    url, drop = await create_database()
    try:
        yield url
    finally:
        await drop()
