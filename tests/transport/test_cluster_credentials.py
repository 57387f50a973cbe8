"""A cluster whose three backends all speak TLS and want credentials, started as an operator
would: ``cronwheel tokens create --bootstrap``, a node with every role, and an api node that
serves HTTPS to clients with a certificate. Everything it prints (start-up lines, logs,
``cronwheel cluster status``, ``GET /v1/cluster``) is searched for the three passwords, as
written and as percent-encoded in the URLs."""

from __future__ import annotations

import asyncio
import logging
import os
import re
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

from cronwheel.node.server import ServerSettings, serve
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

    # three nodes started at once: every role (plain HTTP API), an api serving HTTPS to clients with
    # a certificate, and a scheduler serving its metrics over HTTPS
    worker, api, scheduler = (Node(tmp_path / f"{name}.log") for name in ("all", "api", "scheduler"))
    nodes.extend((worker, api, scheduler))
    local = ("--allow-network", "127.0.0.0/8")  # the sink
    tls = (
        "--tls-cert",
        str(pki.server.cert),
        "--tls-key",
        str(pki.server.key),
        "--tls-client-ca",
        str(pki.ca.ca),
    )
    worker.launch("server", "--node-id", "all-roles", "--port", "0", *local, env=cluster_env)
    api.launch("api", "--node-id", "api-tls", "--port", "0", *local, *tls, env=cluster_env)
    scheduler.launch("scheduler", "--node-id", "sched-tls", *tls, env=cluster_env)
    plain_url, https_url = worker.wait(), api.wait()
    metrics_url = scheduler.wait(re.compile(r"metrics on (\S+)\)"))
    assert https_url.startswith("https://127.0.0.1:")
    assert metrics_url.startswith("https://127.0.0.1:")

    status = _cronwheel("cluster", "status", env={"CRONWHEEL_URL": plain_url, "CRONWHEEL_TOKEN": token})
    assert status.returncode == 0, status.stderr
    for name in ("all-roles", "api-tls", "sched-tls"):
        assert name in status.stdout

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
    metrics = {node["node"]: node["metrics_url"] for node in answer.json()["nodes"]}
    assert metrics == {
        "all-roles": f"{plain_url}/metrics",
        "api-tls": f"{https_url}/metrics",
        "sched-tls": metrics_url,
    }
    async with httpx.AsyncClient(verify=verify, timeout=10) as client:
        assert (await client.get(metrics_url)).status_code == 200
    async with httpx.AsyncClient(timeout=5) as plain:
        with pytest.raises(httpx.TransportError):  # the TLS port does not speak plain HTTP
            await plain.get(metrics_url.replace("https://", "http://"))

    for node in nodes:
        node.stop()  # the stop's own lines are searched too
    printed = {
        "bootstrap": made.stdout + made.stderr,
        "cluster status": status.stdout + status.stderr,
        "GET /v1/cluster": answer.text,
        "all-roles log": worker.text(),
        "api log": api.text(),
        "scheduler log": scheduler.text(),
    }
    assert {where: _leaked(text) for where, text in printed.items() if _leaked(text)} == {}
    assert "cronwheel serving on https://127.0.0.1:" in api.text()
    backends = next(line for line in api.text().splitlines() if line.startswith("backends ("))
    assert backends.startswith("backends (postgresql+etcd+redis): ")
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
