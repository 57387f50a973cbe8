"""``cronwheel export``: jobs as a file that ``cronwheel apply -f`` takes back unchanged.

One YAML document per team, ``{team: T, jobs: [...]}``, teams and their jobs in order of name.
Each job is its definition (:func:`cronwheel.cli.definition.definition`): every field a client
defines, defaults included, in the schema's order, and none of the server's own (ids, versions,
cursors, runs, pause). Writing the defaults pins them: applied to a server whose defaults have
changed, an export still makes the same jobs. Two exports of the same jobs are equal byte for byte.

Secrets are written as the references jobs hold (``{secret: NAME}``), never as values. A value a
job holds in clear is written as the API shows it to the caller; to a reader without the write
scope a credential shows as ``***``, which a note on stderr names and ``apply`` refuses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import groupby
from typing import Any

import click
import yaml

from cronwheel.cli.calendars import calendar_definition
from cronwheel.cli.definition import MASKED_TEXT, definition, masked_in
from cronwheel.cli.output import Ctx, api_command
from cronwheel.client import NotFound

PAGE = 500  # jobs per request; export follows the API's cursors to the last page


def read_jobs(ctx: Ctx, teams: Iterable[str]) -> list[dict[str, Any]]:
    """Every job of ``teams`` (none: of every team the caller can see), by team and name."""
    found: list[dict[str, Any]] = []
    scopes: list[str | None] = [*sorted(set(teams))] or [None]
    for team in scopes:
        found += [dict(job) for job in ctx.client.iter_jobs(team=team, limit=PAGE)]
    return sorted(found, key=lambda job: (job["team"], job["name"]))


def sections(
    jobs: list[dict[str, Any]], teams: Iterable[str], calendars: dict[str, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """``{team: T, calendars: [...], jobs: [...]}`` per team, each job without its team (the
    calendars only when the team has some); a team named in ``teams`` that has no job gets an
    empty section (so that ``apply --prune --team T`` empties it)."""
    found = {
        team: [_without_team(job) for job in group] for team, group in groupby(jobs, key=lambda j: j["team"])
    }
    for team in teams:
        found.setdefault(team, [])
    own = calendars or {}
    return [
        {"team": team, **({"calendars": own[team]} if own.get(team) else {}), "jobs": found[team]}
        for team in sorted(found)
    ]


def read_calendars(ctx: Ctx, teams: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The calendars of each of ``teams``, by name, as apply takes them back (none of a team the
    token does not see, as it sees none of its jobs)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for team in teams:
        try:
            found[team] = [calendar_definition(dict(c)) for c in ctx.client.iter_calendars(team, limit=PAGE)]
        except NotFound:
            found[team] = []
    return found


def _without_team(job: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in definition(job).items() if key != "team"}


def as_yaml(documents: list[dict[str, Any]]) -> str:
    if not documents:
        return "[]"
    return yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True, explicit_start=True).rstrip()


@click.command()
@click.option(
    "--team",
    "teams",
    multiple=True,
    metavar="TEAM",
    help="Only this team's jobs (repeat); default: every team the token can see.",
)
@api_command
def export(ctx: Ctx, teams: tuple[str, ...]) -> None:
    """Print jobs as a file that `cronwheel apply -f` takes back unchanged (YAML; -o json: a
    JSON list of jobs).

    \b
    Examples:
      cronwheel export > jobs.yaml
      cronwheel export --team data | cronwheel apply -f - --context staging
    """
    jobs = read_jobs(ctx, teams)
    for job in jobs:
        for where in masked_in(job):
            click.echo(f"note: {job['team']}/{job['name']}: {where}: {MASKED_TEXT}", err=True)
    if ctx.output == "json":
        click.echo(json.dumps([definition(job) for job in jobs], indent=2))
    else:
        calendars = read_calendars(ctx, sorted({*teams, *(job["team"] for job in jobs)}))
        click.echo(as_yaml(sections(jobs, teams, calendars)))
