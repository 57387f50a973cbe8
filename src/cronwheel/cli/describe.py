"""``cronwheel jobs describe JOB``: one job in one screen, as kubectl describe shows an object:
its definition, its next fire times (the API's schedule preview), its last runs and the
notification rules in force."""

from __future__ import annotations

from typing import Any

import click

from cronwheel.cli.completion import job_argument
from cronwheel.cli.jobs import job_view
from cronwheel.cli.notifications import rules_table
from cronwheel.cli.output import Ctx, api_command
from cronwheel.cli.runs import runs_table
from cronwheel.cli.schedule import fire_line


@click.command()
@job_argument
@click.option(
    "--fires", default=5, show_default=True, type=click.IntRange(1, 100), help="Next fire times shown."
)
@click.option("--runs", default=5, show_default=True, type=click.IntRange(1, 100), help="Last runs shown.")
@api_command
def describe(ctx: Ctx, job: str, fires: int, runs: int) -> None:
    """Show a job whole: definition, next fire times, last runs, notification rules (JOB: id or
    TEAM/NAME). -o json/yaml: the same as one document."""
    found = ctx.client.get_job(job)
    preview = ctx.client.preview_schedule(
        found["schedule"],
        timezone=found["timezone"],
        count=fires,
        dst_gap=found["dst_gap"],
        dst_fold=found["dst_fold"],
        seed=found["id"],
        jitter_s=found.get("jitter_s") or None,
    )
    data = {
        "job": found,
        "next_fires": preview["fires"],
        "runs": ctx.client.list_job_runs(found["id"], limit=runs).items,
        "notifications": ctx.client.get_job_notifications(found["id"]),
    }
    ctx.emit(data, description)


def description(data: dict[str, Any]) -> str:
    """The sections of :func:`describe`, each under its heading."""
    job = data["job"]
    fires = [fire_line(fire) for fire in data["next_fires"]] or ["  (no fire times)"]
    heading = f"Next fires ({job['timezone']}, UTC)"
    if job["paused"]:
        heading += ": paused, these are the schedule's"
    return "\n".join(
        [
            job_view(job),
            "",
            heading + ":",
            *fires,
            "",
            "Last runs:",
            _indented(runs_table(data["runs"])),
            "",
            "Notifications:",
            _indented(rules_table(data["notifications"])),
        ]
    )


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
