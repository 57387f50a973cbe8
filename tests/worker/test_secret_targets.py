"""Attempts of targets that refer to team secrets, and signed webhooks, against a sink on
127.0.0.1: the value reaches the target and nothing else (not the attempt's output or error, not a
log line), a secret that cannot be had fails the attempt saying why, and every signature is
verified with the Standard Webhooks reference library, retries included."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict
from standardwebhooks import Webhook

from cronwheel.clock import ManualClock
from cronwheel.model import CommandTarget, HttpTarget, Outcome, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.signing import TEAM_DEFAULT, new_signing_secret
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor
from cronwheel.worker.executors.live import OutputSoFar

TOKEN = "sk_live_5b1e-webhook-token-77"
KEYS = Keyring([new_key("k1")])
SETTINGS = WorkerSettings(allowed_networks=("127.0.0.0/8",), allow_commands=True, kill_grace_s=0.3)


@dataclass
class Sink:
    url: str = ""
    seen: list[tuple[CIMultiDict[str], bytes]] = field(default_factory=list)


async def _handle(request: web.Request) -> web.Response:
    sink: Sink = request.app[SINK]
    body = await request.read()
    sink.seen.append((CIMultiDict(request.headers), body))
    if request.path == "/echo":  # a target that echoes what it got: the credential included
        return web.Response(status=401, text=f"denied for {request.headers.get('Authorization')}")
    if request.path == "/mirror":  # ... or echoes it in a header of its answer
        return web.Response(text="ok", headers={"X-Seen": f"got {request.headers.get('Authorization')}"})
    return web.Response(text="ok")


SINK = web.AppKey("sink", Sink)


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


@pytest.fixture
def store_clock() -> None:
    """tests/conftest.py's ``store`` keeps its own clock here (the system's)."""


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(datetime.now(UTC).replace(microsecond=0))  # the reference library checks real time


@pytest.fixture
async def executors(store: SqlStore, clock: ManualClock) -> AsyncIterator[Executors]:
    built = Executors(SETTINGS, clock=clock, secrets=SecretResolver(store, KEYS, clock=clock, ttl_s=0))
    yield built
    await built.close()


async def put(store: SqlStore, name: str, value: str, team: str = "billing", keyring: Keyring = KEYS) -> None:
    sealed = seal(keyring, team, name, value)
    await store.put_secret(StoredSecret(team, name, sealed.key_id, sealed.value))


def ctx(attempt: int = 1, payload: Any = None, team: str = "billing") -> AttemptContext:
    return AttemptContext(
        execution_id="0193f2a4-run-0001",
        job_id="job-42",
        job_name="nightly",
        team=team,
        scheduled_at=datetime(2026, 3, 2, 12, 0, tzinfo=UTC),
        attempt=attempt,
        timeout_s=5.0,
        payload={"n": 1, "w": "wörld"} if payload is None else payload,
    )


def bearer(url: str, **changes: Any) -> HttpTarget:
    return HttpTarget(url, headers=(("Authorization", SecretRef("api-key")), ("X-Plain", "p")), **changes)


# -- header references -----------------------------------------------------------------------------


async def test_the_target_gets_the_value_and_the_attempt_keeps_none_of_it(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    await put(store, "api-key", TOKEN)
    result = await executors.execute(bearer(sink.url + "/echo"), ctx())
    [(headers, _)] = sink.seen
    assert headers["Authorization"] == TOKEN
    assert headers["X-Plain"] == "p"
    assert result.outcome is Outcome.FAILURE  # 401
    assert result.output == "denied for [secret:api-key]"
    assert TOKEN not in repr(result)


async def test_the_headers_sent_are_kept_with_every_secret_redacted(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    """What the run page shows: every header as sent, in order, but the value of one that came
    from a secret (whatever its name), of one that holds a secret's value, of the credentials by
    name and of the signature is "[redacted]"."""
    await put(store, "api-key", TOKEN)
    await put(store, "tenant", "acme-tenant-0042")
    await put(store, TEAM_DEFAULT, new_signing_secret())
    target = HttpTarget(
        sink.url + "/hook",
        headers=(
            ("Authorization", SecretRef("api-key")),
            ("X-Tenant", SecretRef("tenant")),  # an innocent name, a secret value
            ("X-Plain", "p"),
            ("X-Copy", f"prefix {TOKEN}"),  # a value typed in the job that holds a secret's value
            ("Cookie", "session=abc"),
        ),
    )
    result = await executors.execute(target, ctx())
    assert result.outcome is Outcome.SUCCESS
    [(received, _)] = sink.seen
    assert received["X-Tenant"] == "acme-tenant-0042"  # the target got them all
    assert result.request_headers is not None
    kept = dict(result.request_headers)
    for name in ("Authorization", "X-Tenant", "X-Copy", "Cookie", "webhook-signature"):
        assert kept[name] == "[redacted]", name
    assert kept["X-Plain"] == "p"
    assert kept["Idempotency-Key"] == kept["webhook-id"] == "0193f2a4-run-0001"
    assert kept["X-Cronwheel-Attempt"] == "1"
    assert kept["Host"] == sink.url.removeprefix("http://")  # the HTTP client's own, as sent
    assert [name for name, _ in result.request_headers] == list(received)  # every one, in order
    assert TOKEN not in repr(result)
    assert "acme-tenant-0042" not in repr(result)


async def test_a_secret_echoed_in_a_header_of_the_answer_is_not_kept(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    await put(store, "api-key", TOKEN)
    result = await executors.execute(bearer(sink.url + "/mirror"), ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.response_headers is not None
    assert dict(result.response_headers)["X-Seen"] == "[redacted]"
    assert TOKEN not in repr(result)


async def test_a_request_that_was_never_sent_keeps_no_headers(sink: Sink, executors: Executors) -> None:
    refused = await executors.execute(HttpTarget("http://10.1.2.3/x"), ctx())  # the SSRF guard
    assert refused.outcome is Outcome.ERROR
    assert refused.request_headers is None
    missing = await executors.execute(bearer(sink.url), ctx())  # a secret that does not exist
    assert missing.request_headers is None


async def test_a_missing_secret_fails_the_attempt_and_sends_nothing(sink: Sink, executors: Executors) -> None:
    result = await executors.execute(bearer(sink.url), ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "secret 'api-key' does not exist in team 'billing' (deleted since it was referenced?); "
        "set it with `cronwheel secrets set billing/api-key`"
    )
    assert sink.seen == []


async def test_a_worker_that_lacks_the_key_fails_the_attempt_clearly(
    sink: Sink, store: SqlStore, clock: ManualClock
) -> None:
    await put(store, "api-key", TOKEN, keyring=Keyring([new_key("k9")]))
    executors = Executors(SETTINGS, clock=clock, secrets=SecretResolver(store, KEYS))
    try:
        result = await executors.execute(bearer(sink.url), ctx())
    finally:
        await executors.close()
    assert result.outcome is Outcome.ERROR
    assert result.error is not None
    assert "was encrypted with key 'k9', which this process does not have (it has k1" in result.error
    assert sink.seen == []


async def test_a_resolved_value_that_cannot_be_a_header_is_refused_by_name(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    await put(store, "api-key", TOKEN + "\r\nX-Evil: 1")
    result = await executors.execute(bearer(sink.url), ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == "target.headers['Authorization'] contains a control character"
    assert sink.seen == []


async def test_no_log_line_holds_the_value(
    sink: Sink, store: SqlStore, executors: Executors, caplog: pytest.LogCaptureFixture
) -> None:
    await put(store, "api-key", TOKEN)
    with caplog.at_level(logging.DEBUG):
        await executors.execute(bearer(sink.url + "/echo"), ctx())
        await executors.execute(
            CommandTarget(("/bin/sh", "-c", "echo $T"), env=(("T", SecretRef("api-key")),)), ctx()
        )
        await executors.execute(bearer("http://127.0.0.1:9/"), ctx())  # connection refused
    assert caplog.records
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
        assert TOKEN not in repr(vars(record))


# -- command environments -----------------------------------------------------------------------------


async def test_a_command_gets_the_value_in_its_environment_and_its_output_is_redacted(
    store: SqlStore, executors: Executors
) -> None:
    await put(store, "api-key", TOKEN)
    script = (
        'printf %s "$TOKEN" | sha256sum; echo "token=$TOKEN"; echo "cut=$(printf %s "$TOKEN" | cut -c1-9)"'
    )
    target = CommandTarget(("/bin/sh", "-c", script), env=(("TOKEN", SecretRef("api-key")), ("MODE", "x")))
    result = await executors.execute(target, ctx())
    assert result.outcome is Outcome.SUCCESS, result
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    assert (
        result.output == f"{digest}  -\ntoken=[secret:api-key]\ncut=sk_live_5\n"
    )  # 9 characters, not the value
    assert TOKEN not in (result.output or "")


async def test_a_commands_output_so_far_is_redacted_while_it_runs(
    store: SqlStore, executors: Executors
) -> None:
    await put(store, "api-key", TOKEN)
    live = OutputSoFar()
    script = 'echo "token=$TOKEN"; sleep 5'
    target = CommandTarget(("/bin/sh", "-c", script), env=(("TOKEN", SecretRef("api-key")),))
    attempt = asyncio.create_task(executors.execute(target, replace(ctx(), live=live)))
    try:
        async with asyncio.timeout(5):
            while live.text(65_536) is None:
                await asyncio.sleep(0.01)
        assert live.text(65_536) == "token=[secret:api-key]\n"
    finally:
        attempt.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await attempt
    assert live.text(65_536) is None  # over: nothing more to read


async def test_the_kept_tail_never_starts_with_the_end_of_a_value(
    store: SqlStore, clock: ManualClock
) -> None:
    """The kept output is the last 1 KiB: a value the window cuts in two is redacted too."""
    await put(store, "api-key", TOKEN)
    executors = Executors(
        replace(SETTINGS, output_limit=40), clock=clock, secrets=SecretResolver(store, KEYS)
    )
    try:
        pad = "y" * (40 - 10)
        target = CommandTarget(
            ("/bin/sh", "-c", f'printf "%s{pad}" "$T"'), env=(("T", SecretRef("api-key")),)
        )
        result = await executors.execute(target, ctx())
    finally:
        await executors.close()
    assert result.output == f"[secret:api-key]{pad}"


# -- signatures -----------------------------------------------------------------------------------------


def verify(secret: str, headers: CIMultiDict[str], body: bytes) -> Any:
    return Webhook(secret).verify(body, dict(headers))


async def test_the_jobs_signing_secret_signs_the_exact_body_sent(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    secret = new_signing_secret()
    await put(store, "hook-signing", secret)
    target = HttpTarget(sink.url + "/hook", signing_secret=SecretRef("hook-signing"))
    result = await executors.execute(target, ctx())
    assert result.outcome is Outcome.SUCCESS
    [(headers, body)] = sink.seen
    assert body == json.dumps({"n": 1, "w": "wörld"}, separators=(",", ":")).encode()
    assert headers["webhook-id"] == "0193f2a4-run-0001"
    assert verify(secret, headers, body) == {"n": 1, "w": "wörld"}


async def test_retries_carry_the_same_id_a_new_timestamp_and_a_new_signature(
    sink: Sink, store: SqlStore, executors: Executors, clock: ManualClock
) -> None:
    secret = new_signing_secret()
    await put(store, "hook-signing", secret)
    target = HttpTarget(sink.url + "/hook", signing_secret=SecretRef("hook-signing"))
    await executors.execute(target, ctx(attempt=1))
    clock.advance(30)
    await executors.execute(target, ctx(attempt=2))
    (first, body1), (second, body2) = sink.seen
    assert first["webhook-id"] == second["webhook-id"]
    assert int(second["webhook-timestamp"]) == int(first["webhook-timestamp"]) + 30
    assert first["webhook-signature"] != second["webhook-signature"]
    verify(secret, first, body1)
    verify(secret, second, body2)
    with pytest.raises(Exception, match="No matching signature"):  # a signature is not reusable
        verify(secret, CIMultiDict({**second, "webhook-signature": first["webhook-signature"]}), body2)


async def test_a_team_default_signs_jobs_that_name_none_and_rotation_sends_two(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    await executors.execute(HttpTarget(sink.url + "/unsigned"), ctx())
    assert "webhook-signature" not in sink.seen[-1][0]  # no default yet: not signed
    new, old = new_signing_secret(), new_signing_secret()
    await put(store, TEAM_DEFAULT, f"{new} {old}")
    await executors.execute(HttpTarget(sink.url + "/hook"), ctx(payload="x"))
    headers, body = sink.seen[-1]
    assert len(headers["webhook-signature"].split(" ")) == 2
    verify(new, headers, body)
    verify(old, headers, body)
    await executors.execute(HttpTarget(sink.url + "/other-team"), ctx(team="payments"))
    assert "webhook-signature" not in sink.seen[-1][0]  # another team's default is not ours


async def test_a_signing_secret_that_is_not_whsec_fails_the_attempt(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    await put(store, "hook-signing", TOKEN)
    result = await executors.execute(HttpTarget(sink.url, signing_secret=SecretRef("hook-signing")), ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == (
        "signing secret 'hook-signing' of team 'billing' (key 1) is not a Standard Webhooks secret: "
        "it must start with whsec_"
    )
    assert sink.seen == []


async def test_a_target_with_a_reference_is_checked_at_each_attempt_and_no_value_is_kept(
    sink: Sink, store: SqlStore, executors: Executors
) -> None:
    """What the executor keeps per job target between attempts holds the references' names,
    never their values; the resolved headers are checked again at every attempt (the value may
    have changed since the last)."""
    await put(store, "api-key", TOKEN)
    target = bearer(sink.url + "/echo")
    assert (await executors.execute(target, ctx())).outcome is Outcome.FAILURE  # sent: 401
    http = executors["http"]
    assert isinstance(http, HttpExecutor)
    assert TOKEN not in repr(http._plans)
    assert http._plans[target].checked is None  # checked per attempt, after resolving
    await put(store, "api-key", TOKEN + "\r\nX-Evil: 1")  # the resolver caches nothing here
    result = await executors.execute(target, ctx(attempt=2))
    assert result.error == "target.headers['Authorization'] contains a control character"
    assert len(sink.seen) == 1
