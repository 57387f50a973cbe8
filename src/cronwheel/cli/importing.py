"""``cronwheel import FORMAT FILE --team TEAM``: another scheduler's jobs as an apply file.

The jobs go to stdout or ``-o FILE``; the report (every change of meaning, every entry left
out, every command to run afterwards) to stderr or ``--report FILE``. Each job is checked with
the API's own schema, as ``cronwheel apply`` checks it; one it refuses is left out and reported.
Unreadable input (bad YAML, no CronJob ...) stops the command before anything is written.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import click
import yaml

from cronwheel.cli.apply import job_problems
from cronwheel.importers import apscheduler, celery, crontab, dkron, kubernetes
from cronwheel.importers.draft import NAME
from cronwheel.importers.options import Options
from cronwheel.importers.report import ImportResult, Note, NoteKind, UnreadableInputError
from cronwheel.importers.timing import known_zone

FORMATS = ("crontab", "k8s", "dkron", "celery", "apscheduler")


class UnreadableFile(click.ClickException):
    exit_code = 2


def convert(
    source: str, text: str, path: str, options: Options, system: bool, module: str | None
) -> ImportResult:
    """The importer of ``source`` on ``text`` (``path`` tells the file's form where it can)."""
    if source == "crontab":
        system = system or path == "/etc/crontab" or path.startswith("/etc/cron.d/")
        return crontab.convert(text, options, system=system)
    if source == "k8s":
        return kubernetes.convert(text, options)
    if source == "dkron":
        return dkron.convert(text, options)
    if source == "celery":
        return celery.convert(text, options, python=not path.endswith((".json", ".yaml", ".yml")))
    return apscheduler.convert(text, options, module=module or Path(path).stem)


def checked(result: ImportResult, team: str) -> ImportResult:
    """``result`` less the jobs the API's schema refuses, each reported with why."""
    kept = ImportResult(notes=list(result.notes))
    for job in result.jobs:
        problems = job_problems({"team": team, **job})
        if problems:
            why = "; ".join(problems)
            kept.notes.append(
                Note("output", NoteKind.SKIPPED, f"not imported: the API refuses it: {why}", job["name"])
            )
        else:
            kept.jobs.append(job)
    return kept


def report_text(result: ImportResult, source: str, path: str) -> str:
    counts: dict[str, int] = {}
    for note in result.notes:
        counts[note.kind.value] = counts.get(note.kind.value, 0) + 1
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())) or "no notes"
    lines = [f"imported {len(result.jobs)} job(s) from {source} {path}: {summary}"]
    return "\n".join([*lines, *(note.text() for note in result.notes)]) + "\n"


def _read(path: str) -> str:
    try:
        return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(f"cannot read {path}: {error.strerror}", param_hint="FILE") from None
    except UnicodeDecodeError:
        raise UnreadableFile(f"{path}: not UTF-8 text; nothing imported") from None


@click.command("import")
@click.argument("source", type=click.Choice(FORMATS), metavar="FORMAT")
@click.argument("path", metavar="FILE")
@click.option("--team", required=True, help="The team the jobs belong to.")
@click.option("-o", "--out", "out", metavar="FILE", help="Write the jobs file here (default: stdout).")
@click.option("--report", "report", metavar="FILE", help="Write the report here (default: stderr).")
@click.option("--report-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--timezone", metavar="ZONE", help="The zone of entries that name none (default: UTC, reported)."
)
@click.option("--system", is_flag=True, help="crontab: with a user field (/etc/crontab).")
@click.option(
    "--module", metavar="NAME", help="apscheduler: the file's import name (default: its file name)."
)
def import_(
    source: str,
    path: str,
    team: str,
    out: str | None,
    report: str | None,
    report_format: str,
    timezone: str | None,
    system: bool,
    module: str | None,
) -> None:
    """Turn FILE, another scheduler's jobs, into a `cronwheel apply -f` file and a report.

    \b
    FORMAT is one of:
      crontab      a crontab (--system for /etc/crontab and /etc/cron.d files)
      k8s          Kubernetes manifests (CronJobs; other kinds are passed over)
      dkron        Dkron's job list as its API returns it (JSON)
      celery       a Celery config module with beat_schedule (or its JSON/YAML form)
      apscheduler  a Python module with add_job calls, @scheduled_job or JOBS = [...]

    \b
    Example:
      cronwheel import crontab backup.cron --team ops -o jobs.yaml --report import.txt
      cronwheel apply -f jobs.yaml --dry-run
    """
    if not NAME.fullmatch(team):
        raise click.BadParameter(
            f"{team!r} is not a team name ([A-Za-z0-9._-], at most 100)", param_hint="--team"
        )
    if timezone is not None and known_zone(timezone) is None:
        raise click.BadParameter(f"unknown time zone {timezone!r}", param_hint="--timezone")
    text = _read(path)
    options = Options(team=team, now=datetime.now(UTC), timezone=timezone)
    try:
        result = checked(convert(source, text, path, options, system=system, module=module), team)
    except UnreadableInputError as error:
        raise UnreadableFile(f"{path}: {error}; nothing imported") from None
    header = f"# cronwheel import {source} {path} --team {team}: read the report before applying\n"
    document = header + yaml.safe_dump(result.apply_file(team), sort_keys=False, allow_unicode=True)
    shown = (
        json.dumps([note.data() for note in result.notes], indent=2) + "\n"
        if report_format == "json"
        else report_text(result, source, path)
    )
    _write(out, document, err=False)
    _write(report, shown, err=True)


def _write(path: str | None, text: str, *, err: bool) -> None:
    if path is None:
        click.echo(text, nl=False, err=err)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise click.BadParameter(f"cannot write {path}: {error.strerror}") from None
