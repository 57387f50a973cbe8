"""A notifier over a real store (SQLite file: tests/conftest.py's ``store``), a manual clock, a
webhook sink (aiohttp on loopback, answering a scripted list of statuses) and an SMTP server
(aiosmtpd on loopback)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email import message_from_bytes
from email.message import Message
from typing import Any

import pytest
from aiohttp import web
from aiosmtpd.controller import Controller
from multidict import CIMultiDict

import suite_workers
from cronwheel.clock import ManualClock
from cronwheel.notifier.channels import Senders, SmtpSettings
from cronwheel.notifier.loop import Notifier
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
KEYS = Keyring([new_key("k1")])
LOOPBACK = ("127.0.0.0/8",)


@dataclass
class Sink:
    url: str = ""
    statuses: list[int] = field(default_factory=list)  # answered in turn; then 200
    seen: list[tuple[CIMultiDict[str], bytes]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # the path and query of each request, in turn


SINK = web.AppKey("sink", Sink)


async def _handle(request: web.Request) -> web.Response:
    sink = request.app[SINK]
    sink.seen.append((CIMultiDict(request.headers), await request.read()))
    sink.paths.append(request.path_qs)
    return web.Response(status=sink.statuses.pop(0) if sink.statuses else 200, text="ok")


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    state = Sink()
    app = web.Application()
    app[SINK] = state
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    yield state
    await runner.cleanup()


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.recipients: list[list[str]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(message_from_bytes(envelope.content))
        self.recipients.append(list(envelope.rcpt_tos))
        return "250 OK"


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


@pytest.fixture
def mailbox() -> Iterator[tuple[Mailbox, SmtpSettings]]:
    box = Mailbox()
    port = free_port()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, SmtpSettings.from_url(f"smtp://127.0.0.1:{port}?from=cronwheel@example.com")
    finally:
        controller.stop()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


async def put_secret(store: SqlStore, team: str, name: str, value: str) -> None:
    sealed = seal(KEYS, team, name, value)
    await store.put_secret(StoredSecret(team, name, sealed.key_id, sealed.value))


@pytest.fixture
async def notifier(
    store: SqlStore, clock: ManualClock, mailbox: tuple[Mailbox, SmtpSettings]
) -> AsyncIterator[Notifier]:
    http = HttpExecutor(
        WorkerSettings(allowed_networks=LOOPBACK), clock=clock, secrets=SecretResolver(store, KEYS)
    )
    try:
        yield Notifier(store, Senders(http, mailbox[1], clock), clock, rand=lambda: 0.0)
    finally:
        await http.close()
