"""RabbitMqExecutor against the live RabbitMQ on 127.0.0.1:5672 (guest/guest).

Each test declares its own exchange and queue (unique names) and deletes them after. Without a
broker the tests skip, except under CRONWHEEL_TEST_REQUIRE_BACKENDS (scripts/test, CI): then an
unreachable broker fails them, as for Redis and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import aiormq
import aiormq.abc
import pytest

from broker_support import amqp_connection
from cronwheel.clock import ManualClock
from cronwheel.model import Outcome, RabbitMqTarget, SecretRef
from cronwheel.secrets.resolve import Resolved
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor

AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
TARGET_URL = "amqp://127.0.0.1:5672/"
SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id=f"run-{uuid.uuid4().hex[:12]}",
        job_id="job-42",
        job_name="nightly",
        team="payments",
        scheduled_at=SLOT,
        attempt=2,
        timeout_s=5.0,
        payload={"hello": "wörld", "n": 1},
    )
    return replace(ctx, **changes)


@dataclass
class Broker:
    channel: aiormq.abc.AbstractChannel
    exchange: str
    queue: str
    routing_key: str

    async def get(self) -> aiormq.abc.DeliveredMessage:
        for _ in range(100):
            message = await self.channel.basic_get(self.queue, no_ack=True)
            if message.body or message.header.properties.message_id:
                return message
            await asyncio.sleep(0.02)
        raise AssertionError("the queue received nothing")

    async def count(self) -> int:
        declared = await self.channel.queue_declare(self.queue, passive=True)
        return int(declared.message_count or 0)


async def _reachable() -> aiormq.abc.AbstractConnection:
    return await amqp_connection(AMQP_URL)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    connection = await _reachable()
    channel = await connection.channel()
    name = f"cwtest-{uuid.uuid4().hex[:10]}"
    await channel.exchange_declare(name, exchange_type="direct", auto_delete=False)
    await channel.queue_declare(name, auto_delete=False)
    await channel.queue_bind(name, name, routing_key="reports")
    try:
        yield Broker(channel, name, name, "reports")
    finally:
        await channel.queue_delete(name)
        await channel.exchange_delete(name)
        await connection.close()


@pytest.fixture
async def executor() -> AsyncIterator[RabbitMqExecutor]:
    executor = RabbitMqExecutor(LOOPBACK)
    try:
        yield executor
    finally:
        await executor.close()


def target_for(broker: Broker, **changes: Any) -> RabbitMqTarget:
    target = RabbitMqTarget(url=TARGET_URL, exchange=broker.exchange, routing_key=broker.routing_key)
    return replace(target, **changes)


async def test_the_queue_receives_the_payload_with_the_execution_id(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    ctx = make_ctx()
    target = target_for(broker, headers=(("X-Team-Header", "blue"), ("X-Cronwheel-Attempt", "forged")))
    result = await executor.execute(target, ctx)
    assert result.outcome is Outcome.SUCCESS, result.error
    message = await broker.get()
    properties = message.header.properties
    assert message.body == '{"hello":"wörld","n":1}'.encode()
    assert properties.message_id == ctx.execution_id
    assert properties.content_type == "application/json"
    assert properties.delivery_mode == 2
    headers = properties.headers or {}
    assert headers["Idempotency-Key"] == ctx.execution_id
    assert headers["X-Cronwheel-Job-Id"] == "job-42"
    assert headers["X-Cronwheel-Scheduled-At"] == "2025-01-02T03:04:05Z"
    assert headers["X-Cronwheel-Attempt"] == "2"  # ours win over the target's
    assert headers["X-Team-Header"] == "blue"


async def test_the_default_exchange_routes_to_the_queue_named_by_the_key(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    ctx = make_ctx(payload=None)
    result = await executor.execute(target_for(broker, exchange="", routing_key=broker.queue), ctx)
    assert result.outcome is Outcome.SUCCESS, result.error
    message = await broker.get()
    assert message.body == b"null"
    assert message.header.properties.message_id == ctx.execution_id


async def test_an_exchange_that_does_not_exist_fails_and_the_channel_is_reopened(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    missing = await executor.execute(target_for(broker, exchange=f"{broker.exchange}-missing"), make_ctx())
    assert missing.outcome is Outcome.FAILURE
    assert missing.error is not None
    assert "NOT_FOUND" in missing.error
    delivered = await executor.execute(target_for(broker), make_ctx())  # the same pooled connection
    assert delivered.outcome is Outcome.SUCCESS, delivered.error
    assert len(executor.pool) == 1
    assert await broker.count() == 1


async def test_an_unroutable_message_is_returned_and_fails(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    result = await executor.execute(target_for(broker, routing_key="nobody-listens"), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.error is not None
    assert "unroutable" in result.error
    assert "nobody-listens" in result.error
    assert await broker.count() == 0


async def test_an_unreachable_port_is_an_error(executor: RabbitMqExecutor) -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        target = RabbitMqTarget(url=f"amqp://127.0.0.1:{port}/", exchange="", routing_key="x")
        result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert f"amqp://127.0.0.1:{port}" in result.error
    assert len(executor.pool) == 0


async def test_a_private_address_is_refused_unless_allowed(broker: Broker) -> None:
    strict = RabbitMqExecutor(WorkerSettings())
    try:
        result = await strict.execute(target_for(broker), make_ctx())
        assert result.outcome is Outcome.ERROR
        assert result.error is not None
        assert "SSRF guard" in result.error
        assert "loopback" in result.error

        async def to_loopback(host: str, port: int) -> list[str]:
            return ["127.0.0.1"]  # a public-looking name whose answer is loopback (DNS rebinding)

        named = RabbitMqExecutor(WorkerSettings(), resolver=to_loopback)
        try:
            target = target_for(broker, url="amqp://broker.example.com:5672/")
            result = await named.execute(target, make_ctx())
            assert result.outcome is Outcome.ERROR
            assert result.error == (
                "refused by the SSRF guard: broker.example.com resolves to 127.0.0.1 is a loopback "
                "address (not in allowed_networks)"
            )
        finally:
            await named.close()
        assert await broker.count() == 0
    finally:
        await strict.close()


async def test_the_timeout_is_the_attempts_budget(broker: Broker) -> None:
    async def slow(host: str, port: int) -> list[str]:
        await asyncio.sleep(5)
        return ["127.0.0.1"]

    executor = RabbitMqExecutor(LOOPBACK, resolver=slow)
    try:
        target = target_for(broker, url="amqp://broker.example.com:5672/")  # a name: it is resolved
        result = await executor.execute(target, make_ctx(timeout_s=0.2))
    finally:
        await executor.close()
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "no confirmation from amqp://broker.example.com:5672 within 0.2 s"


class _Secrets:
    """A resolver holding RabbitMQ's guest credentials as the team's secrets."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.asked: list[list[str]] = []

    async def resolve(self, team: str, required: list[str], optional: list[str] = ()) -> Resolved:  # type: ignore[assignment]
        self.asked.append(list(required))
        return Resolved({name: self.values[name] for name in required})


async def test_credentials_from_secrets_never_reach_logs_or_output(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    secrets = _Secrets({"mq-user": "guest", "mq-password": "guest"})
    executor = RabbitMqExecutor(LOOPBACK, secrets=secrets)  # type: ignore[arg-type]
    caplog.set_level(logging.DEBUG)
    try:
        target = target_for(broker, username=SecretRef("mq-user"), password=SecretRef("mq-password"))
        ok = await executor.execute(target, make_ctx())
        assert ok.outcome is Outcome.SUCCESS, ok.error
        secrets.values["mq-password"] = "wrong-Pa55word-xyz"
        refused = await executor.execute(target, make_ctx())  # other credentials: another connection
    finally:
        await executor.close()
    assert sorted(secrets.asked[0]) == ["mq-password", "mq-user"]
    assert refused.outcome is Outcome.FAILURE
    assert refused.error is not None
    assert "refused the credentials" in refused.error
    kept = " ".join(filter(None, [ok.output, ok.error, refused.output, refused.error, caplog.text]))
    assert "wrong-Pa55word-xyz" not in kept
    assert "guest" not in kept  # aiormq's own DEBUG lines name the connection without its user


async def test_idle_connections_are_closed_and_reopened(broker: Broker) -> None:
    clock = ManualClock(datetime(2025, 1, 2, tzinfo=UTC))
    executor = RabbitMqExecutor(LOOPBACK, clock=clock, idle_s=30)
    try:
        assert (await executor.execute(target_for(broker), make_ctx())).outcome is Outcome.SUCCESS
        (link,) = [entry.connection for entry in executor.pool._entries.values()]
        clock.advance(29)
        assert await executor.pool.sweep() == 0
        clock.advance(1)
        assert await executor.pool.sweep() == 1
        assert link.connection.is_closed
        assert (await executor.execute(target_for(broker), make_ctx())).outcome is Outcome.SUCCESS
        assert len(executor.pool) == 1
    finally:
        await executor.close()
    assert await broker.count() == 2


async def test_closing_the_executors_closes_the_connections(broker: Broker) -> None:
    executors = Executors(LOOPBACK)
    rabbitmq = executors["rabbitmq"]
    assert isinstance(rabbitmq, RabbitMqExecutor)
    result = await executors.execute(target_for(broker), make_ctx())
    assert result.outcome is Outcome.SUCCESS, result.error
    (link,) = [entry.connection for entry in rabbitmq.pool._entries.values()]
    await executors.close()
    assert link.connection.is_closed
    assert len(rabbitmq.pool) == 0


async def test_concurrent_attempts_share_one_connection(broker: Broker, executor: RabbitMqExecutor) -> None:
    results = await asyncio.gather(*(executor.execute(target_for(broker), make_ctx()) for _ in range(20)))
    assert {result.outcome for result in results} == {Outcome.SUCCESS}
    assert len(executor.pool) == 1
    assert await broker.count() == 20


async def test_a_missing_exchange_fails_only_its_own_attempt(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    """Attempts of other jobs in flight on the same connection are not hurt when the broker closes
    one attempt's channel."""
    good = [executor.execute(target_for(broker), make_ctx()) for _ in range(30)]
    bad = [
        executor.execute(target_for(broker, exchange=f"{broker.exchange}-gone"), make_ctx()) for _ in range(5)
    ]
    results = await asyncio.gather(*good[:15], *bad, *good[15:])
    outcomes = [result.outcome for result in results]
    assert outcomes.count(Outcome.SUCCESS) == 30
    assert outcomes.count(Outcome.FAILURE) == 5
    assert len(executor.pool) == 1
    assert await broker.count() == 30


async def test_a_connection_closed_under_the_pool_is_replaced(
    broker: Broker, executor: RabbitMqExecutor
) -> None:
    assert (await executor.execute(target_for(broker), make_ctx())).outcome is Outcome.SUCCESS
    (link,) = [entry.connection for entry in executor.pool._entries.values()]
    await link.connection.close()  # as a missed heartbeat or a broker restart would
    result = await executor.execute(target_for(broker), make_ctx())
    assert result.outcome is Outcome.SUCCESS, result.error
    (replaced,) = [entry.connection for entry in executor.pool._entries.values()]
    assert replaced is not link


async def test_an_unknown_virtual_host_fails(broker: Broker, executor: RabbitMqExecutor) -> None:
    result = await executor.execute(target_for(broker, url="amqp://127.0.0.1:5672/no-such-vhost"), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.error == (
        "amqp://127.0.0.1:5672 refused the virtual host (it does not exist, or the user may not use it)"
    )
    assert len(executor.pool) == 0
