"""The ``kafka`` target kind: a record published to a Kafka topic through an idempotent producer
(header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import KafkaTarget
from cronwheel.targets.checks import check_kafka, kafka_server
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    HEADER,
    SECRET_HEADER,
    TOPIC,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
    values_from_json,
    values_to_json,
)


def to_json(target: KafkaTarget) -> dict[str, Any]:
    return {
        "type": "kafka",
        "bootstrap_servers": list(target.bootstrap_servers),
        "topic": target.topic,
        "key": target.key,
        "headers": values_to_json(target.headers),
        "tls": target.tls,
        "sasl_mechanism": target.sasl_mechanism,
        "username": optional_to_json(target.username),
        "password": optional_to_json(target.password),
    }


def from_json(data: Mapping[str, Any]) -> KafkaTarget:
    return KafkaTarget(
        bootstrap_servers=tuple(str(server) for server in data["bootstrap_servers"]),
        topic=data["topic"],
        key=data.get("key"),
        headers=values_from_json(data["headers"]),
        tls=bool(data.get("tls", False)),
        sasl_mechanism=data.get("sasl_mechanism"),
        username=optional_from_json(data.get("username")),
        password=optional_from_json(data.get("password")),
    )


def summary(target: Mapping[str, Any]) -> str:
    key = "job id" if target.get("key") is None else target["key"]
    return f"kafka {','.join(target['bootstrap_servers'])} topic {target['topic']} key {key}"


def addresses(target: KafkaTarget) -> list[tuple[str, URL]]:
    found = []
    for index, text in enumerate(target.bootstrap_servers):
        field = f"target.bootstrap_servers[{index}]"
        found.append((field, kafka_server(field, text)))
    return found


KIND = Kind(
    tag="kafka",
    record=KafkaTarget,
    check=check_kafka,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="headers",
    credentials=("username", "password"),
    addresses=addresses,
    refused_field="target.bootstrap_servers",
    flags=(
        Flag(
            "--kafka",
            "kafka_servers",
            "Target: publish to Kafka via these brokers.",
            metavar="HOST:PORT[,...]",
        ),
        Flag("--key", "kafka_key", "Kafka record key (default: the job id)."),
        Flag("--kafka-tls", "kafka_tls", "Kafka over TLS (amqps:// says it for RabbitMQ).", is_flag=True),
        Flag(
            "--sasl-mechanism",
            "sasl_mechanism",
            "Kafka SASL.",
            choices=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        ),
        TOPIC,
        HEADER,
        SECRET_HEADER,
        *BROKER_CREDENTIALS,
    ),
)
