"""Guarantee 9 through the roles wired as in production (JobService, scheduler, MemoryQueue,
worker, a real SqlStore on SQLite) against a webhook on 127.0.0.1 that echoes the credential it
got: the value reaches the target, and is nowhere else: not in the job, the queue's triggers, the
run, its attempts (their output, nor the headers they sent) or its events, the database files, or
a log line."""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import HttpTarget, Job, RetryPolicy, RunState, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.service import SecretService
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker

from .harness import Roles, at

TOKEN = "sk_live_0f3c-roles-token-1234"
KEYS = Keyring([new_key("k1")])


@pytest.fixture
async def echo() -> AsyncIterator[tuple[str, list[str]]]:
    """A webhook that fails its first call, and echoes the Authorization it got in every answer."""
    got: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        got.append(request.headers.get("Authorization", ""))
        return web.Response(status=500 if len(got) == 1 else 200, text=f"got {got[-1]}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}/hook", got
    await runner.cleanup()


async def test_a_secret_reaches_its_target_and_nothing_else(
    roles: Roles, echo: tuple[str, list[str]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, got = echo
    roles.service.policy = TargetPolicy(allowed_networks=("127.0.0.0/8",))
    await SecretService(roles.store, KEYS, roles.clock).set("billing", "api-key", TOKEN)
    resolver = SecretResolver(roles.store, KEYS, clock=roles.clock)
    executors = Executors(
        WorkerSettings(allowed_networks=("127.0.0.0/8",)), clock=roles.clock, secrets=resolver
    )
    worker = Worker(roles.store, roles.queue, executors, roles.clock, "worker-s", rng=random.Random(1))
    target = HttpTarget(url, headers=(("Authorization", SecretRef("api-key")),))
    retry = RetryPolicy(max_attempts=2, initial_delay_s=5, jitter=False)
    job = Job(id="", team="billing", name="charge", schedule="* * * * *", target=target, retry=retry)
    with caplog.at_level(logging.DEBUG):
        job = await roles.service.create(job)
        await roles.notify()
        await roles.tick(at(1))
        queued = [repr(lane) for lane in roles.queue._lanes.values()]
        [first] = await roles.work(worker)
        roles.clock.set(at(1, 10))
        queued += [repr(lane) for lane in roles.queue._lanes.values()]  # the retry's trigger
        [second] = await roles.work(worker)
        await executors.close()

    assert got == [TOKEN, TOKEN]  # the target got the value, on both attempts
    assert first is not None
    assert second is not None
    assert (first.state, second.state) == (RunState.RETRYING, RunState.SUCCESS)
    attempts = await roles.attempts(second.id)
    assert [(a.status_code, a.output) for a in attempts] == [
        (500, "got [secret:api-key]"),
        (200, "got [secret:api-key]"),
    ]
    for attempt in attempts:  # the headers the worker sent, as the store keeps them
        sent = dict(attempt.request_headers or ())
        assert sent["Authorization"] == "[redacted]"
        assert sent["Idempotency-Key"] == second.id
        assert sent["X-Cronwheel-Attempt"] == str(attempt.number)
    records = [
        repr(await roles.store.get_job(job.id)),
        repr(await roles.runs()),
        repr(attempts),
        repr(await roles.store.list_events(second.id)),
        *queued,
    ]
    assert all(TOKEN not in text for text in records)
    assert "SecretRef(name='api-key')" in records[0]  # the job holds the reference
    assert sum("Trigger(" in text for text in queued) == 2  # both triggers were looked at
    files = list(tmp_path.glob("cronwheel.db*"))
    assert files
    for path in files:
        assert TOKEN.encode() not in path.read_bytes(), path.name
    assert caplog.records
    assert all(TOKEN not in repr(vars(record)) for record in caplog.records)
