"""``parse_schedule``: expression text + zone + options -> a schedule of its kind (cron, ``@every``
or ``@at``: :data:`~cronwheel.schedule.kinds.Schedule`).

Parsing the same (expression, zone, options) twice returns the same object from a cache, and the
fields inside are shared between schedules, so repeated work is free.
"""

from __future__ import annotations

import zoneinfo
from functools import lru_cache
from typing import get_args

from cronwheel.schedule.days import DayRule
from cronwheel.schedule.elapsed import is_elapsed, parse_elapsed
from cronwheel.schedule.errors import ScheduleError
from cronwheel.schedule.fields import (
    HOUR,
    MINUTE,
    MONTH,
    SECOND,
    DayOfMonthSpec,
    DayOfWeekSpec,
    FieldSyntaxError,
    ValueSet,
    parse_day_of_month,
    parse_day_of_week,
    parse_values,
)
from cronwheel.schedule.kinds import Schedule
from cronwheel.schedule.schedule import CronSchedule, DstFold, DstGap
from cronwheel.schedule.zone import zone_model

MAX_EXPRESSION_LENGTH = 1024

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_GAPS = frozenset((None, *get_args(DstGap)))
_FOLDS = frozenset((None, *get_args(DstFold)))
_FIVE = ("minute", "hour", "day-of-month", "month", "day-of-week")
_SIX = ("second", *_FIVE)


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    *,
    dst_gap: DstGap | None = None,
    dst_fold: DstFold | None = None,
    seed: str | None = None,
) -> Schedule:
    """Parse a schedule evaluated in an IANA time zone.

    Args:
        expression: five fields (minute hour day-of-month month day-of-week), six with a leading
            seconds field, a macro such as ``@daily``, an interval (``@every 90m``, ``@every 6h
            from 2026-01-01T03:00:00+01:00``) or one instant (``@at 2026-12-24T18:00:00+01:00``).
            See ``docs/schedules.md`` for the dialect.
        timezone: an IANA zone name such as ``"Europe/Berlin"``; fire times follow its wall clock.
        dst_gap: for local times that a DST change skips: ``"shift"`` fires once when the gap ends,
            ``"skip"`` does not fire. ``None`` (default) follows cron: ``shift`` for fixed-time
            schedules, ``skip`` for those with ``*`` at the start of the minute or hour field.
        dst_fold: for local times that a DST change repeats: ``"first"`` fires on the first pass,
            ``"last"`` on the second, ``"both"`` on both. ``None`` (default) follows cron:
            ``first`` for fixed-time schedules, ``both`` for ``*`` minute or hour.
        seed: what ``H`` hashes (cronwheel uses the job id), so that many ``H * * * *`` jobs
            spread over the hour; ``None`` hashes the empty string.

    ``@every`` and ``@at`` count elapsed time: DST moves none of their fires, and ``dst_gap`` or
    ``dst_fold`` given with them is refused.

    Raises:
        ScheduleError: anything refused, with the field, the position and the reason.
    """
    try:  # a cache hit costs one lookup; the checks run only on a miss
        return _parse_cached(expression, timezone, dst_gap, dst_fold, seed)
    except TypeError:  # unhashable arguments: not strings
        raise ScheduleError(repr(expression), "expression, timezone and options must be strings") from None


def may_hash(expression: str) -> bool:
    """Whether ``expression`` may hash its seed (``H``, the job id): a cron expression, not a
    macro, ``@every`` or ``@at`` (the only texts with ``@``), with an ``h`` in it (``H``, or a
    name such as ``thu``). Jobs whose expression may hash walk their own slots; the others that
    share an expression share its slots. The store's grouping asks the same of its rows."""
    return "@" not in expression and "h" in expression.lower()


def parse_cron(
    expression: str,
    timezone: str = "UTC",
    *,
    dst_gap: DstGap | None = None,
    dst_fold: DstFold | None = None,
    seed: str | None = None,
) -> CronSchedule:
    """:func:`parse_schedule` for a cron expression only, whose fields can then be read; ``@every``
    and ``@at`` are refused (:class:`ScheduleError`)."""
    schedule = parse_schedule(expression, timezone, dst_gap=dst_gap, dst_fold=dst_fold, seed=seed)
    if not isinstance(schedule, CronSchedule):
        raise ScheduleError(expression, "a cron expression is needed here, not @every or @at")
    return schedule


@lru_cache(maxsize=65536)
def _parse_cached(
    expression: str,
    timezone: str,
    dst_gap: DstGap | None,
    dst_fold: DstFold | None,
    seed: str | None,
) -> Schedule:
    if not isinstance(expression, str):
        raise ScheduleError(repr(expression), "the expression must be a string")
    if dst_gap not in _GAPS:
        raise ScheduleError(expression, f"dst_gap must be 'shift' or 'skip', not {dst_gap!r}")
    if dst_fold not in _FOLDS:
        raise ScheduleError(expression, f"dst_fold must be 'first', 'last' or 'both', not {dst_fold!r}")
    if seed is not None:
        if not isinstance(seed, str):
            raise ScheduleError(expression, f"seed must be a string, not {type(seed).__name__}")
        if "h" not in expression.lower() or is_elapsed(expression):  # no H: share the unseeded one
            return _parse_cached(expression, timezone, dst_gap, dst_fold, None)
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ScheduleError(expression, f"longer than {MAX_EXPRESSION_LENGTH} characters")
    if is_elapsed(expression):
        if dst_gap is not None or dst_fold is not None:
            raise ScheduleError(
                expression, "dst_gap and dst_fold apply to cron schedules, not to @every or @at"
            )
        return parse_elapsed(expression, timezone, load_zone(timezone, expression))
    zone = load_zone(timezone, expression)
    seconds, minutes, hours, days, months = _parse_fields(expression, seed or "")
    wildcard = minutes.star or hours.star
    return CronSchedule(
        expression=expression,
        timezone=timezone,
        zone=zone,
        model=zone_model(zone),
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        dst_gap=dst_gap or ("skip" if wildcard else "shift"),
        dst_fold=dst_fold or ("both" if wildcard else "first"),
        seed=seed,
    )


_ZERO = ValueSet.of(1, 59, False)
_Parts = tuple[ValueSet, ValueSet, ValueSet, DayRule, ValueSet]


def _parse_fields(expression: str, salt: str) -> _Parts:
    """The five or six fields, parsed (each from its own cache) and checked to fire at all."""
    texts = _split(expression)
    six = len(texts) == 6
    names = _SIX if six else _FIVE
    current = 0
    try:
        seconds = parse_values(texts[0], SECOND, salt) if six else _ZERO
        current = 1 if six else 0
        minutes = parse_values(texts[current], MINUTE, salt)
        current += 1
        hours = parse_values(texts[current], HOUR, salt)
        current += 1
        dom = parse_day_of_month(texts[current], salt)
        current += 1
        months = parse_values(texts[current], MONTH, salt)
        current += 1
        dow = parse_day_of_week(texts[current], salt)
    except FieldSyntaxError as error:
        raise _field_error(expression, names[current], current, error) from None
    days = day_rule(dom, dow)
    if not can_fire(days, months):
        raise ScheduleError(expression, "the schedule can never fire (no such day in those months)")
    return seconds, minutes, hours, days, months


def _split(expression: str) -> list[str]:
    """The expression's fields, macros expanded."""
    fields = expression.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        macro = MACROS.get(fields[0].lower())
        if macro is None:
            known = ", ".join([*MACROS, "@every", "@at"])
            raise ScheduleError(expression, f"unknown macro {fields[0]!r} (known: {known})", column=1)
        return macro.split()
    if len(fields) not in (5, 6):
        raise ScheduleError(
            expression,
            f"expected 5 fields (minute hour day-of-month month day-of-week) or 6 with a leading "
            f"seconds field, got {len(fields)}",
        )
    return fields


def _field_error(expression: str, name: str, index: int, error: FieldSyntaxError) -> ScheduleError:
    """The error with the field's number and column in the original text (macros have none)."""
    if expression.strip().startswith("@"):
        return ScheduleError(expression, error.reason, field=name)
    column = 0
    for position, part in enumerate(expression.split()):
        column = expression.index(part, column)
        if position == index:
            break
        column += len(part)
    return ScheduleError(
        expression,
        error.reason,
        field=name,
        field_index=index + 1,
        column=column + error.offset + 1,
    )


@lru_cache(maxsize=4096)
def day_rule(dom: DayOfMonthSpec, dow: DayOfWeekSpec) -> DayRule:
    """One shared DayRule (and so one mask cache) per pair of day fields."""
    return DayRule(dom, dow)


@lru_cache(maxsize=4096)
def can_fire(days: DayRule, months: ValueSet) -> bool:
    return days.every_day or any(days.can_fire_in(month) for month in months.values())


_ZONE_ERRORS = (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError, TypeError)


def load_zone(timezone: str, expression: str = "") -> zoneinfo.ZoneInfo:
    """The ``ZoneInfo`` for an IANA name, or a ScheduleError naming the problem."""
    found = _lookup_zone(timezone) if isinstance(timezone, str) else None
    if isinstance(found, zoneinfo.ZoneInfo):
        return found
    reason = found or f"{timezone!r} is not an IANA time zone name"
    raise ScheduleError(expression, reason, field="timezone")


@lru_cache(maxsize=1024)
def _lookup_zone(timezone: str) -> zoneinfo.ZoneInfo | str:
    """The zone, or the reason it cannot be had."""
    if timezone not in _available_zones():
        hint = _case_insensitive().get(timezone.lower())
        suffix = f" (did you mean {hint!r}?)" if hint else ""
        return f"unknown time zone {timezone!r}{suffix}"
    try:
        return zoneinfo.ZoneInfo(timezone)
    except _ZONE_ERRORS as error:  # pragma: no cover - listed zones load
        return f"cannot load time zone {timezone!r}: {error}"


@lru_cache(maxsize=1)
def _available_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@lru_cache(maxsize=1)
def _case_insensitive() -> dict[str, str]:
    return {name.lower(): name for name in _available_zones()}
