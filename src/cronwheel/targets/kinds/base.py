"""What every target kind declares (:class:`Kind`) and the small pieces kinds share: the JSON of
header, environment and credential values (plain text, or ``{"secret": name}`` for a reference to
a team secret), and the command-line flags a kind takes, as data (:class:`Flag`; the CLI turns
them into options)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cronwheel.targets.values import SecretRef, Value

if TYPE_CHECKING:
    from yarl import URL

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Flag:
    """A command-line flag of ``cronwheel jobs create/update``: ``name`` (``--http``) fills the
    parameter ``dest``. ``is_flag``: a switch (absent: None); ``choices``: the values it takes."""

    name: str
    dest: str
    help: str | None = None
    metavar: str | None = None
    multiple: bool = False
    is_flag: bool = False
    choices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Kind(Generic[T]):
    """One target kind: its ``tag`` (``target.type``), its record, checks and JSON codec, where it
    holds values that may refer to secrets, its one-line summary and its CLI flags.

    * ``pairs``: the field of ``(name, value)`` pairs (``headers``, ``env``, ``metadata``), if any;
      a value may be a :class:`SecretRef`.
    * ``credentials``: the fields holding one value or None (a user name, a password, a token),
      which may be a :class:`SecretRef` too.
    * ``references``: the fields holding only a :class:`SecretRef` or None (a signing secret); a
      resolved target drops them (the executor asks for their value by name).
    * ``credential_url``: whether its ``url`` may carry a credential (user info, ``?token=``).
    * ``summary``: the target in one line, from its JSON (the API's or the store's).
    * ``reserved``: whether the operator must allow it (``--allow-commands``, ``--python-allow``):
      writing one takes the right its tag names.
    * ``refused_field``: the field a refusal of the server's policy names (``target.url``).
    * ``addresses``: where it connects, as (field, URL) pairs whose hosts the server judges where a
      job is written (:func:`cronwheel.targets.ssrf.url_refusal`); none for a command or a function.
    """

    tag: str
    record: type[T]
    check: Callable[[T], object]
    to_json: Callable[[T], dict[str, Any]]
    from_json: Callable[[Mapping[str, Any]], T]
    summary: Callable[[Mapping[str, Any]], str]
    pairs: str | None = None
    credentials: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    credential_url: bool = False
    reserved: bool = False
    refused_field: str = "target.url"
    flags: tuple[Flag, ...] = ()
    addresses: Callable[[T], list[tuple[str, URL]]] = lambda _: []


# -- values in JSON ------------------------------------------------------------------------------


def values_to_json(pairs: tuple[tuple[str, Value], ...]) -> list[list[Any]]:
    """Header or env pairs: a plain value as text, a reference as ``{"secret": name}``."""
    return [[key, value if isinstance(value, str) else {"secret": value.name}] for key, value in pairs]


def values_from_json(data: Any) -> tuple[tuple[str, Value], ...]:
    return tuple((str(key), value_from_json(value)) for key, value in data)


def value_from_json(data: Any) -> Value:
    return SecretRef(str(data["secret"])) if isinstance(data, Mapping) else str(data)


def optional_to_json(value: Value | None) -> Any:
    """A credential field: null, plain text, or ``{"secret": name}``."""
    return None if value is None else value if isinstance(value, str) else {"secret": value.name}


def optional_from_json(data: Any) -> Value | None:
    return None if data is None else value_from_json(data)


# -- flags more than one kind takes --------------------------------------------------------------

HEADER = Flag("--header", "headers", "Webhook header (repeat).", metavar="K=V", multiple=True)
SECRET_HEADER = Flag(
    "--secret-header",
    "secret_headers",
    "Webhook header whose value is the team's secret SECRET (repeat).",
    metavar="K=SECRET",
    multiple=True,
)
TOPIC_FLAG = Flag("--topic", "topic", "MQTT or Kafka topic to publish to (with --mqtt or --kafka).")
BROKER_USER = Flag(
    "--broker-user",
    "broker_user",
    "Broker user name (with --nats, --mqtt, --rabbitmq, --kafka).",
    metavar="NAME",
)
BROKER_USER_SECRET = Flag(
    "--broker-user-secret",
    "broker_user_secret",
    "Broker user name: the team's secret SECRET.",
    metavar="SECRET",
)
BROKER_PASSWORD_SECRET = Flag(
    "--broker-password-secret",
    "broker_password_secret",
    "Broker password: the team's secret SECRET.",
    metavar="SECRET",
)
BROKER_CREDENTIALS = (BROKER_USER, BROKER_USER_SECRET, BROKER_PASSWORD_SECRET)
