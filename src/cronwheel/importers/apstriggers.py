"""APScheduler's triggers as cronwheel schedules: ``cron`` (with its defaults and its weekday
numbering), ``interval`` (``@every``, anchored at ``start_date`` when given) and ``date``
(``@at``). A naive date is in the trigger's zone, as APScheduler reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from cronwheel.importers import pyconfig
from cronwheel.importers.days import both_days, field_text
from cronwheel.importers.draft import Draft
from cronwheel.importers.report import NoEquivalentError, NoteKind
from cronwheel.importers.timing import EVERY_FROM_EPOCH, every, instant
from cronwheel.importers.weekdays import NAMES, aps_days, cron_days

# most significant first, with what a field below the least significant one given defaults to
_CRON_DEFAULTS = (
    ("year", "*"), ("month", "1"), ("day", "1"), ("week", "*"),
    ("day_of_week", "*"), ("hour", "0"), ("minute", "0"), ("second", "0"),
)  # fmt: skip
_INTERVAL = {"weeks": 604_800, "days": 86_400, "hours": 3600, "minutes": 60, "seconds": 1}
_READ = {  # the fields each trigger kind has, as this module reads them
    "cron": {name for name, _ in _CRON_DEFAULTS} | {"start_date", "end_date", "timezone", "jitter"},
    "interval": set(_INTERVAL) | {"start_date", "end_date", "timezone", "jitter"},
    "date": {"run_date", "timezone"},
}
_NTH = re.compile(r"^(1st|2nd|3rd|4th|5th|last) ([a-z]{3})$")


@dataclass(frozen=True)
class Trigger:
    kind: str  # cron, interval, date
    fields: dict[str, Any]


def trigger_of(value: Any, fields: dict[str, Any]) -> Trigger | None:
    """The trigger of ``add_job(func, value, **fields)``: a name and the job's keywords, or a
    trigger object."""
    if isinstance(value, str) and value in ("cron", "interval", "date"):
        return Trigger(value, fields)
    if isinstance(value, pyconfig.CallValue):
        if value.name == "from_crontab" and value.args:
            minute, hour, day, month, dow = (str(value.args[0]).split() + ["*"] * 5)[:5]
            extra = {"minute": minute, "hour": hour, "day": day, "month": month, "day_of_week": dow}
            return Trigger("cron", {**extra, **value.kwargs, **fields})
        kinds = {"CronTrigger": "cron", "IntervalTrigger": "interval", "DateTrigger": "date"}
        if value.name in kinds:
            positional = ("run_date",) if value.name == "DateTrigger" else ()
            given = dict(zip(positional, value.args, strict=False)) | value.kwargs
            return Trigger(kinds[value.name], given | fields)
    return None


def aware(value: Any, zone: str) -> datetime | None:
    """A date value (``datetime(...)``, ISO text) as an aware datetime, naive ones in ``zone``."""
    if isinstance(value, pyconfig.CallValue) and value.name == "datetime":
        try:
            moment = datetime(*value.args, **value.kwargs)  # noqa: DTZ001 - given a zone just below
        except (TypeError, ValueError):
            return None
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=ZoneInfo(zone))


def trigger_schedule(trigger: Trigger, zone: str, draft: Draft) -> str | None:
    """The schedule text, or None (the reason noted as SKIPPED by the caller)."""
    for key in sorted(set(trigger.fields) - _READ[trigger.kind]):
        draft.note(
            NoteKind.DROPPED, f"{key}={trigger.fields[key]!r}: not a {trigger.kind} trigger field read here"
        )
    if trigger.kind == "interval":
        seconds = sum(float(trigger.fields.get(unit, 0)) * size for unit, size in _INTERVAL.items())
        if seconds <= 0:
            return None
        start = aware(trigger.fields.get("start_date"), zone)
        if start is None:
            draft.note(
                NoteKind.SCHEDULE,
                "no start_date: APScheduler counted from when the job was added; " + EVERY_FROM_EPOCH,
            )
        return every(seconds, start)
    if trigger.kind == "date":
        run = aware(trigger.fields.get("run_date"), zone)
        return None if run is None else "@at " + instant(run)
    return _cron(trigger.fields, draft)


def _cron(fields: dict[str, Any], draft: Draft) -> str | None:
    given = {name: field_text(fields[name]) for name, _ in _CRON_DEFAULTS if fields.get(name) is not None}
    for name in ("week", "year"):
        if given.get(name, "*") != "*":
            raise NoEquivalentError(f"its cron trigger has {name}={given[name]!r}; cron has no {name} field")
    values: dict[str, str] = {}
    left = dict(given)
    defaults = False
    for name, default in _CRON_DEFAULTS:
        if name in left:
            values[name] = left.pop(name)
            defaults = not left
        else:
            values[name] = default if defaults else "*"
    days = _days(values["day"], values["day_of_week"], draft)
    if days is None:
        return None
    text = f"{values['minute']} {values['hour']} {days[0]} {values['month']} {days[1]}"
    return text if values["second"] == "0" else f"{values['second']} {text}"


def _days(day: str, dow: str, draft: Draft) -> tuple[str, str] | None:
    nth = _NTH.match(day.lower())
    if day.lower() == "last":
        day = "L"
    elif nth is not None and dow == "*" and nth.group(2).upper() in NAMES:
        name = nth.group(2).upper()
        return "*", f"{name}L" if nth.group(1) == "last" else f"{name}#{nth.group(1)[0]}"
    if dow != "*":
        days = aps_days(dow)
        if days is None:
            raise NoEquivalentError(f"day_of_week {dow!r} is not a weekday list this importer reads")
        written = cron_days(days)
        if any(char.isdigit() for char in dow):
            draft.note(
                NoteKind.SCHEDULE,
                f"day_of_week {dow!r} counts from Monday = 0 in APScheduler, Sunday = 0 in cron: "
                f"written {written!r}",
            )
        dow = written
    both = both_days(day, dow)
    if both is None:
        raise NoEquivalentError(
            f"day {day!r} and day_of_week {dow!r} must both match in APScheduler; cron fires on a day "
            "matching either, and has no spelling for both"
        )
    if both != (day, dow):
        draft.note(
            NoteKind.SCHEDULE, f"day {day!r} and day_of_week {dow!r} must both match: written {both[1]!r}"
        )
    return both
