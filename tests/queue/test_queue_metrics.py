"""A scrape of ``/metrics`` reads each queue's depth, pending, delayed and lag then (``Queue.stats``
through :mod:`cronwheel.cluster.gauges`), on every backend; a queue that fails or hangs leaves its
series out of that scrape, within the timeout, and is counted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from queue_backends import T0, Backend, open_backend

from cronwheel.clock import ManualClock
from cronwheel.cluster import gauges as metrics_live
from cronwheel.node import metrics_http
from cronwheel.queue import QueueStats, Trigger
from cronwheel.queue.memory import MemoryQueue
from cronwheel.queue.streams import RedisStreamQueue
from cronwheel.telemetry import metrics


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture(params=["memory", "redis", "postgres"])
async def backend(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[Backend]:
    async with open_backend(request.param, clock) as opened:
        yield opened


@pytest.fixture(autouse=True)
def detached() -> Iterator[None]:
    yield
    metrics_live.LIVE.source = None


async def scrape() -> dict[tuple[str, str], float]:
    """``/metrics`` of a node without the API, as Prometheus reads it: {(name, queue): value}."""
    transport = httpx.ASGITransport(app=metrics_http.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9103") as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 200
    return {
        (sample.name, sample.labels.get("queue", "")): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


async def test_a_scrape_reads_depth_pending_delayed_and_lag(backend: Backend, clock: ManualClock) -> None:
    queue = backend.queue
    metrics_live.attach(metrics_live.Source("n1", queue, ("default", "idle")))
    await queue.publish([Trigger(f"r{i}", "j") for i in range(3)])
    await queue.publish_at(Trigger("retry", "j"), T0 + timedelta(minutes=5))
    await queue.receive("default", "w", 1, 0.1)  # one handed out, never acknowledged
    await backend.long_after(2)
    seen = await scrape()
    assert seen[("cronwheel_queue_depth", "default")] == 2
    assert seen[("cronwheel_queue_pending", "default")] == 1
    assert seen[("cronwheel_queue_delayed", "default")] == 1
    assert seen[("cronwheel_queue_lag_seconds", "default")] > (0.2 if backend.real_time else 1.9)
    assert seen[("cronwheel_queue_depth", "idle")] == 0
    assert seen[("cronwheel_queue_lag_seconds", "idle")] == 0


async def test_an_unreachable_queue_is_left_out_and_counted(clock: ManualClock) -> None:
    down = RedisStreamQueue("redis://127.0.0.1:1/0", clock, connect_timeout_s=0.5)
    failures = metrics.REGISTRY.get_sample_value(
        "cronwheel_metrics_source_failures_total", {"source": "queue"}
    )
    try:
        metrics_live.attach(metrics_live.Source("n1", down, ("default",)))
        seen = await scrape()
    finally:
        await down.close()
    assert not [key for key in seen if key[0].startswith("cronwheel_queue_depth")]
    assert seen[("cronwheel_metrics_source_failures_total", "")] == (failures or 0.0) + 1


FAILURES = "cronwheel_metrics_source_failures_total"


class _Hanging(MemoryQueue):
    """A queue whose stats never answer (a Redis that accepts the connection and stalls)."""

    async def stats(self, queue: str) -> QueueStats:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_hanging_queue_delays_a_scrape_by_the_timeout_at_most(clock: ManualClock) -> None:
    metrics_live.attach(metrics_live.Source("n1", _Hanging(clock), ("default",)))
    failures = metrics.REGISTRY.get_sample_value(FAILURES, {"source": "queue"}) or 0.0
    began = time.monotonic()
    await metrics_live.scrape(timeout_s=0.2)
    assert time.monotonic() - began < 1.0
    assert metrics.REGISTRY.get_sample_value(FAILURES, {"source": "queue"}) == failures + 1
    assert metrics.REGISTRY.get_sample_value("cronwheel_queue_depth", {"queue": "default"}) is None
