"""docs/examples' WSGI and ASGI receivers, each served on loopback and sent real signed deliveries
by cronwheel's own HTTP executor (the worker's code, with the job's signing secret sealed in a real
SqlStore): a delivery is processed once, its retry answered "already processed", work that fails
lets the retry through; and each app in-process refuses forged and stale requests."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
import pytest
import uvicorn

from cronwheel.clock import ManualClock
from cronwheel.model import HttpTarget, Outcome, SecretRef
from cronwheel.receiver import MemoryDeduplicator
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.signing import new_signing_secret, signature_header, signing_keys
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"
KEYS = Keyring([new_key("k1")])
SETTINGS = WorkerSettings(allowed_networks=("127.0.0.0/8",))
SECRET = new_signing_secret()


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class Work:
    """The examples' work: records each payload; fails while ``failing`` is set."""

    done: list[Any] = field(default_factory=list)
    failing: bool = False

    def __call__(self, payload: Any) -> None:
        if self.failing:
            raise RuntimeError("the work failed")
        self.done.append(payload)


def attempt(execution_id: str, number: int, payload: Any) -> AttemptContext:
    return AttemptContext(
        execution_id=execution_id, job_id="job-42", job_name="nightly", team="billing",
        scheduled_at=datetime(2026, 3, 2, 12, tzinfo=UTC), attempt=number, timeout_s=5.0, payload=payload,
    )  # fmt: skip


@pytest.fixture
async def executors(tmp_path: Path) -> AsyncIterator[tuple[Executors, ManualClock]]:
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))  # the receiver checks real time
    store: SqlStore = await open_store(f"sqlite:///{tmp_path / 'store.db'}")
    sealed = seal(KEYS, "billing", "hook-signing", SECRET)
    await store.put_secret(StoredSecret("billing", "hook-signing", sealed.key_id, sealed.value))
    built = Executors(SETTINGS, clock=clock, secrets=SecretResolver(store, KEYS, clock=clock, ttl_s=0))
    try:
        yield built, clock
    finally:
        await built.close()
        await store.close()


async def deliveries(executors: Executors, clock: ManualClock, url: str, work: Work) -> None:
    """What both examples must do with cronwheel's own signed requests."""
    target = HttpTarget(url + "/hook", signing_secret=SecretRef("hook-signing"))
    first = await executors.execute(target, attempt("run-1", 1, {"n": 1}))
    assert first.outcome is Outcome.SUCCESS, first.error
    clock.advance(30)
    retry = await executors.execute(target, attempt("run-1", 2, {"n": 1}))  # its answer was lost, say
    assert retry.outcome is Outcome.SUCCESS
    assert work.done == [{"n": 1}]  # processed once
    work.failing = True
    failed = await executors.execute(target, attempt("run-2", 1, {"n": 2}))
    assert (failed.outcome, failed.status_code) == (Outcome.FAILURE, 500)
    work.failing = False
    clock.advance(30)
    again = await executors.execute(target, attempt("run-2", 2, {"n": 2}))
    assert again.outcome is Outcome.SUCCESS
    assert work.done == [{"n": 1}, {"n": 2}]
    unsigned = await executors.execute(HttpTarget(url + "/hook"), attempt("run-3", 1, {"n": 3}))
    assert (unsigned.outcome, unsigned.status_code) == (Outcome.FAILURE, 401)


def refusals() -> list[tuple[dict[str, str], bytes, tuple[int, str]]]:
    """Forged, stale and well-signed requests, in order, with the answer each must get."""
    body, now = b'{"n":9}', int(time.time())

    def headers(webhook_id: str, timestamp: int, secret: str = SECRET) -> dict[str, str]:
        signature = signature_header(signing_keys(secret, "s"), webhook_id, timestamp, body)
        return {"webhook-id": webhook_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}

    return [
        (headers("x-1", now, new_signing_secret()), body, (401, "bad signature")),
        (headers("x-1", now - 3600), body, (400, "stale timestamp")),
        (headers("x-1", now), body, (200, "processed")),
        (headers("x-1", now + 1), body, (200, "already processed")),
        (headers("x-2", now), body + b" ", (401, "bad signature")),
    ]


# -- WSGI ----------------------------------------------------------------------------------------


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def wsgi() -> Iterator[tuple[str, Work]]:
    work = Work()
    app = example("receiver_wsgi").make_app(SECRET, MemoryDeduplicator(), work)
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", work
    finally:
        server.shutdown()
        server.server_close()


async def test_the_wsgi_example_takes_cronwheels_deliveries_once(
    wsgi: tuple[str, Work], executors: tuple[Executors, ManualClock]
) -> None:
    url, work = wsgi
    await deliveries(*executors, url, work)


def test_the_wsgi_example_refuses_forged_and_stale_requests() -> None:
    app = example("receiver_wsgi").make_app(SECRET, MemoryDeduplicator(), Work())
    with httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://receiver") as client:
        for headers, body, expected in refusals():
            answer = client.post("/hook", content=body, headers=headers)
            assert (answer.status_code, answer.text) == expected


# -- ASGI ----------------------------------------------------------------------------------------


async def test_the_asgi_example_takes_cronwheels_deliveries_once(
    executors: tuple[Executors, ManualClock],
) -> None:
    work = Work()
    app = example("receiver_asgi").make_app(SECRET, MemoryDeduplicator(), work)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.005)
        await deliveries(*executors, f"http://127.0.0.1:{sock.getsockname()[1]}", work)
    finally:
        server.should_exit = True
        await serving
        sock.close()


async def test_the_asgi_example_refuses_forged_and_stale_requests() -> None:
    app = example("receiver_asgi").make_app(SECRET, MemoryDeduplicator(), Work())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
        for headers, body, expected in refusals():
            answer = await client.post("/hook", content=body, headers=headers)
            assert (answer.status_code, answer.text) == expected
