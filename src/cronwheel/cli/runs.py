"""``cronwheel runs ...``: read the record of runs, their attempts and their history."""

from __future__ import annotations

from typing import Any

import click

from cronwheel.cli.jobs import STATES
from cronwheel.cli.output import Ctx, api_command, fields, table, when
from cronwheel.client import collect
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


def runs_table(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "no runs"
    return table(
        ["ID", "JOB", "KIND", "SLOT", "STATE", "ATTEMPTS", "LATENESS", "REASON"],
        [
            [
                run["id"], job_of(run), run["kind"], _slot(run), run["state"], run["attempts"],
                _seconds(run["start_lateness_s"] if run["start_lateness_s"] is not None
                         else run["queued_lateness_s"]),
                run["reason"],
            ]
            for run in runs
        ],
    )  # fmt: skip


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
        parts += _sent_headers(attempts)
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


def _sent_headers(attempts: list[dict[str, Any]]) -> list[str]:
    """Each HTTP attempt's request headers, as sent (credentials shown ``[redacted]``)."""
    parts = []
    for attempt in attempts:
        headers = attempt.get("request_headers")
        if headers:
            lines = "\n".join(f"  {name}: {value}" for name, value in headers.items())
            parts.append(f"\nheaders sent (attempt {attempt['number']}):\n{lines}")
    return parts


@click.group()
def runs() -> None:
    """Read runs: what fired, when, how late, and how each attempt went."""


@runs.command("list")
@click.option("--job", help="Only this job's runs (id or TEAM/NAME).")
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
@api_command
def list_(
    ctx: Ctx, job: str | None, states: tuple[str, ...], limit: int, cursor: str | None, **filters: Any
) -> None:
    """List runs, newest first (by slot)."""
    wanted = [state.upper() for state in states]
    filtered = any(filters.values())
    job_id = ctx.client.get_job(job)["id"] if job is not None and filtered and "/" in job else job

    def fetch(size: int, after: str | None) -> Page[Run]:
        if job_id is None or filtered:
            return ctx.client.list_runs(job_id=job_id, states=wanted, limit=size, cursor=after, **filters)
        return ctx.client.list_job_runs(job_id, states=wanted, limit=size, cursor=after)

    items, cursor = collect(fetch, limit, cursor)
    ctx.emit({"items": items, "next_cursor": cursor}, lambda data: runs_table(data["items"]))
    if cursor and ctx.output == "table":
        click.echo(f"(more: --cursor {cursor})", err=True)


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
