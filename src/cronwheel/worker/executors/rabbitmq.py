"""RabbitMQ targets: publish the payload to an exchange, confirmed by the broker.

One attempt is one ``basic.publish`` on a channel in publisher-confirm mode, with
``mandatory=True``: the attempt succeeds only when the broker confirmed the message
(``basic.ack``), which for a persistent message routed to durable queues means the queues have
it. A ``basic.nack``, a message the broker returned as unroutable (no queue bound for its routing
key), an exchange that does not exist (the broker closes the channel: the next attempt opens a
new one) or refused credentials are the target's answer: ``Outcome.FAILURE``. A broker that
cannot be reached is ``Outcome.ERROR``; the attempt's budget running out is ``Outcome.TIMEOUT``
(a message may then still have been delivered: the execution id lets a consumer de-duplicate).

The message: the payload as JSON (UTF-8, ``content_type`` ``application/json``, ``null`` when the
job has none), persistent (``delivery_mode`` 2), ``message_id`` the execution id, and headers
``Idempotency-Key`` (the execution id), ``X-Cronwheel-Job-Id``, ``X-Cronwheel-Scheduled-At``
(RFC 3339 UTC), ``X-Cronwheel-Attempt`` and, with tracing on, ``traceparent``, which win over the
target's own headers (:func:`~cronwheel.worker.executors.connections.envelope_headers`).

Connections are pooled per (URL, credentials)
(:class:`~cronwheel.worker.executors.connections.ConnectionPool`, shared with the other broker
executors): opened by the first attempt, shared by the concurrent ones, closed when idle, dead,
and on :meth:`RabbitMqExecutor.close`. Each attempt publishes on a confirming channel it holds
alone (idle ones are reused, up to :data:`MAX_IDLE_CHANNELS`): the broker closing a channel (a
missing exchange) or an attempt cut by its timeout ends that attempt only, not the others in
flight on the same connection. The host goes through the SSRF guard when the job is written and
again at connect time, on the resolved addresses
(:func:`~cronwheel.worker.executors.connections.guarded_address`); the connection is opened to
the checked address (with the host name for TLS's certificate check).

Built on aiormq, the AMQP 0-9-1 client under aio-pika, used directly: publishing needs a
connection, a channel and ``basic_publish``, which aiormq's API is, and aio-pika's robust
reconnection and object layer would only stand between the attempt and the broker's answer
(docs/dependencies.md). Credentials (resolved secrets) are never part of an error, a log line or
the attempt's output: errors are written here, naming ``scheme://host:port`` only, and every
resolved value is redacted from what the attempt keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiormq
import aiormq.abc
from pamqp import commands as spec
from yarl import URL

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInputError
from cronwheel.model import AttemptResult, Outcome, RabbitMqTarget
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.checks import AMQP_SCHEMES, amqp_vhost, broker_port
from cronwheel.targets.kinds.rabbitmq import check_rabbitmq
from cronwheel.targets.ssrf import parse_networks, url_refusal
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

PERSISTENT = 2
CLOSE_WAIT_S = 1.0


MAX_IDLE_CHANNELS = 64


@dataclass
class _Link:
    """One pooled AMQP connection and its idle confirming channels. An attempt holds a channel of
    its own while it publishes (they are reused after), so a broker that closes one (a missing
    exchange) or an attempt cut mid-way fails that attempt only, never another one in flight."""

    connection: aiormq.abc.AbstractConnection
    idle: list[aiormq.abc.AbstractChannel] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return not self.connection.is_closed

    @contextlib.asynccontextmanager
    async def channel(self) -> AsyncIterator[aiormq.abc.AbstractChannel]:
        channel = None
        while self.idle and channel is None:
            candidate = self.idle.pop()
            channel = None if candidate.is_closed else candidate
        if channel is None:
            channel = await _confirming_channel(self.connection)
        reusable = False
        try:
            yield channel
            reusable = True
        except aiormq.exceptions.PublishError:  # a returned message: the channel is fine
            reusable = True
            raise
        finally:
            if reusable and not channel.is_closed and len(self.idle) < MAX_IDLE_CHANNELS:
                self.idle.append(channel)
            elif not channel.is_closed:  # cut mid-way (timeout, cancelled): its state is unknown
                await _close_channel(channel)


async def _confirming_channel(connection: aiormq.abc.AbstractConnection) -> aiormq.abc.AbstractChannel:
    return await connection.channel(publisher_confirms=True, on_return_raises=True)


async def _close_channel(channel: aiormq.abc.AbstractChannel) -> None:
    try:
        await asyncio.wait_for(channel.close(), CLOSE_WAIT_S)
    except Exception:  # the connection may be gone: nothing left to release
        log.debug("closing an AMQP channel failed", exc_info=True)


class _Connection(aiormq.Connection):
    """aiormq's connection, named without user info: aiormq logs and raises with the connection's
    ``str``, which shows the URL's user (a resolved secret) with only the password masked."""

    def __str__(self) -> str:
        return str(self.url.with_user(None))


class _VhostRefusedError(aiormq.exceptions.AMQPError):
    """The broker refused to open the URL's virtual host for these credentials."""


def _alive(link: _Link) -> bool:
    return link.alive


async def _close(link: _Link) -> None:
    await _close_connection(link.connection)


async def _close_connection(connection: aiormq.abc.AbstractConnection) -> None:
    try:
        await connection.close()
    except Exception:  # already broken: nothing left to release
        log.debug("closing an AMQP connection failed", exc_info=True)


def message_properties(target: RabbitMqTarget, ctx: AttemptContext) -> spec.Basic.Properties:
    """The AMQP properties of the attempt's message (``target`` resolved: plain values only): the
    target's headers, then the envelope's (:func:`~cronwheel.worker.executors.connections.envelope_headers`),
    which win a clash."""
    headers: dict[str, Any] = {}
    for name, value in target.headers:
        assert isinstance(value, str), "secret references are resolved before publishing"
        headers[name] = value
    headers.update(envelope_headers(ctx))
    return spec.Basic.Properties(
        content_type=CONTENT_TYPE,
        delivery_mode=PERSISTENT,
        message_id=ctx.execution_id,
        headers=headers,
    )


class RabbitMqExecutor:
    """Publishes RabbitMQ attempts over pooled, guarded, confirming connections."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretResolver | None = None,
        resolver: Resolve | None = None,
        idle_s: float = IDLE_S,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._secrets = secrets or SecretResolver(None, None)
        self._allowed = parse_networks(self._settings.allowed_networks)
        self._clock: Clock = clock or SystemClock()
        self._resolver = resolver or system_resolve
        self.pool: ConnectionPool[_Link] = ConnectionPool(
            close=_close, alive=_alive, idle_s=idle_s, clock=self._clock
        )

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, target: RabbitMqTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, publish, and keep none of them in the result."""
        return await with_secrets(
            self._secrets, ctx.team, target, lambda resolved: self._publish(resolved.target(target), ctx)
        )

    async def _publish(self, target: RabbitMqTarget, ctx: AttemptContext) -> AttemptResult:
        try:
            url = check_rabbitmq(target)
        except InvalidInputError as error:
            return AttemptResult(Outcome.ERROR, error=str(error))
        where = f"{url.scheme}://{url.host}:{broker_port(url, AMQP_SCHEMES)}"
        refusal = url_refusal(url, self._allowed)
        if refusal is not None:
            return AttemptResult(
                Outcome.ERROR, error=f"refused by the SSRF guard: {refusal} (not in allowed_networks)"
            )
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        key = _pool_key(url, target)
        link: _Link | None = None
        try:
            async with asyncio.timeout(budget):
                async with (
                    self.pool.connection(key, lambda: self._open(url, target)) as link,
                    link.channel() as channel,
                ):
                    confirmation = await channel.basic_publish(
                        message_body(ctx),
                        exchange=target.exchange,
                        routing_key=target.routing_key,
                        properties=message_properties(target, ctx),
                        mandatory=True,
                    )
        # TimeoutError is an OSError; aiormq says "closed" (a channel or connection closed under
        # the attempt) with RuntimeError and its subclass ChannelInvalidStateError
        except (aiormq.exceptions.AMQPError, OSError, RuntimeError) as error:
            result, broken = _failed(error, where, target, budget)
            if broken:  # the connection failed: the next attempt opens another one
                await self._drop(key, link)
            return result
        if isinstance(confirmation, spec.Basic.Ack):
            log.debug(
                "rabbitmq attempt job=%s run=%s attempt=%d %s confirmed",
                ctx.job_id,
                ctx.execution_id,
                ctx.attempt,
                where,
            )
            return AttemptResult(Outcome.SUCCESS, output=f"confirmed by {where}")
        kind = type(confirmation).__name__ if confirmation is not None else "nothing"
        return AttemptResult(
            Outcome.FAILURE, error=f"{where} did not confirm the message (basic.{kind.lower()})"
        )

    async def _open(self, url: URL, target: RabbitMqTarget) -> _Link:
        """A new connection to the checked address of the URL's host, with a confirming channel."""
        host = url.host or ""
        port = broker_port(url, AMQP_SCHEMES)
        address = await guarded_address(host, port, self._allowed, self._resolver)
        connect_url = URL.build(
            scheme=url.scheme,
            user=None if target.username is None else _text(target.username),  # None: guest
            password=None if target.password is None else _text(target.password),
            host=address,
            port=port,
            path="/" + amqp_vhost(url),
        )
        extra: dict[str, Any] = {"server_hostname": host} if url.scheme == "amqps" else {}
        connection = _Connection(connect_url, **extra)
        try:
            try:
                await connection.connect()
            except (aiormq.exceptions.InvalidFrameError, aiormq.exceptions.ConnectionNotAllowed):
                # the broker answered connection.open with connection.close: a virtual host that
                # does not exist or that the user may not use (aiormq reports an unexpected frame)
                raise _VhostRefusedError() from None
            link = _Link(connection)
            link.idle.append(await _confirming_channel(connection))
        except BaseException:
            await _close_connection(connection)
            raise
        return link

    async def _drop(self, key: str, link: _Link | None) -> None:
        if link is not None:
            await self.pool.discard(key, link)


def _failed(
    error: BaseException, where: str, target: RabbitMqTarget, budget: float
) -> tuple[AttemptResult, bool]:
    """The attempt's result for ``error``, and whether the pooled connection must go."""
    outcome, broken = Outcome.ERROR, True
    if isinstance(error, TimeoutError):  # the attempt's channel is closed; the connection stays
        outcome, broken = Outcome.TIMEOUT, False
        text = f"no confirmation from {where} within {budget:g} s"
    elif isinstance(error, BlockedAddressError):
        text, broken = str(error), False
    elif isinstance(error, aiormq.exceptions.PublishError):
        frame = getattr(error.message, "delivery", None)
        reply = f"{getattr(frame, 'reply_code', '')} {getattr(frame, 'reply_text', '') or 'returned'}".strip()
        outcome, broken = Outcome.FAILURE, False
        text = (
            f"{where} returned the message as unroutable ({reply}): no queue is bound to "
            f"exchange {target.exchange!r} for routing key {target.routing_key!r}"
        )
    elif isinstance(error, aiormq.exceptions.ChannelClosed):  # exchange not found, access refused ...
        outcome, broken = Outcome.FAILURE, False
        text = f"{where} refused the publish: {_reply(error)}"
    elif isinstance(
        error, (aiormq.exceptions.AuthenticationError, aiormq.exceptions.ProbableAuthenticationError)
    ):
        outcome, text = Outcome.FAILURE, f"{where} refused the credentials (or access to the virtual host)"
    elif isinstance(error, _VhostRefusedError):
        outcome, text = (
            Outcome.FAILURE,
            f"{where} refused the virtual host (it does not exist, or the user may not use it)",
        )
    elif isinstance(error, RuntimeError):
        text = f"the connection to {where} closed during the attempt"
    else:
        text = f"cannot publish to {where}: {_os_text(error)}"
    return AttemptResult(outcome, error=text), broken


def _text(value: object) -> str:
    assert isinstance(value, str), "secret references are resolved before connecting"
    return value


def _pool_key(url: URL, target: RabbitMqTarget) -> str:
    """A digest of the endpoint, virtual host and credentials (the pool keeps no secret)."""
    return pool_key(
        url.scheme,
        url.host,
        broker_port(url, AMQP_SCHEMES),
        amqp_vhost(url),
        target.username,
        target.password,
    )


def _reply(error: aiormq.exceptions.AMQPError) -> str:
    """The broker's reply (``404 NOT_FOUND - no exchange 'x' in vhost '/'``): names, no credentials."""
    args = [str(arg) for arg in error.args if arg is not None]
    return " ".join(args) or type(error).__name__


def _os_text(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return type(error).__name__
