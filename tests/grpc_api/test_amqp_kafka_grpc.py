"""RabbitMQ and Kafka targets through the gRPC API with the generated stubs: created, read back
field for field (a secret reference as a ``google.protobuf.Value``), and refused with a field
violation naming the field, as over REST (one service layer decides)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from cronwheel.store.port import StoredSecret
from cronwheel.v1 import jobs_pb2, targets_pb2
from grpc_api.conftest import Env, Stubs, auth
from grpc_api.test_api import violations


def secret(name: str) -> struct_pb2.Value:
    return struct_pb2.Value(
        struct_value=struct_pb2.Struct(fields={"secret": struct_pb2.Value(string_value=name)})
    )


def job(name: str, target: targets_pb2.Target) -> jobs_pb2.CreateJobRequest:
    return jobs_pb2.CreateJobRequest(
        job=jobs_pb2.JobSpec(team="data", name=name, schedule="0 3 * * *", target=target)
    )


async def test_rabbitmq_and_kafka_jobs_round_trip(env: Env, stubs: Stubs) -> None:
    await env.store.put_secret(
        StoredSecret("data", "mq-password", "k1", b"sealed")
    )  # the API checks names only
    token = auth(env.admin_token)
    rabbitmq = targets_pb2.RabbitmqTarget(
        url="amqps://mq.example.com/billing",
        exchange="amq.topic",
        routing_key="reports.nightly",
        username=struct_pb2.Value(string_value="svc"),
        password=secret("mq-password"),
    )
    created = await stubs.jobs.CreateJob(job("mq", targets_pb2.Target(rabbitmq=rabbitmq)), metadata=token)
    assert created.target.WhichOneof("kind") == "rabbitmq"
    assert created.target.rabbitmq.routing_key == "reports.nightly"
    assert created.target.rabbitmq.password.struct_value.fields["secret"].string_value == "mq-password"
    kafka = targets_pb2.KafkaTarget(
        bootstrap_servers=["k1.example.com:9092"], topic="reports", key="tenant-7"
    )
    made = await stubs.jobs.CreateJob(job("k", targets_pb2.Target(kafka=kafka)), metadata=token)
    assert list(made.target.kafka.bootstrap_servers) == ["k1.example.com:9092"]
    assert (made.target.kafka.topic, made.target.kafka.key, made.target.kafka.tls) == (
        "reports",
        "tenant-7",
        False,
    )


async def test_a_loopback_broker_is_refused_naming_the_field(env: Env, stubs: Stubs) -> None:
    kafka = targets_pb2.KafkaTarget(bootstrap_servers=["k1.example.com:9092", "127.0.0.1:9092"], topic="t")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.jobs.CreateJob(job("k", targets_pb2.Target(kafka=kafka)), metadata=auth(env.admin_token))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    found = violations(caught.value)
    assert any(
        "target.bootstrap_servers[1] points to a non-public address" in text for text in found.values()
    ), found
