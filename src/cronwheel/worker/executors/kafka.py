"""Kafka targets: publish the payload to a topic through an idempotent producer.

One attempt is one record sent with ``send_and_wait`` by an aiokafka producer configured by
:func:`producer_config`: ``enable_idempotence=True`` and ``acks="all"``, so the attempt succeeds
only when every in-sync replica has the record, and a retry inside the producer never writes it
twice. The record (:func:`record_of`): the topic, the key (the target's, or the job id, so one
job's records stay in order on one partition), the payload as JSON (UTF-8; ``null`` when the job
has none), and headers ``Idempotency-Key`` (the execution id: Kafka records have no message id),
``X-Cronwheel-Job-Id``, ``X-Cronwheel-Scheduled-At`` (RFC 3339 UTC), ``X-Cronwheel-Attempt``,
``content-type: application/json``, after the target's own headers (ours win on a name clash).

Outcomes (:func:`outcome_of`): the broker refusing (unknown topic, authorization, SASL, a record
too large, not enough replicas, a producer id refused) is ``Outcome.FAILURE``; no broker reachable
is ``Outcome.ERROR``; the attempt's budget or the producer's own request timeout running out is
``Outcome.TIMEOUT``.

Producers are pooled per (bootstrap servers, TLS, SASL mechanism, credentials)
(:class:`~cronwheel.worker.executors.connections.ConnectionPool`) and stopped when idle and on
:meth:`KafkaExecutor.close`. **SSRF guard**: the bootstrap hosts are judged when the job is
written and before a producer starts; and since a Kafka client connects to whatever brokers the
cluster's metadata advertises, every connection the producer opens goes through
:func:`_guarded_create_conn`, which resolves the host, refuses the whole answer when any address
is refused (:func:`~cronwheel.worker.executors.connections.guarded_address`) and, without TLS,
connects to the checked address itself. With TLS the host name is kept for the certificate
check, so a DNS answer that changes between the check and the connect is not excluded there.

Errors name the topic and the servers, never a credential; resolved secrets are redacted from
what the attempt keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiokafka  # type: ignore[import-untyped]
import aiokafka.client  # type: ignore[import-untyped]
import aiokafka.errors  # type: ignore[import-untyped]
from yarl import URL

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInputError
from cronwheel.model import AttemptResult, KafkaTarget, Outcome
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.kinds.kafka import check_kafka
from cronwheel.targets.ssrf import IPNetwork, parse_networks, url_refusal
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, with_secrets
from cronwheel.worker.executors.connections import (
    CONTENT_TYPE,
    IDLE_S,
    ConnectionPool,
    Resolve,
    envelope_headers,
    guarded_address,
    message_body,
    pool_key,
    system_resolve,
)
from cronwheel.worker.executors.http import BlockedAddressError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_MS = 30_000


# -- pure parts: the producer's configuration, the record, the outcome of an error ------------------


def producer_config(target: KafkaTarget, ssl_context: ssl.SSLContext | None = None) -> dict[str, Any]:
    """The keyword arguments of ``AIOKafkaProducer`` for ``target`` (resolved: plain credentials)."""
    sasl = target.sasl_mechanism is not None
    protocol = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}
    config: dict[str, Any] = {
        "bootstrap_servers": list(target.bootstrap_servers),
        "client_id": "cronwheel",
        "enable_idempotence": True,
        "acks": "all",
        "request_timeout_ms": REQUEST_TIMEOUT_MS,
        "security_protocol": protocol.get((target.tls, sasl), "SASL_SSL"),
    }
    if target.tls:
        config["ssl_context"] = ssl_context or ssl.create_default_context()
    if sasl:
        config["sasl_mechanism"] = target.sasl_mechanism
        config["sasl_plain_username"] = _text(target.username)
        config["sasl_plain_password"] = _text(target.password)
    return config


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    topic: str
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


def record_of(target: KafkaTarget, ctx: AttemptContext) -> KafkaRecord:
    """The record one attempt sends (``target`` resolved): the target's headers, then the
    envelope's (:func:`~cronwheel.worker.executors.connections.envelope_headers`) and
    ``content-type``, which win a clash (a name the envelope sets is not sent twice)."""
    ours = [*envelope_headers(ctx), ("content-type", CONTENT_TYPE)]
    folded = {name.lower() for name, _ in ours}
    headers = [(name, _text(value).encode()) for name, value in target.headers if name.lower() not in folded]
    headers += [(name, value.encode()) for name, value in ours]
    return KafkaRecord(
        topic=target.topic,
        key=(ctx.job_id if target.key is None else target.key).encode(),
        value=message_body(ctx),
        headers=tuple(headers),
    )


_FAILURES: tuple[type[BaseException], ...] = (
    aiokafka.errors.UnknownTopicOrPartitionError,
    aiokafka.errors.TopicAuthorizationFailedError,
    aiokafka.errors.ClusterAuthorizationFailedError,
    aiokafka.errors.TransactionalIdAuthorizationFailed,
    aiokafka.errors.MessageSizeTooLargeError,
    aiokafka.errors.RecordListTooLargeError,
    aiokafka.errors.InvalidTopicError,
    aiokafka.errors.NotEnoughReplicasError,
    aiokafka.errors.NotEnoughReplicasAfterAppendError,
    aiokafka.errors.UnsupportedVersionError,
    aiokafka.errors.UnsupportedSaslMechanismError,
    aiokafka.errors.SaslAuthenticationFailed,
    aiokafka.errors.AuthenticationFailedError,
    aiokafka.errors.UnknownError,
)
_TIMEOUTS: tuple[type[BaseException], ...] = (
    TimeoutError,
    aiokafka.errors.KafkaTimeoutError,
    aiokafka.errors.RequestTimedOutError,
)


def outcome_of(error: BaseException) -> Outcome:
    """What an exception of the producer says about the attempt."""
    if isinstance(error, _TIMEOUTS):
        return Outcome.TIMEOUT
    if isinstance(error, BlockedAddressError):
        return Outcome.ERROR
    if isinstance(error, _FAILURES):
        return Outcome.FAILURE
    if isinstance(error, aiokafka.errors.KafkaError) and not getattr(error, "retriable", False):
        return Outcome.FAILURE
    return Outcome.ERROR  # KafkaConnectionError, NodeNotReadyError, OSError ...


def _describe(error: BaseException, where: str, topic: str) -> str:
    """An error's text for the attempt: the exception's name and its Kafka error text (a broker
    error code's description, or aiokafka's own sentence, which names hosts and topics only)."""
    known = (
        (BlockedAddressError, str(error)),
        (aiokafka.errors.KafkaConnectionError, f"cannot reach a broker of {where}"),
        (aiokafka.errors.UnknownTopicOrPartitionError, f"{where} has no topic {topic!r}"),
        (aiokafka.errors.SaslAuthenticationFailed, f"{where} refused the credentials"),
        (aiokafka.errors.AuthenticationFailedError, f"{where} refused the credentials"),
    )
    for kind, text in known:
        if isinstance(error, kind):
            return text
    if isinstance(error, aiokafka.errors.KafkaError):
        description = getattr(error, "description", "") or ""
        detail = f" ({description})" if description else ""
        return f"{where} refused the record for topic {topic!r}: {type(error).__name__}{detail}"
    if isinstance(error, OSError) and error.strerror:
        return f"cannot reach {where}: {error.strerror}"
    return f"publishing to {where} failed: {type(error).__name__}"


# -- the guard on every connection the producer opens ----------------------------------------------


@dataclass
class _Guard:
    allowed: tuple[IPNetwork, ...]
    resolver: Resolve
    refused: list[BlockedAddressError] = field(default_factory=list)


_GUARD: contextvars.ContextVar[_Guard | None] = contextvars.ContextVar("cronwheel_kafka_guard", default=None)
_UNGUARDED: Callable[..., Awaitable[Any]] = aiokafka.client.create_conn


async def _guarded_create_conn(host: str, port: int, **kwargs: Any) -> Any:
    """aiokafka's ``create_conn``, behind the SSRF guard for producers started by this module
    (they run in a context holding a :class:`_Guard`; any other aiokafka client is untouched)."""
    guard = _GUARD.get()
    if guard is not None:
        try:
            address = await guarded_address(host, port, guard.allowed, guard.resolver)
        except BlockedAddressError as error:
            guard.refused.append(error)
            raise
        if kwargs.get("ssl_context") is None:  # no certificate to check: connect to what was checked
            host = address
    return await _UNGUARDED(host, port, **kwargs)


aiokafka.client.create_conn = _guarded_create_conn


class _NoUserName(logging.Filter):
    """aiokafka logs "Authenticated as USER via MECHANISM" at INFO; the user name may be a
    resolved secret (guarantee 9): the record keeps the mechanism only."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.msg == "Authenticated as %s via %s"
            and isinstance(record.args, tuple)
            and len(record.args) == 2
        ):
            record.args = ("[redacted]", record.args[1])
        return True


logging.getLogger("aiokafka.conn").addFilter(_NoUserName())


# -- the executor ------------------------------------------------------------------------------------


@dataclass
class _Producer:
    producer: Any  # aiokafka.AIOKafkaProducer, started
    guard: _Guard


def _alive(entry: _Producer) -> bool:
    return not getattr(entry.producer, "_closed", False)


async def _stop(entry: _Producer) -> None:
    try:
        await entry.producer.stop()
    except Exception:
        log.debug("stopping a Kafka producer failed", exc_info=True)


class KafkaExecutor:
    """Publishes Kafka attempts through pooled, guarded, idempotent producers."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretResolver | None = None,
        resolver: Resolve | None = None,
        idle_s: float = IDLE_S,
        config: Callable[[KafkaTarget], dict[str, Any]] = producer_config,
    ) -> None:
        """``config`` makes a producer's configuration (:func:`producer_config`; a test against a
        broker that grants no producer ids swaps it, see tests/worker/test_kafka_executor.py)."""
        self._settings = settings or WorkerSettings()
        self._secrets = secrets or SecretResolver(None, None)
        self._allowed = parse_networks(self._settings.allowed_networks)
        self._clock: Clock = clock or SystemClock()
        self._resolver = resolver or system_resolve
        self._config = config
        self.pool: ConnectionPool[_Producer] = ConnectionPool(
            close=_stop, alive=_alive, idle_s=idle_s, clock=self._clock
        )

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, target: KafkaTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, send the record, and keep none of them in the result."""
        return await with_secrets(
            self._secrets, ctx.team, target, lambda resolved: self._send(resolved.target(target), ctx)
        )

    async def _send(self, target: KafkaTarget, ctx: AttemptContext) -> AttemptResult:
        try:
            servers = check_kafka(target)
        except InvalidInputError as error:
            return AttemptResult(Outcome.ERROR, error=str(error))
        where = "kafka " + ",".join(target.bootstrap_servers)
        for server in servers:
            refusal = url_refusal(server, self._allowed)
            if refusal is not None:
                return AttemptResult(
                    Outcome.ERROR, error=f"refused by the SSRF guard: {refusal} (not in allowed_networks)"
                )
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        record = record_of(target, ctx)
        key = _pool_key(target)
        entry: _Producer | None = None
        try:
            async with asyncio.timeout(budget):
                async with self.pool.connection(key, lambda: self._start(target, servers)) as entry:
                    token = _GUARD.set(entry.guard)  # a connection opened on the way is guarded too
                    try:
                        metadata = await entry.producer.send_and_wait(
                            record.topic, record.value, key=record.key, headers=list(record.headers)
                        )
                    finally:
                        _GUARD.reset(token)
        except (aiokafka.errors.KafkaError, OSError) as error:  # TimeoutError is an OSError
            refused = entry.guard.refused if entry is not None else []
            outcome = Outcome.ERROR if refused else outcome_of(error)
            if outcome is Outcome.ERROR and entry is not None:  # a new producer (and guard) next time
                await self.pool.discard(key, entry)
            if refused:  # the guard refused a broker the metadata advertised
                return AttemptResult(outcome, error=str(refused[-1]))
            text = (
                f"no acknowledgement from {where} within {budget:g} s"
                if isinstance(error, TimeoutError)
                else _describe(error, where, target.topic)
            )
            return AttemptResult(outcome, error=text)
        log.debug(
            "kafka attempt job=%s run=%s attempt=%d topic=%s acknowledged",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            target.topic,
        )
        return AttemptResult(
            Outcome.SUCCESS,
            output=f"acknowledged by {where}: topic {metadata.topic} "
            f"partition {metadata.partition} offset {metadata.offset}",
        )

    async def _start(self, target: KafkaTarget, servers: list[URL]) -> _Producer:
        """A started producer; its connections (and those of the tasks it starts) are guarded."""
        guard = _Guard(self._allowed, self._resolver)
        for server in servers:  # the clear reason, before aiokafka turns it into "cannot bootstrap"
            assert server.port is not None
            await guarded_address(server.host or "", server.port, guard.allowed, guard.resolver)
        token = _GUARD.set(guard)
        try:
            producer = aiokafka.AIOKafkaProducer(**self._config(target))
            try:
                await producer.start()
            except BaseException as error:
                with contextlib.suppress(Exception):
                    await producer.stop()
                if guard.refused and isinstance(error, Exception):  # say why, not "cannot bootstrap"
                    raise guard.refused[-1] from error
                raise
        finally:
            _GUARD.reset(token)
        return _Producer(producer, guard)


def _text(value: object) -> str:
    assert isinstance(value, str), "secret references are resolved before the producer is made"
    return value


def _pool_key(target: KafkaTarget) -> str:
    """A digest of the servers, TLS, SASL and credentials (the pool keeps no secret)."""
    return pool_key(
        target.bootstrap_servers, target.tls, target.sasl_mechanism, target.username, target.password
    )
