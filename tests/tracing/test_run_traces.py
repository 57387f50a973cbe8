"""A run's trace, end to end in one process with the real SDK: the fire span starts it, its
context is recorded on the run, the worker's claim and attempt spans join it (a retry too), and
the webhook receives the attempt span's traceparent. With tracing off: no header, no trace id."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from cronwheel.model import RunState
from cronwheel.scheduler.loop import Scheduler
from cronwheel.store.port import RunQuery
from cronwheel.telemetry.tracing import trace_id
from cronwheel.telemetry.tracing.runs import ATTEMPT, CLAIM, FIRE, FIRE_BATCH

from .conftest import RETRY_ONCE, START, Roles, Sink, named

SLOT = START + timedelta(minutes=1)


def _hex(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def _traceparent(span: ReadableSpan) -> str:
    """``span`` as a W3C parent (its flags: sampled, and the SDK's random trace id)."""
    assert span.context is not None
    trace, own = _hex(span)
    return f"00-{trace}-{own}-{span.context.trace_flags:02x}"


def _parent(span: ReadableSpan) -> str:
    assert span.parent is not None
    return f"{span.parent.span_id:016x}"


async def test_a_fired_runs_spans_share_its_recorded_trace(
    traced: Roles, sink: Sink, exporter: InMemorySpanExporter
) -> None:
    sink.statuses = [500]  # the first attempt fails, the retry succeeds
    job = await traced.webhook_job(sink.url, RETRY_ONCE)
    traced.clock.set(SLOT)
    await traced.scheduler.tick(SLOT)
    [first] = await traced.work()
    assert first is not None
    assert first.state is RunState.RETRYING
    traced.clock.advance(2.0)
    [second] = await traced.work()
    assert second is not None
    assert second.state is RunState.SUCCESS

    run = await traced.store.get_run(first.id)
    recorded = trace_id(run.traceparent)
    assert recorded is not None
    spans = exporter.get_finished_spans()
    [fire] = named(spans, FIRE)
    [batch] = named(spans, FIRE_BATCH)
    claims, attempts = named(spans, CLAIM), named(spans, ATTEMPT)
    fire_trace, fire_span = _hex(fire)
    assert fire_trace == recorded
    assert run.traceparent == _traceparent(fire)
    assert fire.parent is None  # a scheduled run's trace starts with its fire
    assert fire.kind is SpanKind.PRODUCER
    assert fire.start_time == int(SLOT.timestamp()) * 10**9  # the moment of the batch
    assert dict(fire.attributes or {}) == {
        "cronwheel.job_id": job.id, "cronwheel.run_id": run.id, "cronwheel.team": "ops",
        "cronwheel.slot": SLOT.isoformat(), "cronwheel.run_kind": "scheduled", "cronwheel.lateness_s": 0.0,
    }  # fmt: skip
    assert batch.context is not None
    assert [link.context.span_id for link in fire.links] == [batch.context.span_id]
    assert _hex(batch)[0] != recorded  # the batch is a trace of its own
    assert (batch.attributes or {})["cronwheel.runs"] == 1

    assert [span.attributes["cronwheel.attempt"] for span in attempts] == [1, 2]  # type: ignore[index]
    assert [span.attributes["cronwheel.attempt"] for span in claims] == [1, 2]  # type: ignore[index]
    for span in [*attempts, *claims]:
        assert _hex(span)[0] == recorded  # a retry is another attempt of the same trace
        assert _parent(span) == fire_span
    assert {span.kind for span in attempts} == {SpanKind.CLIENT}
    assert {span.kind for span in claims} == {SpanKind.CONSUMER}
    failed, succeeded = attempts
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "failure: HTTP 500"
    assert (failed.attributes or {})["http.response.status_code"] == 500
    assert (failed.attributes or {})["cronwheel.state"] == "RETRYING"
    assert succeeded.status.status_code is StatusCode.UNSET
    assert (succeeded.attributes or {})["cronwheel.outcome"] == "success"
    assert (succeeded.attributes or {})["cronwheel.target"] == "http"
    assert succeeded.start_time == int(SLOT.timestamp() + 2) * 10**9  # the worker's clock

    # each webhook request carries its attempt span as the parent
    sent = [headers.get("traceparent") for headers in sink.seen]
    assert sent == [_traceparent(span) for span in attempts]
    assert all(trace_id(header) == recorded for header in sent)
    assert all("tracestate" not in headers for headers in sink.seen)


async def test_no_secret_reaches_an_attribute(
    traced: Roles, sink: Sink, exporter: InMemorySpanExporter
) -> None:
    url = sink.url + "?token=s3cret"
    traced.service.policy = replace(traced.service.policy, allow_plain_credentials=True)  # a token in clear
    await traced.webhook_job(url)
    traced.clock.set(SLOT)
    await traced.scheduler.tick(SLOT)
    await traced.work()
    spans = exporter.get_finished_spans()
    assert {span.name for span in spans} == {FIRE, FIRE_BATCH, CLAIM, ATTEMPT}
    for span in spans:
        text = repr(dict(span.attributes or {})) + repr(span.status.description)
        assert "s3cret" not in text
        assert "127.0.0.1" not in text  # no URL at all


async def test_with_tracing_off_the_webhook_gets_no_traceparent(untraced: Roles, sink: Sink) -> None:
    await untraced.webhook_job(sink.url)
    untraced.clock.set(SLOT)
    await untraced.scheduler.tick(SLOT)
    [run] = await untraced.work()
    assert run is not None
    assert run.state is RunState.SUCCESS
    assert len(sink.seen) == 1
    assert "traceparent" not in sink.seen[0]
    assert "tracestate" not in sink.seen[0]
    assert (await untraced.store.get_run(run.id)).traceparent is None


async def test_only_the_fired_runs_of_a_batch_get_a_trace(
    traced: Roles, sink: Sink, exporter: InMemorySpanExporter
) -> None:
    job = await traced.webhook_job(sink.url)
    late = SLOT + timedelta(minutes=5)  # slots missed beyond the grace period are SKIPPED
    traced.clock.set(late)
    await traced.scheduler.tick(late)
    runs = (await traced.store.list_runs(RunQuery(job_id=job.id))).items
    skipped = [run for run in runs if run.state is RunState.SKIPPED]
    pending = [run for run in runs if run.state is RunState.PENDING]
    assert skipped
    assert pending
    assert all(run.traceparent is None for run in skipped)  # never attempted: the record says why
    fires = named(exporter.get_finished_spans(), FIRE)
    assert sorted(trace_id(run.traceparent) or "" for run in pending) == sorted(_hex(f)[0] for f in fires)
    [batch] = named(exporter.get_finished_spans(), FIRE_BATCH)
    assert (batch.attributes or {})["cronwheel.skipped"] == len(skipped)


async def test_an_armed_runs_fire_span_ends_at_its_record(
    traced: Roles, sink: Sink, exporter: InMemorySpanExporter
) -> None:
    armer = Scheduler(
        traced.store, traced.queue, traced.clock, "armer", tracer=traced.scheduler.tracer, arm_ahead_s=30
    )
    traced.scheduler = armer
    await traced.webhook_job(sink.url)
    armed_at = SLOT - timedelta(seconds=1)
    traced.clock.set(armed_at)
    await armer.tick(armed_at)
    [fire] = named(exporter.get_finished_spans(), FIRE)
    attributes = dict(fire.attributes or {})
    assert (attributes["cronwheel.armed"], attributes["cronwheel.lead_s"]) == (True, 1.0)
    assert "cronwheel.lateness_s" not in attributes
    assert fire.end_time == int(armed_at.timestamp()) * 10**9
    traced.clock.set(SLOT)
    await armer.tick(SLOT)
    [done] = await traced.work()
    assert done is not None
    assert done.state is RunState.SUCCESS
    assert done.queued_at == SLOT
    assert trace_id(done.traceparent) == _hex(fire)[0]
