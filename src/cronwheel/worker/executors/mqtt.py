"""MQTT targets: publish the attempt's payload to a topic, MQTT 5, QoS 1 or 2.

The message is the broker envelope (:mod:`cronwheel.worker.executors.connections`): the payload
as JSON (content type ``application/json``, payload format indicator UTF-8), and MQTT 5 user
properties carrying the execution id (``Idempotency-Key``), the job id, the slot and the attempt.
MQTT has no message id of its own to set (packet identifiers are per connection), so a consumer
de-duplicates on the ``Idempotency-Key`` property.

The attempt succeeds only once the broker acknowledged the message: its PUBACK (QoS 1) or its
PUBCOMP (QoS 2), with a success reason code (an MQTT 5 broker may acknowledge with a refusal,
"not authorized" for example: that is a FAILURE naming the code). QoS 1 is at-least-once to the
broker (a retry after a lost PUBACK sends a second copy, with the same ``Idempotency-Key``);
QoS 2 is exactly once to the broker within one connection. A broker that refuses MQTT 5 (CONNACK
"unsupported protocol version") is spoken to in MQTT 3.1.1, which has no properties: its messages
carry the payload alone.

Outcomes: the broker unreachable is ``error``; the attempt's budget running out is ``timeout``; the
broker refusing the credentials (CONNACK "bad user name or password", "not authorized") or the
message is ``failure``. One connection per (URL, credentials) is shared by concurrent attempts
and closed when idle (:class:`ConnectionPool`); it connects to the address the SSRF guard
checked (:func:`guarded_address`); with ``mqtts://`` TLS verifies the URL's host name on that
connection (:class:`_NamedTls`). Credentials are never logged nor quoted in an error.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import uuid
from typing import Any

import aiomqtt
import paho.mqtt.client as paho
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from yarl import URL

from cronwheel.clock import Clock, SystemClock
from cronwheel.model import AttemptResult, MqttTarget, Outcome
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.checks import MQTT_SCHEMES, broker_port
from cronwheel.targets.kinds.mqtt import check_mqtt
from cronwheel.targets.ssrf import endpoint, parse_networks
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, with_secrets
from cronwheel.worker.executors.connections import (
    CONNECT_TIMEOUT_S,
    CONTENT_TYPE,
    IDLE_S,
    ConnectionPool,
    Resolve,
    checked_broker_url,
    envelope_headers,
    guarded_address,
    message_body,
    pool_key,
    system_resolve,
)
from cronwheel.worker.executors.http import BlockedAddressError

log = logging.getLogger(__name__)

__all__ = ["MqttExecutor"]

MAX_INFLIGHT = 1000  # QoS 1/2 messages of one connection awaiting their acknowledgement
_UNSUPPORTED_VERSION = frozenset({1, 132})  # CONNACK: 3.1.1's "unacceptable protocol version", 5's 0x84
_QUIET = logging.getLogger("cronwheel.worker.executors.mqtt.paho")  # paho's own lines, debug only


class _NamedTls(ssl.SSLContext):
    """A client TLS context that verifies ``hostname`` whatever address the socket connected to:
    paho names the host it was given (the address the guard checked) as the server's name."""

    hostname: str

    def wrap_socket(self, sock: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["server_hostname"] = self.hostname
        return super().wrap_socket(sock, *args, **kwargs)


def _tls_for(hostname: str) -> ssl.SSLContext:
    context = _NamedTls(ssl.PROTOCOL_TLS_CLIENT)
    context.load_default_certs()
    context.hostname = hostname
    return context


class _Publisher(aiomqtt.Client):
    """aiomqtt's client, keeping the reason code of each PUBACK/PUBCOMP (aiomqtt drops it) and
    waking a publisher when the connection drops (aiomqtt's publish would wait for its timeout)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.refused: dict[int, ReasonCode] = {}
        self.v5 = kwargs.get("protocol") is aiomqtt.ProtocolVersion.V5

    def _on_publish(
        self, client: paho.Client, userdata: Any, mid: int, reason_code: ReasonCode, properties: Properties
    ) -> None:
        if reason_code.is_failure:
            self.refused[mid] = reason_code
        super()._on_publish(client, userdata, mid, reason_code, properties)

    @property
    def alive(self) -> bool:
        return self._connected.done() and not self._disconnected.done()

    async def confirmed(
        self, topic: str, payload: bytes, qos: int, retain: bool, props: Properties | None
    ) -> None:
        """Publish and wait for the broker's acknowledgement; raises :class:`_RefusedError` when it
        acknowledged with a refusal, ``aiomqtt.MqttError`` when the message could not go out."""
        info = self._client.publish(topic, payload, qos, retain, props)
        if info.rc != paho.MQTT_ERR_SUCCESS:
            raise aiomqtt.MqttCodeError(info.rc, "could not publish the message")
        if not info.is_published():
            acked = asyncio.Event()
            self._pending_publishes[info.mid] = acked
            waiter = asyncio.ensure_future(acked.wait())
            try:
                gone: asyncio.Future[Any] = self._disconnected
                await asyncio.wait([waiter, gone], return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                self._pending_publishes.pop(info.mid, None)
            if not acked.is_set():
                raise aiomqtt.MqttError("the connection closed before the broker acknowledged the message")
        refusal = self.refused.pop(info.mid, None)
        if refusal is not None:
            raise _RefusedError(f"refused the message: {refusal.getName()} (reason code {refusal.value})")


class _RefusedError(Exception):
    """The broker refused (credentials at connect, the message at its acknowledgement)."""


class MqttExecutor:
    """Publishes MQTT attempts over pooled connections."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretResolver | None = None,
        resolve: Resolve | None = None,
        idle_s: float = IDLE_S,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._allowed = parse_networks(self._settings.allowed_networks)
        self._clock: Clock = clock or SystemClock()
        self._secrets = secrets or SecretResolver(None, None)
        self._resolve = resolve or system_resolve
        self.pool: ConnectionPool[_Publisher] = ConnectionPool(
            close=_close, alive=lambda client: client.alive, idle_s=idle_s, clock=self._clock
        )

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, target: MqttTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, publish, and keep none of them in the result."""
        return await with_secrets(
            self._secrets, ctx.team, target, lambda resolved: self._publish(resolved.target(target), ctx)
        )

    async def _publish(self, target: MqttTarget, ctx: AttemptContext) -> AttemptResult:
        url, problem = checked_broker_url(target.url, MQTT_SCHEMES, self._allowed, lambda: check_mqtt(target))
        if url is None:
            return AttemptResult(Outcome.ERROR, error=problem)
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        where = endpoint(url.with_port(broker_port(url, MQTT_SCHEMES)))
        key = pool_key(target.url, target.username, target.password)
        try:
            async with asyncio.timeout(budget):
                async with self.pool.connection(key, lambda: self._connect(url, target)) as client:
                    try:
                        props = _properties(ctx, client)
                        await client.confirmed(
                            target.topic, message_body(ctx), target.qos, target.retain, props
                        )
                    except aiomqtt.MqttError:
                        await self.pool.discard(key, client)
                        raise
        except (TimeoutError, OSError, aiomqtt.MqttError, _RefusedError) as error:
            return _failed(error, where, budget, target.qos)
        log.debug(
            "action=mqtt_published job_id=%s run_id=%s attempt=%d qos=%d",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            target.qos,
        )
        output = {"topic": target.topic, "qos": target.qos, "ack": _ACK[target.qos]}
        return AttemptResult(Outcome.SUCCESS, output=json.dumps(output))

    async def _connect(self, url: URL, target: MqttTarget) -> _Publisher:
        host = url.host or ""
        port = broker_port(url, MQTT_SCHEMES)
        address = await guarded_address(host, port, self._allowed, self._resolve)
        try:
            return await self._attach(
                address, port, host, url.scheme == "mqtts", target, aiomqtt.ProtocolVersion.V5
            )
        except MqttConnectError as error:
            if _code(error) not in _UNSUPPORTED_VERSION:
                raise _refusal(error) from None
        try:
            return await self._attach(
                address, port, host, url.scheme == "mqtts", target, aiomqtt.ProtocolVersion.V311
            )
        except MqttConnectError as error:
            raise _refusal(error) from None

    async def _attach(
        self,
        address: str,
        port: int,
        host: str,
        tls: bool,
        target: MqttTarget,
        protocol: aiomqtt.ProtocolVersion,
    ) -> _Publisher:
        client = _Publisher(
            address,
            port,
            username=_plain(target.username),
            password=_plain(target.password),
            identifier=f"cronwheel-{uuid.uuid4().hex}",
            protocol=protocol,
            timeout=CONNECT_TIMEOUT_S,
            keepalive=60,
            max_inflight_messages=MAX_INFLIGHT,
            tls_context=_tls_for(host) if tls else None,
            logger=_QUIET,
        )
        await client.__aenter__()
        return client


_ACK = {1: "PUBACK", 2: "PUBCOMP"}


def _failed(error: BaseException, where: str, budget: float, qos: int) -> AttemptResult:
    """The outcome of an attempt that raised ``error`` (module docstring)."""
    if isinstance(error, TimeoutError):
        return AttemptResult(
            Outcome.TIMEOUT, error=f"no {_ACK.get(qos, 'ack')} from {where} within {budget:g} s"
        )
    if isinstance(error, BlockedAddressError):
        return AttemptResult(Outcome.ERROR, error=str(error))
    if isinstance(error, _RefusedError):
        return AttemptResult(Outcome.FAILURE, error=f"{where} {error}")
    return AttemptResult(Outcome.ERROR, error=f"cannot publish to {where}: {_text(error)}")


def _properties(ctx: AttemptContext, client: _Publisher) -> Properties | None:
    """The message's MQTT 5 properties (none in MQTT 3.1.1)."""
    if not client.v5:
        return None
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    props.ContentType = CONTENT_TYPE
    props.PayloadFormatIndicator = 1  # UTF-8
    props.UserProperty = envelope_headers(ctx)
    return props


def _code(error: aiomqtt.MqttCodeError) -> int:
    rc = error.rc
    return rc.value if isinstance(rc, ReasonCode) else int(rc) if isinstance(rc, int) else -1


def _refusal(error: MqttConnectError) -> Exception:
    """A negative CONNACK: the broker refused us (credentials, authorization), not unreachable."""
    rc = error.rc
    name = rc.getName() if isinstance(rc, ReasonCode) else str(rc)
    return _RefusedError(f"refused the connection: {name} (CONNACK code {_code(error)})")


async def _close(client: _Publisher) -> None:
    await client.__aexit__(None, None, None)


def _plain(value: object) -> str | None:
    """A credential after resolution: text, or None."""
    assert value is None or isinstance(value, str), "secret references are resolved before connecting"
    return value


def _text(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).strip() or type(error).__name__
