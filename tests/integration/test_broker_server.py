"""A RabbitMQ target in ``cronwheel server`` as a user runs it (a subprocess over a SQLite file):
credentials set as team secrets with the CLI, a job created over the API, triggered, published to
the live RabbitMQ on 127.0.0.1:5672 with the run id as message id, confirmed, and the run
SUCCESS; a job whose exchange does not exist ends FAILED, its attempt saying why."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiormq
import aiormq.abc
import httpx
import pytest
from server_harness import ServerProcess, wait_for

from broker_support import amqp_connection

pytestmark = pytest.mark.integration

AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")


@pytest.fixture
async def queue() -> AsyncIterator[tuple[aiormq.abc.AbstractChannel, str]]:
    connection = await amqp_connection(AMQP_URL)
    channel = await connection.channel()
    name = f"cwtest-server-{uuid.uuid4().hex[:8]}"
    await channel.queue_declare(name)
    try:
        yield channel, name
    finally:
        await channel.queue_delete(name)
        await connection.close()


def cli(server: ServerProcess, *args: str, value: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cronwheel", *args, "--url", server.url]
    return subprocess.run(
        command, input=value, capture_output=True, text=True, timeout=60, check=False, cwd=server.db.parent
    )


async def finished(api: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    run: dict[str, Any] = (await api.get(f"/v1/runs/{run_id}")).json()
    return run if run["state"] in ("SUCCESS", "FAILED") else None


async def test_a_rabbitmq_job_publishes_confirmed_with_the_run_id(
    server_factory: Callable[..., ServerProcess], queue: tuple[aiormq.abc.AbstractChannel, str]
) -> None:
    channel, name = queue
    server = server_factory()
    for secret in ("mq-user", "mq-password"):
        assert cli(server, "secrets", "set", f"billing/{secret}", value="guest\n").returncode == 0
    target = {
        "type": "rabbitmq",
        "url": "amqp://127.0.0.1:5672/",
        "routing_key": name,
        "username": {"secret": "mq-user"},
        "password": {"secret": "mq-password"},
    }
    async with server.client() as api:
        body = {"team": "billing", "name": "report", "schedule": "@yearly", "target": target}
        created = await api.post("/v1/jobs", json=body)
        assert created.status_code == 201, created.text
        job = created.json()
        triggered = await api.post(f"/v1/jobs/{job['id']}/trigger", json={"payload": {"invoice": 42}})
        assert triggered.status_code == 201, triggered.text
        run_id = triggered.json()["id"]
        run = await wait_for(lambda: finished(api, run_id), timeout=20)
        missing = {**target, "exchange": f"{name}-missing"}
        other = await api.post(
            "/v1/jobs", json={**body, "name": "missing", "target": missing, "retry": {"max_attempts": 1}}
        )
        assert other.status_code == 201, other.text
        failing = await api.post(f"/v1/jobs/{other.json()['id']}/trigger", json={})
        failed = await wait_for(lambda: finished(api, failing.json()["id"]), timeout=20)
    assert run["state"] == "SUCCESS", run
    assert run["attempt_details"][0]["output"] == "confirmed by amqp://127.0.0.1:5672"
    message = await channel.basic_get(name, no_ack=True)
    assert message.body == b'{"invoice":42}'
    assert message.header.properties.message_id == run_id
    assert (message.header.properties.headers or {})["X-Cronwheel-Job-Id"] == job["id"]
    assert failed["state"] == "FAILED", failed
    (attempt,) = failed["attempt_details"]
    assert attempt["outcome"] == "failure"
    assert "NOT_FOUND" in attempt["error"]
    assert f"{name}-missing" in attempt["error"]
