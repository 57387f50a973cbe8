"""``cronwheel apply -f jobs.yaml``: make the server's jobs match a file, declaratively.

Jobs are matched by (team, name). Each file job is created when the server has none of that name,
replaced (PUT, conditional on the version just read) when its definition differs, and left alone
when it matches, so applying the same file twice changes nothing the second time. With
``--prune``, jobs of the file's teams that the file no longer lists are deleted. ``--dry-run``
prints the plan and changes nothing.

Pruning a team down to no jobs at all is never inferred: a file (or a ``{team: ..., jobs: []}``
section) that lists no job for a team is refused with ``--prune`` unless ``--team`` names that
team, because an emptied or truncated file looks exactly like that and would delete every job of
the team. ``--team`` (repeatable) says which teams the apply is about: the file may then hold
only their jobs, and ``--prune`` deletes what it does not list of theirs, all of them if need be.

The file holds jobs as a list, as ``{team: ..., jobs: [...]}`` (the team is the default for
jobs that name none), or one job per YAML document. A section may also hold the team's
``calendars: [...]`` (as ``cronwheel export`` writes them): each is created or replaced before the
jobs, which may list it, and never deleted (``--prune`` is about jobs). Definitions are checked and
normalized with the API's own schema (:mod:`cronwheel.api.schemas.jobs`) before anything is sent,
so a typo in the fifth job stops the whole apply before the first one is written.

A job as the API returns it (``cronwheel jobs get -o yaml`` or ``-o json``) applies as it is: the
fields the server owns (:func:`cronwheel.cli.definition.server_fields`: id, version, paused,
next_run_at, last_run ...) are read-only and dropped before anything is compared or sent; such a
file is a snapshot, whose status is stale as soon as the job fires. ``paused`` is the one a reader
may take for a setting, so when it disagrees with the server a note says that apply left it (pause
and resume are their own commands). A credential the server masked as ``***`` for a reader
without the write scope is refused, so that the mask is never written over the real value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import click

from cronwheel.cli.calendars import plan_calendars, write_calendars
from cronwheel.cli.definition import MASKED_TEXT, definition, masked_fields, server_fields
from cronwheel.cli.output import Ctx, api_command, load_documents
from cronwheel.targets.kinds import KINDS

_SECRET_PREFIXES = (
    "target.headers.",
    "target.env.",
    "target.metadata.",
    "target.user",  # and target.username: a broker's credentials
    "target.password",
    "target.token",
)


# the target types, which pydantic puts in an error's location (target.kafka.topic)
_TARGET_TAGS = tuple(KINDS)  # pydantic names the member of the target union in an error's loc


class InvalidFile(click.ClickException):
    exit_code = 2


@dataclass
class Update:
    key: str
    job_id: str
    version: int
    spec: dict[str, Any]
    changes: list[tuple[str, Any, Any]]


@dataclass
class Plan:
    create: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    update: list[Update] = field(default_factory=list)
    delete: list[tuple[str, str, int]] = field(default_factory=list)  # key, id, version
    unchanged: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what apply left alone that the file disagrees with

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


# -- the file ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobsFile:
    path: str
    jobs: list[Any]  # raw job mappings, a section's team filled in
    sections: frozenset[str]  # teams of ``{team: ..., jobs: [...]}`` sections, with jobs or not
    calendars: list[tuple[str, Any]] = field(default_factory=list)  # (section's team, raw calendar)


def file_jobs(path: str) -> JobsFile:
    """The raw job mappings of the file, with a section's default team filled in."""
    found: list[dict[str, Any]] = []
    sections: set[str] = set()
    calendars: list[tuple[str, Any]] = []
    for document in load_documents(path):
        if isinstance(document, list):
            found += document
        elif isinstance(document, dict) and "jobs" in document:
            extra = set(document) - {"team", "jobs", "calendars"}
            if extra:
                unknown = ", ".join(sorted(extra))
                raise InvalidFile(
                    f"{path}: unknown top-level key(s) {unknown} (expected team, calendars, jobs)"
                )
            if not isinstance(document["jobs"], list):
                raise InvalidFile(f"{path}: 'jobs' must be a list")
            calendars += section_calendars(document, path)
            if isinstance(document.get("team"), str):
                sections.add(document["team"])
            for item in document["jobs"]:
                if isinstance(item, dict) and "team" in document and "team" not in item:
                    found.append({"team": document["team"], **item})
                else:
                    found.append(item)
        else:
            found.append(document)
    return JobsFile(path, found, frozenset(sections), calendars)


def section_calendars(section: dict[str, Any], path: str) -> list[tuple[str, Any]]:
    """The calendars of a ``{team: ..., calendars: [...], jobs: [...]}`` section."""
    listed = section.get("calendars", [])
    if not isinstance(listed, list):
        raise InvalidFile(f"{path}: 'calendars' must be a list")
    if listed and not isinstance(section.get("team"), str):
        raise InvalidFile(f"{path}: a section's calendars need its team")
    return [(section["team"], item) for item in listed]


def scope(file: JobsFile, specs: dict[str, dict[str, Any]], teams: tuple[str, ...], prune: bool) -> list[str]:
    """The teams this apply reads (and, with ``prune``, prunes): ``teams`` when given (the file
    may name no other), else the teams of the file's jobs. Refuses a prune that would empty a
    team the file names without listing a job of it, unless ``teams`` names it."""
    named = {spec["team"] for spec in specs.values()}
    if teams:
        strays = sorted((named | file.sections) - set(teams))
        if strays:
            raise InvalidFile(
                f"{file.path}: nothing applied; it holds team(s) {', '.join(strays)}, "
                f"not among --team {' '.join(teams)}"
            )
        return sorted(set(teams))
    source = "stdin" if file.path == "-" else file.path
    empty = sorted(file.sections - named)
    if prune and empty:
        raise InvalidFile(
            f"{source} lists no jobs for team(s) {', '.join(empty)}: --prune would delete every job "
            f"they have, so nothing was applied; to mean that, name them: "
            + " ".join(f"--team {team}" for team in empty)
        )
    if prune and not specs:
        raise InvalidFile(
            f"{source} lists no jobs, so --prune has no team to prune and nothing was applied; "
            "to delete every job of a team, name it: --prune --team TEAM"
        )
    return sorted(named)


def normalize(raw: list[Any], path: str) -> dict[str, dict[str, Any]]:
    """Every job checked and normalized (defaults filled in, instants in UTC), by ``team/name``;
    the server's own fields of a job read from the API left out."""
    # imported here, not at the top: pydantic costs every other command ~0.2 s of start-up
    from pydantic import ValidationError  # noqa: PLC0415

    from cronwheel.api.schemas.jobs import JobCreate  # noqa: PLC0415

    specs: dict[str, dict[str, Any]] = {}
    problems: list[str] = []
    owned = server_fields()  # read-only: dropped, never sent
    for index, item in enumerate(raw, start=1):
        label = f"job {index}"
        if isinstance(item, dict) and isinstance(item.get("team"), str) and isinstance(item.get("name"), str):
            label += f" ({item['team']}/{item['name']})"
        if not isinstance(item, dict):
            problems.append(f"{label}: must be a mapping of job fields")
            continue
        try:  # the schema and the schedule's checks, at once, on the fields a client defines
            job = JobCreate.model_validate({key: value for key, value in item.items() if key not in owned})
        except ValidationError as error:
            problems += [f"{label}: {_problem_text(detail)}" for detail in error.errors()]
            continue
        problems += [f"{label}: {where}: {MASKED_TEXT}" for where in masked_fields(job)]
        key = f"{job.team}/{job.name}"
        if key in specs:
            problems.append(f"{label}: {key} appears more than once")
        specs[key] = job.model_dump(mode="json")
    if problems:
        raise InvalidFile(f"{path}: nothing applied; fix these first:\n  " + "\n  ".join(problems))
    return specs


def paused_claims(raw: list[Any]) -> dict[str, bool]:
    """``paused`` as the file's jobs state it (a job read from the API), by ``team/name``."""
    return {
        f"{item['team']}/{item['name']}": item["paused"]
        for item in raw
        if isinstance(item, dict)
        and isinstance(item.get("paused"), bool)
        and "team" in item
        and "name" in item
    }


def job_problems(item: dict[str, Any]) -> list[str]:
    """What the API's schema (and the checks that need no server) refuse in one job mapping, as
    :func:`normalize` reads it (the server's own fields, such as ``paused``, left out)."""
    from pydantic import ValidationError  # noqa: PLC0415

    from cronwheel.api.schemas.jobs import JobCreate  # noqa: PLC0415

    owned = server_fields()
    try:
        JobCreate.model_validate({key: value for key, value in item.items() if key not in owned})
    except ValidationError as error:
        return [_problem_text(detail) for detail in error.errors()]
    return []


def _problem_text(detail: Any) -> str:
    """One error of the API's schema as a line: ``field: message``, or the checks' own sentence
    (``invalid schedule '61 * * * *': minute field ...``) where they give one."""
    whole = (detail.get("ctx") or {}).get("detail")
    if whole:
        return str(whole)
    where = ".".join(str(part) for part in detail["loc"] if part not in _TARGET_TAGS)
    return f"{where or 'job'}: {str(detail['msg']).removeprefix('Value error, ')}"


def server_spec(job: dict[str, Any]) -> dict[str, Any]:
    """A server job's definition, normalized the same way as the file's."""
    from pydantic import ValidationError  # noqa: PLC0415

    from cronwheel.api.schemas.jobs import JobCreate  # noqa: PLC0415

    projected = definition(job)
    try:
        return JobCreate.model_validate(projected).model_dump(mode="json")
    except ValidationError:
        return projected  # something this CLI's schema does not know: it differs


def changes(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Dotted paths whose values differ between ``old`` and ``new`` (a secret reference is one
    value: its change is shown whole)."""
    if (
        isinstance(old, dict)
        and isinstance(new, dict)
        and not prefix.endswith("payload.")
        and not _reference(old)
        and not _reference(new)
    ):
        found: list[tuple[str, Any, Any]] = []
        for key in [*old, *(k for k in new if k not in old)]:
            found += changes(old.get(key), new.get(key), f"{prefix}{key}.")
        return found
    return [] if old == new else [(prefix.rstrip("."), old, new)]


# -- plan and apply ------------------------------------------------------------------------------


def make_plan(
    ctx: Ctx, specs: dict[str, dict[str, Any]], teams: list[str], prune: bool, paused: dict[str, bool]
) -> Plan:
    """What to change so that the server's jobs of ``teams`` match ``specs``; ``paused``: what the
    file says of jobs' pause (not applied: a note where it differs)."""
    plan = Plan()
    live: dict[str, dict[str, Any]] = {}
    for team in teams:
        live.update(
            {f"{job['team']}/{job['name']}": dict(job) for job in ctx.client.iter_jobs(team=team, limit=1000)}
        )
    for key, spec in specs.items():
        current = live.get(key)
        note = _paused_note(key, paused.get(key), current)
        if note:
            plan.notes.append(note)
        if current is None:
            plan.create.append((key, spec))
            continue
        diff = changes(server_spec(current), spec)
        if diff:
            plan.update.append(Update(key, current["id"], current["version"], spec, diff))
        else:
            plan.unchanged.append(key)
    if prune:
        plan.delete = [
            (key, job["id"], job["version"]) for key, job in sorted(live.items()) if key not in specs
        ]
    return plan


def _paused_note(key: str, claimed: bool | None, current: dict[str, Any] | None) -> str | None:
    actual = False if current is None else bool(current.get("paused"))
    if claimed is None or claimed == actual:
        return None
    state = "will be created active" if current is None else f"is {'paused' if actual else 'active'}"
    return (
        f"note: {key}: the file says paused: {str(claimed).lower()}, the server's job {state}; apply "
        "leaves pausing alone (cronwheel jobs pause / resume)"
    )


def _reference(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secret"}


def _shown(path: str, value: Any) -> str:
    if _reference(value):  # a secret's name, not its value: safe, and worth seeing
        return f"{{secret: {value['secret']}}}"
    if path.startswith(_SECRET_PREFIXES) and value is not None:
        return "(hidden)"
    if path == "target.url" and isinstance(value, str):
        from cronwheel.targets.checks import redacted_url  # noqa: PLC0415 - yarl only when a URL is shown

        return repr(redacted_url(value))  # its user info and query may hold credentials
    return "(none)" if value is None else repr(value)


def plan_text(plan: Plan) -> list[str]:
    lines = [f"+ create {key}" for key, _ in plan.create]
    for update in plan.update:
        lines.append(f"~ update {update.key}")
        lines += [
            f"    {path}: {_shown(path, old)} -> {_shown(path, new)}" for path, old, new in update.changes
        ]
    lines += [f"- delete {key}" for key, _, _ in plan.delete]
    return lines


def plan_data(plan: Plan, dry_run: bool) -> dict[str, Any]:
    return {
        "dry_run": dry_run,
        "create": [key for key, _ in plan.create],
        "update": [{"job": u.key, "changes": [path for path, _, _ in u.changes]} for u in plan.update],
        "delete": [key for key, _, _ in plan.delete],
        "unchanged": plan.unchanged,
    }


def execute(ctx: Ctx, plan: Plan) -> None:
    for _, spec in plan.create:
        ctx.client.create_job(spec)
    for update in plan.update:
        ctx.client.replace_job(update.job_id, update.spec, if_version=update.version)
    for _, job_id, version in plan.delete:
        ctx.client.delete_job(job_id, if_version=version)


@click.command()
@click.option(
    "-f", "--file", "path", required=True, metavar="FILE", help="Jobs file (YAML or JSON; - for stdin)."
)
@click.option("--prune", is_flag=True, help="Delete jobs of the file's teams that the file does not list.")
@click.option(
    "--team",
    "teams",
    multiple=True,
    metavar="TEAM",
    help="The team(s) this file is for (repeat): the file may hold no other, and --prune may delete "
    "all of a team's jobs only when it is named here.",
)
@click.option("--dry-run", is_flag=True, help="Show what would change; change nothing.")
@api_command
def apply(ctx: Ctx, path: str, prune: bool, teams: tuple[str, ...], dry_run: bool) -> None:
    """Make the server's jobs match FILE (matched by team and name).

    \b
    Example jobs.yaml:
      team: data
      jobs:
        - name: nightly
          schedule: "0 3 * * *"
          timezone: Europe/Berlin
          target: {type: http, url: "https://hooks.example.com/nightly"}

    \b
    What `cronwheel export` and `cronwheel jobs get JOB -o yaml` print applies as it is; the
    fields the server owns (id, version, paused, next_run_at ...) are ignored.

    \b
    To delete every job of a team, prune it with a file that lists none, naming the team:
      echo '{team: data, jobs: []}' | cronwheel apply -f - --prune --team data
    """
    file = file_jobs(path)
    specs = normalize(file.jobs, path)
    plan = make_plan(ctx, specs, scope(file, specs, teams, prune), prune, paused_claims(file.jobs))
    calendars = plan_calendars(ctx, file.calendars, path)
    if not dry_run:
        write_calendars(ctx, calendars)  # first: the jobs may list them
    if not dry_run and not plan.empty:
        execute(ctx, plan)
    for note in plan.notes:
        click.echo(note, err=True)
    if ctx.output != "table":
        ctx.emit({**plan_data(plan, dry_run), **calendars.data()}, lambda data: "")
        return
    for line in [*calendars.text(), *plan_text(plan)]:
        click.echo(line)
    counts = f"{len(plan.create)} to create, {len(plan.update)} to update, {len(plan.delete)} to delete"
    if plan.empty:
        click.echo(f"No changes: {len(plan.unchanged)} job(s) already match {path}.")
    elif dry_run:
        click.echo(f"Dry run: {counts}, {len(plan.unchanged)} unchanged; nothing was changed.")
    else:
        click.echo(
            f"Applied: {len(plan.create)} created, {len(plan.update)} updated, {len(plan.delete)} deleted, "
            f"{len(plan.unchanged)} unchanged."
        )
