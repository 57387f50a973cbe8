"""The broker executors turn any target into an ``AttemptResult`` and never raise (the Executor
contract), and never put a credential into what the attempt keeps.

Generated: URLs, exchanges, routing keys, virtual hosts, topics, header names and values, user
names and passwords from plausible to hostile (NUL bytes, lone surrogates, control characters,
oversized, non-ASCII). RabbitMQ targets run against the live broker on 127.0.0.1:5672 (every name
resolves to it through a test resolver, so nothing leaves the machine; it refuses most of them:
unknown vhosts, exchanges, users); Kafka targets against a closed loopback port (no broker here
that takes an idempotent producer: tests/worker/test_kafka_executor.py). Deterministic and bounded.
"""

from __future__ import annotations

import asyncio
import os
import socket
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker_support import amqp_connection
from cronwheel.model import AttemptResult, KafkaTarget, Outcome, RabbitMqTarget
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.kafka import KafkaExecutor
from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor

OUTCOMES = {Outcome.SUCCESS, Outcome.FAILURE, Outcome.TIMEOUT, Outcome.ERROR}
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))
TUNED = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

hostile = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=300),
    st.sampled_from(["", "\x00", "a\x00b", "\ud800", "é" * 200, "x" * 300, "/", "%2f", "a/b", "..", "."]),
)
names = st.one_of(st.from_regex(r"[A-Za-z0-9-]{1,20}", fullmatch=True), hostile)
password = st.text(alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ", min_size=12, max_size=16).map(lambda s: f"pw-{s}")


AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
CTX = AttemptContext("run-1", "job-42", "nightly", "payments", datetime(2025, 1, 2, tzinfo=UTC), 1, 5.0)


def make_ctx(**changes: Any) -> AttemptContext:
    return replace(CTX, **changes)


async def _require_rabbitmq() -> None:
    connection = await amqp_connection(AMQP_URL)
    await connection.close()


async def _to_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]


def _never_quotes(result: AttemptResult, secret: str) -> None:
    kept = f"{result.error} {result.output} {result.output_tail}"
    assert secret not in kept


@st.composite
def rabbitmq_targets(draw: st.DrawFn) -> tuple[RabbitMqTarget, str]:
    vhost = draw(st.one_of(st.just(""), names))
    host = draw(st.sampled_from(["127.0.0.1", "mq.example.com", "[::ffff:127.0.0.1]", "0x7f.1"]))
    url = draw(st.one_of(st.just(f"amqp://{host}:5672/{vhost}"), hostile))
    secret = draw(password)
    target = RabbitMqTarget(
        url=url,
        exchange=draw(st.one_of(st.just(""), st.just("amq.direct"), names)),
        routing_key=draw(names),
        headers=tuple(draw(st.lists(st.tuples(names, hostile), max_size=3))),
        username=draw(st.one_of(st.none(), st.just("guest"), names)),
        password=secret,
    )
    return target, secret


async def test_rabbitmq_never_raises() -> None:
    await _require_rabbitmq()
    executor = RabbitMqExecutor(LOOPBACK, resolver=_to_loopback)
    loop = asyncio.get_running_loop()
    results: list[AttemptResult] = []

    @TUNED
    @given(rabbitmq_targets(), st.one_of(st.none(), st.integers(), st.text(max_size=20)))
    def attempt(drawn: tuple[RabbitMqTarget, str], payload: Any) -> None:
        target, secret = drawn
        future = asyncio.run_coroutine_threadsafe(executor.execute(target, make_ctx(payload=payload)), loop)
        result = future.result(10)
        assert result.outcome in OUTCOMES, result
        _never_quotes(result, secret)
        results.append(result)

    try:
        await loop.run_in_executor(None, attempt)
    finally:
        await executor.close()
    assert {result.outcome for result in results} >= {Outcome.FAILURE, Outcome.ERROR}


@st.composite
def kafka_targets(draw: st.DrawFn, port: int) -> tuple[KafkaTarget, str]:
    secret = draw(password)
    servers = draw(st.lists(st.one_of(st.just(f"127.0.0.1:{port}"), hostile), min_size=0, max_size=3))
    target = KafkaTarget(
        bootstrap_servers=tuple(servers),
        topic=draw(st.one_of(st.just("reports"), names)),
        key=draw(st.one_of(st.none(), hostile)),
        headers=tuple(draw(st.lists(st.tuples(names, hostile), max_size=3))),
        tls=draw(st.booleans()),
        sasl_mechanism=draw(st.sampled_from([None, "PLAIN", "SCRAM-SHA-256"])),
        username=draw(st.one_of(st.none(), names)),
        password=draw(st.sampled_from([None, secret])),
    )
    return target, secret


async def test_kafka_never_raises() -> None:
    with socket.socket() as probe:  # bound, never listening: every connection is refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        executor = KafkaExecutor(LOOPBACK, resolver=_to_loopback)
        loop = asyncio.get_running_loop()
        outcomes: set[Outcome] = set()

        @settings(TUNED, max_examples=40)
        @given(kafka_targets(port))
        def attempt(drawn: tuple[KafkaTarget, str]) -> None:
            target, secret = drawn
            future = asyncio.run_coroutine_threadsafe(executor.execute(target, make_ctx(timeout_s=3)), loop)
            result = future.result(10)
            assert result.outcome in OUTCOMES, result
            assert result.outcome is not Outcome.SUCCESS
            _never_quotes(result, secret)
            outcomes.add(result.outcome)

        try:
            await loop.run_in_executor(None, attempt)
        finally:
            await executor.close()
    assert Outcome.ERROR in outcomes
