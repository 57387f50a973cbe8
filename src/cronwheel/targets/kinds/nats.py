"""The ``nats`` target kind: a message published to a NATS subject, through JetStream or not
(header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import NatsTarget
from cronwheel.targets.checks import NATS_SCHEMES, check_nats, parse_broker_url
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
    values_from_json,
    values_to_json,
)


def to_json(target: NatsTarget) -> dict[str, Any]:
    return {
        "type": "nats",
        "url": target.url,
        "subject": target.subject,
        "jetstream": target.jetstream,
        "headers": values_to_json(target.headers),
        "user": optional_to_json(target.user),
        "password": optional_to_json(target.password),
        "token": optional_to_json(target.token),
    }


def from_json(data: Mapping[str, Any]) -> NatsTarget:
    return NatsTarget(
        url=data["url"],
        subject=data["subject"],
        jetstream=bool(data["jetstream"]),
        headers=values_from_json(data["headers"]),
        user=optional_from_json(data.get("user")),
        password=optional_from_json(data.get("password")),
        token=optional_from_json(data.get("token")),
    )


def summary(target: Mapping[str, Any]) -> str:
    via = " (jetstream)" if target.get("jetstream") else ""
    return f"nats {target['url']} subject {target['subject']}{via}"


def addresses(target: NatsTarget) -> list[tuple[str, URL]]:
    return [("target.url", parse_broker_url(target.url, NATS_SCHEMES))]


KIND = Kind(
    tag="nats",
    record=NatsTarget,
    check=check_nats,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    pairs="headers",
    credentials=("user", "password", "token"),
    addresses=addresses,
    flags=(
        Flag("--nats", "nats_url", "Target: publish to NATS (nats:// or tls://).", metavar="URL"),
        Flag("--subject", "subject", "NATS subject to publish to (with --nats)."),
        Flag("--jetstream", "jetstream", "Publish through JetStream (with --nats).", is_flag=True),
        *BROKER_CREDENTIALS,
        Flag(
            "--broker-token-secret",
            "broker_token_secret",
            "NATS token: the team's secret SECRET (with --nats).",
            metavar="SECRET",
        ),
    ),
)
