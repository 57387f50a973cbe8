"""A cluster whose three backends all speak TLS and want credentials, started as an operator
would: ``cronwheel tokens create --bootstrap``, a node with every role, and an api node that
serves HTTPS to clients with a certificate. Everything it prints (start-up lines, logs,
``cronwheel cluster status``, ``GET /v1/cluster``) is searched for the three passwords, as
written and as percent-encoded in the URLs."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from cronwheel.server import ServerSettings, serve
from cronwheel.store.driver import StoreRefusedError

from .servers import (
    ETCD_PASSWORD,
    PG_PASSWORD,
    REDIS_PASSWORD,
    Node,
    Pki,
    TlsEtcd,
    TlsPostgres,
    TlsRedis,
    client_context,
    in_url,
)

PASSWORDS = [
    each for password in (PG_PASSWORD, REDIS_PASSWORD, ETCD_PASSWORD) for each in (password, in_url(password))
]


def _leaked(text: str) -> list[str]:
    return [password for password in PASSWORDS if password in text]


@pytest.fixture
def cluster_env(tls_postgres: TlsPostgres, tls_redis: TlsRedis, tls_etcd: TlsEtcd) -> dict[str, str]:
    return {
        "CRONWHEEL_DATABASE_URL": tls_postgres.url(tls_postgres.verified()),
        "CRONWHEEL_QUEUE_URL": tls_redis.url(),
        "CRONWHEEL_COORDINATOR_URL": tls_etcd.url(),
        "CRONWHEEL_TTL": "2",
        "CRONWHEEL_LOG_LEVEL": "DEBUG",
    }


@dataclass
class Sink:
    url: str = ""
    run_ids: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.run_ids.append(request.headers["Idempotency-Key"])
        return web.Response(text="ok")


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    recorder = Sink()
    app = web.Application()
    app.router.add_post("/hook", recorder.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    recorder.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield recorder
    await runner.cleanup()


@pytest.fixture
def nodes() -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        node.stop()


def _cronwheel(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cronwheel", *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **env}
    )


async def test_a_cluster_on_tls_backends_never_shows_a_password(
    tmp_path: Path, pki: Pki, cluster_env: dict[str, str], nodes: list[Node], sink: Sink
) -> None:
    made = _cronwheel("tokens", "create", "--bootstrap", "--name", "transport", env=cluster_env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert "cw_pass:***@127.0.0.1" in made.stderr  # where it was stored, the password redacted

    worker = Node(tmp_path / "all.log")
    nodes.append(worker)
    local = ("--allow-network", "127.0.0.0/8")  # the sink
    plain_url = worker.start("server", "--node-id", "all-roles", "--port", "0", *local, env=cluster_env)
    tls = (
        "--tls-cert",
        str(pki.server.cert),
        "--tls-key",
        str(pki.server.key),
        "--tls-client-ca",
        str(pki.ca.ca),
    )
    api = Node(tmp_path / "api.log")
    nodes.append(api)
    https_url = api.start("api", "--node-id", "api-tls", "--port", "0", *local, *tls, env=cluster_env)
    assert https_url.startswith("https://127.0.0.1:")

    status = _cronwheel("cluster", "status", env={"CRONWHEEL_URL": plain_url, "CRONWHEEL_TOKEN": token})
    assert status.returncode == 0, status.stderr
    assert "all-roles" in status.stdout
    assert "api-tls" in status.stdout

    headers = {"Authorization": f"Bearer {token}"}
    verify = client_context(pki.ca.ca, pki.client)
    async with httpx.AsyncClient(base_url=https_url, verify=verify, headers=headers, timeout=10) as client:
        answer = await client.get("/v1/cluster")
        # a run goes the whole way: API (HTTPS) -> PostgreSQL -> Redis -> worker -> the sink
        target = {"type": "http", "url": f"{sink.url}/hook"}
        job = {"team": "t", "name": f"tls-{uuid.uuid4().hex[:8]}", "schedule": "@yearly", "target": target}
        made_job = await client.post("/v1/jobs", json=job)
        assert made_job.status_code == 201, made_job.text
        run = (await client.post(f"/v1/jobs/{made_job.json()['id']}/trigger", json={})).json()
        deadline = time.monotonic() + 15
        while run["id"] not in sink.run_ids and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert run["id"] in sink.run_ids
    assert answer.status_code == 200, answer.text
    assert {node["node"] for node in answer.json()["nodes"]} == {"all-roles", "api-tls"}
    assert all(node["metrics_url"].startswith("http") for node in answer.json()["nodes"])

    for node in nodes:
        node.stop()  # the stop's own lines are searched too
    printed = {
        "bootstrap": made.stdout + made.stderr,
        "cluster status": status.stdout + status.stderr,
        "GET /v1/cluster": answer.text,
        "all-roles log": worker.text(),
        "api log": api.text(),
    }
    assert {where: _leaked(text) for where, text in printed.items() if _leaked(text)} == {}
    assert "cronwheel serving on https://127.0.0.1:" in api.text()
    backends = next(line for line in api.text().splitlines() if line.startswith("backends: "))
    assert "store postgresql://cw_pass:***@127.0.0.1:" in backends
    assert "queue rediss://cronwheel:***@127.0.0.1:" in backends
    assert "coordinator etcd+https://root:***@127.0.0.1:" in backends
    assert f"ssl_ca_certs={pki.ca.ca}" in backends  # where the files are is no secret


async def test_a_start_the_store_refuses_says_why_without_the_password(
    tls_postgres: TlsPostgres, cluster_env: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """In-process (what ``cronwheel api`` prints as ``error: ...`` before exiting 2)."""
    wrong = tls_postgres.url(tls_postgres.verified(), password=PG_PASSWORD + "x")
    settings = ServerSettings(
        roles=("api",),
        port=0,
        database_url=wrong,
        queue_url=cluster_env["CRONWHEEL_QUEUE_URL"],
        coordinator_url=cluster_env["CRONWHEEL_COORDINATOR_URL"],
    )
    with caplog.at_level(logging.DEBUG), pytest.raises(StoreRefusedError) as refused:
        await serve(settings, announce=lambda _line: None)
    assert "password authentication failed" in str(refused.value)
    assert _leaked(str(refused.value) + caplog.text) == []
