"""APScheduler (3.x) jobs from a Python module read with :mod:`ast`, never imported: every
``<scheduler>.add_job(...)`` call, every ``@<scheduler>.scheduled_job(...)`` decorator, and a
Flask-APScheduler ``JOBS = [{...}]`` list. The scheduler's ``timezone`` and ``job_defaults`` are
read from its constructor or ``configure(...)`` call.

Cron triggers follow APScheduler's defaults (fields below the least significant one given are at
their minimum); ``day_of_week`` counts from Monday = 0 and is rewritten for cron (see
:mod:`cronwheel.importers.weekdays`). Interval triggers become ``@every``, date triggers ``@at``.
The function becomes a python target, called as ``function(payload, ctx)`` with the job's
``args`` and ``kwargs`` in the payload, which the report says for each job.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronwheel.importers import pyconfig
from cronwheel.importers.apstriggers import Trigger, aware, trigger_of, trigger_schedule
from cronwheel.importers.draft import Draft, call_payload, finish, skipped
from cronwheel.importers.options import LABEL, Options
from cronwheel.importers.report import ImportResult, NoEquivalentError, Note, NoteKind, UnreadableInputError
from cronwheel.importers.timing import (
    MAX_GRACE_S,
    NO_LIMIT_S,
    fires_within,
    instant,
    known_zone,
    schedule_problem,
)
from cronwheel.schedule.jitter import MAX_JITTER_S

KNOWN = frozenset({"CronTrigger", "IntervalTrigger", "DateTrigger", "from_crontab", "datetime", "timedelta"})
_JOB_KEYS = {
    "id",
    "name",
    "func",
    "trigger",
    "args",
    "kwargs",
    "misfire_grace_time",
    "coalesce",
    "max_instances",
}
_IGNORED = {
    "replace_existing",
    "jobstore",
    "executor",
}  # where APScheduler keeps and runs it: no meaning here


@dataclass
class _Module:
    """What the module says about its scheduler and where its functions come from."""

    name: str  # the module's own import name, for functions defined in it
    imports: dict[str, str] = field(default_factory=dict)  # local name -> "package.module:name"
    zone: str | None = None
    defaults: dict[str, Any] = field(default_factory=dict)


def convert(text: str, options: Options, *, module: str = "jobs") -> ImportResult:
    """The jobs of an APScheduler module; ``module``: its import name (functions it defines are
    ``module:function``)."""
    tree = pyconfig.parse(text)
    context = _context(tree, module)
    found = _job_calls(tree, context)
    if not found:
        raise UnreadableInputError("no add_job(...) call, @scheduled_job decorator or JOBS = [...] list")
    entries: list[Draft | Note] = []
    given_zone = context.zone
    zone = known_zone(given_zone) or options.zone
    if given_zone is None:
        why = f"the scheduler names no timezone: APScheduler used the host's; imported as {zone}"
        entries.append(Note("file", NoteKind.TIMEZONE, why))
    elif zone != given_zone:
        why = f"the scheduler's timezone {given_zone!r} is not a known zone; imported as {zone}"
        entries.append(Note("file", NoteKind.TIMEZONE, why))
    entries.append(
        Note("file", NoteKind.TIMEOUT, f"APScheduler sets no time limit: timeout_s {NO_LIMIT_S:g}")
    )
    for where, spec in found:
        entries.append(spec if isinstance(spec, Note) else _job(spec, where, zone, context, options.now))
    return finish(entries, options.team)


def _context(tree: ast.Module, module: str) -> _Module:
    context = _Module(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                context.imports[alias.asname or alias.name] = f"{node.module}:{alias.name}"
        elif isinstance(node, ast.Call):
            name = pyconfig.dotted(node.func) or ""
            if name.endswith("Scheduler") or name.endswith(".configure"):
                _settings(node, context)
    return context


def _settings(call: ast.Call, context: _Module) -> None:
    for keyword in call.keywords:
        try:
            given = pyconfig.value(keyword.value, KNOWN) if keyword.arg else None
        except pyconfig.NotLiteralError:
            continue
        if keyword.arg == "timezone" and isinstance(given, str):
            context.zone = given
        elif keyword.arg == "job_defaults" and isinstance(given, dict):
            context.defaults.update(given)


def _job_calls(tree: ast.Module, context: _Module) -> list[tuple[str, dict[str, Any] | Note]]:
    """Each job found, in source order, as its add_job keywords (``func`` a reference)."""
    found: list[tuple[int, str, dict[str, Any] | Note]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (pyconfig.dotted(node.func) or "").endswith(".add_job"):
            where = f"line {node.lineno}: add_job"
            found.append((node.lineno, where, _add_job(node, where, context)))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                name = pyconfig.dotted(decorator.func) if isinstance(decorator, ast.Call) else None
                if isinstance(decorator, ast.Call) and (name or "").endswith(".scheduled_job"):
                    where = f"line {decorator.lineno}: @scheduled_job {node.name}"
                    spec = _arguments(
                        decorator.args, decorator.keywords, ("trigger", "args", "kwargs", "id", "name"), where
                    )
                    if isinstance(spec, dict):
                        spec["func"] = f"{context.name}:{node.name}"
                    found.append((decorator.lineno, where, spec))
        elif isinstance(node, ast.Assign) and [pyconfig.dotted(t) for t in node.targets] == ["JOBS"]:
            found += [(node.lineno, *item) for item in _flask_jobs(node.value)]
    return [(where, spec) for _, where, spec in sorted(found, key=lambda item: item[0])]


def _add_job(call: ast.Call, where: str, context: _Module) -> dict[str, Any] | Note:
    func = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "func"), None)
    reference = None if func is None else _reference(func, context)
    if reference is None:
        return skipped(
            where, f"the function {ast.unparse(func) if func else '(none)'} is not a name to import"
        )
    keywords = [k for k in call.keywords if k.arg != "func"]
    spec = _arguments(call.args[1:], keywords, ("trigger", "args", "kwargs", "id", "name"), where)
    if isinstance(spec, dict):
        spec["func"] = reference
    return spec


def _reference(node: ast.expr, context: _Module) -> str | None:
    """``package.module:function`` of a function given by name, by ``module.function`` or as
    APScheduler's text reference."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
        return text if ":" in text else None
    name = pyconfig.dotted(node)
    if name is None:
        return None
    if "." not in name:
        return context.imports.get(name, f"{context.name}:{name}")
    base, _, function = name.rpartition(".")
    return f"{base}:{function}"


def _arguments(
    args: list[ast.expr], keywords: list[ast.keyword], positional: tuple[str, ...], where: str
) -> dict[str, Any] | Note:
    """The call's arguments by name (positional ones named by ``positional``)."""
    spec: dict[str, Any] = {}
    nodes = dict(zip(positional, args, strict=False))
    nodes.update({k.arg: k.value for k in keywords if k.arg})
    for key, node in nodes.items():
        try:
            spec[key] = pyconfig.value(node, KNOWN)
        except pyconfig.NotLiteralError as error:
            return skipped(where, f"{key}={error} cannot be read without running the module")
    return spec


def _flask_jobs(node: ast.expr) -> list[tuple[str, dict[str, Any] | Note]]:
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else []
    found: list[tuple[str, dict[str, Any] | Note]] = []
    for index, item in enumerate(items):
        where = f"JOBS[{index}]"
        try:
            spec = pyconfig.value(item, KNOWN)
        except pyconfig.NotLiteralError as error:
            found.append((where, skipped(where, f"{error} cannot be read without running the module")))
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("func"), str) or ":" not in spec["func"]:
            found.append((where, skipped(where, "a job needs func: 'package.module:function'")))
        else:
            found.append((where, spec))
    return found


def _job(spec: dict[str, Any], where: str, zone: str, context: _Module, now: datetime) -> Draft | Note:
    func = str(spec["func"])
    name = spec.get("id") or spec.get("name") or func.rpartition(":")[2]
    draft = Draft(where, str(name))
    fields = {k: v for k, v in spec.items() if k not in _JOB_KEYS and k not in _IGNORED}
    trigger = trigger_of(spec.get("trigger"), fields)
    if trigger is None:
        return skipped(where, f"trigger {spec.get('trigger')!r} is not cron, interval or date")
    job_zone = known_zone(trigger.fields.get("timezone")) or zone
    try:
        schedule = trigger_schedule(trigger, job_zone, draft)
    except NoEquivalentError as error:
        return skipped(where, str(error))
    if schedule is None:
        return skipped(where, f"its {trigger.kind} trigger {_fields(trigger.fields)} has no cron spelling")
    problem = schedule_problem(schedule, job_zone)
    if problem is not None:
        return skipped(where, problem)
    function = func.partition(":")[2]
    draft.job = {
        "description": f"APScheduler job {name!r}: {func}"[:2000],
        "schedule": schedule,
        "timezone": job_zone,
        "target": {"type": "python", "function": func},
        "payload": call_payload(spec.get("args"), spec.get("kwargs")),
        "timeout_s": NO_LIMIT_S,
    }
    draft.note(
        NoteKind.TARGET,
        f"APScheduler called {function}(*args, **kwargs); cronwheel calls {func}(payload, ctx) with "
        "payload {args, kwargs}: the function must take those",
    )
    _window(trigger, job_zone, draft)
    _jitter(trigger.fields.get("jitter"), draft, now)
    _policies({**context.defaults, **spec}, draft, now)
    draft.job["labels"] = {LABEL: "apscheduler"}
    return draft


def _fields(fields: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in fields.items())


def _window(trigger: Trigger, zone: str, draft: Draft) -> None:
    for key, field_name in (("start_date", "start_at"), ("end_date", "end_at")):
        if trigger.kind == "interval" and key == "start_date":
            continue  # the interval's anchor
        given = trigger.fields.get(key)
        moment = aware(given, zone) if given is not None else None
        if moment is not None:
            draft.job[field_name] = instant(moment)
        elif given is not None:
            draft.note(NoteKind.DROPPED, f"{key} {given!r} is not a date this importer reads")


def _jitter(jitter: Any, draft: Draft, now: datetime) -> None:
    """APScheduler delays each fire by a random 0 to ``jitter`` seconds; cronwheel's window
    (``jitter_s``) delays each slot by an offset fixed by the job id and the slot, and must be
    shorter than every gap between two slots."""
    if not jitter:
        return
    if not isinstance(jitter, int | float) or jitter < 0 or jitter > MAX_JITTER_S:
        draft.note(NoteKind.DROPPED, f"jitter {jitter!r} is not a window of 0 to {MAX_JITTER_S:g} s")
    elif fires_within(draft.job["schedule"], draft.job["timezone"], jitter, now):
        draft.note(NoteKind.DROPPED, f"jitter {jitter:g}: not shorter than the gap between two fires")
    else:
        draft.job["jitter_s"] = float(jitter)
        draft.note(
            NoteKind.SCHEDULE,
            f"jitter {jitter:g}: jitter_s {jitter:g}, an offset fixed per slot by the job id, "
            "where APScheduler draws a random one at each fire",
        )


def _policies(spec: dict[str, Any], draft: Draft, now: datetime) -> None:
    grace = spec.get("misfire_grace_time", 1)
    coalesce = spec.get("coalesce", True)
    if grace is None:
        policy = "run_once" if coalesce else "catch_up"
        draft.job["misfire"] = {"policy": policy}
        draft.note(NoteKind.MISFIRE, f"misfire_grace_time None (no limit): misfire {policy}")
    elif isinstance(grace, int | float):
        draft.job["misfire"] = {"policy": "skip", "grace_s": min(float(grace), MAX_GRACE_S)}
        if coalesce and fires_within(draft.job["schedule"], draft.job["timezone"], grace, now):
            draft.note(
                NoteKind.MISFIRE,
                f"coalesce: APScheduler ran the missed runs within {grace:g} s once; cronwheel runs each",
            )
    instances = spec.get("max_instances", 1)
    draft.job["overlap"] = "forbid" if instances == 1 else "allow"
    if instances != 1:
        draft.note(
            NoteKind.OVERLAP,
            f"max_instances {instances}: overlap allow, which sets no limit on concurrent runs",
        )
