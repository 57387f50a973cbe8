"""The live brokers the broker executor tests use: the machine's NATS (with JetStream) and
Mosquitto on loopback, and private ones a test starts with credentials (and stops).

Unreachable shared brokers skip the tests locally and fail them under
``CRONWHEEL_TEST_REQUIRE_BACKENDS`` (scripts/test, CI), as the Redis and PostgreSQL tests do.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import aiormq
import pytest

import suite_workers
from cronwheel.worker.executors import AttemptContext, WorkerSettings

NATS_URL = os.environ.get("CRONWHEEL_TEST_NATS_URL", "nats://127.0.0.1:4222")
MQTT_URL = os.environ.get("CRONWHEEL_TEST_MQTT_URL", "mqtt://127.0.0.1:1883")
AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))
SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
NOW = datetime(2025, 1, 2, 3, 4, 30, tzinfo=UTC)
SECRET = "s3cr3t-broker-password"


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id="0193f2a4-run-0001",
        job_id="job-42",
        job_name="nightly",
        team="payments",
        scheduled_at=SLOT,
        attempt=2,
        timeout_s=5.0,
        payload={"hello": "world", "n": 1},
    )
    return replace(ctx, **changes)


def _host_port(url: str) -> tuple[str, int]:
    rest = url.split("://", 1)[1]
    host, _, port = rest.rpartition(":")
    return host, int(port)


def _reachable(url: str) -> bool:
    try:
        with socket.create_connection(_host_port(url), timeout=2):
            return True
    except OSError:
        return False


def require(url: str, what: str, variable: str) -> str:
    """``url``; skip (locally) or fail (scripts/test, CI) when nothing listens there."""
    if not _reachable(url):
        unavailable(f"no {what} at {url} (set {variable})")
    return url


def unavailable(message: str) -> NoReturn:
    """A broker (or its program) the test needs is not there: skip locally, fail under
    ``CRONWHEEL_TEST_REQUIRE_BACKENDS`` or ``CI`` (scripts/test), where every backend is required."""
    if os.environ.get("CI") or os.environ.get("CRONWHEEL_TEST_REQUIRE_BACKENDS"):
        pytest.fail(message)
    pytest.skip(message)


async def amqp_connection(url: str = AMQP_URL) -> aiormq.abc.AbstractConnection:
    """A connection to the test RabbitMQ, or :func:`unavailable` when it cannot be reached."""
    try:
        return await asyncio.wait_for(aiormq.connect(url), 5)
    except (OSError, aiormq.exceptions.AMQPError, TimeoutError) as error:
        unavailable(f"no RabbitMQ at 127.0.0.1:5672 ({type(error).__name__}; set CRONWHEEL_TEST_AMQP_URL)")


def require_nats() -> str:
    return require(NATS_URL, "NATS", "CRONWHEEL_TEST_NATS_URL")


def require_mqtt() -> str:
    return require(MQTT_URL, "MQTT broker", "CRONWHEEL_TEST_MQTT_URL")


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


def _program(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin")
    if found is None:
        unavailable(f"{name} is not installed")
    return found


@contextmanager
def _running(argv: list[str], port: int) -> Iterator[int]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not _reachable(f"x://127.0.0.1:{port}"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not start on port {port}")
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def private_nats(token: str) -> Iterator[int]:
    """A nats-server of the test's own on loopback that requires ``token``."""
    port = free_port()
    argv = [_program("nats-server"), "-a", "127.0.0.1", "-p", str(port), "--auth", token]
    with _running(argv, port) as started:
        yield started


@contextmanager
def private_mosquitto(tmp: Path, user: str, password: str) -> Iterator[int]:
    """A mosquitto of the test's own on loopback that requires ``user``/``password``."""
    port = free_port()
    passwords = tmp / "passwords"
    passwords.touch(mode=0o600)
    subprocess.run([_program("mosquitto_passwd"), "-b", str(passwords), user, password], check=True)
    config = tmp / "mosquitto.conf"
    config.write_text(
        # run as ourselves: as root, mosquitto would become user mosquitto, who cannot read tmp
        f"user {getpass.getuser()}\nlistener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {passwords}\npersistence false\n"
    )
    with _running([_program("mosquitto"), "-c", str(config)], port) as started:
        yield started
