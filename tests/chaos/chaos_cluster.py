"""A whole cronwheel cluster on loopback for the chaos suite, every part a real process.

* PostgreSQL: a private server (``initdb`` into a temporary directory), so that the suite can kill
  and restart it without touching the machine's shared server;
* etcd: a three-member cluster on separate loopback ports, each member killable and restartable;
* Redis: a private ``redis-server`` without persistence (a restart loses everything);
* cronwheel ``api``, ``scheduler`` and ``worker`` processes started as an operator would. Each
  scheduler reaches PostgreSQL, Redis and every etcd member through its own TCP proxies (hosted by
  the :class:`~chaos_backplane.Backplane`), so that one process's links can be delayed,
  black-holed or cut; a scheduler may run under libfaketime, its wall clock steppable at runtime.

In the ``postgresql`` mode (``ChaosCluster(..., mode="postgresql")``) there is no etcd and no
Redis: every process is given the database URL alone, and coordinates and queues through it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from chaos_backplane import Backplane

import suite_workers
from cronwheel.scheduler import ARM_AHEAD_S
from cronwheel.scheduler.loop import ARM_MIN_S

PG_BIN = Path("/usr/lib/postgresql/15/bin")
FAKETIME_LIB = Path(
    os.environ.get("CRONWHEEL_FAKETIME_LIB") or "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
)
REPO = Path(__file__).resolve().parents[2]
# the schedulers' --arm-ahead (empty: cronwheel's default); ARMING: whether they arm ahead
ARM_AHEAD = os.environ.get("CRONWHEEL_TEST_ARM_AHEAD", "")
ARMING = float(ARM_AHEAD or ARM_AHEAD_S) >= ARM_MIN_S


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


def wait_port(port: int, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"{what} did not listen on {port} within {timeout_s} s")


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: drop to the ``postgres`` user when we are root."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@dataclass
class PrivatePostgres:
    """A throwaway PostgreSQL server in a temporary directory (fsync off: crash-only restarts of the
    server process keep everything committed, which is the fault under test; a power cut is not)."""

    port: int = field(default_factory=free_port)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cronwheel-chaos-pg-")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def init(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise AssertionError(f"PostgreSQL 15 binaries not found in {PG_BIN}")
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        subprocess.run(
            _as_postgres([str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust",
                          "--no-sync", "-E", "UTF8"]),
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip

    def start(self) -> None:
        log = (self.directory / "postgres.log").open("ab")
        command = [str(PG_BIN / "postgres"), "-D", str(self.data), "-p", str(self.port),
                   "-k", str(self.directory), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                   "-c", "full_page_writes=off", "-c", "max_connections=300",
                   "-c", "shared_buffers=128MB"]  # fmt: skip
        self.process = subprocess.Popen(_as_postgres(command), stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            probe = subprocess.run(
                [str(PG_BIN / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True, check=False,
            )  # fmt: skip
            if probe.returncode == 0:
                return
            if self.process.poll() is not None:
                raise AssertionError(f"postgres exited: {(self.directory / 'postgres.log').read_text()}")
            time.sleep(0.1)
        raise AssertionError("postgres did not start")

    def kill(self) -> None:
        """Crash the server: immediate shutdown (every backend killed, no checkpoint; the next
        start recovers from the WAL), through ``pg_ctl`` since the process may run as another user."""
        self._pg_ctl("immediate")

    def stop(self) -> None:
        self._pg_ctl("fast")

    def _pg_ctl(self, mode: str) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        subprocess.run(
            _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"]),
            capture_output=True, check=False, timeout=60,
        )  # fmt: skip
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


@dataclass
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def client_url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class EtcdCluster:
    """Three etcd members on loopback. A killed member restarts from its data directory and
    rejoins; killing two of three loses quorum (nothing can be written until one returns)."""

    workdir: Path
    size: int = 3
    members: list[EtcdMember] = field(default_factory=list)

    def __post_init__(self) -> None:
        for index in range(self.size):
            self.members.append(
                EtcdMember(f"e{index}", free_port(), free_port(), self.workdir / f"etcd-e{index}")
            )

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(f"127.0.0.1:{member.client_port}" for member in self.members)

    def start(self) -> None:
        for member in self.members:
            self.start_member(member, wait=False)
        for member in self.members:
            self._wait_healthy(member)

    def start_member(self, member: EtcdMember, *, wait: bool = True) -> None:
        binary = shutil.which("etcd") or "/usr/bin/etcd"
        if not Path(binary).exists():
            raise AssertionError("etcd is not installed: run scripts/etcd (installs Debian's etcd-server)")
        initial = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        peer = f"http://127.0.0.1:{member.peer_port}"
        command = [binary, "--name", member.name, "--data-dir", str(member.data_dir),
                   "--listen-client-urls", member.client_url, "--advertise-client-urls", member.client_url,
                   "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                   "--initial-cluster", initial,
                   "--initial-cluster-token", f"chaos-{self.members[0].peer_port}",
                   "--initial-cluster-state", "new",
                   "--heartbeat-interval", "100", "--election-timeout", "1000"]  # fmt: skip
        log = (self.workdir / f"etcd-{member.name}.log").open("ab")
        member.process = subprocess.Popen(command, stdout=log, stderr=log)
        if wait:
            self._wait_healthy(member)

    def _wait_healthy(self, member: EtcdMember, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{member.client_url}/health", timeout=1).status_code == 200:
                    return
            if member.process is not None and member.process.poll() is not None:
                raise AssertionError(f"etcd member {member.name} exited")
            time.sleep(0.1)
        raise AssertionError(f"etcd member {member.name} not healthy within {timeout_s} s")

    def kill_member(self, member: EtcdMember) -> None:
        if member.alive():
            assert member.process is not None
            member.process.kill()
            member.process.wait(10)

    def wait_quorum(self, timeout_s: float = 30) -> None:
        for member in self.members:
            if member.alive():
                self._wait_healthy(member, timeout_s)

    def stop(self) -> None:
        for member in self.members:
            self.kill_member(member)


@dataclass
class PrivateRedis:
    """A private redis-server with no persistence: a restart loses every stream and group."""

    workdir: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        command = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", str(self.workdir)]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port, 10, "redis-server")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@dataclass
class Links:
    """A scheduler's proxies: one to PostgreSQL, one to Redis, one per etcd member (none of
    either in the ``postgresql`` mode)."""

    postgres: Any
    redis: Any | None
    etcd: list[Any]

    def all(self) -> list[Any]:
        return [self.postgres, *([self.redis] if self.redis else []), *self.etcd]


@dataclass
class Node:
    role: str
    name: str
    log: Path
    command: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    args: tuple[str, ...] = ()
    url: str = ""
    links: Links | None = None
    faketime_file: Path | None = None

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive():
            self.process.send_signal(sig)

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(10)

    def step_clock(self, offset_s: float) -> None:
        """Set this node's wall clock to real time + ``offset_s`` (libfaketime reads the file on
        every call: FAKETIME_NO_CACHE)."""
        assert self.faketime_file is not None, f"{self.name} does not run under libfaketime"
        self.faketime_file.write_text(f"{offset_s:+.3f}\n")


@dataclass
class ChaosCluster:
    workdir: Path
    backplane: Backplane
    ttl_s: float = 2.0
    lease_s: float = 4.0
    postgres: PrivatePostgres = field(default_factory=PrivatePostgres)
    etcd: EtcdCluster = field(init=False)
    redis: PrivateRedis = field(init=False)
    database: str = "cronwheel"
    mode: str = "postgresql+etcd+redis"  # or "postgresql": the database alone
    nodes: dict[str, Node] = field(default_factory=dict)
    token: str = ""  # the admin token made by `cronwheel tokens create --bootstrap`

    def __post_init__(self) -> None:
        self.etcd = EtcdCluster(self.workdir)
        self.redis = PrivateRedis(self.workdir)

    # -- backends ------------------------------------------------------------------------------

    def start_backends(self) -> None:
        self.postgres.init()
        self.postgres.start()
        subprocess.run(
            [str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(self.postgres.port), "-U", "postgres",
             self.database],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        if self.mode != "postgresql":
            self.etcd.start()
            self.redis.start()
        migrate = subprocess.run(
            [sys.executable, "-m", "cronwheel", "db", "upgrade", "--database-url", self.database_url],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert migrate.returncode == 0, migrate.stderr
        bootstrap = subprocess.run(
            [sys.executable, "-m", "cronwheel", "tokens", "create", "--bootstrap", "--name", "chaos",
             "--database-url", self.database_url],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert bootstrap.returncode == 0, bootstrap.stderr
        self.token = bootstrap.stdout.strip()

    @property
    def database_url(self) -> str:
        return self.postgres.url(self.database)

    # -- nodes ---------------------------------------------------------------------------------

    def _env(self, database_url: str, coordinator_url: str, queue_url: str) -> dict[str, str]:
        """A node's environment; in the ``postgresql`` mode, no coordinator or queue URL."""
        inherited = {
            k: v
            for k, v in os.environ.items()
            if k not in ("CRONWHEEL_COORDINATOR_URL", "CRONWHEEL_QUEUE_URL")
        }
        elsewhere = (
            {} if self.mode == "postgresql"
            else {"CRONWHEEL_COORDINATOR_URL": coordinator_url, "CRONWHEEL_QUEUE_URL": queue_url}
        )  # fmt: skip
        return {
            **inherited,
            **elsewhere,
            "PYTHONUNBUFFERED": "1",
            "CRONWHEEL_DATABASE_URL": database_url,
            "CRONWHEEL_TTL": str(self.ttl_s),
            "CRONWHEEL_LEASE": str(self.lease_s),
            # the workload creates a herd of up to 2,000 jobs at once from one address, and the
            # long profile more than 10,000 jobs in its one team: the rate limit and the team
            # quota have their own tests (tests/api/test_limits.py), the chaos suite others
            "CRONWHEEL_RATE_LIMIT": "0",
            "CRONWHEEL_MAX_JOBS_PER_TEAM": "0",
        }

    def _direct_env(self) -> dict[str, str]:
        return self._env(self.database_url, self.etcd.url, self.redis.url)

    def start_api(self, name: str) -> Node:
        return self._spawn("api", name, self._direct_env(), "--allow-commands")

    def start_worker(self, name: str, *args: str) -> Node:
        # the workload's commands run this interpreter on files of the run: as the suite's own
        # user (root on CI), not the nobody a root worker picks by default
        own = ("--command-user", str(os.geteuid()))
        return self._spawn("worker", name, self._direct_env(), "--allow-commands", *own, *args)

    def start_scheduler(self, name: str, *, faketime: bool = False, failpoints: str = "") -> Node:
        """A scheduler whose every backend link runs through its own proxy (kept across restarts
        of the same name, so a fault on a link outlives the process)."""
        previous = self.nodes.get(name)
        links = previous.links if previous is not None and previous.links is not None else self._links(name)
        env = self._env(
            f"postgresql://postgres@127.0.0.1:{links.postgres.port}/{self.database}",
            "etcd://" + ",".join(f"127.0.0.1:{proxy.port}" for proxy in links.etcd),
            f"redis://127.0.0.1:{links.redis.port}/0" if links.redis else "",
        )
        if failpoints:
            env["CRONWHEEL_FAILPOINTS"] = failpoints
        if ARM_AHEAD:  # 0: the schedulers record at the slot (docs/reliability.md)
            env["CRONWHEEL_ARM_AHEAD"] = ARM_AHEAD
        clock_file = None
        if faketime:
            assert FAKETIME_LIB.exists(), f"{FAKETIME_LIB} missing: run scripts/libfaketime (installs it)"
            clock_file = self.workdir / f"{name}.faketime"
            clock_file.write_text("+0\n")
            env.update(
                LD_PRELOAD=str(FAKETIME_LIB),
                FAKETIME_TIMESTAMP_FILE=str(clock_file),
                FAKETIME_NO_CACHE="1",
                # only the wall clock steps, as under NTP or an operator; CLOCK_MONOTONIC stays true
                FAKETIME_DONT_FAKE_MONOTONIC="1",
            )
        node = self._spawn("scheduler", name, env)
        node.links, node.faketime_file = links, clock_file
        return node

    def _links(self, name: str) -> Links:
        plane = self.backplane
        postgres = plane.proxy(f"{name}-pg", "127.0.0.1", self.postgres.port)
        if self.mode == "postgresql":
            return Links(postgres=postgres, redis=None, etcd=[])
        return Links(
            postgres=postgres,
            redis=plane.proxy(f"{name}-redis", "127.0.0.1", self.redis.port),
            etcd=[plane.proxy(f"{name}-{m.name}", "127.0.0.1", m.client_port) for m in self.etcd.members],
        )

    def _spawn(self, role: str, name: str, env: dict[str, str], *args: str) -> Node:
        log = self.workdir / f"{name}.log"
        port = ("--port", "0") if role == "api" else ()  # a scheduler or worker has no API port
        command = [sys.executable, "-m", "cronwheel", role, "--node-id", name, *port,
                   "--allow-network", "127.0.0.0/8", *args]  # fmt: skip
        with log.open("ab") as handle:
            handle.write(f"=== start {time.time():.3f}\n".encode())
        offset = log.stat().st_size
        process = subprocess.Popen(
            command, stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=REPO
        )
        node = Node(role, name, log, command, env, process, args)
        self.nodes[name] = node
        pattern = r"serving on (http://\S+)" if role == "api" else r"running \(node"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(pattern, node.text()[offset:])
            if found:
                node.url = found.group(1) if role == "api" else ""
                return node
            if process.poll() is not None:
                raise AssertionError(f"{name} exited with {process.returncode}:\n{node.text()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"{name} did not start:\n{node.text()[-3000:]}")

    def restart(self, name: str) -> Node:
        node = self.nodes[name]
        node.kill()
        if node.role == "scheduler":
            return self.start_scheduler(name, faketime=node.faketime_file is not None)
        return self._spawn(node.role, name, node.env, *node.args)

    def of_role(self, role: str) -> list[Node]:
        return [node for node in self.nodes.values() if node.role == role]

    def stop_all(self) -> None:
        for node in self.nodes.values():
            if node.alive():
                node.signal(signal.SIGCONT)
                node.signal(signal.SIGTERM)
        for node in self.nodes.values():
            try:
                node.process.wait(15)
            except subprocess.TimeoutExpired:
                node.process.kill()

    def close(self) -> None:
        self.stop_all()
        self.redis.kill()
        self.etcd.stop()
        self.postgres.destroy()
