"""``cronwheel jobs backfill``, ``cronwheel jobs backfills`` and ``cronwheel jobs cancel-backfill``:
record runs for a job's past slots, follow them, and stop them.

The server records the runs at its own bounded rate; ``backfill`` then polls the job's backfills
and draws a progress bar of the slots decided (created, or found with a run) over the total, on
stderr, until the backfill is through (``--no-wait``: return at once).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click

from cronwheel.cli.completion import job_argument
from cronwheel.cli.output import ApiFailure, Ctx, api_command, fields, table, when
from cronwheel.client.errors import Invalid

POLL_S = 1.0  # between two reads of a backfill's progress
BAR_WIDTH = 30
pause: Callable[[float], None] = time.sleep  # how the progress loop waits (tests replace it)


@click.command()
@job_argument
@click.option("--from", "start", required=True, metavar="RFC3339", help="First instant, with an offset.")
@click.option(
    "--to", "end", required=True, metavar="RFC3339", help="Last instant, with an offset; not ahead."
)
@click.option(
    "--dry-run", is_flag=True, help="List the slots it would create and those with runs; write nothing."
)
@click.option("--yes", "confirm", is_flag=True, help="Confirm a range of more slots than the server's limit.")
@click.option(
    "--wait/--no-wait", default=True, show_default=True, help="Show the progress until it is through."
)
@api_command
def backfill(ctx: Ctx, job: str, start: str, end: str, dry_run: bool, confirm: bool, wait: bool) -> None:
    """Record a run for every slot of JOB in [--from, --to] that has none (a repeat creates nothing)."""
    try:
        answer: dict[str, Any] = dict(
            ctx.client.backfill_job(job, start, end, dry_run=dry_run, confirm=confirm)
        )
    except Invalid as error:
        if error.problem.type.endswith(":backfill-confirm-required"):
            hint = "pass --yes to backfill them all, or --dry-run to list them"
            raise ApiFailure(f"{error}\n  ({hint})", 2) from None
        raise
    if dry_run:
        ctx.emit(answer, plan_view)
        return
    if wait and answer["state"] == "running":
        answer = follow(ctx, job, answer)
    ctx.emit(answer, summary)


@click.command()
@job_argument
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@api_command
def backfills(ctx: Ctx, job: str, limit: int) -> None:
    """List JOB's backfills with their progress, newest first."""
    found = ctx.client.job_backfills(job, limit=limit)
    ctx.emit(found, backfills_table)


@click.command("cancel-backfill")
@job_argument
@click.argument("backfill_id")
@api_command
def cancel_backfill(ctx: Ctx, job: str, backfill_id: str) -> None:
    """Stop JOB's running backfill BACKFILL_ID: no run is created for it after this; the runs it
    created stay. One already done or cancelled is refused (exit 2)."""
    ctx.emit(dict(ctx.client.cancel_backfill(job, backfill_id)), summary)


def follow(ctx: Ctx, job: str, backfill: dict[str, Any]) -> dict[str, Any]:
    """Poll ``backfill`` until it is no longer running, drawing slots decided / total."""
    _draw(backfill)
    while backfill["state"] == "running":
        pause(POLL_S)
        backfill = dict(ctx.client.get_backfill(job, backfill["id"]))
        _draw(backfill)
    click.echo(err=True)
    return backfill


def progress_bar(decided: int, total: int, width: int = BAR_WIDTH) -> str:
    """``[#####-----] 5/10 slots``: the slots decided (created, or found with a run) of the total."""
    filled = width if total <= 0 else min(width, width * decided // total)
    return f"[{'#' * filled}{'-' * (width - filled)}] {decided}/{total} slots"


def _draw(backfill: dict[str, Any]) -> None:
    bar = progress_bar(backfill["created"] + backfill["existing"], backfill["total"])
    click.echo(f"\rbackfill {bar}", err=True, nl=False)


def summary(backfill: dict[str, Any]) -> str:
    rest = "never recorded: cancelled, or its job deleted" if backfill["state"] == "cancelled" else "to go"
    return (
        f"backfill {backfill['id']} {backfill['state']}: {backfill['created']} created, "
        f"{backfill['existing']} already had runs, {backfill['remaining']} {rest} (of {backfill['total']})"
    )


def plan_view(plan: dict[str, Any]) -> str:
    facts = [
        ("from", when(plan["from"])),
        ("to", when(plan["to"])),
        ("slots", plan["total"]),
        ("to create", len(plan["create"])),
        ("with runs", len(plan["existing"])),
        ("needs --yes", plan["confirm_required"]),
    ]
    return "\n".join([fields(facts), "", table(["SLOT", "ACTION"], _actions(plan))])


def _actions(plan: dict[str, Any]) -> list[tuple[str | None, str]]:
    rows = [(slot, "create") for slot in plan["create"]] + [(slot, "has a run") for slot in plan["existing"]]
    return [(when(slot), action) for slot, action in sorted(rows)]


def backfills_table(items: list[dict[str, Any]]) -> str:
    return table(
        ["ID", "FROM", "TO", "STATE", "CREATED", "EXISTING", "TOTAL", "NEXT SLOT"],
        [
            (b["id"], when(b["from"]), when(b["to"]), b["state"], b["created"], b["existing"], b["total"],
             when(b["next_slot"]))
            for b in items
        ],
    )  # fmt: skip
