"""A run's trace across machines: api, scheduler and worker processes over PostgreSQL, etcd and
Redis, each exporting over OTLP/HTTP to one collector stand-in. The scheduler's fire span and the
worker's attempt span are one trace, carried by the run's record alone (the queue message stays
thin), and the webhook receives the worker's traceparent; a trigger on the api continues the
caller's trace."""

from __future__ import annotations

import asyncio
import time

import pytest
from cluster_harness import (
    Cluster,
    Sink,
    cluster_fixture,  # noqa: F401 - the `cluster` fixture
)

from tracing.collector import Collector, collecting

pytestmark = pytest.mark.integration

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


async def _spans_of(
    collector: Collector, trace_id: str, names: set[str]
) -> dict[str, tuple[str, bytes, bytes]]:
    """The trace's spans, once it holds ``names`` (or after 20 s)."""
    deadline = time.monotonic() + 20
    while True:
        found = {
            span.name: (resource["service.instance.id"], span.span_id, span.parent_span_id)
            for resource, span in collector.trace(trace_id)
        }
        if names <= set(found) or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_a_runs_trace_spans_the_scheduler_and_the_worker(
    cluster: tuple[Cluster, Sink], monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, sink = cluster
    async with collecting() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
        api_node = nodes.start("api", "api-1", "--tracing", "otlp")
        nodes.start("scheduler", "sched-1", "--tracing", "otlp")
        nodes.start("worker", "worker-1", "--tracing", "otlp")
        async with nodes.client(api_node) as api:
            body = {"team": "c", "name": "traced", "schedule": "* * * * * *",
                    "target": {"type": "http", "url": f"{sink.url}/hook"}}  # fmt: skip
            job = (await api.post("/v1/jobs", json=body)).json()
            deadline = time.monotonic() + 20
            while not sink.deliveries and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            delivery = sink.deliveries[0]
            run = (await api.get(f"/v1/runs/{delivery.run_id}")).json()
            triggered = await api.post(f"/v1/jobs/{job['id']}/trigger", headers={"traceparent": CALLER})
        scheduled = await _spans_of(collector, run["trace_id"], {"cronwheel.fire", "cronwheel.attempt"})
        manual = await _spans_of(collector, CALLER_TRACE, {"cronwheel.fire", "cronwheel.attempt"})

    assert run["trace_id"] is not None
    fire_node, fire_span, _ = scheduled["cronwheel.fire"]
    attempt_node, attempt_span, attempt_parent = scheduled["cronwheel.attempt"]
    assert (fire_node, attempt_node) == ("sched-1", "worker-1")  # two processes, one trace
    assert attempt_parent == fire_span
    assert scheduled["cronwheel.claim"][0] == "worker-1"
    assert delivery.traceparent is not None
    assert delivery.traceparent.split("-")[1:3] == [run["trace_id"], attempt_span.hex()]

    assert triggered.json()["trace_id"] == CALLER_TRACE
    assert manual["cronwheel.fire"][0] == "api-1"  # a manual run's trace starts on the api
    assert manual["cronwheel.fire"][2].hex() == "00f067aa0ba902b7"
    assert manual["cronwheel.attempt"][0] == "worker-1"
