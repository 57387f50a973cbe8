"""A manual trigger continues the API caller's trace (a deploy pipeline's trace includes the
run), through the store to the worker and the webhook; with tracing off the header is ignored."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.callers.access import AccessPolicy
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.model import RunState
from cronwheel.telemetry.tracing import trace_id
from cronwheel.telemetry.tracing.runs import ATTEMPT, FIRE

from .conftest import START, Roles, Sink, named

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@asynccontextmanager
async def api(roles: Roles) -> AsyncIterator[httpx.AsyncClient]:
    record, token = issue("deployer", None, (Scope.ADMIN,), START)
    await roles.store.create_token(record)
    services = ApiServices(
        roles.store, roles.service, roles.clock, access=AccessPolicy(allowed_hosts=("cronwheel.test",))
    )
    transport = httpx.ASGITransport(app=create_app(services))
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://cronwheel.test", headers=headers
    ) as http:
        yield http


async def test_a_trigger_keeps_the_callers_trace_to_the_webhook(
    traced: Roles, sink: Sink, exporter: InMemorySpanExporter
) -> None:
    job = await traced.webhook_job(sink.url)
    async with api(traced) as http:
        response = await http.post(
            f"/v1/jobs/{job.id}/trigger", headers={"traceparent": CALLER, "tracestate": "vendor=abc"}
        )
        assert response.status_code == 201, response.text
        run = response.json()
        assert run["trace_id"] == CALLER_TRACE
        assert (await http.get(f"/v1/runs/{run['id']}")).json()["trace_id"] == CALLER_TRACE
    [fire] = named(exporter.get_finished_spans(), FIRE)
    assert fire.context is not None
    assert fire.parent is not None
    assert f"{fire.parent.span_id:016x}" == CALLER_SPAN
    assert fire.kind is SpanKind.PRODUCER
    assert fire.context.trace_state.get("vendor") == "abc"
    assert (fire.attributes or {})["cronwheel.run_kind"] == "manual"

    [done] = await traced.work()  # the worker reads the trace context from the run it claimed
    assert done is not None
    assert done.state is RunState.SUCCESS
    [attempt] = named(exporter.get_finished_spans(), ATTEMPT)
    assert attempt.parent is not None
    assert attempt.parent.span_id == fire.context.span_id
    [headers] = sink.seen
    assert trace_id(headers["traceparent"]) == CALLER_TRACE


async def test_a_trigger_without_a_valid_traceparent_starts_a_trace(traced: Roles, sink: Sink) -> None:
    job = await traced.webhook_job(sink.url)
    async with api(traced) as http:
        plain = (await http.post(f"/v1/jobs/{job.id}/trigger")).json()
        bad = await http.post(f"/v1/jobs/{job.id}/trigger", headers={"traceparent": "00-zz-not-valid"})
        assert bad.status_code == 201  # W3C: an invalid parent is ignored, never refused
    for run in (plain, bad.json()):
        assert run["trace_id"] is not None
        assert len(run["trace_id"]) == 32
        assert run["trace_id"] != CALLER_TRACE
    assert plain["trace_id"] != bad.json()["trace_id"]


async def test_a_repeated_trigger_answers_the_first_runs_trace(traced: Roles, sink: Sink) -> None:
    job = await traced.webhook_job(sink.url)
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with api(traced) as http:
        key = {"Idempotency-Key": "deploy-41"}
        first = await http.post(f"/v1/jobs/{job.id}/trigger", headers={**key, "traceparent": CALLER})
        again = await http.post(f"/v1/jobs/{job.id}/trigger", headers={**key, "traceparent": other})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["trace_id"] == CALLER_TRACE


async def test_with_tracing_off_a_trigger_has_no_trace(untraced: Roles, sink: Sink) -> None:
    job = await untraced.webhook_job(sink.url)
    async with api(untraced) as http:
        response = await http.post(f"/v1/jobs/{job.id}/trigger", headers={"traceparent": CALLER})
    assert response.status_code == 201
    assert response.json()["trace_id"] is None
    [done] = await untraced.work()
    assert done is not None
    assert "traceparent" not in sink.seen[0]
