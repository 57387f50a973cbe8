"""The ``rabbitmq`` target kind: a message published to a RabbitMQ (AMQP 0-9-1) exchange with
publisher confirms (header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import RabbitMqTarget
from cronwheel.targets.checks import check_rabbitmq, parse_amqp_url, redacted_url
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    HEADER,
    SECRET_HEADER,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
    values_from_json,
    values_to_json,
)


def to_json(target: RabbitMqTarget) -> dict[str, Any]:
    return {
        "type": "rabbitmq",
        "url": target.url,
        "exchange": target.exchange,
        "routing_key": target.routing_key,
        "headers": values_to_json(target.headers),
        "username": optional_to_json(target.username),
        "password": optional_to_json(target.password),
    }


def from_json(data: Mapping[str, Any]) -> RabbitMqTarget:
    return RabbitMqTarget(
        url=data["url"],
        exchange=data["exchange"],
        routing_key=data["routing_key"],
        headers=values_from_json(data["headers"]),
        username=optional_from_json(data.get("username")),
        password=optional_from_json(data.get("password")),
    )


def summary(target: Mapping[str, Any]) -> str:
    exchange = target["exchange"] or "(default exchange)"
    return f"rabbitmq {redacted_url(target['url'])} {exchange} key {target['routing_key']}"


def addresses(target: RabbitMqTarget) -> list[tuple[str, URL]]:
    return [("target.url", parse_amqp_url(target.url))]


KIND = Kind(
    tag="rabbitmq",
    record=RabbitMqTarget,
    check=check_rabbitmq,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="headers",
    credentials=("username", "password"),
    addresses=addresses,
    flags=(
        Flag(
            "--rabbitmq",
            "rabbitmq_url",
            "Target: publish to RabbitMQ (amqp://host:5672/vhost).",
            metavar="URL",
        ),
        Flag("--exchange", "exchange", "RabbitMQ exchange (default: the default exchange)."),
        Flag("--routing-key", "routing_key", "RabbitMQ routing key."),
        HEADER,
        SECRET_HEADER,
        *BROKER_CREDENTIALS,
    ),
)
