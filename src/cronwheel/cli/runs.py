"""``cronwheel runs ...``: read the record of runs, their attempts and their history."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.completion import complete_job
from cronwheel.cli.jobs import STATES
from cronwheel.cli.output import Column, Ctx, api_command, columns_table, fields, table, when
from cronwheel.cli.watching import every, show_listing, watch_options
from cronwheel.client.types import Page, Run
from cronwheel.model import SkipReason

REASONS = [reason.value for reason in SkipReason]


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.3f}s"


def _late(at: str | None, lateness_s: float | None, due: str = "the slot") -> str | None:
    """An instant with how long after (or, released ahead, before) the run was due (``due``:
    the slot, or its jittered fire time)."""
    if at is None:
        return None
    if lateness_s is not None and lateness_s < 0:
        return f"{when(at)}  ({_seconds(-lateness_s)} before {due})"
    return f"{when(at)}  ({_seconds(lateness_s)} after {due})"


def _slot(run: dict[str, Any]) -> str | None:
    """The run's slot, with when it fired when jitter moved it."""
    due = run.get("due_at")  # older servers do not send it
    if not due or due == run["slot"]:
        return when(run["slot"])
    return f"{when(run['slot'])} (fires {when(due)})"


def _due(run: dict[str, Any]) -> str:
    return "the slot" if not run.get("due_at") else "its fire time"


def job_of(run: dict[str, Any], with_id: bool = False) -> str:
    """The run's job as people name it, ``team/name``; a deleted job has only its id left."""
    if run["job_team"] is None:
        return f"{run['job_id']} (deleted)"
    name = f"{run['job_team']}/{run['job_name']}"
    return f"{name} ({run['job_id']})" if with_id else name


def _lateness(run: dict[str, Any]) -> str | None:
    """How late the run started (queued, when it has not started)."""
    started = run["start_lateness_s"]
    return _seconds(started if started is not None else run["queued_lateness_s"])


def duration(run: dict[str, Any]) -> str | None:
    """From the first attempt's start to the run's end (None: not started or not finished)."""
    if run["started_at"] is None or run["finished_at"] is None:
        return None
    span = datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])
    return _seconds(span.total_seconds())


RUN_COLUMNS: tuple[Column, ...] = (
    ("ID", lambda run: run["id"]),
    ("JOB", job_of),
    ("KIND", lambda run: run["kind"]),
    ("SLOT", _slot),
    ("STATE", lambda run: run["state"]),
    ("ATTEMPTS", lambda run: run["attempts"]),
    ("LATENESS", _lateness),
    ("REASON", lambda run: run["reason"]),
)
WIDE_RUN_COLUMNS: tuple[Column, ...] = (
    *RUN_COLUMNS,
    ("QUEUE", lambda run: run["queue"]),
    ("QUEUED LATE", lambda run: _seconds(run["queued_lateness_s"])),
    ("STARTED", lambda run: when(run["started_at"])),
    ("DURATION", duration),
    ("NEXT ATTEMPT", lambda run: when(run["next_attempt_at"])),
    ("JOB VERSION", lambda run: run["job_version"]),
)
"""``runs list -o wide``: what the table shows, then the queue, both latenesses, when it started,
how long it took, its next attempt and the version of the job it ran."""


def runs_table(runs: list[dict[str, Any]], columns: Sequence[Column] = RUN_COLUMNS) -> str:
    return columns_table(columns, runs) if runs else "no runs"


def wide_runs_table(runs: list[dict[str, Any]]) -> str:
    return runs_table(runs, WIDE_RUN_COLUMNS)


def run_detail_view(run: dict[str, Any]) -> str:
    parts = [
        fields(
            [
                ("id", run["id"]),
                ("job", job_of(run, with_id=True)),
                ("kind", run["kind"]),
                ("slot", when(run["slot"])),
                ("fires at", when(run.get("due_at"))),  # jittered: the slot plus its offset
                ("state", run["state"] if not run["reason"] else f"{run['state']} ({run['reason']})"),
                ("attempts", run["attempts"]),
                ("queued", _late(run["queued_at"], run["queued_lateness_s"], _due(run))),
                ("started", _late(run["started_at"], run["start_lateness_s"], _due(run))),
                ("finished", when(run["finished_at"])),
                ("next attempt", when(run["next_attempt_at"])),
                ("trace", run.get("trace_id")),  # older servers do not send it
            ]
        )
    ]
    attempts = run.get("attempt_details") or []
    if attempts:
        parts.append("\nattempts:")
        parts.append(
            table(
                ["#", "WORKER", "STARTED", "FINISHED", "OUTCOME", "STATUS", "EXIT", "ERROR"],
                [
                    [
                        a["number"], a["worker"], when(a["started_at"]), when(a["finished_at"]), a["outcome"],
                        a["status_code"], a["exit_code"], a["error"],
                    ]
                    for a in attempts
                ],
            )
        )  # fmt: skip
        parts += _headers(attempts)
        parts += _outputs_so_far(attempts)
    events = run.get("events") or []
    if events:
        parts.append("\nhistory:")
        parts.append(
            table(
                ["AT", "FROM", "TO", "ATTEMPT", "NODE", "DETAIL"],
                [
                    [when(e["at"]), e["previous"], e["state"], e["attempt"], e["node"], e["detail"]]
                    for e in events
                ],
            )
        )
    return "\n".join(parts)


def _headers(attempts: list[dict[str, Any]]) -> list[str]:
    """Each HTTP attempt's request headers, as sent, and those its target answered with
    (credentials shown ``[redacted]``)."""
    parts = []
    for attempt in attempts:
        for key, title in (("request_headers", "headers sent"), ("response_headers", "headers received")):
            headers = attempt.get(key)  # older servers send no response_headers
            if headers:
                lines = "\n".join(f"  {name}: {value}" for name, value in headers.items())
                parts.append(f"\n{title} (attempt {attempt['number']}):\n{lines}")
    return parts


def _outputs_so_far(attempts: list[dict[str, Any]]) -> list[str]:
    """The output so far of each attempt still running (its worker writes it about once a second)."""
    parts = []
    for attempt in attempts:
        if attempt["finished_at"] is None and attempt.get("output"):
            text = attempt["output"].rstrip("\n")
            parts.append(f"\noutput so far (attempt {attempt['number']}, running):\n{text}")
    return parts


@shared.group(*shared.GLOBAL)
def runs(**_: Any) -> None:
    """Read runs: what fired, when, how late, and how each attempt went."""


@runs.command("list")
@click.option("--job", help="Only this job's runs (id or TEAM/NAME).", shell_complete=complete_job)
@click.option("--state", "states", multiple=True, type=click.Choice(STATES, case_sensitive=False))
@click.option("--team", help="Only runs of this team's jobs.")
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    type=click.Choice(REASONS),
    help="Only runs skipped for this reason.",
)
@click.option("--since", help="Only slots at or after this instant (RFC 3339).")
@click.option("--until", help="Only slots before this instant (RFC 3339).")
@click.option("--late", is_flag=True, help="Only runs that started over 1 s after they were due.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--cursor", help="Continue from a cursor a previous list printed.")
@watch_options
@api_command(wide=True)
def list_(
    ctx: Ctx,
    job: str | None,
    states: tuple[str, ...],
    limit: int,
    cursor: str | None,
    watching: bool,
    interval: float | None,
    **filters: Any,
) -> None:
    """List runs, newest first by slot (-o wide: with queue, start, duration and next attempt;
    --watch: again whenever the list changes)."""
    wanted = [state.upper() for state in states]
    watch_s = every(watching, interval)
    filtered = any(filters.values())
    job_id = ctx.client.get_job(job)["id"] if job is not None and filtered and "/" in job else job

    def page(size: int, after: str | None) -> Page[Run]:
        if job_id is None or filtered:
            return ctx.client.list_runs(job_id=job_id, states=wanted, limit=size, cursor=after, **filters)
        return ctx.client.list_job_runs(job_id, states=wanted, limit=size, cursor=after)

    show_listing(ctx, page, limit, cursor, runs_table, wide_runs_table, watch_s)


@runs.command()
@click.argument("run_id")
@api_command
def get(ctx: Ctx, run_id: str) -> None:
    """Show one run with its attempts and history."""
    ctx.emit(ctx.client.get_run(run_id), run_detail_view)


def output_view(data: dict[str, Any]) -> str:
    """Each attempt's kept output; a header line per attempt when there are several."""
    attempts = data["attempts"]
    lines = []
    for attempt in attempts:
        if len(attempts) > 1:
            lines.append(f"== attempt {attempt['number']} ({attempt['outcome'] or 'running'})")
        text = (attempt["output"] or "").rstrip("\n")
        if text:
            lines.append(text)
    return "\n".join(lines)


@runs.command()
@click.argument("run_id")
@api_command
def logs(ctx: Ctx, run_id: str) -> None:
    """Print what the run's attempts wrote (up to the server's --output-tail-bytes each)."""
    ctx.emit(ctx.client.get_run_output(run_id), output_view)
