"""What every broker executor shares (nats and mqtt here; rabbitmq and kafka may use it too): the
message envelope, the SSRF guard at connect time, and a pool of long-lived connections.

**The envelope.** A broker message's body is the attempt's payload as compact JSON (UTF-8, content
type ``application/json``; a job without a payload sends ``null``). Its headers (or MQTT 5 user
properties) are the webhook contract's (:func:`envelope_headers`): ``Idempotency-Key`` (the
execution id: the same on every attempt of a run, so a consumer de-duplicates on it),
``X-Cronwheel-Job-Id``, ``X-Cronwheel-Scheduled-At`` (the slot, RFC 3339 UTC) and
``X-Cronwheel-Attempt``, then the attempt's ``traceparent`` when tracing is on. Where the protocol
has a message id, it is the execution id too (NATS ``Nats-Msg-Id``).

**The guard.** :func:`guarded_address` resolves a broker's host once, refuses it whole when any
answer is an address the operator did not allow (:func:`cronwheel.targets.ssrf.address_refusal`, as the
HTTP executor's resolver does), and returns the address to connect to: the executor connects to
that very address (TLS still verifies the host's name), so a DNS answer that changes between the
check and the connect cannot slip through.

**The pool.** :class:`ConnectionPool` keeps one connection per key (a digest of the broker URL and
the resolved credentials: the pool holds no credential in clear). Concurrent attempts share it;
the first one opens it in a task of the pool's own (an attempt that times out while it opens does
not cancel it half-way: the next attempt gets it). A connection that is found dead is dropped and
the next attempt opens another; one unused for ``idle_s`` seconds (on the injected clock's
monotonic reading) is closed by :meth:`ConnectionPool.sweep`, which every acquire runs and a
background task runs every ``idle_s / 2`` seconds while the pool holds anything; ``close()``
closes them all. Closing never raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ipaddress
import json
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from yarl import URL

from cronwheel.clock import monotonic_of
from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import parse_broker_url
from cronwheel.targets.ssrf import IPNetwork, address_refusal, url_refusal
from cronwheel.worker.executors.base import AttemptContext, rfc3339
from cronwheel.worker.executors.http import BlockedAddressError

log = logging.getLogger(__name__)

C = TypeVar("C")

CONTENT_TYPE = "application/json"
IDLE_S = 60.0  # a broker connection unused this long is closed
CONNECT_TIMEOUT_S = 10.0  # opening one connection (TCP, TLS, the protocol's handshake)
CLOSE_TIMEOUT_S = 5.0  # closing one, politely, before it is dropped

Resolve = Callable[[str, int], Awaitable[list[str]]]
"""``(host, port) -> addresses``: how a broker's host name is looked up (tests inject one)."""


# -- the envelope ----------------------------------------------------------------------------------


def message_body(ctx: AttemptContext) -> bytes:
    """The attempt's payload as compact UTF-8 JSON (``null`` without one)."""
    return json.dumps(ctx.payload, separators=(",", ":"), ensure_ascii=False).encode()


def envelope_headers(ctx: AttemptContext) -> list[tuple[str, str]]:
    """What every broker message carries, named as the HTTP executor's headers."""
    return [
        ("Idempotency-Key", ctx.execution_id),
        ("X-Cronwheel-Job-Id", ctx.job_id),
        ("X-Cronwheel-Scheduled-At", rfc3339(ctx.scheduled_at)),
        ("X-Cronwheel-Attempt", str(ctx.attempt)),
        *ctx.trace_headers,
    ]


def pool_key(*parts: object) -> str:
    """A digest of what tells connections apart (URL, credentials): the pool keeps no secret."""
    return hashlib.sha256(json.dumps([str(part) for part in parts]).encode()).hexdigest()


# -- the guard -------------------------------------------------------------------------------------


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host`` (each once, in its order)."""
    loop = asyncio.get_running_loop()
    answers = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(answer[4][0]) for answer in answers))


async def guarded_address(host: str, port: int, allowed: Sequence[IPNetwork], resolve: Resolve) -> str:
    """The address to connect to for ``host``: an IP literal as it is, a name as resolved. Raises
    :class:`BlockedAddressError` when the address, or any answer for the name, is refused, and
    ``OSError`` when the name does not resolve."""
    try:
        literal = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        literal = None
    answers = [str(literal)] if literal is not None else await resolve(host, port)
    if not answers:
        raise OSError(f"cannot resolve {host}: no address")
    for address in answers:
        reason = address_refusal(address, allowed)
        if reason is not None:
            raise BlockedAddressError(address, reason, host)
    return answers[0]


def host_port(address: str, port: int) -> str:
    """``address:port`` with an IPv6 address in brackets (for a URL)."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


# -- the pool --------------------------------------------------------------------------------------


@dataclass
class _Entry(Generic[C]):
    connection: C
    last_used: float
    users: int = 0


class ConnectionPool(Generic[C]):
    """Long-lived broker connections by key, shared by concurrent attempts (module docstring)."""

    def __init__(
        self,
        *,
        close: Callable[[C], Awaitable[None]],
        alive: Callable[[C], bool],
        idle_s: float = IDLE_S,
        clock: object | None = None,
    ) -> None:
        self._close_one = close
        self._alive = alive
        self.idle_s = idle_s
        self._monotonic = monotonic_of(clock)
        self._entries: dict[str, _Entry[C]] = {}
        self._opening: dict[str, asyncio.Task[C]] = {}
        self._reaper: asyncio.Task[None] | None = None
        self.opened = 0  # connections opened so far (for tests and figures)

    def __len__(self) -> int:
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def connection(self, key: str, open_: Callable[[], Awaitable[C]]) -> AsyncIterator[C]:
        """The live connection of ``key``, opened with ``open_`` when there is none. A caller that
        finds it broken calls :meth:`discard` before leaving."""
        await self.sweep()
        entry = self._entries.get(key)
        if entry is None:
            connection = await asyncio.shield(self._open(key, open_))
            entry = self._entries.get(key)
            if entry is None or entry.connection is not connection:  # closed meanwhile
                raise ConnectionError("the connection was closed as it opened")
        entry.users += 1
        try:
            yield entry.connection
        finally:
            entry.users -= 1
            entry.last_used = self._monotonic.monotonic()

    def _open(self, key: str, open_: Callable[[], Awaitable[C]]) -> asyncio.Task[C]:
        task = self._opening.get(key)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._opened(key, open_))
            self._opening[key] = task
            task.add_done_callback(_retrieved)
        return task

    async def _opened(self, key: str, open_: Callable[[], Awaitable[C]]) -> C:
        try:
            connection = await asyncio.wait_for(open_(), CONNECT_TIMEOUT_S)
        finally:
            self._opening.pop(key, None)
        self._entries[key] = _Entry(connection, self._monotonic.monotonic())
        self.opened += 1
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return connection

    async def discard(self, key: str, connection: C) -> None:
        """Drop ``connection`` (found broken): the next attempt opens another."""
        entry = self._entries.get(key)
        if entry is not None and entry.connection is connection:
            del self._entries[key]
        await self._close_quietly(connection)

    async def sweep(self) -> int:
        """Close the connections that are dead, or unused for ``idle_s``; returns how many."""
        now = self._monotonic.monotonic()
        gone = [
            key
            for key, entry in self._entries.items()
            if not self._alive(entry.connection)
            or (entry.users == 0 and now - entry.last_used >= self.idle_s)
        ]
        for key in gone:
            entry = self._entries.pop(key)
            log.debug(
                "action=broker_connection_closed reason=%s",
                "dead" if not self._alive(entry.connection) else "idle",
            )
            await self._close_quietly(entry.connection)
        return len(gone)

    async def _reap(self) -> None:
        while self._entries:
            await asyncio.sleep(max(self.idle_s / 2, 0.05))
            await self.sweep()

    async def close(self) -> None:
        """Close every connection, and stop opening any."""
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        opening = list(self._opening.values())
        for task in opening:  # no attempt waits for them any more
            task.cancel()
        if opening:
            await asyncio.wait(opening, timeout=CLOSE_TIMEOUT_S)
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            await self._close_quietly(entry.connection)

    async def _close_quietly(self, connection: C) -> None:
        try:
            await asyncio.wait_for(self._close_one(connection), CLOSE_TIMEOUT_S)
        except Exception as error:  # a broken connection may fail to close; it is gone
            log.debug("action=broker_connection_close_failed error=%s", type(error).__name__)


def _retrieved(task: asyncio.Task[object]) -> None:
    """An opening task's failure is its waiters' to report; none may be left waiting."""
    if not task.cancelled():
        task.exception()


def checked_broker_url(
    text: str, schemes: dict[str, int], allowed: Sequence[IPNetwork], check: Callable[[], URL]
) -> tuple[URL | None, str | None]:
    """A broker target's URL once ``check`` (its type's full check) passed and its host is not
    refused by the SSRF guard, or why nothing may be sent (as the service judged it on write;
    the guard's refusal first, as the sharper reason)."""
    try:
        refusal = url_refusal(parse_broker_url(text, schemes), allowed)
        if refusal is not None:
            return None, f"refused by the SSRF guard: {refusal} (not in allowed_networks)"
        return check(), None
    except InvalidInputError as error:
        return None, str(error)
