"""The ``nats`` target kind: a message published to a NATS subject, through JetStream or not
(header values and credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    MAX_NATS_SUBJECT,
    NATS_SCHEMES,
    NATS_SUBJECT_BAD,
    check_credential,
    check_header,
    parse_broker_url,
    utf8,
)
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
    values_from_json,
    values_to_json,
)
from cronwheel.targets.values import Value


@dataclass(frozen=True, slots=True)
class NatsTarget:
    """Publish the payload to a NATS subject (through JetStream when ``jetstream``)."""

    url: str  # nats://host:4222, tls://host:4222
    subject: str
    jetstream: bool = False
    headers: tuple[tuple[str, Value], ...] = ()
    user: Value | None = None
    password: Value | None = None
    token: Value | None = None
    type: Literal["nats"] = "nats"


def check_nats(target: NatsTarget) -> URL:
    """Refuse what nats-py cannot publish; returns the URL."""
    url = parse_broker_url(target.url, NATS_SCHEMES)
    subject = target.subject
    if not subject or len(subject) > MAX_NATS_SUBJECT:
        raise InvalidInputError(f"target.subject must be 1 to {MAX_NATS_SUBJECT} characters")
    utf8("target.subject", subject)
    if NATS_SUBJECT_BAD.search(subject):
        raise InvalidInputError(
            "target.subject must not contain whitespace, control characters or the wildcards * and > "
            "(a message is published to one subject)"
        )
    if any(not token for token in subject.split(".")):
        raise InvalidInputError("target.subject has an empty token (a leading, trailing or double '.')")
    for name, value in target.headers:
        check_header("target.headers", name, value)
    check_credential("target.user", target.user)
    check_credential("target.password", target.password)
    check_credential("target.token", target.token)
    if target.password is not None and target.user is None:
        raise InvalidInputError("target.password needs target.user")
    if target.token is not None and (target.user is not None or target.password is not None):
        raise InvalidInputError("give target.token or target.user and target.password, not both")
    return url


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
