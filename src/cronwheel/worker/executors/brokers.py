"""What the broker executors (RabbitMQ, Kafka) share: pooled connections and the SSRF guard.

**Pool.** A broker connection is expensive (TCP, TLS, the protocol's handshake, SASL) and a
publish is cheap, so an executor keeps one connection per key (the endpoint and the credentials
it was opened with) and shares it between attempts, however many run at once: the first attempt
opens it while the others wait for it (one opener per key). A connection no attempt used for
:attr:`Pool.idle_s` seconds is closed by :meth:`Pool.sweep`, which a background task runs every
half of that while the pool holds any (tests call it with a manual clock); :meth:`Pool.close`
closes all of them (the executor's ``close``). A connection found broken (an error, or closed
under us: ``alive``) is discarded and the next attempt opens a new one.

**Guard.** A broker target's hosts are judged when the job is written exactly as an HTTP URL's
host (:func:`cronwheel.ssrf.host_refusal`); at connect time :func:`guarded_address` resolves the
host and refuses the whole answer when any address in it is refused
(:func:`cronwheel.ssrf.address_refusal`, the HTTP executor's check), and returns the address the
socket is then opened to, so a DNS answer that changes between check and connect cannot slip
through. ``WorkerSettings.allowed_networks`` is the only way around, as for HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from cronwheel.clock import Monotonic
from cronwheel.ssrf import IPNetwork, address_refusal

log = logging.getLogger(__name__)

C = TypeVar("C")

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host and port to IP addresses (the default asks the system's resolver)."""

IDLE_S = 60.0


class BlockedBrokerError(OSError):
    """The SSRF guard refused a broker address (the message names host and address only)."""


async def system_resolver(host: str, port: int) -> list[str]:
    answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in answers))


async def guarded_address(host: str, port: int, allowed: Sequence[IPNetwork], resolver: Resolver) -> str:
    """The address to connect to for ``host``: every address the resolver gives must pass the
    guard (a refused one refuses the whole answer). Raises :class:`BlockedBrokerError`, or
    ``OSError`` when the name does not resolve."""
    addresses = await resolver(host, port)
    if not addresses:
        raise OSError(f"{host} has no address")
    for address in addresses:
        reason = address_refusal(address, allowed)
        if reason is not None:
            where = address if address == host else f"{host} resolves to {address}"
            raise BlockedBrokerError(
                f"refused by the SSRF guard: {where} is {reason} (not in allowed_networks)"
            )
    return addresses[0]


@dataclass
class _Entry(Generic[C]):
    connection: C
    users: int
    last_used: float


class Pool(Generic[C]):
    """Connections by key (see the module docstring). ``closer`` must not raise."""

    def __init__(
        self,
        closer: Callable[[C], Awaitable[None]],
        monotonic: Monotonic,
        idle_s: float = IDLE_S,
        name: str = "broker",
        alive: Callable[[C], bool] | None = None,
    ) -> None:
        self._closer = closer
        self._alive = alive
        self._monotonic = monotonic
        self.idle_s = idle_s
        self._name = name
        self._entries: dict[Hashable, _Entry[C]] = {}
        self._opening: dict[Hashable, asyncio.Lock] = {}
        self._reaper: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @contextlib.asynccontextmanager
    async def use(self, key: Hashable, opener: Callable[[], Awaitable[C]]) -> AsyncIterator[C]:
        """The pooled connection of ``key`` (opened by ``opener`` when there is none), held for
        the body of the ``async with``."""
        entry = await self._entry(key, opener)
        entry.users += 1
        try:
            yield entry.connection
        finally:
            entry.users -= 1
            entry.last_used = self._monotonic.monotonic()

    async def _entry(self, key: Hashable, opener: Callable[[], Awaitable[C]]) -> _Entry[C]:
        entry = self._entries.get(key)
        if entry is not None and self._usable(entry):
            return entry
        lock = self._opening.setdefault(key, asyncio.Lock())
        async with lock:
            entry = self._entries.get(key)
            if entry is not None and not self._usable(entry):  # closed under us (heartbeat, broker)
                del self._entries[key]
                await self._closer(entry.connection)
                entry = None
            if entry is None:
                entry = _Entry(await opener(), 0, self._monotonic.monotonic())
                self._entries[key] = entry
                self._start_reaper()
        return entry

    def _usable(self, entry: _Entry[C]) -> bool:
        return self._alive is None or self._alive(entry.connection)

    async def discard(self, key: Hashable, connection: C) -> None:
        """Close ``connection`` (found broken) and forget it, unless another one replaced it."""
        entry = self._entries.get(key)
        if entry is not None and entry.connection is connection:
            del self._entries[key]
        await self._closer(connection)

    async def sweep(self) -> int:
        """Close the connections unused for ``idle_s`` seconds; returns how many."""
        now = self._monotonic.monotonic()
        idle = [
            (key, entry)
            for key, entry in self._entries.items()
            if entry.users == 0 and now - entry.last_used >= self.idle_s
        ]
        for key, entry in idle:
            del self._entries[key]
            await self._closer(entry.connection)
        if idle:
            log.debug("%s connections closed when idle: %d", self._name, len(idle))
        return len(idle)

    async def close(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
        entries, self._entries = list(self._entries.values()), {}
        for entry in entries:
            await self._closer(entry.connection)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.create_task(self._reap(), name=f"{self._name}-pool-reaper")

    async def _reap(self) -> None:
        while self._entries:
            await asyncio.sleep(max(self.idle_s / 2, 0.05))
            try:
                await self.sweep()
            except Exception:  # a closer must not raise; if one does, the reaper goes on
                log.exception("closing idle %s connections failed", self._name)
