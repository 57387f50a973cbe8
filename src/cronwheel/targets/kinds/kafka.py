"""The ``kafka`` target kind: a record published to a Kafka topic through an idempotent producer
(header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    MAX_BOOTSTRAP_SERVERS,
    TOPIC,
    check_broker_headers,
    check_credential,
    kafka_server,
    utf8,
)
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    HEADER,
    SECRET_HEADER,
    TOPIC_FLAG,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
    values_from_json,
    values_to_json,
)
from cronwheel.targets.values import Value

KafkaSasl = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


@dataclass(frozen=True, slots=True)
class KafkaTarget:
    """Publish the payload to a Kafka topic through an idempotent producer (acks=all)."""

    bootstrap_servers: tuple[str, ...]  # "host:port" each
    topic: str
    key: str | None = None  # None: the job id
    headers: tuple[tuple[str, Value], ...] = ()
    tls: bool = False
    sasl_mechanism: KafkaSasl | None = None
    username: Value | None = None
    password: Value | None = None
    type: Literal["kafka"] = "kafka"


def check_kafka(target: KafkaTarget) -> list[URL]:
    """Refuse what no Kafka producer could send; returns the bootstrap servers as
    ``kafka://host:port`` URLs (their ``raw_host`` is what the SSRF guard judges)."""
    if not target.bootstrap_servers:
        raise InvalidInputError("target.bootstrap_servers must list at least one host:port")
    if len(target.bootstrap_servers) > MAX_BOOTSTRAP_SERVERS:
        raise InvalidInputError(f"target.bootstrap_servers lists more than {MAX_BOOTSTRAP_SERVERS} servers")
    servers = [kafka_server(f"target.bootstrap_servers[{index}]", text)
               for index, text in enumerate(target.bootstrap_servers)]  # fmt: skip
    if not TOPIC.fullmatch(target.topic) or target.topic in (".", ".."):
        raise InvalidInputError('target.topic must be 1-249 of A-Z a-z 0-9 . _ - (and not "." or "..")')
    if target.key is not None:
        utf8("target.key", target.key)
    check_broker_headers(target.headers)
    check_credential("target.username", target.username)
    check_credential("target.password", target.password)
    credentials = target.username is not None or target.password is not None
    if target.sasl_mechanism is not None and (target.username is None or target.password is None):
        raise InvalidInputError(
            f"target.sasl_mechanism {target.sasl_mechanism} needs target.username and target.password"
        )
    if target.sasl_mechanism is None and credentials:
        raise InvalidInputError(
            "target.username and target.password need target.sasl_mechanism "
            "(PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
        )
    return servers


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
        TOPIC_FLAG,
        HEADER,
        SECRET_HEADER,
        *BROKER_CREDENTIALS,
    ),
)
