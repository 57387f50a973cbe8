"""NATS targets: publish the attempt's payload to a subject, on core NATS or through JetStream.

The message is the broker envelope (:mod:`cronwheel.worker.executors.connections`): the payload
as JSON, and headers carrying the execution id (``Idempotency-Key``, and ``Nats-Msg-Id``), the job
id, the slot and the attempt, after the target's own headers (ours win on a clash).

* **core NATS** (``jetstream: false``): the attempt succeeds once the server answered the flush
  that follows the publish (a PING/PONG round trip: the server has the message and has passed it
  to the subscribers connected then). Core NATS is at-most-once: a subscriber that is not
  connected never gets it, and nothing tells the publisher.
* **JetStream** (``jetstream: true``): the message is a request to the stream that captures the
  subject; the attempt succeeds only on its PubAck. ``Nats-Msg-Id`` is the execution id, so within
  the stream's duplicate window a second attempt of the same run is acknowledged as a duplicate
  and not stored again. No stream for the subject is a FAILURE that says so (an operator has to
  create one); a refusal of the stream (an API error) is a FAILURE with its code.

Outcomes: the server unreachable (refused, reset, does not resolve) is ``error``; the attempt's
budget (:meth:`AttemptContext.budget_s`) running out is ``timeout``; the server refusing the
credentials is ``failure``. One connection per (URL, credentials) is shared by concurrent attempts
and closed when idle (:class:`ConnectionPool`); it connects to the address the SSRF guard checked
(:func:`guarded_address`; TLS verifies the URL's host name). Credentials (``user``/``password``
or ``token``, each plain or a secret reference) are never logged nor quoted in an error, and any
resolved secret found in an error is redacted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from dataclasses import dataclass, field

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NatsClient
from yarl import URL

from cronwheel.clock import Clock, SystemClock
from cronwheel.model import AttemptResult, NatsTarget, Outcome
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.checks import NATS_SCHEMES, broker_port
from cronwheel.targets.kinds.nats import check_nats
from cronwheel.targets.ssrf import endpoint, parse_networks
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, with_secrets
from cronwheel.worker.executors.connections import (
    CONNECT_TIMEOUT_S,
    IDLE_S,
    ConnectionPool,
    Resolve,
    checked_broker_url,
    envelope_headers,
    guarded_address,
    host_port,
    message_body,
    pool_key,
    system_resolve,
)
from cronwheel.worker.executors.http import BlockedAddressError

log = logging.getLogger(__name__)

__all__ = ["NatsExecutor"]


@dataclass
class _Connection:
    """A NATS client and the errors its connection reported (the last one says why it failed)."""

    client: NatsClient = field(default_factory=NatsClient)
    errors: list[BaseException] = field(default_factory=list)

    async def on_error(self, error: Exception) -> None:
        self.errors.append(error)
        del self.errors[:-3]


class NatsExecutor:
    """Publishes NATS and JetStream attempts over pooled connections."""

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
        self.pool: ConnectionPool[_Connection] = ConnectionPool(
            close=_close, alive=lambda conn: conn.client.is_connected, idle_s=idle_s, clock=self._clock
        )

    async def close(self) -> None:
        await self.pool.close()

    async def execute(self, target: NatsTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, publish, and keep none of them in the result."""
        return await with_secrets(
            self._secrets, ctx.team, target, lambda resolved: self._publish(resolved.target(target), ctx)
        )

    async def _publish(self, target: NatsTarget, ctx: AttemptContext) -> AttemptResult:
        url, problem = checked_broker_url(target.url, NATS_SCHEMES, self._allowed, lambda: check_nats(target))
        if url is None:
            return AttemptResult(Outcome.ERROR, error=problem)
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        where = endpoint(url.with_port(broker_port(url, NATS_SCHEMES)))
        key = pool_key(target.url, target.user, target.password, target.token)
        try:
            async with asyncio.timeout(budget):
                async with self.pool.connection(key, lambda: self._connect(url, target)) as conn:
                    try:
                        output = await self._send(conn.client, target, ctx, budget)
                    except (OSError, nats.errors.ConnectionClosedError, nats.errors.StaleConnectionError):
                        await self.pool.discard(key, conn)
                        raise
        except (TimeoutError, OSError, nats.errors.Error, _RefusedError) as error:
            return _failed(error, where, budget, target.subject)
        log.debug(
            "action=nats_published job_id=%s run_id=%s attempt=%d jetstream=%s",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            target.jetstream,
        )
        return AttemptResult(Outcome.SUCCESS, output=output)

    async def _send(self, client: NatsClient, target: NatsTarget, ctx: AttemptContext, budget: float) -> str:
        headers = {name: str(value) for name, value in target.headers}
        headers.update(envelope_headers(ctx))
        headers["Nats-Msg-Id"] = ctx.execution_id
        headers["Content-Type"] = "application/json"
        body = message_body(ctx)
        if target.jetstream:
            ack = await client.jetstream().publish(target.subject, body, timeout=budget, headers=headers)
            return json.dumps({"stream": ack.stream, "seq": ack.seq, "duplicate": bool(ack.duplicate)})
        await client.publish(target.subject, body, headers=headers)
        await client.flush(timeout=budget)  # type: ignore[arg-type]  # seconds, a float works
        return json.dumps({"subject": target.subject, "flushed": True})

    async def _connect(self, url: URL, target: NatsTarget) -> _Connection:
        host = url.host or ""
        port = broker_port(url, NATS_SCHEMES)
        address = await guarded_address(host, port, self._allowed, self._resolve)
        conn = _Connection()
        try:
            await self._attach(conn, url, host, address, port, target)
        except BaseException:
            if not conn.client.is_closed:
                await asyncio.shield(_close_quietly(conn))
            raise
        return conn

    async def _attach(
        self, conn: _Connection, url: URL, host: str, address: str, port: int, target: NatsTarget
    ) -> None:
        tls = ssl.create_default_context() if url.scheme == "tls" else None
        try:
            await conn.client.connect(
                servers=[f"{url.scheme}://{host_port(address, port)}"],
                name="cronwheel",
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                connect_timeout=int(CONNECT_TIMEOUT_S),
                dont_randomize=True,
                no_echo=True,
                tls=tls,
                tls_hostname=host if tls is not None else None,
                user=_plain(target.user),
                password=_plain(target.password),
                token=_plain(target.token),
                error_cb=conn.on_error,
            )
        except nats.errors.NoServersError:
            raise _why(conn, host_port(host, port)) from None
        except nats.errors.AuthorizationError:
            raise _RefusedError("refused the credentials (authorization violation)") from None
        except nats.errors.Error as error:
            if "authorization" in str(error).lower() or "authentication" in str(error).lower():
                raise _RefusedError(f"refused the credentials ({_text(error)})") from None
            raise


def _failed(error: BaseException, where: str, budget: float, subject: str) -> AttemptResult:
    """The outcome of an attempt that raised ``error`` (module docstring)."""
    outcome, text = Outcome.ERROR, f"cannot publish to {where}: {_text(error)}"
    if isinstance(error, TimeoutError):
        outcome, text = Outcome.TIMEOUT, f"no answer from {where} within {budget:g} s"
    elif isinstance(error, BlockedAddressError):
        text = str(error)
    elif isinstance(error, _RefusedError):
        outcome, text = Outcome.FAILURE, f"{where} {error}"
    elif isinstance(error, nats.js.errors.NoStreamResponseError | nats.errors.NoRespondersError):
        outcome = Outcome.FAILURE
        text = (
            f"no JetStream stream on {where} captures subject {subject!r} (NoRespondersError): "
            "create a stream for it, or publish with jetstream false"
        )
    elif isinstance(error, nats.js.errors.APIError):
        outcome = Outcome.FAILURE
        text = (
            f"JetStream on {where} refused the message: {error.description} "
            f"(code {error.code}, error code {error.err_code})"
        )
    return AttemptResult(outcome, error=text)


class _RefusedError(Exception):
    """The server refused the connection (credentials): a FAILURE, not a reachability error."""


def _why(conn: _Connection, where: str) -> Exception:
    """Why a connection could not be made, from the errors its client reported."""
    last = conn.errors[-1] if conn.errors else None
    if isinstance(last, nats.errors.AuthorizationError) or "authoriz" in str(last).lower():
        return _RefusedError("refused the credentials (authorization violation)")
    if isinstance(last, OSError):
        return OSError(f"cannot connect to {where}: {last.strerror or type(last).__name__}")
    return OSError(f"cannot connect to {where}" + (f": {_text(last)}" if last is not None else ""))


async def _close(conn: _Connection) -> None:
    if not conn.client.is_closed:
        await conn.client.close()


async def _close_quietly(conn: _Connection) -> None:
    try:
        await asyncio.wait_for(_close(conn), 1.0)
    except Exception as error:  # a client that never connected may fail to close
        log.debug("action=nats_close_failed error=%s", type(error).__name__)


def _plain(value: object) -> str | None:
    """A credential after resolution: text, or None."""
    assert value is None or isinstance(value, str), "secret references are resolved before connecting"
    return value


def _text(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, OSError) and error.strerror:
        text = error.strerror
    return text
