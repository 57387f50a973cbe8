"""The SSRF corpus at every attempt: the HTTP executor, with a resolver the test controls, sends
nothing to a refused address. A local listener (127.0.0.1 and ::1, one port) must never be
reached, and a tripwire on the event loop's ``sock_connect`` proves that no connection to any
address was even tried: the guard decides before a socket exists. Traffic stays on loopback.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult

from cronwheel.clock import ManualClock
from cronwheel.model import HttpTarget, Outcome
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

from .corpus import REFUSED, RESOLVED, corpus_size

NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
SECRETS = ("HUNTER2", "s3cr3t", "pass")
STAND_IN = WorkerSettings(allowed_networks=("127.0.0.1/32",))  # 127.0.0.1 plays a public address


def ctx() -> AttemptContext:
    return AttemptContext("run-1", "job-1", "nightly", "data", NOW, attempt=1, timeout_s=5.0)


@dataclass
class Listener:
    """One port on 127.0.0.1 and ::1; records every request it gets."""

    port: int = 0
    seen: list[str] = field(default_factory=list)
    redirect_to: str | None = None


LISTENER = web.AppKey("listener", Listener)


async def _handle(request: web.Request) -> web.Response:
    listener = request.app[LISTENER]
    listener.seen.append(f"{request.method} {request.host}{request.path_qs}")
    if listener.redirect_to is not None:
        status = int(request.query.get("status", "302"))
        return web.Response(status=status, headers={"Location": listener.redirect_to})
    return web.Response(text="reached")


async def _listen(hosts: tuple[str, ...]) -> tuple[web.AppRunner, Listener]:
    state = Listener()
    app = web.Application()
    app[LISTENER] = state
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    first = web.TCPSite(runner, hosts[0], 0)
    await first.start()
    state.port = runner.addresses[0][1]
    for host in hosts[1:]:
        await web.TCPSite(runner, host, state.port).start()
    return runner, state


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    runner, state = await _listen(("127.0.0.1", "::1"))
    yield state
    await runner.cleanup()


class Tripwire:
    """Every address the event loop was asked to connect a socket to."""

    def __init__(self) -> None:
        self.connects: list[Any] = []


@pytest.fixture
async def tripwire(monkeypatch: pytest.MonkeyPatch) -> Tripwire:
    wire = Tripwire()
    loop = asyncio.get_running_loop()
    original = loop.sock_connect

    async def recording(sock: socket.socket, address: Any) -> None:
        wire.connects.append(address)
        if not ipaddress.ip_address(address[0]).is_loopback:  # a guard that failed: stay on loopback
            raise ConnectionRefusedError(f"the test's tripwire refused {address[0]}")
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", recording)
    return wire


class Resolver(AbstractResolver):
    """A DNS under the test's control: answers from a table, in order, and records the names."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.table:
            raise OSError(socket.EAI_NONAME, "Name or service not known")
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for address in self.table[host]
        ]

    async def close(self) -> None:
        pass


def assert_refused(result: Any, why: str) -> None:
    assert result.outcome is Outcome.ERROR, (why, result)
    assert result.status_code is None
    assert result.error is not None
    assert result.error.startswith("refused by the SSRF guard: "), (why, result.error)
    for secret in SECRETS:
        assert secret not in result.error, (why, result.error)


def test_the_corpus_is_large() -> None:
    """Reported in the issue's closing note."""
    assert corpus_size() >= 120


async def test_refused_spellings_reach_nothing(listener: Listener, tripwire: Tripwire) -> None:
    # a resolver that would send every name to the listener: a name that slipped past the host
    # check would be looked up, and the refused answer shows it
    resolver = Resolver({})
    executor = HttpExecutor(clock=ManualClock(NOW), resolver=resolver)
    try:
        for why, template in REFUSED:
            url = "http://" + template.format(port=listener.port)
            assert_refused(await executor.execute(HttpTarget(url=url), ctx()), why)
    finally:
        await executor.close()
    assert listener.seen == []
    assert tripwire.connects == []
    assert resolver.asked == []  # every refused spelling was judged without a lookup


async def test_resolved_names_reach_nothing(listener: Listener, tripwire: Tripwire) -> None:
    table = {name: answer for _, name, answer in RESOLVED}
    resolver = Resolver(table)
    executor = HttpExecutor(clock=ManualClock(NOW), resolver=resolver)
    try:
        for why, name, answer in RESOLVED:
            result = await executor.execute(HttpTarget(url=f"http://{name}:{listener.port}/"), ctx())
            assert_refused(result, why)
            assert f"{name} resolves to" in (result.error or ""), result.error
            assert any(address in (result.error or "") for address in answer)
    finally:
        await executor.close()
    assert resolver.asked == [name for _, name, _ in RESOLVED]
    assert listener.seen == []
    assert tripwire.connects == []


async def test_rebinding_between_lookups(listener: Listener, tripwire: Tripwire) -> None:
    """A name that answers the public stand-in first and a refused address the next time is
    refused the next time: every connection is judged, not the first lookup."""
    resolver = Resolver({"rebind.attacker.example": ["127.0.0.1"]})
    executor = HttpExecutor(STAND_IN, clock=ManualClock(NOW), resolver=resolver)
    url = f"http://rebind.attacker.example:{listener.port}/"
    try:
        first = await executor.execute(HttpTarget(url=url), ctx())
        assert first.outcome is Outcome.SUCCESS
        for answer in (["127.0.0.2"], ["::1"], ["169.254.169.254"], ["127.0.0.1", "10.0.0.1"]):
            resolver.table["rebind.attacker.example"] = answer
            await executor.close()  # as if the cached answer and the pooled connection were gone
            assert_refused(await executor.execute(HttpTarget(url=url), ctx()), str(answer))
    finally:
        await executor.close()
    assert len(listener.seen) == 1
    assert tripwire.connects == [("127.0.0.1", listener.port)]


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_redirect_chains_are_never_followed(status: int, tripwire: Tripwire) -> None:
    """A webhook that answers with a redirect to a refused address (the second listener, on
    127.0.0.2; the metadata service) gets one request: redirects are not followed, so nothing
    behind them is reached, whatever the chain."""
    inner_runner, inner = await _listen(("127.0.0.2",))
    outer_runner, outer = await _listen(("127.0.0.1",))
    executor = HttpExecutor(STAND_IN, clock=ManualClock(NOW))
    try:
        chain = [
            f"http://127.0.0.2:{inner.port}/internal",
            "http://169.254.169.254/latest/meta-data/iam/",
            f"http://127.0.0.1:{outer.port}/hop?status={status}",  # a chain through itself
            f"http://[::1]:{inner.port}/",
        ]
        for location in chain:
            outer.redirect_to = location
            url = f"http://127.0.0.1:{outer.port}/hook?status={status}"
            result = await executor.execute(HttpTarget(url=url), ctx())
            assert result.outcome is Outcome.FAILURE
            assert result.status_code == status
            assert result.error == f"HTTP {status}, expected 2xx (redirects are not followed)"
    finally:
        await executor.close()
        await outer_runner.cleanup()
        await inner_runner.cleanup()
    assert len(outer.seen) == len(chain)
    assert all(seen.endswith(f"/hook?status={status}") for seen in outer.seen)
    assert inner.seen == []
    assert {address[0] for address in tripwire.connects} == {"127.0.0.1"}
