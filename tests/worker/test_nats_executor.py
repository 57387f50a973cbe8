"""NatsExecutor against the live NATS server (JetStream on) on loopback, and a private
nats-server with a token: what a subscriber receives, JetStream's de-duplication by execution id,
outcomes (unreachable, timeout, no stream, refused credentials), the SSRF guard at connect time,
secrets kept out of results and logs, and the connection pool (idle close, reopen, close)."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js.api import StreamConfig

from broker_support import LOOPBACK, NOW, SECRET, make_ctx, private_nats, require_nats
from cronwheel.clock import ManualClock
from cronwheel.model import NatsTarget, Outcome, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.store.port import StoredSecret
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.executors.nats import NatsExecutor

KEYS = Keyring([new_key("k1")])


class Secrets:
    """A store holding team ``payments``'s secrets, sealed."""

    def __init__(self, **values: str) -> None:
        self.values = values

    async def get_secrets(self, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
        found = {}
        for name in names:
            if name in self.values:
                sealed = seal(KEYS, team, name, self.values[name])
                found[name] = StoredSecret(team, name, sealed.key_id, sealed.value)
        return found


def resolver(**values: str) -> SecretResolver:
    return SecretResolver(Secrets(**values), KEYS)


@pytest.fixture
async def client() -> AsyncIterator[NatsClient]:
    url = require_nats()
    nc = await nats.connect(url)
    yield nc
    await nc.close()


@pytest.fixture
async def executor() -> AsyncIterator[NatsExecutor]:
    made = NatsExecutor(LOOPBACK, clock=ManualClock(NOW))
    yield made
    await made.close()


def subject() -> str:
    return f"cwtest.{uuid.uuid4().hex[:12]}.reports"


async def received(client: NatsClient, name: str) -> tuple[asyncio.Queue[Msg], object]:
    box: asyncio.Queue[Msg] = asyncio.Queue()

    async def take(msg: Msg) -> None:
        await box.put(msg)

    sub = await client.subscribe(name, cb=take)
    await client.flush()
    return box, sub


# -- core NATS -------------------------------------------------------------------------------------


async def test_a_subscriber_gets_the_payload_and_the_execution_id(
    client: NatsClient, executor: NatsExecutor
) -> None:
    name = subject()
    box, _ = await received(client, name)
    target = NatsTarget(
        require_nats(), name, headers=(("X-Team-Header", "blue"), ("Idempotency-Key", "theirs"))
    )
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.SUCCESS, result
    msg = await asyncio.wait_for(box.get(), 5)
    assert json.loads(msg.data) == {"hello": "world", "n": 1}
    headers = msg.headers or {}
    assert headers["Idempotency-Key"] == "0193f2a4-run-0001"  # ours win over the target's
    assert headers["Nats-Msg-Id"] == "0193f2a4-run-0001"
    assert headers["X-Cronwheel-Job-Id"] == "job-42"
    assert headers["X-Cronwheel-Scheduled-At"] == "2025-01-02T03:04:05Z"
    assert headers["X-Cronwheel-Attempt"] == "2"
    assert headers["X-Team-Header"] == "blue"
    assert headers["Content-Type"] == "application/json"


async def test_no_payload_is_json_null(client: NatsClient, executor: NatsExecutor) -> None:
    name = subject()
    box, _ = await received(client, name)
    result = await executor.execute(NatsTarget(require_nats(), name), make_ctx(payload=None))
    assert result.outcome is Outcome.SUCCESS
    assert (await asyncio.wait_for(box.get(), 5)).data == b"null"


# -- JetStream -------------------------------------------------------------------------------------


@pytest.fixture
async def stream(client: NatsClient) -> AsyncIterator[tuple[str, str]]:
    """A stream capturing a fresh subject, with a one-minute duplicate window; deleted after."""
    js = client.jetstream()
    name = f"CWTEST_{uuid.uuid4().hex[:12].upper()}"
    captured = subject()
    await js.add_stream(StreamConfig(name=name, subjects=[captured], duplicate_window=60.0, max_msgs=100))
    yield name, captured
    await js.delete_stream(name)


async def test_jetstream_keeps_one_message_per_run(
    client: NatsClient, executor: NatsExecutor, stream: tuple[str, str]
) -> None:
    name, captured = stream
    target = NatsTarget(require_nats(), captured, jetstream=True)
    first = await executor.execute(target, make_ctx(attempt=1))
    second = await executor.execute(target, make_ctx(attempt=2))  # a retry of the same run
    other = await executor.execute(target, make_ctx(execution_id="0193f2a4-run-0002", attempt=1))
    assert [first.outcome, second.outcome, other.outcome] == [Outcome.SUCCESS] * 3
    assert json.loads(first.output or "") == {"stream": name, "seq": 1, "duplicate": False}
    assert json.loads(second.output or "") == {"stream": name, "seq": 1, "duplicate": True}
    info = await client.jetstream().stream_info(name)
    assert info.state.messages == 2  # the run's once, the other run's once
    stored = await client.jetstream().get_msg(name, 1)
    assert stored.headers is not None
    assert stored.headers["Nats-Msg-Id"] == "0193f2a4-run-0001"
    assert stored.headers["X-Cronwheel-Attempt"] == "1"


async def test_jetstream_without_a_stream_is_a_failure(executor: NatsExecutor) -> None:
    result = await executor.execute(NatsTarget(require_nats(), subject(), jetstream=True), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert "no JetStream stream" in (result.error or "")
    assert "NoRespondersError" in (result.error or "")


# -- outcomes --------------------------------------------------------------------------------------


async def test_an_unreachable_port_is_an_error(executor: NatsExecutor) -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    result = await executor.execute(NatsTarget(f"nats://127.0.0.1:{port}", "a.b"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert f"127.0.0.1:{port}" in (result.error or "")


async def test_a_silent_server_is_a_timeout_within_the_budget(executor: NatsExecutor) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers (no INFO)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await executor.execute(
            NatsTarget(f"nats://127.0.0.1:{port}", "a.b"), make_ctx(timeout_s=0.3)
        )
        assert loop.time() - started < 2
    finally:
        server.close()
    assert result.outcome is Outcome.TIMEOUT, result
    assert "0.3 s" in (result.error or "")


async def test_a_passed_deadline_sends_nothing(executor: NatsExecutor) -> None:
    ctx = make_ctx(deadline=NOW - timedelta(seconds=1))
    result = await executor.execute(NatsTarget(require_nats(), subject()), ctx)
    assert result.outcome is Outcome.TIMEOUT
    assert len(executor.pool) == 0


# -- the SSRF guard --------------------------------------------------------------------------------


async def test_loopback_is_refused_unless_allowed() -> None:
    executor = NatsExecutor(WorkerSettings(), clock=ManualClock(NOW))
    try:
        result = await executor.execute(NatsTarget(require_nats(), subject()), make_ctx())
    finally:
        await executor.close()
    assert result.outcome is Outcome.ERROR
    assert "refused by the SSRF guard" in (result.error or "")
    assert "loopback" in (result.error or "")


async def test_a_name_is_judged_on_the_address_it_resolves_to(client: NatsClient) -> None:
    """The guard checks the resolver's answer and the connection goes to that very address."""
    asked: list[str] = []

    async def to_loopback(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]

    port = require_nats().rsplit(":", 1)[1]
    target = NatsTarget(f"nats://broker.example:{port}", subject())
    refused = NatsExecutor(WorkerSettings(), clock=ManualClock(NOW), resolve=to_loopback)
    allowed = NatsExecutor(LOOPBACK, clock=ManualClock(NOW), resolve=to_loopback)
    box, _ = await received(client, target.subject)
    try:
        no = await refused.execute(target, make_ctx())
        yes = await allowed.execute(target, make_ctx())
    finally:
        await refused.close()
        await allowed.close()
    assert no.outcome is Outcome.ERROR
    assert no.error == (
        "refused by the SSRF guard: broker.example resolves to 127.0.0.1 is a loopback address "
        "(not in allowed_networks)"
    )
    assert yes.outcome is Outcome.SUCCESS
    assert (await asyncio.wait_for(box.get(), 5)).data == b'{"hello":"world","n":1}'
    assert asked == ["broker.example", "broker.example"]


async def test_a_stored_target_that_is_now_invalid_is_an_error(executor: NatsExecutor) -> None:
    result = await executor.execute(NatsTarget("nats://u:p@127.0.0.1:4222", "a.b"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert "must not hold credentials" in (result.error or "")
    assert "u:p" not in (result.error or "")


# -- credentials from secrets ----------------------------------------------------------------------


async def test_a_token_from_a_secret_connects_and_never_shows(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with private_nats(SECRET) as port:
        url = f"nats://127.0.0.1:{port}"
        good = NatsExecutor(LOOPBACK, clock=ManualClock(NOW), secrets=resolver(token=SECRET))
        bad = NatsExecutor(LOOPBACK, clock=ManualClock(NOW), secrets=resolver(token=SECRET[::-1]))
        try:
            ok = await good.execute(NatsTarget(url, "a.b", token=SecretRef("token")), make_ctx())
            refused = await bad.execute(NatsTarget(url, "a.b", token=SecretRef("token")), make_ctx())
            missing = await good.execute(NatsTarget(url, "a.b"), make_ctx())
        finally:
            await good.close()
            await bad.close()
    assert ok.outcome is Outcome.SUCCESS, ok
    assert refused.outcome is Outcome.FAILURE, refused
    assert "refused the credentials" in (refused.error or "")
    assert missing.outcome is Outcome.FAILURE  # no token at all: refused too
    everything = repr([ok, refused, missing]) + caplog.text
    assert SECRET not in everything
    assert SECRET[::-1] not in everything


async def test_a_missing_secret_fails_the_attempt_saying_which(executor: NatsExecutor) -> None:
    target = NatsTarget(require_nats(), "a.b", user="svc", password=SecretRef("nats-password"))
    no_store = await executor.execute(target, make_ctx())
    assert no_store.outcome is Outcome.ERROR
    assert "nats-password" in (no_store.error or "")


# -- the pool --------------------------------------------------------------------------------------


async def test_one_connection_is_shared_then_closed_when_idle_and_reopened(client: NatsClient) -> None:
    clock = ManualClock(NOW)
    executor = NatsExecutor(LOOPBACK, clock=clock, idle_s=30)
    target = NatsTarget(require_nats(), subject())
    try:
        results = await asyncio.gather(*(executor.execute(target, make_ctx(attempt=n)) for n in range(1, 21)))
        assert {result.outcome for result in results} == {Outcome.SUCCESS}
        assert executor.pool.opened == 1
        assert len(executor.pool) == 1
        [entry] = executor.pool._entries.values()
        first = entry.connection.client
        clock.advance(29)
        assert await executor.pool.sweep() == 0
        clock.advance(1)
        assert await executor.pool.sweep() == 1
        assert first.is_closed
        assert len(executor.pool) == 0
        again = await executor.execute(target, make_ctx())
        assert again.outcome is Outcome.SUCCESS
        assert executor.pool.opened == 2
    finally:
        await executor.close()


async def test_other_credentials_get_another_connection(executor: NatsExecutor) -> None:
    url = require_nats()
    await executor.execute(NatsTarget(url, "a.b"), make_ctx())
    await executor.execute(NatsTarget(url, "a.b", headers=(("X", "1"),)), make_ctx())  # same connection
    await executor.execute(
        NatsTarget(url, "a.b", user="x", password="y"), make_ctx()
    )  # the server has no auth
    assert executor.pool.opened == 2


async def test_a_dropped_connection_is_replaced(executor: NatsExecutor) -> None:
    target = NatsTarget(require_nats(), subject())
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    [entry] = executor.pool._entries.values()
    await entry.connection.client.close()  # as if the server went away
    assert (await executor.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    assert executor.pool.opened == 2


async def test_closing_the_executors_closes_the_connections() -> None:
    require_nats()
    executors = Executors(LOOPBACK, clock=ManualClock(NOW))
    target = NatsTarget(require_nats(), subject())
    assert (await executors.execute(target, make_ctx())).outcome is Outcome.SUCCESS
    nats_executor = executors["nats"]
    assert isinstance(nats_executor, NatsExecutor)
    [entry] = nats_executor.pool._entries.values()
    await executors.close()
    assert entry.connection.client.is_closed
    assert len(nats_executor.pool) == 0
