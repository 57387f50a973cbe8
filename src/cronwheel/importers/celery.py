"""Celery beat schedules: ``beat_schedule`` (or ``CELERYBEAT_SCHEDULE``, or
``app.conf.beat_schedule``) of a Python configuration module read with :mod:`ast`, never
imported; or the same mapping as JSON/YAML, with ``schedule`` as a number of seconds or
``{crontab: {minute: ..., hour: ...}}``.

``crontab(...)`` becomes a cron schedule (Celery's day fields must both match; cron's either:
see :mod:`cronwheel.importers.days`), a number or ``timedelta`` an ``@every``. The task becomes
a python target when its name is a dotted path (``proj.tasks.add`` -> ``proj.tasks:add``); the
function is then called as ``function(payload, ctx)``, so it must be a plain function taking
those (a Celery task object is refused by the worker): the report says so for each.
"""

from __future__ import annotations

import ast
import re
from datetime import timedelta
from typing import Any

import yaml

from cronwheel.importers import pyconfig
from cronwheel.importers.days import both_days, field_text
from cronwheel.importers.draft import Draft, call_payload, finish, skipped
from cronwheel.importers.options import LABEL, Options
from cronwheel.importers.report import ImportResult, NoEquivalentError, Note, NoteKind, UnreadableInputError
from cronwheel.importers.timing import (
    EVERY_FROM_EPOCH,
    MAX_GRACE_S,
    NO_LIMIT_S,
    every,
    known_zone,
    schedule_problem,
)

_KNOWN = frozenset({"crontab", "timedelta", "schedule", "solar"})
_SCHEDULE_NAMES = ("beat_schedule", "CELERYBEAT_SCHEDULE")
_ZONE_NAMES = ("timezone", "CELERY_TIMEZONE")
_CRONTAB = ("minute", "hour", "day_of_week", "day_of_month", "month_of_year")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def convert(text: str, options: Options, *, python: bool = True) -> ImportResult:
    """The beat entries of a Python module (``python``) or of a JSON/YAML mapping."""
    schedule, zone_given = _python(text) if python else _data(text)
    zone = known_zone(zone_given) or "UTC"
    entries: list[Draft | Note] = []
    if zone_given is not None and zone != zone_given:
        entries.append(Note("file", NoteKind.TIMEZONE, f"timezone {zone_given!r} is not a known zone: UTC"))
    entries.append(
        Note(
            "file",
            NoteKind.TIMEOUT,
            f"beat sets no time limit: every job has timeout_s {NO_LIMIT_S:g}, the most",
        )
    )
    for key, entry in schedule.items():
        where = f"beat_schedule[{key!r}]"
        if isinstance(entry, pyconfig.NotLiteralError):
            entries.append(skipped(where, f"{entry} cannot be read without running the module"))
        elif not isinstance(entry, dict) or not isinstance(entry.get("task"), str):
            entries.append(skipped(where, "an entry needs a task name and a schedule"))
        else:
            entries.append(_entry(str(key), entry, zone, where))
    return finish(entries, options.team)


def _python(text: str) -> tuple[dict[str, Any], str | None]:
    module = pyconfig.parse(text)
    schedule: dict[str, Any] | None = None
    zone = None
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            name = (pyconfig.dotted(node.targets[0]) or "").rsplit(".", 1)[-1]
            if name in _SCHEDULE_NAMES and isinstance(node.value, ast.Dict):
                schedule = _entries(node.value)
            elif name in _ZONE_NAMES:
                try:
                    zone = str(pyconfig.value(node.value, _KNOWN))
                except pyconfig.NotLiteralError:
                    zone = None
    if schedule is None:
        raise UnreadableInputError("no beat_schedule = {...} (or CELERYBEAT_SCHEDULE) dict at module level")
    return schedule, zone


def _entries(node: Any) -> dict[str, Any]:
    """Each entry's value, or the error that stopped reading it (one bad entry, not the file)."""
    found: dict[str, Any] = {}
    for key, item in zip(node.keys, node.values, strict=True):
        label = pyconfig.value(key, _KNOWN) if key is not None else "**"
        try:
            found[str(label)] = pyconfig.value(item, _KNOWN)
        except pyconfig.NotLiteralError as error:
            found[str(label)] = error
    return found


def _data(text: str) -> tuple[dict[str, Any], str | None]:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise UnreadableInputError(f"not valid JSON/YAML: {error}") from None
    if isinstance(data, dict) and isinstance(data.get("beat_schedule"), dict):
        zone = data.get("timezone")
        return _from_data(data["beat_schedule"]), zone if isinstance(zone, str) else None
    raise UnreadableInputError("expected a mapping with beat_schedule: {NAME: {task: ..., schedule: ...}}")


def _from_data(entries: dict[str, Any]) -> dict[str, Any]:
    """The data form's ``{crontab: {...}}`` schedules as the module form's calls."""
    return {str(key): _crontab_call(entry) for key, entry in entries.items()}


def _crontab_call(entry: Any) -> Any:
    given = entry.get("schedule") if isinstance(entry, dict) else None
    if not (isinstance(given, dict) and "crontab" in given):
        return entry
    fields = given["crontab"] if isinstance(given["crontab"], dict) else {}
    return {**entry, "schedule": pyconfig.CallValue("crontab", (), fields)}


def _entry(key: str, entry: dict[str, Any], zone: str, where: str) -> Draft | Note:
    draft = Draft(where, key)
    try:
        schedule = _schedule(entry.get("schedule"), draft)
    except NoEquivalentError as error:
        return skipped(where, str(error))
    if schedule is None:
        return skipped(where, f"schedule {_shown(entry.get('schedule'))} has no cronwheel equivalent")
    problem = schedule_problem(schedule, zone)
    if problem is not None:
        return skipped(where, problem)
    task = entry["task"]
    if not _DOTTED.fullmatch(task):
        return skipped(where, f"task {task!r} is not a dotted module path: give the job a target by hand")
    module, _, function = task.rpartition(".")
    draft.job = {
        "description": f"Celery beat entry {key!r}: task {task}"[:2000],
        "schedule": schedule,
        "timezone": zone,
        "target": {"type": "python", "function": f"{module}:{function}"},
        "payload": call_payload(entry.get("args"), entry.get("kwargs")),
        "timeout_s": NO_LIMIT_S,
        "misfire": {"policy": "run_once"},
        "labels": {LABEL: "celery"},
    }
    draft.note(
        NoteKind.TARGET,
        f"Celery sent task {task} to a worker as {function}(*args, **kwargs); cronwheel calls "
        f"{module}:{function}(payload, ctx) in its worker, with payload {{args, kwargs}}: point "
        "target.function at a plain function taking those (a task object is refused)",
    )
    _options(entry, draft)
    return draft


def _schedule(given: Any, draft: Draft) -> str | None:
    if isinstance(given, int | float) and not isinstance(given, bool) and given > 0:
        return _interval(float(given), draft)
    if not isinstance(given, pyconfig.CallValue):
        return None
    if given.name == "timedelta":
        seconds = timedelta(*given.args, **given.kwargs).total_seconds()
        return _interval(seconds, draft) if seconds > 0 else None
    if given.name == "schedule":
        run_every = given.kwargs.get("run_every", given.args[0] if given.args else None)
        return _schedule(run_every, draft)
    if given.name == "crontab":
        return _crontab(given, draft)
    return None  # solar: sunrise and sunset have no cron spelling


def _shown(given: Any) -> str:
    if isinstance(given, pyconfig.CallValue):
        return f"{given.name}(...)"
    return repr(given)


def _interval(seconds: float, draft: Draft) -> str:
    text = every(seconds)
    if seconds < 1 or seconds != int(seconds):
        draft.note(
            NoteKind.SCHEDULE, f"every {seconds:g} s: cronwheel's intervals are whole seconds ({text})"
        )
    draft.note(NoteKind.SCHEDULE, EVERY_FROM_EPOCH + ", not from beat's last run")
    return text


def _crontab(call: pyconfig.CallValue, draft: Draft) -> str | None:
    values = dict(zip(_CRONTAB, call.args, strict=False)) | call.kwargs
    minute, hour, dow, dom, month = (field_text(values.get(name, "*")) for name in _CRONTAB)
    days = both_days(dom, dow)
    if days is None:
        raise NoEquivalentError(
            f"day_of_month {dom!r} and day_of_week {dow!r} must both match in Celery; "
            "cron fires on a day matching either, and has no spelling for both"
        )
    if days != (dom, dow):
        draft.note(
            NoteKind.SCHEDULE,
            f"day_of_month {dom!r} and day_of_week {dow!r} must both match in Celery: written {days[1]!r}",
        )
    return f"{minute} {hour} {days[0]} {month} {days[1]}"


def _options(entry: dict[str, Any], draft: Draft) -> None:
    options = entry.get("options") or {}
    expires = options.get("expires") if isinstance(options, dict) else None
    if isinstance(expires, int | float) and not isinstance(expires, bool):
        grace = min(float(expires), MAX_GRACE_S)
        draft.job["misfire"] = {"policy": "skip", "grace_s": grace}
        draft.note(
            NoteKind.MISFIRE,
            f"options.expires {expires:g}: a slot fires only within {grace:g} s (misfire skip)",
        )
    else:
        draft.note(
            NoteKind.MISFIRE, "beat ran an entry missed while it was down once, at start: misfire run_once"
        )
    for key in sorted(set(options) - {"expires"} if isinstance(options, dict) else []):
        draft.note(NoteKind.DROPPED, f"options.{key}: a Celery routing option; no cronwheel equivalent")
    if entry.get("relative"):
        draft.note(NoteKind.DROPPED, "relative: beat rounded the interval to its unit; cronwheel does not")
