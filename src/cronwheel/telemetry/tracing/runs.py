"""The spans of a run, their names and attributes in one place (docs/operations.md, "Logs and
traces"). Each builder is called only when the tracer is enabled.

* ``cronwheel.fire`` (producer): one per run a fire batch records, started at the batch's
  moment, ended when its trigger is queued; the root of the run's trace (or, for a manual run,
  a child of the API caller's ``traceparent``). Its context is what ``runs.traceparent`` holds.
* ``cronwheel.fire_batch``: one per fire batch, its own trace; each fire span links to it.
* ``cronwheel.claim`` (consumer): one per run a worker claimed, a child of the run's fire span,
  lasting the claim's transaction (one for the whole receive).
* ``cronwheel.attempt`` (client for HTTP targets): one per attempt, a child of the run's fire
  span, from the claim to the recorded outcome; an HTTP target receives its ``traceparent``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from cronwheel.model import AttemptResult, FireResult, Firing, Job, Outcome, Run, RunState
from cronwheel.telemetry.tracing.port import Attributes, Span, SpanKind, Tracer

FIRE = "cronwheel.fire"
FIRE_BATCH = "cronwheel.fire_batch"
CLAIM = "cronwheel.claim"
ATTEMPT = "cronwheel.attempt"


def _run(run: Run, team: str | None) -> dict[str, str | int | None]:
    return {
        "cronwheel.job_id": run.job_id,
        "cronwheel.run_id": run.id,
        "cronwheel.team": team,
        "cronwheel.slot": run.slot.isoformat(),
        "cronwheel.run_kind": run.kind.value,
    }


@dataclass
class FireSpans:
    """The spans of one fire batch, and its firings with each PENDING run's trace context."""

    batch: Span
    firings: list[Firing]
    runs: dict[str, Span] = field(default_factory=dict)

    @classmethod
    def begin(
        cls, tracer: Tracer, firings: Sequence[Firing], teams: Mapping[str, str], at: datetime
    ) -> FireSpans:
        batch = tracer.start(FIRE_BATCH, at, attributes={"cronwheel.firings": len(firings)})
        spans = cls(batch, [])
        for firing in firings:
            runs = tuple(spans._traced(tracer, run, teams.get(firing.job_id), at) for run in firing.runs)
            spans.firings.append(dataclasses.replace(firing, runs=runs))
        return spans

    def _traced(self, tracer: Tracer, run: Run, team: str | None, at: datetime) -> Run:
        if run.state is not RunState.PENDING:  # SKIPPED: never attempted, its record says why
            return run
        span = tracer.start(FIRE, at, kind="producer", attributes=_run(run, team), links=(self.batch,))
        self.runs[run.id] = span
        return dataclasses.replace(run, traceparent=span.traceparent)

    def end(self, result: FireResult, queued: datetime, *, armed: bool = False) -> None:
        """The recorded runs' spans end when their triggers were queued; the others (a stale or
        fenced firing, a slot another scheduler recorded first) say they were not recorded.
        ``armed``: the runs were recorded ahead of their slots (``queued`` is when), and are
        queued at their slots (the run's ``queued_at``): their spans end at the record and
        carry ``cronwheel.armed`` and how far ahead of the slot it was."""
        for run in result.accepted:
            span = self.runs.pop(run.id, None)
            if span is not None:
                if armed:
                    span.set(
                        {"cronwheel.armed": True, "cronwheel.lead_s": (run.due - queued).total_seconds()}
                    )
                else:
                    span.set({"cronwheel.lateness_s": (queued - run.due).total_seconds()})
                span.end(queued)
        for span in self.runs.values():
            span.set({"cronwheel.recorded": False})
            span.end(queued)
        self.batch.set(
            {
                "cronwheel.runs": len(result.accepted),
                "cronwheel.skipped": len(result.skipped),
                "cronwheel.stale": len(result.stale_job_ids),
                "cronwheel.fenced": len(result.fenced_job_ids),
            }
        )
        self.batch.end(queued)

    def fail(self, error: BaseException, at: datetime) -> None:
        """The batch's write or publish failed: every span ends as an error."""
        for span in [*self.runs.values(), self.batch]:
            span.fail(type(error).__name__)
            span.end(at)


def manual_fire(
    tracer: Tracer, run: Run, team: str, at: datetime, parent: str | None, state: str | None
) -> Span:
    """The fire span of a manual run, a child of the caller's trace context when it sent one."""
    return tracer.start(FIRE, at, parent=parent, state=state, kind="producer", attributes=_run(run, team))


def claim(tracer: Tracer, runs: Sequence[Run], started: datetime, ended: datetime, triggers: int) -> None:
    """One span per claimed run, in the run's trace, lasting the claim that took it."""
    for run in runs:
        attributes: Attributes = {
            "cronwheel.job_id": run.job_id,
            "cronwheel.run_id": run.id,
            "cronwheel.attempt": run.attempts,
            "cronwheel.claimed": len(runs),
            "cronwheel.triggers": triggers,
        }
        span = tracer.start(CLAIM, started, parent=run.traceparent, kind="consumer", attributes=attributes)
        span.end(ended)


def attempt(tracer: Tracer, run: Run, job: Job | None, at: datetime) -> Span:
    """The span of the attempt the worker is making of ``run`` (as claimed), in its trace."""
    kind: SpanKind = "client" if job is not None and job.target.type == "http" else "internal"
    attributes: Attributes = {
        "cronwheel.job_id": run.job_id,
        "cronwheel.run_id": run.id,
        "cronwheel.attempt": run.attempts,
        "cronwheel.team": None if job is None else job.team,
        "cronwheel.target": None if job is None else job.target.type,
    }
    return tracer.start(ATTEMPT, at, parent=run.traceparent, kind=kind, attributes=attributes)


def attempted(span: Span, result: AttemptResult, recorded: Run | None) -> None:
    """What the attempt came to; an outcome other than success is the span's error."""
    span.set(
        {
            "cronwheel.outcome": result.outcome.value,
            "cronwheel.state": None if recorded is None else recorded.state.value,
            "http.response.status_code": result.status_code,
            "process.exit.code": result.exit_code,
        }
    )
    if result.outcome is not Outcome.SUCCESS:
        span.fail(_failure(result))


def _failure(result: AttemptResult) -> str:
    """The outcome and its code, never the error's text (it may quote what the target wrote)."""
    if result.status_code is not None:
        return f"{result.outcome.value}: HTTP {result.status_code}"
    if result.exit_code is not None:
        return f"{result.outcome.value}: exit {result.exit_code}"
    return result.outcome.value
