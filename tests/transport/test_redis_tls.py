"""The queue over TLS with an ACL user, against a private ``redis-server`` that listens on a TLS
port only, wants client certificates of the test CA and has its default user off
(``servers.TlsRedis``)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cronwheel.clock import SystemClock
from cronwheel.errors import BackendUnavailableError, InvalidInputError
from cronwheel.node.backends import open_queue
from cronwheel.queue.port import Trigger
from cronwheel.queue.streams import QueueRefusedError, RedisStreamQueue
from cronwheel.tls import TlsConfigError
from suite_backends import redis_url_with

from .servers import REDIS_PASSWORD, Pki, TlsRedis, in_url


def _leaks(message: str) -> bool:
    return REDIS_PASSWORD in message or in_url(REDIS_PASSWORD) in message


def _queue(url: str) -> RedisStreamQueue:
    return RedisStreamQueue(
        url, SystemClock(), prefix=f"cronwheel:t{uuid.uuid4().hex[:8]}", connect_timeout_s=2
    )


async def test_triggers_go_through_a_tls_redis_as_an_acl_user(tls_redis: TlsRedis) -> None:
    queue = await open_queue(tls_redis.url(), SystemClock(), visibility_timeout_s=30)
    try:
        await queue.publish([Trigger("run-1", "job-1")])
        assert await queue.depth("default") == 1
        deliveries = await queue.receive("default", "worker-1", limit=10, timeout_s=1)
        assert [delivery.trigger.run_id for delivery in deliveries] == ["run-1"]
        await queue.ack("default", deliveries)
    finally:
        await queue.close()


@pytest.mark.parametrize(
    ("which", "says"),
    [
        ("wrong-ca", "certificate verify failed"),  # the server's certificate is not of this CA
        ("stranger-client", "unknown ca"),  # the server does not know our client certificate's CA
        ("no-password", "authenticated"),  # the default user is off
        ("wrong-password", "invalid username-password pair"),
    ],
)
async def test_refusals_are_permanent_at_once_and_never_quote_the_password(
    tls_redis: TlsRedis, pki: Pki, which: str, says: str
) -> None:
    url = {
        "wrong-ca": tls_redis.url(ca=pki.other.ca),
        "stranger-client": tls_redis.url(client=pki.stranger),
        "no-password": tls_redis.url(password=None),
        "wrong-password": tls_redis.url(password=REDIS_PASSWORD + "x"),
    }[which]
    queue = _queue(url)
    began = time.monotonic()
    try:
        with pytest.raises(QueueRefusedError) as refused:
            await queue.ping()
    finally:
        await queue.close()
    assert time.monotonic() - began < 2
    assert says in str(refused.value).lower()
    assert not _leaks(str(refused.value))


@contextlib.asynccontextmanager
async def _resetting_proxy(upstream_port: int, resets: int) -> AsyncIterator[tuple[int, list[str]]]:
    """A TCP proxy to the TLS Redis that resets (RST) its first ``resets`` connections as they
    arrive and pipes the later ones through; yields its port and what it did to each one."""
    seen: list[str] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(seen) < resets:
            seen.append("reset")
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        seen.append("piped")
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()


@pytest.mark.parametrize(
    ("resets", "raised", "seen"),
    [
        (1, QueueRefusedError, ["reset", "piped"]),  # a reset, then the refusal itself
        (5, BackendUnavailableError, ["reset"] * 3),  # resets only: a server going down
    ],
)
async def test_a_reset_tls_connection_is_asked_again_before_it_counts_as_an_outage(
    tls_redis: TlsRedis, pki: Pki, resets: int, raised: type[Exception], seen: list[str]
) -> None:
    """A TLS 1.3 refusal of the client's certificate can reach the client as a reset when its
    first command crosses the refusal: ping asks again on new connections, up to three."""
    async with _resetting_proxy(tls_redis.port, resets) as (port, done):
        url = tls_redis.url(client=pki.stranger).replace(f":{tls_redis.port}/", f":{port}/")
        queue = _queue(url)
        try:
            with pytest.raises(raised) as error:
                await queue.ping()
        finally:
            await queue.close()
    assert done == seen
    assert not _leaks(str(error.value))


async def test_a_plain_client_gets_no_answer_from_the_tls_port(tls_redis: TlsRedis) -> None:
    """A TLS port closes on a plain client; that looks like a server going down (the error is
    transient, the start waits and logs it), and never quotes the password."""
    url = f"redis://cronwheel:{in_url(REDIS_PASSWORD)}@127.0.0.1:{tls_redis.port}/0"
    queue = _queue(url)
    try:
        with pytest.raises(BackendUnavailableError) as unavailable:
            await queue.ping()
    finally:
        await queue.close()
    assert not _leaks(str(unavailable.value))


def test_urls_that_cannot_work_are_refused_before_any_connection(tls_redis: TlsRedis, tmp_path: Path) -> None:
    port = tls_redis.port
    secret = in_url(REDIS_PASSWORD)
    with pytest.raises(InvalidInputError, match="need a rediss:// URL") as plain:
        _queue(f"redis://u:{secret}@127.0.0.1:{port}/0?ssl_ca_certs=/ca.pem")
    with pytest.raises(InvalidInputError, match="'ssl_ca_cert' is not one of") as unknown:
        _queue(f"rediss://u:{secret}@127.0.0.1:{port}/0?ssl_ca_cert=/ca.pem")
    with pytest.raises(InvalidInputError, match="must look like") as scheme:
        _queue(f"http://u:{secret}@127.0.0.1:{port}/0")
    missing = tmp_path / "ca.pem"
    with pytest.raises(TlsConfigError, match=rf"{missing} \(queue URL ssl_ca_certs\): no such file"):
        _queue(f"rediss://u:{secret}@127.0.0.1:{port}/0?ssl_ca_certs={missing}")
    for refused in (plain, unknown, scheme):
        assert not _leaks(str(refused.value))
        assert secret not in str(refused.value)


async def test_a_tls_client_to_a_plain_redis_times_out() -> None:
    """The suite's shared plain Redis (``suite_backends``) waits for the rest of a command that a
    TLS handshake never sends: a timeout, which is waited out like an outage (docs/security.md)."""
    plain = redis_url_with(scheme="rediss", userinfo=f":{in_url(REDIS_PASSWORD)}")
    url = f"{plain}?ssl_cert_reqs=none"
    queue = RedisStreamQueue(url, SystemClock(), connect_timeout_s=0.5)
    try:
        with pytest.raises(BackendUnavailableError, match="Timeout") as unavailable:
            await queue.ping()
    finally:
        await queue.close()
    assert not _leaks(str(unavailable.value))
