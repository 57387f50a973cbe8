"""A job's target as the API takes and gives it: one spec per kind, each with ``to_record``, and
the JSON of a stored target record."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
)

from cronwheel.api.schemas.base import (
    C_STRING,
    NO_OTHER_KEYS,
    URL_PATTERN,
    CString,
    Documented,
    EnvName,
    HeaderName,
    HeaderValue,
    Name,
    StrictModel,
    integral,
)
from cronwheel.model import (
    CommandTarget,
    GrpcTarget,
    HttpTarget,
    KafkaSasl,
    KafkaTarget,
    MqttQos,
    MqttTarget,
    NatsTarget,
    PythonTarget,
    RabbitMqTarget,
    SecretRef,
    Target,
    Value,
)
from cronwheel.targets.checks import MAX_DESCRIPTOR_SET_CHARS
from cronwheel.targets.kinds import kind_of, target_to_json

# -- targets -----------------------------------------------------------------------------------


class SecretRefSpec(StrictModel):
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


class HttpTargetSpec(StrictModel):
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
    expected_status: list[Annotated[int, Field(ge=100, le=599), BeforeValidator(integral)]] = Field(
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


class CommandTargetSpec(StrictModel):
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


class PythonTargetSpec(StrictModel):
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


class GrpcTargetSpec(StrictModel):
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


class NatsTargetSpec(StrictModel):
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


class MqttTargetSpec(StrictModel):
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


class RabbitMqTargetSpec(StrictModel):
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


class KafkaTargetSpec(StrictModel):
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
