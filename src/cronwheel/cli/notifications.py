"""``cronwheel notifications ...``: notification rules (a team's default, a job's own) and a test.

Rules are written as YAML or JSON (a list of rules, or ``{"rules": [...]}``), as the API takes them::

    - conditions: [failure, recovery]          # also: change, missed, late
      channels:
        - {type: webhook, url: https://hooks.example.com/cw, signing_secret: webhook-signing}
        - {type: slack, url: {secret: slack-ops}}   # a team secret holding the URL
        - {type: email, to: [ops@example.com]}
    - conditions: [missed]
      deadline_s: 600                           # a slot must be terminal 10 min after its time
      channels: [{type: email, to: [oncall@example.com]}]
"""

from __future__ import annotations

from typing import Any

import click
import yaml

from cronwheel.cli import global_options as shared
from cronwheel.cli.completion import complete_job
from cronwheel.cli.output import Ctx, api_command, table


def rules_table(data: dict[str, Any]) -> str:
    """The rules in force and where they come from (the job's own, its team's, none)."""
    if not data["rules"]:
        return f"no notification rules (source: {data['source']})"
    rows = []
    for rule in data["rules"]:
        channels = ", ".join(f"{c['type']}:{_where(c)}" for c in rule["channels"])
        rows.append(
            [",".join(rule["conditions"]), f"{rule['deadline_s']:g}", f"{rule['late_s']:g}", channels]
        )
    return f"source: {data['source']}\n" + table(["CONDITIONS", "DEADLINE S", "LATE S", "CHANNELS"], rows)


def _where(channel: dict[str, Any]) -> str:
    """Where a channel sends: its recipients, its URL, or the secret holding its URL."""
    if channel["type"] == "email":
        return ", ".join(channel["to"])
    url = channel["url"]
    return f"(secret {url['secret']})" if isinstance(url, dict) else str(url)


def _one_of(team: str | None, job: str | None) -> None:
    if (team is None) == (job is None):
        raise click.UsageError("give exactly one of --team TEAM or --job JOB (an id or TEAM/NAME)")


def _read_rules(path: str) -> list[Any]:
    try:
        with click.open_file(path) as handle:
            data = yaml.safe_load(handle)
    except (OSError, yaml.YAMLError) as error:
        raise click.BadParameter(f"cannot read rules: {error}", param_hint="FILE") from None
    if isinstance(data, dict) and set(data) == {"rules"}:
        data = data["rules"]
    if data is None:
        data = []
    if not isinstance(data, list):
        raise click.BadParameter("expected a list of rules (or {rules: [...]})", param_hint="FILE")
    return data


@shared.group(*shared.GLOBAL)
def notifications(**_: Any) -> None:
    """Notification rules: on failure, recovery, change, a missed slot (dead-man's switch), lateness."""


@notifications.command()
@click.option("--team", default=None, help="The team's default rules.")
@click.option(
    "--job",
    default=None,
    help="The rules in force for this job (an id or TEAM/NAME).",
    shell_complete=complete_job,
)
@api_command
def get(ctx: Ctx, team: str | None, job: str | None) -> None:
    """Show the team's default rules, or those in force for a job."""
    _one_of(team, job)
    data = ctx.client.get_team_notifications(team) if team else ctx.client.get_job_notifications(job or "")
    ctx.emit(data, rules_table)


@notifications.command("set")
@click.argument("file", metavar="FILE")
@click.option("--team", default=None, help="Replace the team's default rules.")
@click.option(
    "--job",
    default=None,
    help="Give this job rules of its own (an id or TEAM/NAME).",
    shell_complete=complete_job,
)
@api_command
def set_(ctx: Ctx, file: str, team: str | None, job: str | None) -> None:
    """Replace rules from FILE (YAML or JSON; - for standard input; an empty list clears)."""
    _one_of(team, job)
    rules = _read_rules(file)
    if team:
        data = ctx.client.set_team_notifications(team, rules)
    else:
        data = ctx.client.set_job_notifications(job or "", rules)
    ctx.emit(data, rules_table)


@notifications.command()
@click.option("--job", required=True, help="The job (an id or TEAM/NAME).", shell_complete=complete_job)
@api_command
def reset(ctx: Ctx, job: str) -> None:
    """Drop the job's own rules: its team's default applies again."""
    ctx.client.delete_job_notifications(job)
    ctx.emit({"reset": job}, lambda data: f"job {data['reset']} follows its team's default rules")


@notifications.command("test")
@click.option("--team", required=True, help="The team.")
@click.option("--job", default=None, help="A job of the team (its name): its rules, else the team's.")
@api_command
def test_(ctx: Ctx, team: str, job: str | None) -> None:
    """Send a sample notification through the channels of the rules in force."""
    data = ctx.client.send_test_notification(team, job)
    if data["channels"] == 0:
        raise click.ClickException(
            f"no notification rules apply to {team}{'/' + job if job else ''}: nothing sent"
        )
    ctx.emit(data, lambda d: f"queued test notification {d['notification_id']} to {d['channels']} channel(s)")
