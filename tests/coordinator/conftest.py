"""Live etcd servers for the coordinator tests (never mocks).

The PostgreSQL coordinator's fixtures (``coordination_database``, ``start_pg_node``) use the suite's
PostgreSQL server (``suite_stores``): a fresh migrated database per test.

The etcd fixtures start ``etcd`` themselves, on free loopback ports with a data directory under the
test's temporary directory: ``etcd`` (one server shared by the session; each test gets its own key
prefix) and ``own_etcd`` (a server of the test's own, which it may stop, kill and restart on the
same data). The binary is ``$ETCD_BIN``, else ``etcd`` on PATH, else ``/usr/bin/etcd``; without
one the tests fail (``scripts/etcd`` installs it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

import suite_workers
from cronwheel.clock import Clock, SystemClock
from cronwheel.coordinator.etcd import EtcdCoordinator
from cronwheel.coordinator.etcd_api import EtcdConfig
from cronwheel.coordinator.postgres import PostgresCoordinator
from suite_backends import POSTGRES_ENV, POSTGRES_URL
from suite_stores import fresh_postgres_database

TTL_S = 2.0  # etcd's smallest lease TTL with its default heartbeat and election timeout


def etcd_binary() -> str:
    configured = os.environ.get("ETCD_BIN")
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"ETCD_BIN={configured} is not an executable etcd")
        return configured
    for candidate in (shutil.which("etcd"), "/usr/bin/etcd", "/usr/local/bin/etcd"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "no etcd binary: the coordinator tests run against a real etcd. Run scripts/etcd (it installs "
        "the Debian package etcd-server), install etcd 3.4+ on PATH, or set ETCD_BIN."
    )


def _free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


@dataclass(frozen=True)
class Tls:
    """A test CA, a server certificate for 127.0.0.1 signed by it, and a client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def generate(cls, directory: Path) -> Tls:
        """With the openssl command line (EC P-256 keys, valid for a day)."""
        if shutil.which("openssl") is None:
            pytest.fail("the TLS tests make their certificates with the openssl command: install openssl")
        directory.mkdir(parents=True, exist_ok=True)

        def openssl(*args: str | Path) -> None:
            subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, cwd=directory)

        key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
        openssl(
            "req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=test-ca"
        )
        for name, usage in (("server", "serverAuth,clientAuth"), ("client", "clientAuth")):
            (directory / f"{name}.ext").write_text(
                f"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage={usage}\n"
            )
            openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
            openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "1", "-extfile", f"{name}.ext",
            )  # fmt: skip
        return cls(
            *(directory / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key"))
        )

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca)
        context.load_cert_chain(self.client_cert, self.client_key)
        return context


class EtcdServer:
    """One etcd member on loopback that can be stopped (or killed) and started again on the same
    ports and data; alone (a single-member cluster) or one of ``initial_cluster``. With ``tls``
    it serves clients over https only, to clients with a certificate of the test CA; ``args``
    are more options (``--auth-token=simple``)."""

    def __init__(
        self,
        binary: str,
        directory: Path,
        *,
        name: str = "test",
        client_port: int | None = None,
        peer_port: int | None = None,
        initial_cluster: str | None = None,
        tls: Tls | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.binary = binary
        self.directory = directory
        self.name = name
        self.client_port = client_port or _free_port()
        self.peer_port = peer_port or _free_port()
        self.initial_cluster = initial_cluster or f"{name}=http://127.0.0.1:{self.peer_port}"
        self.tls = tls
        self.args = tuple(args)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.client_port}"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def _tls_args(self) -> list[str]:
        if self.tls is None:
            return []
        return [
            f"--cert-file={self.tls.server_cert}",
            f"--key-file={self.tls.server_key}",
            "--client-cert-auth",
            f"--trusted-ca-file={self.tls.ca}",
        ]

    @property
    def log_path(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / f"{self.name}.etcd"

    def launch(self) -> None:
        """Start the process without waiting for it to answer."""
        assert self.process is None, "already running"
        self.directory.mkdir(parents=True, exist_ok=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    self.binary,
                    f"--name={self.name}",
                    f"--data-dir={self.data_dir}",
                    f"--listen-client-urls={self.url}",
                    f"--advertise-client-urls={self.url}",
                    f"--listen-peer-urls={peer}",
                    f"--initial-advertise-peer-urls={peer}",
                    f"--initial-cluster={self.initial_cluster}",
                    "--initial-cluster-token=cronwheel-test",
                    "--log-level=warn",
                    *self._tls_args(),
                    *self.args,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )

    def start(self, timeout_s: float = 20.0) -> None:
        self.launch()
        self.wait_healthy(timeout_s)

    def wait_healthy(self, timeout_s: float = 20.0) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                self.process = None
                pytest.fail(f"etcd exited at start:\n{tail}")
            if self.healthy():
                return
            time.sleep(0.05)
        self.stop()
        pytest.fail(f"etcd did not answer /health within {timeout_s} s (log: {self.log_path})")

    def healthy(self) -> bool:
        try:
            context = self.tls.context() if self.tls else None
            with urllib.request.urlopen(f"{self.url}/health", timeout=0.5, context=context) as response:
                return b'"health":"true"' in response.read()
        except OSError:
            return False

    def stop(self, *, kill: bool = False) -> None:
        """SIGTERM (or SIGKILL: a crash) and wait for the process to go."""
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


def etcd_cluster(directory: Path, size: int) -> list[EtcdServer]:
    """``size`` etcd members forming one cluster, started and healthy."""
    binary = etcd_binary()
    peers = [(f"m{i}", _free_port()) for i in range(size)]
    initial = ",".join(f"{name}=http://127.0.0.1:{port}" for name, port in peers)
    members = [
        EtcdServer(binary, directory, name=name, peer_port=port, initial_cluster=initial)
        for name, port in peers
    ]
    for member in members:
        member.launch()  # all at once: a member waits for its peers before it answers
    for member in members:
        member.wait_healthy()
    return members


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = EtcdServer(etcd_binary(), tmp_path_factory.mktemp("etcd"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(etcd_binary(), tmp_path / "etcd")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_etcd_cluster(tmp_path: Path) -> Iterator[list[EtcdServer]]:
    members = etcd_cluster(tmp_path / "etcd", 3)
    yield members
    for member in members:
        member.stop()


@pytest.fixture
def prefix() -> str:
    return f"/cronwheel-test/{uuid.uuid4().hex[:10]}"


class NodeFactory(Protocol):
    def __call__(
        self,
        node: str,
        roles: tuple[str, ...] = ("scheduler",),
        *,
        server: EtcdServer | Sequence[EtcdServer] | None = None,
        shards: int = ...,
        clock: Clock | None = ...,
        hold_s: float | None = ...,
        metrics_url: str | None = ...,
    ) -> Awaitable[EtcdCoordinator]: ...


@pytest.fixture
async def start_node(etcd: EtcdServer, prefix: str) -> AsyncIterator[NodeFactory]:
    """``await start_node("n1")``: a started coordinator on the shared etcd (or on ``server=``:
    one server, or the members of a cluster), stopped at the end of the test. ``clock=`` gives it
    a clock of the test's (a ``ManualClock`` moves its local deadline with ``advance()``)."""
    started: list[EtcdCoordinator] = []

    async def start(
        node: str,
        roles: tuple[str, ...] = ("scheduler",),
        *,
        server: EtcdServer | Sequence[EtcdServer] | None = None,
        shards: int = 256,
        clock: Clock | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> EtcdCoordinator:
        servers = [server or etcd] if server is None or isinstance(server, EtcdServer) else server
        coordinator = EtcdCoordinator.connect(
            EtcdConfig(tuple(each.url for each in servers)),
            node,
            roles,
            clock or SystemClock(),
            ttl_s=TTL_S,
            shards=shards,
            prefix=prefix,
            hold_s=hold_s,
            metrics_url=metrics_url,
        )
        await coordinator.start()
        started.append(coordinator)
        return coordinator

    yield start
    await asyncio.gather(*(coordinator.stop() for coordinator in started), return_exceptions=True)


PG_TTL_S = 2.0  # as etcd's, so that the contract suite's timings hold on both


@pytest.fixture
async def coordination_database() -> AsyncIterator[str]:
    """The URL of a fresh migrated PostgreSQL database, dropped after the test."""
    if POSTGRES_URL is None:
        pytest.fail(f"the PostgreSQL coordinator tests need PostgreSQL ({POSTGRES_ENV} is empty)")
    async with fresh_postgres_database(migrated=True) as url:
        yield url


class PgNodeFactory(Protocol):
    def __call__(
        self,
        node: str,
        roles: tuple[str, ...] = ("scheduler",),
        *,
        url: str | None = None,
        shards: int = ...,
        clock: Clock | None = ...,
        hold_s: float | None = ...,
        metrics_url: str | None = ...,
    ) -> Awaitable[PostgresCoordinator]: ...


@pytest.fixture
async def start_pg_node(coordination_database: str) -> AsyncIterator[PgNodeFactory]:
    """``await start_pg_node("n1")``: a started PostgreSQL coordinator on the test's database (or
    on ``url=``: through a proxy), stopped at the end of the test."""
    started: list[PostgresCoordinator] = []

    async def start(
        node: str,
        roles: tuple[str, ...] = ("scheduler",),
        *,
        url: str | None = None,
        shards: int = 256,
        clock: Clock | None = None,
        hold_s: float | None = None,
        metrics_url: str | None = None,
    ) -> PostgresCoordinator:
        coordinator = PostgresCoordinator.connect(
            url or coordination_database,
            node,
            roles,
            clock or SystemClock(),
            ttl_s=PG_TTL_S,
            shards=shards,
            hold_s=hold_s,
            metrics_url=metrics_url,
        )
        await coordinator.start()
        started.append(coordinator)
        return coordinator

    yield start
    await asyncio.gather(*(coordinator.stop() for coordinator in started), return_exceptions=True)
