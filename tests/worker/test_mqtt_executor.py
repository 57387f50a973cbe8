"""MqttExecutor against the live Mosquitto on loopback, and a private one with a password file:
what a subscriber receives (payload, MQTT 5 user properties), QoS 1 and 2 acknowledged, retain,
outcomes (unreachable, timeout, refused credentials), the SSRF guard at connect time, secrets kept
out of results and logs, and the connection pool (idle close, reopen, close)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiomqtt
import pytest

from broker_support import LOOPBACK, NOW, SECRET, make_ctx, private_mosquitto, require_mqtt
from cronwheel.clock import ManualClock
from cronwheel.model import MqttQos, MqttTarget, Outcome, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.store.port import StoredSecret
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.executors.mqtt import MqttExecutor

KEYS = Keyring([new_key("k1")])


class Secrets:
    def __init__(self, **values: str) -> None:
        self.values = values

    async def get_secrets(self, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
        found = {}
        for name in names:
            if name in self.values:
                sealed = seal(KEYS, team, name, self.values[name])
                found[name] = StoredSecret(team, name, sealed.key_id, sealed.value)
        return found


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def topic() -> str:
    return f"cwtest/{uuid.uuid4().hex[:12]}/reports"


@pytest.fixture
async def executor() -> AsyncIterator[MqttExecutor]:
    made = MqttExecutor(LOOPBACK, clock=ManualClock(NOW))
    yield made
    await made.close()


async def first_message(name: str, publish: asyncio.Future[object] | None = None) -> aiomqtt.Message:
    """Subscribe to ``name`` (MQTT 5), then wait for one message."""
    async with aiomqtt.Client(
        "127.0.0.1", port_of(require_mqtt()), protocol=aiomqtt.ProtocolVersion.V5
    ) as subscriber:
        await subscriber.subscribe(name, qos=2)
        if publish is not None:
            publish.set_result(None)
        async with asyncio.timeout(5):
            async for message in subscriber.messages:
                return message
    raise AssertionError("no message")


async def publish_and_receive(executor: MqttExecutor, target: MqttTarget) -> tuple[object, aiomqtt.Message]:
    subscribed: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    receiving = asyncio.create_task(first_message(target.topic, subscribed))
    await subscribed
    result = await executor.execute(target, make_ctx())
    return result, await receiving


@pytest.mark.parametrize("qos", [1, 2])
async def test_a_subscriber_gets_the_payload_and_the_execution_id(
    executor: MqttExecutor, qos: MqttQos
) -> None:
    target = MqttTarget(require_mqtt(), topic(), qos=qos)
    result, message = await publish_and_receive(executor, target)
    assert getattr(result, "outcome", None) is Outcome.SUCCESS, result
    assert json.loads(getattr(result, "output", "") or "") == {
        "topic": target.topic,
        "qos": qos,
        "ack": "PUBACK" if qos == 1 else "PUBCOMP",
    }
    assert isinstance(message.payload, bytes)
    assert json.loads(message.payload) == {"hello": "world", "n": 1}
    assert message.qos == qos
    props: Any = message.properties
    assert props is not None
    assert props.ContentType == "application/json"
    assert props.PayloadFormatIndicator == 1
    assert dict(props.UserProperty) == {
        "Idempotency-Key": "0193f2a4-run-0001",
        "X-Cronwheel-Job-Id": "job-42",
        "X-Cronwheel-Scheduled-At": "2025-01-02T03:04:05Z",
        "X-Cronwheel-Attempt": "2",
    }


async def test_a_retained_message_reaches_a_later_subscriber(executor: MqttExecutor) -> None:
    target = MqttTarget(require_mqtt(), topic(), retain=True)
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    try:
        message = await first_message(target.topic)  # subscribes after the publish
        assert message.retain
        assert json.loads(message.payload) == {"hello": "world", "n": 1}
    finally:  # clear the retained message
        async with aiomqtt.Client("127.0.0.1", port_of(require_mqtt())) as cleaner:
            await cleaner.publish(target.topic, b"", qos=1, retain=True)


async def test_an_unreachable_port_is_an_error(executor: MqttExecutor) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    result = await executor.execute(MqttTarget(f"mqtt://127.0.0.1:{port}", "a/b"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert f"mqtt://127.0.0.1:{port}" in (result.error or "")
    assert "refused" in (result.error or "").lower()


async def test_a_silent_broker_is_a_timeout_within_the_budget(executor: MqttExecutor) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # takes CONNECT, never answers CONNACK
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await executor.execute(
            MqttTarget(f"mqtt://127.0.0.1:{port}", "a/b"), make_ctx(timeout_s=0.3)
        )
        assert loop.time() - started < 2
    finally:
        server.close()
    assert result.outcome is Outcome.TIMEOUT, result
    assert "no PUBACK" in (result.error or "")


async def test_loopback_is_refused_unless_allowed() -> None:
    executor = MqttExecutor(WorkerSettings(), clock=ManualClock(NOW))
    try:
        result = await executor.execute(MqttTarget(require_mqtt(), topic()), make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.ERROR
    assert "refused by the SSRF guard" in (result.error or "")
    assert "loopback" in (result.error or "")


async def test_a_name_is_judged_on_the_address_it_resolves_to() -> None:
    async def to_loopback(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    target = MqttTarget(f"mqtt://broker.example:{port_of(require_mqtt())}", topic())
    refused = MqttExecutor(WorkerSettings(), clock=ManualClock(NOW), resolve=to_loopback)
    allowed = MqttExecutor(LOOPBACK, clock=ManualClock(NOW), resolve=to_loopback)
    try:
        no = await refused.execute(target, make_ctx())
        yes = await allowed.execute(target, make_ctx())
    finally:
        await refused.close()
        await allowed.close()
    assert no.outcome is Outcome.ERROR
    assert "broker.example resolves to 127.0.0.1 is a loopback address" in (no.error or "")
    assert yes.outcome is Outcome.SUCCESS


async def test_a_password_from_a_secret_connects_and_never_shows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with private_mosquitto(tmp_path, "svc", SECRET) as port:
        url = f"mqtt://127.0.0.1:{port}"
        target = MqttTarget(url, "a/b", username="svc", password=SecretRef("mqtt-password"))
        good = MqttExecutor(
            LOOPBACK,
            clock=ManualClock(NOW),
            secrets=SecretResolver(Secrets(**{"mqtt-password": SECRET}), KEYS),
        )
        bad = MqttExecutor(
            LOOPBACK,
            clock=ManualClock(NOW),
            secrets=SecretResolver(Secrets(**{"mqtt-password": SECRET[::-1]}), KEYS),
        )
        try:
            ok = await good.execute(target, make_ctx())
            refused = await bad.execute(target, make_ctx())
            anonymous = await good.execute(MqttTarget(url, "a/b"), make_ctx())
        finally:
            await good.close()
            await bad.close()
    assert ok.outcome is Outcome.SUCCESS, ok
    assert refused.outcome is Outcome.FAILURE, refused
    assert "refused the connection" in (refused.error or "")
    assert anonymous.outcome is Outcome.FAILURE, anonymous
    everything = repr([ok, refused, anonymous]) + caplog.text
    assert SECRET not in everything
    assert SECRET[::-1] not in everything


async def test_one_connection_is_shared_then_closed_when_idle_and_reopened() -> None:
    clock = ManualClock(NOW)
    executor = MqttExecutor(LOOPBACK, clock=clock, idle_s=30)
    target = MqttTarget(require_mqtt(), topic(), qos=2)
    try:
        results = await asyncio.gather(*(executor.execute(target, make_ctx(attempt=n)) for n in range(1, 21)))
        assert {result.outcome for result in results} == {Outcome.SUCCESS}
        assert executor.pool.opened == 1
        [entry] = executor.pool._entries.values()
        first = entry.connection
        clock.advance(30)
        assert await executor.pool.sweep() == 1
        assert not first.alive
        assert len(executor.pool) == 0
        assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
        assert executor.pool.opened == 2
    finally:
        await executor.close()


async def test_closing_the_executors_closes_the_connections() -> None:
    executors = Executors(LOOPBACK, clock=ManualClock(NOW))
    target = MqttTarget(require_mqtt(), topic())
    assert (await executors.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    mqtt_executor = executors["mqtt"]
    assert isinstance(mqtt_executor, MqttExecutor)
    [entry] = mqtt_executor.pool._entries.values()
    await executors.close()
    assert not entry.connection.alive
    assert len(mqtt_executor.pool) == 0
