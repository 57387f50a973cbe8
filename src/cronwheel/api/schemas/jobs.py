"""The REST API's request and response bodies (pydantic v2), and their converters to and from the
records of :mod:`cronwheel.model`.

Pydantic lives here and nowhere else: routes validate a body into one of these models, call
``to_record`` to get a :class:`~cronwheel.model.Job`, and answer with ``from_record``. Every model
refuses unknown fields and does not coerce types (``"30"`` is not a number), so a typo is a 422
that names the field rather than a setting silently ignored.

A job's fields are defined once, in :class:`JobFields` (types, constraints, defaults, docs):
:class:`JobSpec` (POST and PUT) adds the checks a schema cannot state, :class:`JobOut` adds the
server's read-only fields, :class:`JobPatch` is derived from :class:`JobSpec` with every field
optional, and :func:`spec_fields` follows :class:`JobSpec`'s field list. Every choice (overlap,
misfire policy, run state ...) is the model's own enum or ``Literal`` alias, never a copy.
"""

from __future__ import annotations

import enum
import itertools
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ModelWrapValidatorHandler,
    Strict,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, InitErrorDetails, PydanticCustomError

from cronwheel.api.schemas import checks
from cronwheel.api.schemas.partial import partial_model
from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import MAX_TIMEOUT_S, check_payload
from cronwheel.lateness import is_late
from cronwheel.model import (
    Attempt,
    CommandTarget,
    GrpcTarget,
    HttpTarget,
    Job,
    KafkaSasl,
    KafkaTarget,
    MisfireMode,
    MisfirePolicy,
    MqttQos,
    MqttTarget,
    NatsTarget,
    Outcome,
    Overlap,
    PythonTarget,
    RabbitMqTarget,
    RetentionPolicy,
    RetryPolicy,
    Run,
    RunEvent,
    RunKind,
    RunState,
    SecretRef,
    Target,
    Value,
)
from cronwheel.schedule import DstFold, DstGap, Fire, FireKind, ScheduleError, describe, parse_schedule
from cronwheel.schedule.lint import schedule_warnings
from cronwheel.store.port import RunSample
from cronwheel.targets.checks import MAX_DESCRIPTOR_SET_CHARS
from cronwheel.targets.kinds import kind_of, plain_values, target_to_json
from cronwheel.telemetry.tracing import trace_id

# -- building blocks ---------------------------------------------------------------------------


class Documented:
    """JSON Schema keywords that the OpenAPI document states about a value which code checks,
    not the schema: the schedule parser, the zone database, :mod:`cronwheel.targets.checks`. The
    document then says what the server enforces while the server keeps its own precise messages
    (a cron field and column, "target.argv[1] contains a NUL byte"), and a stored value written
    before a check existed is still read back. Each keyword must never refuse what that code
    accepts: tests/api/test_openapi.py proves it for each of them."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(self.keywords)
        return schema


# What the schedule parser can read: a macro, or five or six fields of these characters separated
# by whitespace (str.split's, which counts \x1c-\x1f too); it alone says what is in range.
CRON_FIELD = r"[0-9A-Za-z*?,/#()-]+"
CRON_PATTERN = rf"^[\s\x1c-\x1f]*(@\S+|{CRON_FIELD}([\s\x1c-\x1f]+{CRON_FIELD}){{4,5}})[\s\x1c-\x1f]*$"
ZONE_PATTERN = r"^[A-Za-z0-9._+/-]{1,64}$"  # the characters of IANA zone names
# An absolute http(s) URL without control characters (leading spaces are stripped by the parser).
URL_PATTERN = r"^ *[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x1f\x7f]+$"
C_STRING = r"^[^\x00]*$"  # what execve takes: no NUL byte
NO_OTHER_KEYS = Documented(additionalProperties=False)  # a map whose keys all match its key pattern


def _integral(value: object) -> object:
    """JSON has one kind of number: ``3.0`` is the integer 3 to JSON Schema (and so to the
    document), so it is one here too; ``3.5`` and ``true`` stay refused."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(_integral)]

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
LabelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]{1,100}$")]
LabelValue = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")]
HeaderValue = Annotated[
    str,
    StringConstraints(max_length=8192, pattern=r"^[^\r\n\x00]*$"),
    Documented(pattern=r"^[^\x00-\x08\x0a-\x1f\x7f]*$"),  # what aiohttp sends (cronwheel.targets.checks)
]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")]
ScheduleText = Annotated[
    str, StringConstraints(min_length=1, max_length=1000), Documented(pattern=CRON_PATTERN)
]
ZoneName = Annotated[str, StringConstraints(min_length=1, max_length=64), Documented(pattern=ZONE_PATTERN)]
CString = Annotated[str, StringConstraints(max_length=4096), Documented(pattern=C_STRING)]

# The model's enums, taken by value (``"forbid"``) from JSON and from Python dicts alike (a strict
# model would otherwise want the enum member itself from Python, as ``cronwheel apply`` passes).
OverlapChoice = Annotated[Overlap, Strict(False)]
MisfireChoice = Annotated[MisfireMode, Strict(False)]
RunStateName = Annotated[RunState, Strict(False)]
RunKindName = Annotated[RunKind, Strict(False)]
OutcomeName = Annotated[Outcome, Strict(False)]
FireKindName = Annotated[FireKind, Strict(False)]

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$",
)


def _rfc3339_text(value: object) -> object:
    """Instants must come as RFC 3339 text (no Unix numbers, no date alone); the offset check is
    left to ``AwareDatetime`` so that a naive time gets its own clear message."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, such as 2026-03-01T09:00:00Z")
    return value


def _as_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-02:00 is in no year Python has
        raise ValueError("must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z") from None


Instant = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_text),
    AfterValidator(_as_utc),
    Strict(False),
]


class _Strict(BaseModel):
    """Request bodies; also the job's parts in responses, where every field is always present."""

    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, json_schema_serialization_defaults_required=True
    )


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- targets -----------------------------------------------------------------------------------


class SecretRefSpec(_Strict):
    """A reference to a secret of the job's own team, in place of a value: the job holds the
    name, the worker resolves the value at attempt time and never records it."""

    secret: Name = Field(
        description="The name of a secret of the job's team (`cronwheel secrets set TEAM/NAME`)."
    )

    def to_record(self) -> SecretRef:
        return SecretRef(self.secret)


def _text_or_secret(text: str) -> WrapValidator:
    """One error on the value itself, not one per branch of ``str | SecretRefSpec`` (whose
    locations would name the branches): a value is ``text``, or a reference."""

    def validate(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            if isinstance(value, dict):
                raise ValueError(
                    'a reference must be {"secret": NAME}, NAME 1-100 of A-Z a-z 0-9 . _ -'
                ) from None
            raise ValueError(f'must be {text}, or {{"secret": NAME}}') from None

    return WrapValidator(validate)


HeaderValueOrSecret = Annotated[
    HeaderValue | SecretRefSpec, _text_or_secret("text of at most 8192 characters without CR, LF or NUL")
]
EnvValueOrSecret = Annotated[
    Annotated[str, StringConstraints(max_length=8192), Documented(pattern=C_STRING)] | SecretRefSpec,
    _text_or_secret("text of at most 8192 characters"),
]


def _value(value: str | SecretRefSpec) -> Value:
    return value if isinstance(value, str) else value.to_record()


def _value_json(value: Value) -> str | dict[str, str]:
    return value if isinstance(value, str) else {"secret": value.name}


class HttpTargetSpec(_Strict):
    """POST (or another method) to a webhook URL."""

    type: Literal["http"]
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048), Documented(pattern=URL_PATTERN)] = (
        Field(description="Absolute http(s) URL; non-public addresses only where an operator allows them.")
    )
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    headers: Annotated[dict[HeaderName, HeaderValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict,
        max_length=50,
        description='Each value plain text, or `{"secret": NAME}`: a secret of the job\'s team.',
    )
    expected_status: list[Annotated[int, Field(ge=100, le=599), BeforeValidator(_integral)]] = Field(
        default_factory=list, max_length=50, description="Statuses that count as success; empty: any 2xx."
    )
    signing_secret: SecretRefSpec | None = Field(
        default=None,
        description="Signs every request (Standard Webhooks `webhook-signature`) with this `whsec_` "
        "secret of the job's team; null: with the team's secret `webhook-signing`, if it has one.",
    )

    def to_record(self) -> HttpTarget:
        return HttpTarget(
            url=self.url,
            method=self.method,
            headers=tuple((name, _value(value)) for name, value in self.headers.items()),
            expected_status=tuple(self.expected_status),
            signing_secret=None if self.signing_secret is None else self.signing_secret.to_record(),
        )


class CommandTargetSpec(_Strict):
    """Run a command (only on servers started with --allow-commands)."""

    type: Literal["command"]
    argv: Annotated[
        list[CString],
        # the program (argv[0]) is not empty; 2020-12's prefixItems replace items for it
        Documented(prefixItems=[{"type": "string", "minLength": 1, "maxLength": 4096, "pattern": C_STRING}]),
    ] = Field(min_length=1, max_length=1000, description="Executed directly, never through a shell.")
    env: Annotated[dict[EnvName, EnvValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict,
        max_length=100,
        description='Each value plain text, or `{"secret": NAME}`: a secret of the job\'s team.',
    )
    cwd: (
        Annotated[str, StringConstraints(min_length=1, max_length=4096), Documented(pattern=r"^/[^\x00]*$")]
        | None
    ) = Field(default=None, description="An absolute path.")

    @field_validator("argv")
    @classmethod
    def _program(cls, argv: list[str]) -> list[str]:
        if not argv[0]:
            raise ValueError("the program (argv[0]) must not be empty")
        return argv

    def to_record(self) -> CommandTarget:
        return CommandTarget(
            argv=tuple(self.argv),
            env=tuple((name, _value(value)) for name, value in self.env.items()),
            cwd=self.cwd,
        )


class PythonTargetSpec(_Strict):
    """Call a Python function ``package.module:function`` (only ones the server allows)."""

    type: Literal["python"]
    function: Annotated[
        str,
        StringConstraints(
            max_length=300,
            pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$",
        ),
    ]

    def to_record(self) -> PythonTarget:
        return PythonTarget(function=self.function)


GRPC_METHOD_PATTERN = r"^[A-Za-z0-9_.]+/[A-Za-z0-9_]+$"  # cronwheel.targets.checks.GRPC_METHOD says the rest
GrpcMethodText = Annotated[str, StringConstraints(max_length=500), Documented(pattern=GRPC_METHOD_PATTERN)]
DescriptorSetText = Annotated[str, StringConstraints(min_length=1, max_length=MAX_DESCRIPTOR_SET_CHARS)]
GrpcMetadataKey = Annotated[str, StringConstraints(pattern=r"^[0-9a-z_.-]{1,200}$")]
GrpcMetadataValueOrSecret = Annotated[
    Annotated[str, StringConstraints(max_length=8192, pattern=r"^[\x20-\x7e]*$")] | SecretRefSpec,
    _text_or_secret("printable ASCII of at most 8192 characters"),
]


class GrpcTargetSpec(_Strict):
    """Call a unary gRPC method; the payload (a JSON object) becomes its request message."""

    type: Literal["grpc"]
    address: Annotated[str, StringConstraints(min_length=3, max_length=300)] = Field(
        description="`host:port` (an IPv6 address in brackets: `[2001:db8::1]:443`); non-public "
        "addresses only where an operator allows them."
    )
    method: GrpcMethodText = Field(
        description="`package.Service/Method`: the service's full name and a unary method."
    )
    tls: bool = Field(default=False, description="Connect with TLS (the system's trusted roots).")
    metadata: Annotated[dict[GrpcMetadataKey, GrpcMetadataValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict,
        max_length=50,
        description="Request metadata: lower-case keys (not `grpc-*`, not `*-bin`), each value printable "
        'ASCII, or `{"secret": NAME}`: a secret of the job\'s team.',
    )
    descriptor_set: DescriptorSetText | None = Field(
        default=None,
        description="Base64 of a serialized `google.protobuf.FileDescriptorSet` defining the method "
        "(`protoc --include_imports --descriptor_set_out`); null: the target's server reflection.",
    )

    def to_record(self) -> GrpcTarget:
        return GrpcTarget(
            address=self.address,
            method=self.method,
            tls=self.tls,
            metadata=tuple((name, _value(value)) for name, value in self.metadata.items()),
            descriptor_set=self.descriptor_set,
        )


CREDENTIAL_PATTERN = r"^[^\x00-\x1f\x7f]*$"  # what cronwheel.targets.checks accepts in a credential
CredentialOrSecret = Annotated[
    Annotated[str, StringConstraints(min_length=1, max_length=1024), Documented(pattern=CREDENTIAL_PATTERN)]
    | SecretRefSpec,
    _text_or_secret("text of 1 to 1024 characters"),
]
NATS_URL_PATTERN = r"^ *([Nn][Aa][Tt][Ss]|[Tt][Ll][Ss])://[^\x00-\x1f\x7f]+$"
MQTT_URL_PATTERN = r"^ *[Mm][Qq][Tt][Tt][Ss]?://[^\x00-\x1f\x7f]+$"
_CREDENTIAL_DOC = (
    'Plain text or `{"secret": NAME}` (a secret of the job\'s team, resolved by the worker); null: none.'
)


class NatsTargetSpec(_Strict):
    """Publish the payload (JSON) to a NATS subject; through JetStream when asked."""

    type: Literal["nats"]
    url: Annotated[
        str, StringConstraints(min_length=1, max_length=2048), Documented(pattern=NATS_URL_PATTERN)
    ] = Field(
        description="nats://host:port (tls://host:port for TLS), without credentials; non-public "
        "addresses only where an operator allows them."
    )
    subject: Annotated[str, StringConstraints(min_length=1, max_length=1024)] = Field(
        description="The subject to publish to: dot-separated tokens, no whitespace, no wildcards * or >."
    )
    jetstream: bool = Field(
        default=False,
        description="Publish through JetStream and succeed on its PubAck (a stream must capture the "
        "subject); `Nats-Msg-Id` is the execution id, so the stream's duplicate window drops a retry's copy.",
    )
    headers: Annotated[dict[HeaderName, HeaderValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict,
        max_length=50,
        description='Message headers; each value plain text, or `{"secret": NAME}`.',
    )
    user: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)
    password: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)
    token: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)

    def to_record(self) -> NatsTarget:
        return NatsTarget(
            url=self.url,
            subject=self.subject,
            jetstream=self.jetstream,
            headers=tuple((name, _value(value)) for name, value in self.headers.items()),
            user=_optional(self.user),
            password=_optional(self.password),
            token=_optional(self.token),
        )


class MqttTargetSpec(_Strict):
    """Publish the payload (JSON) to an MQTT topic, MQTT 5, QoS 1 or 2."""

    type: Literal["mqtt"]
    url: Annotated[
        str, StringConstraints(min_length=1, max_length=2048), Documented(pattern=MQTT_URL_PATTERN)
    ] = Field(
        description="mqtt://host:port (mqtts://host:port for TLS), without credentials; non-public "
        "addresses only where an operator allows them."
    )
    topic: Annotated[str, StringConstraints(min_length=1, max_length=65535)] = Field(
        description="The topic name to publish to: at most 65535 bytes of UTF-8, no NUL, no wildcards + or #."
    )
    qos: MqttQos = Field(
        default=1,
        description="1: success on the broker's PUBACK; 2: on its PUBCOMP (exactly once to the broker).",
    )
    retain: bool = Field(default=False, description="The broker keeps the message for later subscribers.")
    username: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)
    password: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)

    def to_record(self) -> MqttTarget:
        return MqttTarget(
            url=self.url,
            topic=self.topic,
            qos=self.qos,
            retain=self.retain,
            username=_optional(self.username),
            password=_optional(self.password),
        )


def _optional(value: str | SecretRefSpec | None) -> Value | None:
    return None if value is None else _value(value)


def _optional_json(value: Value | None) -> str | dict[str, str] | None:
    return None if value is None else _value_json(value)


_HEADERS_DOC = (
    'Message headers; each value plain text, or `{"secret": NAME}`: a secret of the job\'s team. '
    "cronwheel's own headers (Idempotency-Key, X-Cronwheel-*) win over these."
)


class RabbitMqTargetSpec(_Strict):
    """Publish the payload to a RabbitMQ exchange; an attempt succeeds only when the broker
    confirmed the message (publisher confirms, mandatory routing)."""

    type: Literal["rabbitmq"]
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)] = Field(
        description="amqp://host[:port][/vhost] (amqps:// for TLS); no user info: credentials go in "
        "`username` and `password`. Non-public addresses only where an operator allows them."
    )
    exchange: Annotated[str, StringConstraints(max_length=255)] = Field(
        default="",
        description='The exchange; "" (the default exchange) routes to the queue named by the key.',
    )
    routing_key: Annotated[str, StringConstraints(max_length=255)] = Field(
        description="The routing key (at most 255 bytes)."
    )
    headers: Annotated[dict[HeaderName, HeaderValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict, max_length=50, description=_HEADERS_DOC
    )
    username: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)
    password: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)

    def to_record(self) -> RabbitMqTarget:
        return RabbitMqTarget(
            url=self.url,
            exchange=self.exchange,
            routing_key=self.routing_key,
            headers=tuple((name, _value(value)) for name, value in self.headers.items()),
            username=_optional(self.username),
            password=_optional(self.password),
        )


class KafkaTargetSpec(_Strict):
    """Publish the payload to a Kafka topic through an idempotent producer (acks=all)."""

    type: Literal["kafka"]
    bootstrap_servers: list[Annotated[str, StringConstraints(min_length=1, max_length=300)]] = Field(
        min_length=1, max_length=20, description="host:port of brokers to bootstrap from."
    )
    topic: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,249}$")] = Field(
        description='The topic: 1-249 of A-Z a-z 0-9 . _ - (not "." or "..").'
    )
    key: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="The record key; null: the job id (so one job's records keep their order)."
    )
    headers: Annotated[dict[HeaderName, HeaderValueOrSecret], NO_OTHER_KEYS] = Field(
        default_factory=dict, max_length=50, description=_HEADERS_DOC
    )
    tls: bool = Field(default=False, description="Connect with TLS (the system's trusted CAs).")
    sasl_mechanism: KafkaSasl | None = Field(
        default=None, description="SASL authentication; needs `username` and `password`."
    )
    username: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)
    password: CredentialOrSecret | None = Field(default=None, description=_CREDENTIAL_DOC)

    def to_record(self) -> KafkaTarget:
        return KafkaTarget(
            bootstrap_servers=tuple(self.bootstrap_servers),
            topic=self.topic,
            key=self.key,
            headers=tuple((name, _value(value)) for name, value in self.headers.items()),
            tls=self.tls,
            sasl_mechanism=self.sasl_mechanism,
            username=_optional(self.username),
            password=_optional(self.password),
        )


TargetSpec = Annotated[
    HttpTargetSpec
    | CommandTargetSpec
    | PythonTargetSpec
    | GrpcTargetSpec
    | NatsTargetSpec
    | MqttTargetSpec
    | RabbitMqTargetSpec
    | KafkaTargetSpec,
    Field(discriminator="type"),
]


def target_from_record(target: Target) -> dict[str, Any]:
    """A target record as JSON-ready values (what a request would send): the store's JSON with
    header, environment and metadata pairs as an object, and every reference-only field present."""
    kind = kind_of(target)
    data = target_to_json(target)
    if kind.pairs is not None:
        data[kind.pairs] = dict(data[kind.pairs])
    for field in kind.references:
        data.setdefault(field, None)
    return data


# -- policies ----------------------------------------------------------------------------------


class RetrySpec(_Strict):
    """Attempts of one run, with exponential backoff and full jitter between them."""

    max_attempts: Integer = Field(default=1, ge=1, le=100, description="1: no retries.")
    initial_delay_s: float = Field(default=1.0, gt=0, le=86_400)
    multiplier: float = Field(default=2.0, ge=1, le=100)
    max_delay_s: float = Field(
        default=300.0, gt=0, le=86_400, validate_default=True, description="At least initial_delay_s."
    )
    jitter: bool = Field(default=True, description="Full jitter: each delay uniform in [0, ceiling).")

    @field_validator("max_delay_s")
    @classmethod
    def _delays(cls, value: float, info: ValidationInfo) -> float:
        initial = info.data.get("initial_delay_s")
        if initial is not None and value < initial:
            raise PydanticCustomError("field_order", "max_delay_s must be at least initial_delay_s")
        return value

    def to_record(self) -> RetryPolicy:
        return RetryPolicy(**self.model_dump())


class MisfireSpec(_Strict):
    """What to do with slots that passed while nothing could fire them."""

    policy: MisfireChoice = MisfireMode.SKIP
    grace_s: float = Field(default=60.0, ge=0, le=7 * 86_400, description="Used by `skip` only.")
    max_catch_up: Integer = Field(default=10, ge=1, le=1000, description="Used by `catch_up` only.")

    def to_record(self) -> MisfirePolicy:
        return MisfirePolicy(mode=self.policy, grace_s=self.grace_s, max_catch_up=self.max_catch_up)


class RetentionSpec(_Strict):
    """How much of the job's run history to keep (docs/operations.md, Retention): a run goes
    when it is older than ``keep_days`` or beyond the newest ``keep_runs``; runs not finished and
    the latest run of each state always stay. Both null (``{}``): the whole history is kept,
    whatever the server's default."""

    keep_days: Annotated[int, Field(ge=1, le=36_500), BeforeValidator(_integral)] | None = Field(
        default=None, description="Runs whose slot is older than this many days go; null: no age limit."
    )
    keep_runs: Annotated[int, Field(ge=1, le=10_000_000), BeforeValidator(_integral)] | None = Field(
        default=None, description="Runs beyond the job's newest this many go; null: no count limit."
    )

    def to_record(self) -> RetentionPolicy:
        return RetentionPolicy(keep_days=self.keep_days, keep_runs=self.keep_runs)


# -- jobs --------------------------------------------------------------------------------------


def _json_payload(value: Any, info: ValidationInfo) -> Any:
    if not (info.context or {}).get("stored"):  # a stored payload was checked when it was written
        try:
            check_payload(value)
        except InvalidInputError as error:  # from JSON, only its size can be refused
            raise PydanticCustomError("payload_invalid", "{reason}", {"reason": str(error)}) from None
    return value


Payload = Annotated[Any, AfterValidator(_json_payload)]


class JobFields(_Strict):
    """Everything a client defines about a job: each field's type, constraints, default and
    documentation, written once for requests and responses alike."""

    team: Name = Field(description="The owning team.")
    name: Name = Field(description="Unique among the team's live jobs (else 409).")
    schedule: ScheduleText = Field(
        description="A cron expression (docs/schedules.md); `H` hashes the job id."
    )
    timezone: ZoneName = Field(default="UTC", description="The IANA zone the schedule is evaluated in.")
    dst_gap: DstGap | None = Field(
        default=None, description="Local times a DST change skips; null: the schedule kind's default."
    )
    dst_fold: DstFold | None = Field(
        default=None, description="Local times a DST change repeats; null: the schedule kind's default."
    )
    target: TargetSpec = Field(description="What each attempt calls, tagged by `type`.")
    description: Annotated[str, StringConstraints(max_length=2000)] = ""
    payload: Payload = Field(default=None, description="Any JSON, at most 64 KiB as compact JSON.")
    timeout_s: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT_S, description="Per attempt, in seconds.")
    retry: RetrySpec = RetrySpec()
    misfire: MisfireSpec = MisfireSpec()
    overlap: OverlapChoice = Field(
        default=Overlap.ALLOW, description="When a slot comes while an earlier run is still active."
    )
    start_at: Instant | None = Field(default=None, description="No slot before this instant.")
    end_at: Instant | None = Field(default=None, description="No slot after this instant; after start_at.")
    queue: Name = Field(default="default", description="A queue the server's workers serve.")
    labels: Annotated[dict[LabelKey, LabelValue], NO_OTHER_KEYS] = Field(default_factory=dict, max_length=64)
    retention: RetentionSpec | None = Field(
        default=None, description="How much run history to keep; null: the server's default."
    )

    @field_validator("end_at")
    @classmethod
    def _window(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("start_at")
        if value is not None and start is not None and value <= start:
            raise PydanticCustomError("field_order", "end_at must be after start_at")
        return value


class JobSpec(JobFields):
    """A job's whole definition (the body of POST and PUT), checked in one round: the schema, then
    on the fields it accepted the schedule and zone, the server's target policy and queues, all
    reported together (see :mod:`cronwheel.api.schemas.checks`)."""

    _new_job: ClassVar[bool] = False  # JobCreate: also refuse a job that would never fire

    @model_validator(mode="wrap")
    @classmethod
    def _one_round(cls, data: Any, handler: ModelWrapValidatorHandler[JobSpec]) -> JobSpec:
        spec, errors, values = _validate_fields(data, handler, complete=True)
        problems = checks.definition_problems(values, complete=True, new_job=cls._new_job)
        if errors or problems:
            raise ValidationError.from_exception_data(cls.__name__, errors + checks.line_errors(problems))
        assert isinstance(spec, JobSpec)
        return spec

    def to_record(self, job_id: str = "") -> Job:
        """The job record (``id`` empty for a new job: the service assigns one)."""
        return Job(
            id=job_id,
            **{name: getattr(self, name) for name in _PLAIN_FIELDS},
            target=self.target.to_record(),
            retry=self.retry.to_record(),
            misfire=self.misfire.to_record(),
            labels=tuple(self.labels.items()),
            retention=None if self.retention is None else self.retention.to_record(),
        )


class JobCreate(JobSpec):
    """POST /v1/jobs."""

    _new_job = True


class JobUpdate(JobSpec):
    """PUT /v1/jobs/{id}: the whole definition; omitted fields go back to their defaults."""


def _validate_fields(
    data: Any, handler: ModelWrapValidatorHandler[Any], *, complete: bool
) -> tuple[Any, list[InitErrorDetails], dict[str, Any]]:
    """Run the schema: the model (or None), its errors, and the typed values of the fields it
    accepted, for the checks. ``complete``: a whole definition, whose omitted fields take their
    defaults; else a patch, whose omitted fields are not known here."""
    try:
        model = handler(data)
    except ValidationError as error:
        errors = _line_errors(error)
        refused = {str(detail["loc"][0]) for detail in errors if detail["loc"]}
        return None, errors, _accepted(data, refused, complete=complete)
    names = JobFields.model_fields if complete else model.model_fields_set
    return model, [], {name: getattr(model, name) for name in names}


def _accepted(data: Any, refused: set[str], *, complete: bool) -> dict[str, Any]:
    """The typed values of the fields of ``data`` the schema did not refuse."""
    if not isinstance(data, dict):
        return {}
    given = {key: value for key, value in data.items() if key in JobFields.model_fields}
    try:
        partial = _AcceptedFields.model_validate({k: v for k, v in given.items() if k not in refused})
    except ValidationError:  # refused only in company (nothing is, today): check no further
        return {}
    values = {name: getattr(partial, name) for name in partial.model_fields_set}
    if complete:
        for name, info in JobFields.model_fields.items():
            if name not in given and not info.is_required():
                values[name] = info.get_default(call_default_factory=True)
    return values


# Codes of this module's own refusals (the entry code; tests/fuzz/hooks.py knows them too).
_OWN_CODES = frozenset({"field_order", "payload_invalid"})


def _line_errors(error: ValidationError) -> list[InitErrorDetails]:
    """A ValidationError's errors, to be raised again with others (refused input not kept)."""
    found: list[InitErrorDetails] = []
    for detail in error.errors(include_url=False):
        kind = detail["type"]
        if kind in _OWN_CODES:  # not one of pydantic's: made again with its message
            kind = PydanticCustomError(kind, "{message}", {"message": detail["msg"]})  # type: ignore[assignment]
        entry = InitErrorDetails(type=kind, loc=detail["loc"], input=None)
        if "ctx" in detail:
            entry["ctx"] = detail["ctx"]
        found.append(entry)
    return found


# Fields whose record attribute has the same name and value as the request's (the rest convert).
_CONVERTED = ("target", "retry", "misfire", "labels", "retention")
_PLAIN_FIELDS = tuple(name for name in JobFields.model_fields if name not in _CONVERTED)


def spec_fields(job: Job) -> dict[str, Any]:
    """The client-defined part of a stored job, as JSON-ready values (what a PUT would send):
    :class:`JobSpec`'s fields, in its order."""
    return {name: _json_value(value) for name, value in _definition(job).items()}


def _definition(job: Job) -> dict[str, Any]:
    """:class:`JobSpec`'s fields from a job record (enums and instants as they are)."""
    converted = {
        "target": target_from_record(job.target),
        "retry": {name: getattr(job.retry, name) for name in RetrySpec.model_fields},
        "misfire": {
            "policy": job.misfire.mode.value,
            "grace_s": job.misfire.grace_s,
            "max_catch_up": job.misfire.max_catch_up,
        },
        "labels": dict(job.labels),
        "retention": None
        if job.retention is None
        else {"keep_days": job.retention.keep_days, "keep_runs": job.retention.keep_runs},
    }
    return {
        name: converted[name] if name in converted else getattr(job, name) for name in JobFields.model_fields
    }


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, enum.Enum):
        return value.value
    return value


class _JobPatchBase(_Strict):
    """PATCH /v1/jobs/{id}: only the fields given change. ``retry`` and ``misfire`` merge into
    the stored policy field by field; ``target`` and ``labels`` are replaced whole; ``null``
    clears a nullable field (``dst_gap``, ``start_at``, ``payload`` ...) and is refused for the
    others. Every field is :class:`JobSpec`'s, with the same constraints and docs."""

    @model_validator(mode="wrap")
    @classmethod
    def _one_round(cls, data: Any, handler: ModelWrapValidatorHandler[_JobPatchBase]) -> _JobPatchBase:
        patch, errors, values = _validate_fields(data, handler, complete=False)
        problems = checks.definition_problems(values, complete=False)
        if errors or problems:
            raise ValidationError.from_exception_data(cls.__name__, errors + checks.line_errors(problems))
        assert isinstance(patch, _JobPatchBase)
        return patch

    def apply_to(self, job: Job) -> dict[str, Any]:
        """The full definition after this patch, as a JSON-ready dict to validate as
        :class:`JobUpdate`."""
        merged = spec_fields(job)
        given = self.model_dump(mode="json", exclude_unset=True)
        for key in ("retry", "misfire"):
            if key in given:
                given[key] = {**merged[key], **given[key]}
        merged.update(given)
        return merged


if TYPE_CHECKING:
    JobPatch = _JobPatchBase
else:
    JobPatch = partial_model(JobSpec, "JobPatch", _JobPatchBase, _JobPatchBase.__doc__)

_AcceptedFields = partial_model(JobFields, "AcceptedFields", _Strict, "")


def job_update_from_json(data: dict[str, Any]) -> JobUpdate:
    """Validate a JSON-ready dict as a full definition (the same way a request body is)."""
    return JobUpdate.model_validate_json(json.dumps(data))


class LastRunOut(_Out):
    """The summary of a job's most recent run."""

    id: str
    state: RunStateName
    slot: datetime
    finished_at: datetime | None


class RecentRunOut(_Out):
    """What a sparkline shows of one of a job's recent runs."""

    slot: datetime
    state: RunStateName
    lateness_ms: float | None = Field(
        description="Fire lateness: queued at minus the slot; null until queued."
    )
    duration_ms: float | None = Field(description="Finished minus started; null until finished.")

    @classmethod
    def from_record(cls, sample: RunSample) -> RecentRunOut:
        return cls(
            slot=sample.slot,
            state=sample.state,
            lateness_ms=None if sample.lateness_us is None else sample.lateness_us / 1000,
            duration_ms=None if sample.duration_us is None else sample.duration_us / 1000,
        )


class JobOut(JobFields):
    """A stored job: its definition (the same fields as a request's) plus the server's
    read-only fields."""

    id: str
    version: int = Field(description="Bumped by every change; the ETag.")
    paused: bool
    pause_note: str | None
    paused_at: datetime | None
    created_at: datetime | None
    updated_at: datetime | None
    next_run_at: datetime | None = Field(description="The next slot not yet fired; null when none is left.")
    last_run: LastRunOut | None
    plain_values: list[str] = Field(
        description="Header and env values held in clear in the job, not as references to secrets "
        "(e.g. `target.headers.Authorization`): move them into secrets with `cronwheel secrets adopt`."
    )
    schedule_description: str = Field(
        description='The schedule in words, such as "at 09:00 on Monday through Friday" (docs/schedules.md).'
    )
    late: bool = Field(
        description="Not paused, with a slot more than 60 s past that has not fired (the `late` filter)."
    )
    recent: list[RecentRunOut] | None = Field(
        default=None,
        description="The newest runs, oldest first, with `include=recent` on the job list; else null.",
    )

    @classmethod
    def from_record(
        cls,
        job: Job,
        last_run: Run | None = None,
        *,
        now: datetime,
        recent: Sequence[RunSample] | None = None,
    ) -> JobOut:
        """The stored job (its payload is not measured again: it was when it was written), late
        or not at ``now``."""
        return cls.model_validate(
            {
                **_definition(job),
                "id": job.id,
                "version": job.version,
                "paused": job.paused,
                "pause_note": job.pause_note,
                "paused_at": job.paused_at,
                "created_at": job.created_at,
                "updated_at": job.updated_at,
                "next_run_at": job.next_run_at,
                "plain_values": plain_values(job.target),
                "schedule_description": schedule_description(job),
                "late": is_late(job, now),
                "recent": None if recent is None else [RecentRunOut.from_record(sample) for sample in recent],
                "last_run": None
                if last_run is None
                else LastRunOut(
                    id=last_run.id, state=last_run.state, slot=last_run.slot, finished_at=last_run.finished_at
                ),
            },
            context={"stored": True},
        )


def schedule_description(job: Job) -> str:
    """The job's schedule in words (its own ``H`` values: seeded with its id)."""
    try:
        schedule = parse_schedule(
            job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id or None
        )
    except ScheduleError as error:  # stored before a zone went away: say why, do not fail the read
        return f"invalid schedule: {error.reason}"
    return describe(schedule)


VALIDATION_FIRES = 5  # fire times a validation answers
_JUST_BEFORE = timedelta(microseconds=1)  # start_at itself may be a fire time


class JobValidation(JobFields):
    """What ``POST /v1/jobs:validate`` (and ``/v1/jobs/{id}/validate``) answer for a definition the
    service accepts: the definition as it would be stored (defaults filled in, values normalized),
    its first slot, the schedule in words, its next fire times and the preview's warnings."""

    id: str | None = Field(description="The job the definition would replace; null for a new job.")
    next_run_at: datetime | None = Field(description="The first slot it would fire at.")
    schedule_description: str = Field(description="The schedule in words.")
    fires: list[FireOut] = Field(
        description=f"The next {VALIDATION_FIRES} fire times within start_at and end_at, with DST facts."
    )
    warnings: list[str] = Field(description="What the schedule preview warns about.")

    @classmethod
    def from_record(cls, job: Job, now: datetime) -> JobValidation:
        """The validated ``job`` (``id`` empty for a new one: ``H`` then hashes the empty seed)."""
        schedule = parse_schedule(
            job.schedule, job.timezone, dst_gap=job.dst_gap, dst_fold=job.dst_fold, seed=job.id or None
        )
        after = now if job.start_at is None or job.start_at <= now else job.start_at - _JUST_BEFORE
        fires = [
            fire
            for fire in itertools.islice(schedule.fires_after(after), VALIDATION_FIRES)
            if job.end_at is None or fire.at <= job.end_at
        ]
        return cls.model_validate(
            {
                **_definition(job),
                "id": job.id or None,
                "next_run_at": job.next_run_at,
                "schedule_description": describe(schedule),
                "fires": [FireOut.from_record(fire) for fire in fires],
                "warnings": schedule_warnings(schedule, after),
            },
            context={"stored": True},
        )


class JobPage(_Out):
    items: list[JobOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


# -- actions -----------------------------------------------------------------------------------


class PauseIn(_Strict):
    note: Annotated[str, StringConstraints(max_length=1000)] | None = None


class ResumeIn(_Strict):
    missed: Literal["skip", "misfire"] = Field(
        "skip",
        description="skip: record the slots missed while paused as SKIPPED; "
        "misfire: leave them to the job's misfire policy.",
    )


class TriggerIn(_Strict):
    payload: Payload = Field(
        default=None, description="Replaces the job's payload for this run (when given)."
    )


# -- runs --------------------------------------------------------------------------------------


def _seconds(later: datetime | None, earlier: datetime) -> float | None:
    return None if later is None else (later - earlier).total_seconds()


class RunOut(_Out):
    """One run (its ``id`` is the execution id every attempt carries)."""

    id: str
    job_id: str
    job_team: str | None = Field(description="The job's team; null when the job was deleted.")
    job_name: str | None = Field(description="The job's name; null when the job was deleted.")
    kind: RunKindName
    slot: datetime
    state: RunStateName
    reason: str | None
    attempts: int
    job_version: int
    queue: str
    idempotency_key: str | None
    payload: Any = None
    has_payload: bool
    created_at: datetime | None
    queued_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    next_attempt_at: datetime | None
    queued_lateness_s: float | None = Field(description="queued_at - slot, in seconds.")
    start_lateness_s: float | None = Field(description="started_at - slot, in seconds.")
    trace_id: str | None = Field(
        description="The run's OpenTelemetry trace (32 hex digits); null when tracing was off.",
        pattern="^[0-9a-f]{32}$",
    )

    @classmethod
    def from_record(cls, run: Run, job: Job | None) -> RunOut:
        """``run`` as answered; ``job`` is its live job (None once deleted), which gives the
        team and name a reader knows the job by."""
        return cls.model_validate(_run_fields(run, job))


def _run_fields(run: Run, job: Job | None) -> dict[str, Any]:
    return {
        "id": run.id,
        "job_id": run.job_id,
        "job_team": None if job is None else job.team,
        "job_name": None if job is None else job.name,
        "kind": run.kind.value,
        "slot": run.slot,
        "state": run.state.value,
        "reason": run.reason,
        "attempts": run.attempts,
        "job_version": run.job_version,
        "queue": run.queue,
        "idempotency_key": run.idempotency_key,
        "payload": run.payload if run.has_payload else None,
        "has_payload": run.has_payload,
        "created_at": run.created_at,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "next_attempt_at": run.next_attempt_at,
        "queued_lateness_s": _seconds(run.queued_at, run.slot),
        "start_lateness_s": _seconds(run.started_at, run.slot),
        "trace_id": trace_id(run.traceparent),
    }


class AttemptOut(_Out):
    number: int
    worker: str
    started_at: datetime
    finished_at: datetime | None
    outcome: OutcomeName | None
    status_code: int | None
    exit_code: int | None
    error: str | None
    output: str | None
    retry_after_s: float | None
    request_headers: dict[str, str] | None = Field(
        description="The headers the HTTP request of this attempt was sent with, in order; the values "
        'of credentials (Authorization, signatures, cookies, values from team secrets) are "[redacted]". '
        "Null: no HTTP request was sent."
    )

    @classmethod
    def from_record(cls, attempt: Attempt) -> AttemptOut:
        return cls(
            number=attempt.number,
            worker=attempt.worker,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
            outcome=attempt.outcome,
            status_code=attempt.status_code,
            exit_code=attempt.exit_code,
            error=attempt.error,
            output=attempt.output,
            retry_after_s=attempt.retry_after_s,
            request_headers=None if attempt.request_headers is None else dict(attempt.request_headers),
        )


class RunEventOut(_Out):
    at: datetime
    state: RunStateName
    previous: RunStateName | None
    attempt: int
    node: str | None
    detail: str | None

    @classmethod
    def from_record(cls, event: RunEvent) -> RunEventOut:
        return cls(
            at=event.at,
            state=event.state,
            previous=event.previous,
            attempt=event.attempt,
            node=event.node,
            detail=event.detail,
        )


class RunDetailOut(RunOut):
    """A run with its attempts (``attempts`` stays the count) and its history."""

    attempt_details: list[AttemptOut]
    events: list[RunEventOut]

    @classmethod
    def from_records(
        cls, run: Run, job: Job | None, attempts: list[Attempt], events: list[RunEvent]
    ) -> RunDetailOut:
        data = _run_fields(run, job)
        data["attempt_details"] = [AttemptOut.from_record(attempt) for attempt in attempts]
        data["events"] = [RunEventOut.from_record(event) for event in events]
        return cls.model_validate(data)


class RunPage(_Out):
    items: list[RunOut]
    next_cursor: str | None


# -- schedule preview --------------------------------------------------------------------------


class PreviewIn(_Strict):
    expression: ScheduleText
    timezone: ZoneName = "UTC"
    count: Integer = Field(default=10, ge=1, le=1000)
    after: Instant | None = Field(default=None, description="Start after this instant; default: now.")
    dst_gap: DstGap | None = None
    dst_fold: DstFold | None = None
    seed: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="What H hashes (a job's id, for that job's own schedule)."
    )


class FireOut(_Out):
    at: datetime = Field(description="The fire time in the schedule's zone.")
    utc: datetime
    offset_s: int = Field(description="UTC offset of the zone at that time, in seconds.")
    kind: FireKindName
    wall: str = Field(description="The nominal local wall time (differs from `at` when shifted).")

    @classmethod
    def from_record(cls, fire: Fire) -> FireOut:
        offset = fire.at.utcoffset()
        return cls(
            at=fire.at,
            utc=fire.at.astimezone(UTC),
            offset_s=0 if offset is None else int(offset.total_seconds()),
            kind=fire.kind,
            wall=fire.wall.isoformat(),
        )


class PreviewOut(_Out):
    expression: str
    timezone: str
    dst_gap: DstGap
    dst_fold: DstFold
    wildcard: bool
    description: str = Field(description='The schedule in words, such as "every 15 minutes".')
    after: datetime = Field(description="The instant the fire times follow, in UTC.")
    fires: list[FireOut]
    warnings: list[str]

    @classmethod
    def build(cls, request: PreviewIn, now: datetime) -> PreviewOut:
        """The preview ``request`` asks for (after ``request.after``, else after ``now``).

        The one builder of a preview: ``POST /v1/schedules/preview`` and ``cronwheel schedule
        preview`` (which runs locally, without a server) both answer with it, so their JSON is
        the same. Raises :class:`~cronwheel.schedule.ScheduleError` for an invalid expression,
        zone or option."""
        schedule = parse_schedule(
            request.expression,
            request.timezone,
            dst_gap=request.dst_gap,
            dst_fold=request.dst_fold,
            seed=request.seed,
        )
        after = (request.after if request.after is not None else now).astimezone(UTC)
        fires = itertools.islice(schedule.fires_after(after), request.count)
        return cls(
            expression=schedule.expression,
            timezone=schedule.timezone,
            dst_gap=schedule.dst_gap,
            dst_fold=schedule.dst_fold,
            wildcard=schedule.wildcard,
            description=describe(schedule),
            after=after,
            fires=[FireOut.from_record(fire) for fire in fires],
            warnings=schedule_warnings(schedule, after),
        )
