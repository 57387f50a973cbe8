"""Private backend servers that speak only TLS and want credentials, each on a free loopback port
with its files under a temporary directory: ``redis-server`` (TLS port only, client certificates
required, the default user off and an ACL user with a password), PostgreSQL (``initdb`` into a
temporary directory; ``ssl=on`` and ``hostssl`` lines only: a password user and a certificate
user) and an etcd member (https only, client certificates required, authentication enabled with
user root). Each is started once per test session by the fixtures in ``conftest.py`` and
stopped at its end."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import asyncpg

import suite_workers

from .pki import Authority, Pair

PG_BIN = Path(os.environ.get("CRONWHEEL_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))

# passwords with characters a URL must escape; each backend's user has its own
REDIS_PASSWORD = "r3d:s@ss/wörd#1"
PG_PASSWORD = "pg:p@ss/wörd#2"
ETCD_PASSWORD = "etcd:p@ss/wörd#3"
# asyncpg reads a passfile's "\:" as two characters (it never unescapes it): no colon in this one
PASSFILE_PASSWORD = "file-p@ss/wörd#4"


def in_url(password: str) -> str:
    return quote(password, safe="")


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


def _wait(
    ready: object, process: subprocess.Popen[bytes], what: str, log: Path, timeout_s: float = 20
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{what} exited at start:\n{log.read_text(errors='replace')[-2000:]}")
        if ready():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(
        f"{what} did not start within {timeout_s} s:\n{log.read_text(errors='replace')[-2000:]}"
    )


def spawn(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``command`` started with its output appended to ``log`` (the child keeps its own handle)."""
    with log.open("ab") as handle:
        return subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class Pki:
    """The test CA, a server certificate and client certificates (one whose name is the
    PostgreSQL certificate user), and a CA nobody trusts with its own client certificate."""

    directory: Path
    ca: Authority = field(init=False)
    other: Authority = field(init=False)
    server: Pair = field(init=False)
    client: Pair = field(init=False)
    nameless: Pair = field(init=False)  # no CommonName: etcd's gateway wants that with auth on
    pg_client: Pair = field(init=False)
    stranger: Pair = field(init=False)

    def __post_init__(self) -> None:
        self.ca = Authority(self.directory, "test")
        self.other = Authority(self.directory, "other")
        self.server = self.ca.issue("server", "server", server=True)
        self.client = self.ca.issue("client", "cronwheel-client", server=False)
        self.nameless = self.ca.issue("nameless-client", "", server=False)
        self.pg_client = self.ca.issue("pg-client", "cw_cert", server=False)
        self.stranger = self.other.issue("stranger", "cronwheel-client", server=False)


# -- Redis -----------------------------------------------------------------------------------------


@dataclass
class TlsRedis:
    directory: Path
    pki: Pki
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def url(
        self, *, password: str | None = REDIS_PASSWORD, client: Pair | None = None, ca: Path | None = None
    ) -> str:
        userinfo = f"cronwheel:{in_url(password)}@" if password is not None else ""
        client = client or self.pki.client
        query = f"ssl_ca_certs={ca or self.pki.ca.ca}&ssl_certfile={client.cert}&ssl_keyfile={client.key}"
        return f"rediss://{userinfo}127.0.0.1:{self.port}/0?{query}"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "port 0",
                    f"tls-port {self.port}",
                    "bind 127.0.0.1",
                    f"tls-cert-file {self.pki.server.cert}",
                    f"tls-key-file {self.pki.server.key}",
                    f"tls-ca-cert-file {self.pki.ca.ca}",
                    "tls-auth-clients yes",
                    'save ""',
                    "appendonly no",
                    f"dir {self.directory}",
                    "user default off",
                    # what docs/cluster.md suggests: cronwheel's keys, no dangerous commands
                    f'user cronwheel on ">{REDIS_PASSWORD}" ~cronwheel:* +@all -@dangerous',
                    "",
                ]
            )
        )
        log = self.directory / "redis.log"
        self.process = spawn([binary, str(config)], log)

        def ready() -> bool:
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        _wait(ready, self.process, "redis-server", log)

    def stop(self) -> None:
        _stop(self.process)


# -- PostgreSQL ------------------------------------------------------------------------------------


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: drop to the ``postgres`` user when we are root."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class TlsPostgres:
    """``ssl=on``; ``pg_hba.conf`` has a local trust line (the test's set-up) and ``hostssl``
    lines only: user cw_cert by client certificate, every other user by password (SCRAM)."""

    pki: Pki
    port: int = field(default_factory=free_port)
    directory: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cronwheel-pg-tls-")))
    process: subprocess.Popen[bytes] | None = None

    @property
    def data(self) -> Path:
        return self.directory / "data"

    def url(self, query: str, *, user: str = "cw_pass", password: str | None = PG_PASSWORD) -> str:
        userinfo = f"{user}:{in_url(password)}" if password is not None else user
        database = "cronwheel_cert" if user == "cw_cert" else "cronwheel"
        return f"postgresql://{userinfo}@127.0.0.1:{self.port}/{database}?{query}"

    def verified(self, *, client: Pair | None = None) -> str:
        query = f"sslmode=verify-full&sslrootcert={self.pki.ca.ca}"
        if client is not None:
            query += f"&sslcert={client.cert}&sslkey={client.key}"
        return query

    def start(self) -> None:
        if not (PG_BIN / "initdb").exists():
            raise AssertionError(f"no initdb in {PG_BIN}: install postgresql-15 or set CRONWHEEL_TEST_PG_BIN")
        self.directory.chmod(0o755)
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")
        log = self.directory / "postgres.log"
        subprocess.run(
            _as_postgres(
                [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-N"]
            ),
            check=True,
            capture_output=True,
        )
        for name, source in (("server.pem", self.pki.server.cert), ("server.key", self.pki.server.key),
                             ("ca.pem", self.pki.ca.ca)):  # fmt: skip
            target = self.data / name
            shutil.copy(source, target)
            target.chmod(0o600)
            if os.geteuid() == 0:
                shutil.chown(target, "postgres", "postgres")
        (self.data / "pg_hba.conf").write_text(
            "local all all trust\n"
            "hostssl all cw_cert 127.0.0.1/32 cert\n"
            "hostssl all all 127.0.0.1/32 scram-sha-256\n"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            settings = {
                "listen_addresses": "'127.0.0.1'",
                "port": str(self.port),
                "unix_socket_directories": f"'{self.directory}'",
                "ssl": "on",
                "ssl_cert_file": "'server.pem'",
                "ssl_key_file": "'server.key'",
                "ssl_ca_file": "'ca.pem'",
                "fsync": "off",
                "shared_buffers": "16MB",
                "max_connections": "60",
            }
            conf.write("".join(f"{name} = {value}\n" for name, value in settings.items()))
        self.process = spawn(_as_postgres([str(PG_BIN / "postgres"), "-D", str(self.data)]), log)

        def ready() -> bool:
            return (self.directory / f".s.PGSQL.{self.port}").exists() and "ready to accept" in log.read_text(
                errors="replace"
            )

        _wait(ready, self.process, "postgres", log)

    async def create_users(self) -> None:
        admin = await asyncpg.connect(
            host=str(self.directory), port=self.port, user="postgres", database="postgres"
        )
        try:
            await admin.execute(f"CREATE ROLE cw_pass LOGIN PASSWORD '{PG_PASSWORD}'")
            await admin.execute("CREATE ROLE cw_cert LOGIN")
            await admin.execute(f"CREATE ROLE cw_file LOGIN PASSWORD '{PASSFILE_PASSWORD}' IN ROLE cw_pass")
            await admin.execute("CREATE DATABASE cronwheel OWNER cw_pass")
            await admin.execute("CREATE DATABASE cronwheel_cert OWNER cw_cert")
        finally:
            await admin.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            subprocess.run(
                _as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"]),
                capture_output=True,
                check=False,
                timeout=30,
            )
            _stop(self.process)
        shutil.rmtree(self.directory, ignore_errors=True)


# -- etcd ------------------------------------------------------------------------------------------


@dataclass
class TlsEtcd:
    """One member: clients over https only, with a certificate of the test CA; authentication
    on, user root (role root) with :data:`ETCD_PASSWORD`."""

    directory: Path
    pki: Pki
    client_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def url(
        self, *, password: str | None = ETCD_PASSWORD, client: Pair | None = None, ca: Path | None = None
    ) -> str:
        userinfo = f"root:{in_url(password)}@" if password is not None else ""
        client = client or self.pki.nameless
        query = f"cacert={ca or self.pki.ca.ca}&cert={client.cert}&key={client.key}"
        return f"etcd+https://{userinfo}{self.address}?{query}"

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.pki.ca.ca)
        context.load_cert_chain(self.pki.client.cert, self.pki.client.key)
        return context

    def _call(self, path: str, body: dict[str, object], token: str | None = None) -> dict[str, str]:
        request = urllib.request.Request(
            f"https://{self.address}/v3/{path}",
            json.dumps(body).encode(),
            {"Authorization": token} if token else {},
        )
        with urllib.request.urlopen(request, timeout=5, context=self._context()) as response:
            answer: dict[str, str] = json.loads(response.read())
        assert "error" not in answer, answer
        return answer

    def start(self) -> None:
        binary = os.environ.get("ETCD_BIN") or shutil.which("etcd") or "/usr/bin/etcd"
        if not os.access(binary, os.X_OK):
            raise AssertionError(
                "no etcd binary: run scripts/etcd install (Debian's etcd-server) or set ETCD_BIN"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        client, peer = f"https://{self.address}", f"http://127.0.0.1:{self.peer_port}"
        log = self.directory / "etcd.log"
        self.process = spawn(
            [binary, "--name=tls", f"--data-dir={self.directory / 'data'}",
             f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
             f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
             f"--initial-cluster=tls={peer}", "--log-level=warn", "--auth-token=simple",
             f"--cert-file={self.pki.server.cert}", f"--key-file={self.pki.server.key}",
             f"--trusted-ca-file={self.pki.ca.ca}", "--client-cert-auth"],
            log,
        )  # fmt: skip

        def ready() -> bool:
            try:
                with urllib.request.urlopen(
                    f"{client}/health", timeout=0.5, context=self._context()
                ) as answer:
                    return b'"health":"true"' in answer.read()
            except OSError:
                return False

        _wait(ready, self.process, "etcd", log)
        self._call("auth/user/add", {"name": "root", "password": ETCD_PASSWORD})
        self._call("auth/user/grant", {"user": "root", "role": "root"})
        self._call("auth/enable", {})

    def stop(self) -> None:
        _stop(self.process)


# -- cronwheel itself ------------------------------------------------------------------------------

SERVING = re.compile(r"serving on (https?://\S+)")


@dataclass
class Node:
    """``cronwheel <command> ...`` in a subprocess, its output in ``log``."""

    log: Path
    process: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self, *args: str, env: dict[str, str] | None = None, pattern: re.Pattern[str] = SERVING) -> str:
        """Start, and wait for the line that ``pattern`` finds (its first group: the URL)."""
        self.launch(*args, env=env)
        return self.wait(pattern)

    def launch(self, *args: str, env: dict[str, str] | None = None) -> None:
        command = [sys.executable, "-m", "cronwheel", *args]
        environment = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
        self.process = spawn(command, self.log, env=environment)

    def wait(self, pattern: re.Pattern[str] = SERVING) -> str:
        assert self.process is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = pattern.search(self.text())
            if found:
                self.url = found.group(1) if found.groups() else ""
                return self.url
            if self.process.poll() is not None:
                raise AssertionError(
                    f"{self.log.name}: exited with {self.process.returncode}:\n{self.text()}"
                )
            time.sleep(0.05)
        raise AssertionError(f"{self.log.name}: did not start:\n{self.text()}")

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        _stop(self.process)


def client_context(ca: Path, client: Pair | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    return context
