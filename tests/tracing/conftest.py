"""Traced roles wired as in production over a real SQLite store, a MemoryQueue and one
ManualClock, with the real OpenTelemetry SDK exporting to memory, and an aiohttp webhook sink on
127.0.0.1 that records what each request carried."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from multidict import CIMultiDict
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.model import HttpTarget, Job, RetryPolicy, Run
from cronwheel.queue.memory import MemoryQueue
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.telemetry.tracing import OFF, Tracer
from cronwheel.telemetry.tracing.otel import OtelTracer, provider_for
from cronwheel.worker.executors import Executors, WorkerSettings
from cronwheel.worker.loop import Worker
from suite_stores import fresh_sqlite_database

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)  # a Monday, on the minute
LOOPBACK = ("127.0.0.0/8",)
SINK: web.AppKey[Sink] = web.AppKey("sink")
NO_RETRY = RetryPolicy()
RETRY_ONCE = RetryPolicy(max_attempts=2, initial_delay_s=1.0, jitter=False)


@dataclass
class Sink:
    """Answers each request with the next of ``statuses`` (then 200) and keeps its headers."""

    port: int = 0
    statuses: list[int] = field(default_factory=list)
    seen: list[CIMultiDict[str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


async def _hook(request: web.Request) -> web.Response:
    sink = request.app[SINK]
    sink.seen.append(CIMultiDict(request.headers))
    await request.read()
    return web.Response(status=sink.statuses.pop(0) if sink.statuses else 200, text="ok")


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    recorder = Sink()
    app = web.Application()
    app[SINK] = recorder
    app.router.add_post("/hook", _hook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    recorder.port = runner.addresses[0][1]
    try:
        yield recorder
    finally:
        await runner.cleanup()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def tracer(exporter: InMemorySpanExporter) -> AsyncIterator[OtelTracer]:
    """The SDK as ``--tracing`` builds it (cronwheel's resource, the SDK's sampler), each span
    handed to memory as it ends."""
    provider = provider_for("test-node", ("scheduler", "worker"))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traced = OtelTracer(provider)
    yield traced
    await traced.close()


@dataclass
class Roles:
    clock: ManualClock
    store: SqlStore
    queue: MemoryQueue
    service: JobService
    scheduler: Scheduler
    worker: Worker
    executors: Executors

    async def webhook_job(self, url: str, retry: RetryPolicy = NO_RETRY) -> Job:
        job = Job(id="", team="ops", name="hook", schedule="* * * * *", target=HttpTarget(url), retry=retry)
        created = await self.service.create(job)
        await self.scheduler.job_changed(created.id, self.clock.now())
        return created

    async def work(self) -> list[Run | None]:
        """Claim and attempt everything the queue hands out now, as ``Worker.run`` would."""
        done: list[Run | None] = []
        for delivery in await self.queue.receive("default", "test", 100, 0.0):
            done.append(await self.worker.handle(delivery))
        return done


async def wire(tmp_path: Path, tracer: Tracer, store_templates: Path) -> Roles:
    clock = ManualClock(START)
    # a copy of the worker's migrated database (tests/conftest.py)
    store = await open_store(fresh_sqlite_database(store_templates, tmp_path / "cronwheel.db"), clock=clock)
    queue = MemoryQueue(clock)
    policy = TargetPolicy(allowed_networks=LOOPBACK)
    service = JobService(store, queue, ChangeFeed(), clock, policy, tracer=tracer)
    scheduler = Scheduler(store, queue, clock, "scheduler-1", tracer=tracer)
    executors = Executors(WorkerSettings(allowed_networks=LOOPBACK), clock=clock)
    worker = Worker(store, queue, executors, clock, "worker-1", rng=random.Random(1), tracer=tracer)
    return Roles(clock, store, queue, service, scheduler, worker, executors)


@pytest.fixture
async def traced(tmp_path: Path, tracer: OtelTracer, store_templates: Path) -> AsyncIterator[Roles]:
    roles = await wire(tmp_path, tracer, store_templates)
    try:
        yield roles
    finally:
        await close(roles)


@pytest.fixture
async def untraced(tmp_path: Path, store_templates: Path) -> AsyncIterator[Roles]:
    roles = await wire(tmp_path, OFF, store_templates)
    try:
        yield roles
    finally:
        await close(roles)


async def close(roles: Roles) -> None:
    await roles.executors.close()
    await roles.queue.close()
    await roles.store.close()


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]
