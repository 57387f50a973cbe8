"""The ``rabbitmq`` target kind: a message published to a RabbitMQ (AMQP 0-9-1) exchange with
publisher confirms (header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    EXCHANGE,
    MAX_SHORTSTR,
    check_broker_headers,
    check_credential,
    parse_amqp_url,
    redacted_url,
    utf8,
)
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
from cronwheel.targets.values import Value


@dataclass(frozen=True, slots=True)
class RabbitMqTarget:
    """Publish the payload to a RabbitMQ (AMQP 0-9-1) exchange with publisher confirms."""

    url: str  # amqp://host:5672/vhost or amqps://...; never user info (username/password below)
    routing_key: str
    exchange: str = ""  # "": the default exchange (routes to the queue named by routing_key)
    headers: tuple[tuple[str, Value], ...] = ()
    username: Value | None = None
    password: Value | None = None
    type: Literal["rabbitmq"] = "rabbitmq"


def check_rabbitmq(target: RabbitMqTarget) -> URL:
    """Refuse what no AMQP connection could publish; returns the URL as the executor uses it."""
    url = parse_amqp_url(target.url)
    if not EXCHANGE.fullmatch(target.exchange) or len(target.exchange) > MAX_SHORTSTR:
        raise InvalidInputError(
            f"target.exchange must be at most {MAX_SHORTSTR} of A-Z a-z 0-9 - _ . : "
            "(empty: the default exchange)"
        )
    if len(utf8("target.routing_key", target.routing_key)) > MAX_SHORTSTR:
        raise InvalidInputError(f"target.routing_key is longer than {MAX_SHORTSTR} bytes (an AMQP shortstr)")
    check_broker_headers(target.headers)
    check_credential("target.username", target.username)
    check_credential("target.password", target.password)
    return url


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
