"""Every target kind, registered once: ``tag`` (``target.type``) -> :class:`~.base.Kind`, one
module each (:mod:`.http`, :mod:`.command`, :mod:`.python`, :mod:`.grpc`, :mod:`.nats`,
:mod:`.mqtt`, :mod:`.rabbitmq`, :mod:`.kafka`). What applies to any target goes through the
registry rather than naming kinds: its checks, its JSON, the fields that may refer to secrets (and
the values held in clear), its one-line summary and its CLI flags. A new kind is a module here, its
executor and its docs section (and, above this layer, its API spec and proto message)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.redaction import HIDDEN, credential_header
from cronwheel.targets.checks import redacted_url, reserved_header
from cronwheel.targets.kinds import command, grpc, http, kafka, mqtt, nats, python, rabbitmq
from cronwheel.targets.kinds.base import Flag, Kind
from cronwheel.targets.kinds.command import CommandTarget
from cronwheel.targets.kinds.grpc import GrpcTarget
from cronwheel.targets.kinds.http import HttpTarget
from cronwheel.targets.kinds.kafka import KafkaSasl, KafkaTarget
from cronwheel.targets.kinds.mqtt import MqttQos, MqttTarget
from cronwheel.targets.kinds.nats import NatsTarget
from cronwheel.targets.kinds.python import PythonTarget
from cronwheel.targets.kinds.rabbitmq import RabbitMqTarget
from cronwheel.targets.values import SecretRef, Value

__all__ = [
    "KINDS",
    "CommandTarget",
    "Flag",
    "GrpcTarget",
    "HttpTarget",
    "KafkaSasl",
    "KafkaTarget",
    "Kind",
    "MqttQos",
    "MqttTarget",
    "NatsTarget",
    "PythonTarget",
    "RabbitMqTarget",
    "Target",
    "check_reserved_names",
    "check_target",
    "flags",
    "kind_of",
    "masked_credentials",
    "plain_credentials",
    "plain_values",
    "resolved",
    "secret_references",
    "summary",
    "target_from_json",
    "target_to_json",
]

# ``type`` tags a target with its kind, in every layer: the API and jobs.yaml (``target.type``),
# these records (``target.type``), the store's JSON and the worker's executors (keyed by type).
Target = (
    HttpTarget
    | CommandTarget
    | PythonTarget
    | GrpcTarget
    | NatsTarget
    | MqttTarget
    | RabbitMqTarget
    | KafkaTarget
)

KINDS: dict[str, Kind[Any]] = {
    module.KIND.tag: module.KIND for module in (http, command, python, grpc, nats, mqtt, rabbitmq, kafka)
}
_BY_RECORD: dict[type, Kind[Any]] = {kind.record: kind for kind in KINDS.values()}

T = TypeVar("T", bound=Target)


def kind_of(target: Target) -> Kind[Any]:
    """The kind of ``target`` (TypeError: not a target)."""
    kind = _BY_RECORD.get(type(target))
    if kind is None:
        raise TypeError(f"unknown target {target!r}")
    return kind


def flags() -> list[Flag]:
    """The CLI flags of every kind, each once, in the order of the registry."""
    return list({flag.dest: flag for kind in KINDS.values() for flag in kind.flags}.values())


# -- JSON ----------------------------------------------------------------------------------------


def target_to_json(target: Target) -> dict[str, Any]:
    return kind_of(target).to_json(target)


def target_from_json(data: Mapping[str, Any]) -> Target:
    tag = data["type"] if "type" in data else data.get("kind")  # "kind": rows of earlier versions
    kind = KINDS.get(tag) if isinstance(tag, str) else None
    if kind is None:
        raise ValueError(f"unknown target type {tag!r} in the store")
    target: Target = kind.from_json(data)
    return target


def summary(target: Mapping[str, Any]) -> str:
    """``target`` (its JSON, the API's or the store's) in one line."""
    return KINDS[target["type"]].summary(target)


# -- checks --------------------------------------------------------------------------------------


def check_target(target: Target) -> None:
    """Refuse (InvalidInputError, naming the field) a target nothing could ever run, or one that
    sets a header or metadata key cronwheel sets itself (:func:`~cronwheel.targets.checks.reserved_header`).
    That second rule is for definitions being written: on a stored job an attempt's own values win,
    so the executors, which call the checks of each kind, do not ask it."""
    check_reserved_names(target)
    kind_of(target).check(target)


def check_reserved_names(target: Target) -> None:
    """Refuse a header or metadata key of ``target`` that :func:`~cronwheel.targets.checks.reserved_header`
    reserves, naming it (``target.headers.Host``), whatever its case."""
    group = kind_of(target).pairs
    if group not in ("headers", "metadata"):
        return
    for name, _ in getattr(target, group):
        why = reserved_header(name, grpc=group == "metadata")
        if why is not None:
            raise InvalidInputError(f"target.{group}.{name} is {why}; a target may not set it")


# -- secret references and values held in clear ----------------------------------------------------


def _values(target: Target) -> Iterator[tuple[str, Value]]:
    """The target's header, environment or metadata values, then its credentials (those set)."""
    kind = kind_of(target)
    if kind.pairs is not None:
        for name, value in getattr(target, kind.pairs):
            yield f"target.{kind.pairs}.{name}", value
    for field in kind.credentials:
        value = getattr(target, field)
        if value is not None:
            yield f"target.{field}", value


def secret_references(target: Target) -> list[tuple[str, SecretRef]]:
    """Every secret ``target`` refers to, with the field that refers to it, in the API's dotted
    form (``target.headers.Authorization``, ``target.env.TOKEN``, ``target.signing_secret``)."""
    found = [(field, value) for field, value in _values(target) if isinstance(value, SecretRef)]
    for field in kind_of(target).references:
        reference = getattr(target, field)
        if reference is not None:
            found.append((f"target.{field}", reference))
    return found


def plain_values(target: Target) -> list[str]:
    """The header, environment and credential values of ``target`` held in clear in the job (not
    secret references), by field: what ``cronwheel secrets adopt`` moves into secrets. A broker's
    user name is an identity rather than a credential: it is not listed."""
    return [
        field
        for field, value in _values(target)
        if isinstance(value, str) and field not in ("target.user", "target.username")
    ]


def plain_credentials(target: Target) -> list[tuple[str, str]]:
    """The credentials ``target`` holds in clear, as (field, value): a header, metadata or
    environment value whose name carries a credential (:func:`cronwheel.redaction.credential_header`:
    ``Authorization``, ``Cookie``, ``*token*``, ``*api-key*``, ``*secret*``, ``*password*`` ...),
    a broker's password or token, and an HTTP URL with user info or a query parameter whose name
    carries a credential as a header's would (``?token=``, ``?api_key=``, ``?sig=``). What the server
    refuses to store unless its operator allows plain credentials, and what a caller who may not
    write the job sees masked."""
    found = [
        (field, value) for field, value in _values(target) if isinstance(value, str) and _credential(field)
    ]
    if kind_of(target).credential_url and _credential_url(getattr(target, "url")):  # noqa: B009
        found.insert(0, ("target.url", getattr(target, "url")))  # noqa: B009
    return found


def _credential(field: str) -> bool:
    """Whether a field :func:`_values` names holds a credential (a user name does not)."""
    group, _, name = field.removeprefix("target.").partition(".")
    if group in ("headers", "metadata", "env"):
        return credential_header(name)
    return group in ("password", "token")


def _credential_url(text: str) -> bool:
    try:
        url = URL(text)
        names = list(url.query)
    except (ValueError, TypeError):
        return False
    return url.raw_user is not None or url.raw_password is not None or any(map(credential_header, names))


def masked_credentials(target: T) -> T:
    """``target`` with each of its :func:`plain_credentials` replaced by ``***`` (a URL by its
    :func:`~cronwheel.targets.checks.redacted_url`); secret references and other values as they are."""
    fields = {field for field, _ in plain_credentials(target)}
    if not fields:
        return target
    kind = kind_of(target)
    changes: dict[str, Any] = {}
    if kind.pairs is not None:
        group = kind.pairs
        changes[group] = tuple(
            (name, HIDDEN if f"target.{group}.{name}" in fields else value)
            for name, value in getattr(target, group)
        )
    for name in kind.credentials:
        if f"target.{name}" in fields:
            changes[name] = HIDDEN
    if "target.url" in fields:
        changes["url"] = redacted_url(getattr(target, "url"))  # noqa: B009
    return dataclasses.replace(target, **changes)


def resolved(target: T, values: Mapping[str, str]) -> T:
    """``target`` with its secret references replaced by ``values`` (name -> value, every name it
    refers to), for one attempt; its reference-only fields (a signing secret) dropped."""
    kind = kind_of(target)

    def one(value: Value | None) -> Value | None:
        return values[value.name] if isinstance(value, SecretRef) else value

    changes: dict[str, Any] = {field: one(getattr(target, field)) for field in kind.credentials}
    if kind.pairs is not None:
        changes[kind.pairs] = tuple((key, one(value)) for key, value in getattr(target, kind.pairs))
    changes.update(dict.fromkeys(kind.references))
    return dataclasses.replace(target, **changes)
