"""Every registered target kind (:mod:`cronwheel.targets.kinds`) is whole: an API spec and a proto
message of its tag, a JSON codec that round-trips, an executor, secret references that resolve
away, a one-line summary and CLI flags. A kind added to the registry without one of them fails
here."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from cronwheel.api.schemas import targets as targets_schemas
from cronwheel.model import (
    CommandTarget,
    GrpcTarget,
    HttpTarget,
    KafkaTarget,
    MqttTarget,
    NatsTarget,
    PythonTarget,
    RabbitMqTarget,
    SecretRef,
    Target,
)
from cronwheel.targets import kinds
from cronwheel.v1 import targets_pb2
from cronwheel.worker.executors import EXECUTORS, Executors

KEY = SecretRef("api-key")
PASSWORD = SecretRef("broker-password")

EXAMPLES: dict[str, Target] = {
    "http": HttpTarget(
        "https://hooks.example.com/x", headers=(("Authorization", KEY), ("A", "1")), signing_secret=KEY
    ),
    "command": CommandTarget(("/bin/true", "-v"), env=(("TOKEN", KEY),), cwd="/tmp"),
    "python": PythonTarget("jobs.tasks:nightly"),
    "grpc": GrpcTarget("grpc.example.com:443", "pkg.Svc/Run", tls=True, metadata=(("authorization", KEY),)),
    "nats": NatsTarget(
        "nats://nats.example.com:4222", "a.b", headers=(("K", KEY),), user="u", password=PASSWORD
    ),
    "mqtt": MqttTarget("mqtts://mqtt.example.com:8883", "a/b", qos=2, username="u", password=PASSWORD),
    "rabbitmq": RabbitMqTarget(
        "amqps://mq.example.com/v",
        "key",
        exchange="x",
        headers=(("K", KEY),),
        username="u",
        password=PASSWORD,
    ),
    "kafka": KafkaTarget(
        ("k1.example.com:9092",),
        "t",
        headers=(("K", KEY),),
        sasl_mechanism="PLAIN",
        username="u",
        password=PASSWORD,
    ),
}


def _rest_specs() -> dict[str, type[BaseModel]]:
    union = typing.get_args(targets_schemas.TargetSpec)[0]
    return {
        typing.get_args(model.model_fields["type"].annotation)[0]: model for model in typing.get_args(union)
    }


def test_every_kind_has_an_api_spec_a_proto_message_an_executor_and_an_example() -> None:
    tags = set(kinds.KINDS)
    proto = {field.name for field in targets_pb2.Target.DESCRIPTOR.oneofs_by_name["kind"].fields}
    executors = Executors()
    assert set(_rest_specs()) == tags
    assert proto == tags
    assert set(EXAMPLES) == tags
    assert set(EXECUTORS) == tags
    for tag in tags:
        assert executors[tag] is not None


@pytest.mark.parametrize("tag", sorted(EXAMPLES))
def test_a_kind_round_trips_through_the_store_and_the_api(tag: str) -> None:
    target = EXAMPLES[tag]
    kind = kinds.KINDS[tag]
    assert kinds.kind_of(target) is kind
    assert isinstance(target, kind.record)
    assert target.type == tag
    kinds.check_target(target)
    assert kinds.target_from_json(kinds.target_to_json(target)) == target
    spec = TypeAdapter(targets_schemas.TargetSpec).validate_python(targets_schemas.target_from_record(target))
    assert spec.to_record() == target


@pytest.mark.parametrize("tag", sorted(EXAMPLES))
def test_resolving_a_kinds_references_leaves_none(tag: str) -> None:
    target = EXAMPLES[tag]
    names = {reference.name for _, reference in kinds.secret_references(target)}
    resolved = kinds.resolved(target, {name: f"value-of-{name}" for name in names})
    assert kinds.secret_references(resolved) == []
    assert not any(isinstance(value, SecretRef) for value in _leaves(resolved))


def _leaves(value: Any) -> list[Any]:
    if dataclasses.is_dataclass(value):
        return [leaf for field in dataclasses.fields(value) for leaf in _leaves(getattr(value, field.name))]
    if isinstance(value, tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("tag", sorted(EXAMPLES))
def test_a_kind_has_a_summary_and_a_target_flag(tag: str) -> None:
    target = targets_schemas.target_from_record(EXAMPLES[tag])
    assert kinds.summary(target).startswith(tag)
    assert kinds.summary(kinds.target_to_json(EXAMPLES[tag])) == kinds.summary(target)
    first = kinds.KINDS[tag].flags[0]
    assert first.help is not None
    assert first.help.startswith("Target:")


def test_a_flag_name_means_one_parameter_whichever_kind_takes_it() -> None:
    by_name: dict[str, set[str]] = {}
    for kind in kinds.KINDS.values():
        for flag in kind.flags:
            by_name.setdefault(flag.name, set()).add(flag.dest)
    assert all(len(dests) == 1 for dests in by_name.values()), by_name
    assert len({flag.dest for flag in kinds.flags()}) == len(kinds.flags())
