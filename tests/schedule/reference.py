"""A deliberately simple, independent reference for the cron dialect, for tests only.

Nothing here is shared with ``cronwheel.schedule``: every field is parsed into plain Python sets,
days are matched by looking at the calendar of the month, and fire times are found by brute force,
scanning the zone's wall clock minute by minute (second by second inside matching minutes for
six-field expressions) and asking ``zoneinfo`` what each wall time means:

* a wall time that round-trips through UTC with exactly one of ``fold=0`` / ``fold=1`` is *unique*;
* one that round-trips with both, at two different instants, is *repeated* (a fold);
* one that round-trips with neither lies in a *gap*.

The DST rules applied on top (see ``docs/schedules.md``):

* gap + ``shift``: fire once at the instant the gap ends, found as the first existing wall time
  after it; every matching wall time of one gap lands on that one instant;
* gap + ``skip``: no fire;
* repeated + ``first`` / ``last`` / ``both``: the first pass, the second pass, or both;
* defaults: a *fixed-time* expression (neither the minute nor the hour field starts with ``*``)
  uses ``shift`` / ``first``; any other uses ``skip`` / ``both``.

``H`` (hashed values) is out of scope: the reference refuses it.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from typing import Literal
from zoneinfo import ZoneInfo

Gap = Literal["shift", "skip"]
Fold = Literal["first", "last", "both"]

MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MINUTE = timedelta(minutes=1)
_SECOND = timedelta(seconds=1)


class ReferenceSyntaxError(ValueError):
    """The reference does not understand the expression (or it is not valid cron)."""


# -- parsing ----------------------------------------------------------------------------------


def _number(text: str, lo: int, hi: int, names: tuple[str, ...] | None, first: int) -> int:
    """A number or a name (``names[i]`` is ``first + i``), checked against ``lo..hi``."""
    upper = text.upper()
    if names is not None and text.isascii() and upper in names:
        value = names.index(upper) + first
    elif text.isascii() and text.isdigit():
        value = int(text)
    else:
        raise ReferenceSyntaxError(f"bad value {text!r}")
    if not lo <= value <= hi:
        raise ReferenceSyntaxError(f"{value} out of range {lo}-{hi}")
    return value


def _plain(element: str, lo: int, hi: int, names: tuple[str, ...] | None = None, first: int = 0) -> set[int]:
    """``*``, ``a``, ``a-b``, each optionally with ``/step``; ``a/step`` means ``a-hi/step``."""
    base, slash, step_text = element.partition("/")
    step = 1
    if slash:
        if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
            raise ReferenceSyntaxError(f"bad step {step_text!r}")
        step = int(step_text)
    if base == "*":
        start, stop = lo, hi
    elif "-" in base:
        left, _, right = base.partition("-")
        start, stop = _number(left, lo, hi, names, first), _number(right, lo, hi, names, first)
        if stop < start:
            raise ReferenceSyntaxError(f"inverted range {base!r}")
    else:
        start = _number(base, lo, hi, names, first)
        stop = hi if slash else start
    return set(range(start, stop + 1, step))


def _plain_field(
    text: str, lo: int, hi: int, names: tuple[str, ...] | None = None, first: int = 0
) -> frozenset[int]:
    values: set[int] = set()
    for element in text.split(","):
        values |= _plain(element, lo, hi, names, first)
    return frozenset(values)


@dataclass(frozen=True)
class DayOfMonth:
    days: frozenset[int]
    last: bool  # L
    last_weekday: bool  # LW
    nearest: frozenset[int]  # d of dW
    star: bool


@dataclass(frozen=True)
class DayOfWeek:
    weekdays: frozenset[int]  # 0 = Sunday .. 6
    last_of: frozenset[int]  # w of wL
    nth: frozenset[tuple[int, int]]  # (w, n) of w#n
    star: bool


def _day_of_month(text: str) -> DayOfMonth:
    if text == "?":
        return DayOfMonth(frozenset(range(1, 32)), False, False, frozenset(), True)
    days: set[int] = set()
    nearest: set[int] = set()
    last = last_weekday = False
    for element in text.upper().split(","):
        if element == "L":
            last = True
        elif element == "LW":
            last_weekday = True
        elif element.endswith("W"):
            nearest.add(_number(element[:-1], 1, 31, None, 0))
        else:
            days |= _plain(element, 1, 31)
    return DayOfMonth(frozenset(days), last, last_weekday, frozenset(nearest), text.startswith("*"))


def _day_of_week(text: str) -> DayOfWeek:
    if text == "?":
        return DayOfWeek(frozenset(range(7)), frozenset(), frozenset(), True)
    weekdays: set[int] = set()
    last_of: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for element in text.upper().split(","):
        if "#" in element:
            day, _, n = element.partition("#")
            count = _number(n, 1, 5, None, 0)
            nth.add((_number(day, 0, 7, DAY_NAMES, 0) % 7, count))
        elif element.endswith("L") and len(element) > 1:
            last_of.add(_number(element[:-1], 0, 7, DAY_NAMES, 0) % 7)
        else:
            weekdays |= {w % 7 for w in _plain(element, 0, 7, DAY_NAMES, 0)}
    return DayOfWeek(frozenset(weekdays), frozenset(last_of), frozenset(nth), text.startswith("*"))


@dataclass(frozen=True)
class ReferenceCron:
    """One parsed expression: sets of allowed values per field."""

    text: str
    six: bool
    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    dom: DayOfMonth
    months: frozenset[int]
    dow: DayOfWeek
    fixed: bool  # neither minute nor hour text starts with '*'

    def day_matches(self, day: date) -> bool:
        return day in _matching_days(self.dom, self.dow, day.year, day.month)

    def matches(self, wall: datetime) -> bool:
        """Does the naive wall time match (ignoring DST)?"""
        return (
            wall.microsecond == 0
            and wall.second in self.seconds
            and wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self.day_matches(wall.date())
        )

    def can_fire(self) -> bool:
        """Is there any day at all? 28 consecutive years hold every month layout."""
        return any(
            _matching_days(self.dom, self.dow, year, month)
            for month in self.months
            for year in range(2000, 2028)
        )


def parse_reference(expression: str) -> ReferenceCron:
    """Parse with the reference's own simple rules; ReferenceSyntaxError if it cannot."""
    fields = expression.split()
    if len(fields) == 1 and fields[0].lower() in MACROS:
        fields = MACROS[fields[0].lower()].split()
    if len(fields) not in (5, 6):
        raise ReferenceSyntaxError("need 5 or 6 fields")
    six = len(fields) == 6
    seconds = _plain_field(fields[0], 0, 59) if six else frozenset({0})
    minute, hour, dom, month, dow = fields[1:] if six else fields
    # No month name contains an H and THU is the only weekday name that does.
    if any("H" in text.upper() for text in fields[:-1]) or "H" in dow.upper().replace("THU", ""):
        raise ReferenceSyntaxError("H is out of the reference's scope")
    return ReferenceCron(
        text=expression,
        six=six,
        seconds=seconds,
        minutes=_plain_field(minute, 0, 59),
        hours=_plain_field(hour, 0, 23),
        dom=_day_of_month(dom),
        months=_plain_field(month.upper(), 1, 12, MONTH_NAMES, 1),
        dow=_day_of_week(dow),
        fixed=not minute.startswith("*") and not hour.startswith("*"),
    )


# -- days -------------------------------------------------------------------------------------


def _weekday(day: date) -> int:
    """0 = Sunday .. 6 = Saturday."""
    return day.isoweekday() % 7


@lru_cache(maxsize=65536)
def _matching_days(dom: DayOfMonth, dow: DayOfWeek, year: int, month: int) -> frozenset[date]:
    """Every day of the month that the two day fields accept together."""
    length = calendar.monthrange(year, month)[1]
    month_days = [date(year, month, d) for d in range(1, length + 1)]
    workdays = [d for d in month_days if _weekday(d) not in (0, 6)]

    by_dom: set[date] = {d for d in month_days if d.day in dom.days}
    if dom.last:
        by_dom.add(month_days[-1])
    if dom.last_weekday:
        by_dom.add(workdays[-1])
    for target in dom.nearest:
        if target <= length:  # "the weekday nearest the 31st" does not exist in a 30-day month
            by_dom.add(min(workdays, key=lambda d: abs(d.day - target)))

    by_dow: set[date] = {d for d in month_days if _weekday(d) in dow.weekdays}
    for weekday in dow.last_of:
        by_dow.add([d for d in month_days if _weekday(d) == weekday][-1])
    for weekday, n in dow.nth:
        same = [d for d in month_days if _weekday(d) == weekday]
        if n <= len(same):
            by_dow.add(same[n - 1])

    if dom.star or dow.star:
        return frozenset(by_dom & by_dow)
    return frozenset(by_dom | by_dow)


# -- zones ------------------------------------------------------------------------------------


def _wall(instant: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(instant, zone).replace(tzinfo=None)


def instants_of(wall: datetime, zone: ZoneInfo) -> list[int]:
    """The instants whose wall time is ``wall``: [] in a gap, one when unique, two in a fold."""
    found = set()
    for fold in (0, 1):
        instant = int(wall.replace(tzinfo=zone, fold=fold).timestamp())
        if _wall(instant, zone) == wall:
            found.add(instant)
    return sorted(found)


def gap_end(wall: datetime, zone: ZoneInfo) -> int:
    """The instant a gap containing ``wall`` ends: the first existing wall time after it."""
    probe = wall.replace(second=0) + _MINUTE
    for _ in range(60 * 48):
        if instants_of(probe, zone):
            break
        probe += _MINUTE
    else:  # pragma: no cover - no zone has a gap of two days
        raise AssertionError(f"no end to the gap around {wall}")
    while probe - _SECOND > wall and instants_of(probe - _SECOND, zone):
        probe -= _SECOND
    (instant,) = instants_of(probe, zone)[:1]
    return instant


def offset_at(instant: int, zone: ZoneInfo) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    assert offset is not None
    return int(offset.total_seconds())


@dataclass(frozen=True)
class Transition:
    at: int  # first instant (UTC seconds) of the new offset
    before: int
    after: int


@lru_cache(maxsize=4096)
def transitions(zone_name: str, year: int) -> tuple[Transition, ...]:
    """Every UTC-offset change in a (UTC) calendar year, probing every six hours and bisecting."""
    zone = ZoneInfo(zone_name)
    start = int(datetime(year, 1, 1, tzinfo=UTC).timestamp())
    stop = int(datetime(year + 1, 1, 1, tzinfo=UTC).timestamp())
    found: list[Transition] = []
    previous, previous_offset = start - 1, offset_at(start - 1, zone)
    for probe in [*range(start, stop, 6 * 3600), stop - 1]:
        offset = offset_at(probe, zone)
        if offset != previous_offset:
            lo, hi = previous, probe
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset_at(mid, zone) == previous_offset:
                    lo = mid
                else:
                    hi = mid
            found.append(Transition(hi, previous_offset, offset))
        previous, previous_offset = probe, offset
    return tuple(found)


# -- fire times -------------------------------------------------------------------------------


def _timestamp(instant: datetime) -> int:
    if instant.tzinfo is None:
        raise ValueError("aware datetimes only")
    return int(instant.timestamp())


def matching_walls(cron: ReferenceCron, lo: datetime, hi: datetime) -> Iterator[datetime]:
    """Every matching wall time in [lo, hi], by scanning minutes (and seconds inside them)."""
    minute = lo.replace(second=0, microsecond=0)
    while minute <= hi:
        if (
            minute.minute in cron.minutes
            and minute.hour in cron.hours
            and minute.month in cron.months
            and cron.day_matches(minute.date())
        ):
            for second in sorted(cron.seconds):
                wall = minute.replace(second=second)
                if lo <= wall <= hi:
                    yield wall
        minute += _MINUTE


def policies(cron: ReferenceCron, dst_gap: Gap | None, dst_fold: Fold | None) -> tuple[Gap, Fold]:
    """The policies in force: explicit ones, else the fixed-time / wildcard defaults."""
    gap: Gap = dst_gap or ("shift" if cron.fixed else "skip")
    fold: Fold = dst_fold or ("first" if cron.fixed else "both")
    return gap, fold


def expected_timestamps(
    expression: str | ReferenceCron,
    zone: str,
    start: datetime,
    end: datetime,
    dst_gap: Gap | None = None,
    dst_fold: Fold | None = None,
) -> list[int]:
    """Every fire instant ``u`` (UTC seconds) with ``start < u <= end``, sorted, de-duplicated."""
    cron = parse_reference(expression) if isinstance(expression, str) else expression
    tz = ZoneInfo(zone)
    gap, fold = policies(cron, dst_gap, dst_fold)
    first, last = _timestamp(start), _timestamp(end)
    # A wall time w fires at an instant u with w = u + offset, and a gap's wall times shift to
    # its end u with offset_before <= w - u < offset_after: so the walls worth scanning lie in
    # [first + min offset, last + max offset], over the offsets in force in the window.
    probes = [*range(first - 86400, last + 86400, 1800), last + 86400]
    offsets = [offset_at(p, tz) for p in probes]
    wall_lo = _wall(first, UTC_ZONE) + timedelta(seconds=min(offsets) - 3600)
    wall_hi = _wall(last, UTC_ZONE) + timedelta(seconds=max(offsets) + 3600)
    fires: set[int] = set()
    end_of_gap: int | None = None  # of the last gap met: its walls all share that one end
    for wall in matching_walls(cron, wall_lo, wall_hi):
        passes = instants_of(wall, tz)
        if not passes:
            if end_of_gap is None or not _wall(end_of_gap - 1, tz) < wall < _wall(end_of_gap, tz):
                end_of_gap = gap_end(wall, tz)
            chosen = [end_of_gap] if gap == "shift" else []
        elif len(passes) == 1 or fold == "both":
            chosen = passes
        elif fold == "first":
            chosen = passes[:1]
        else:
            chosen = passes[1:]
        fires.update(u for u in chosen if first < u <= last)
    return sorted(fires)


def expected_fires(
    expression: str | ReferenceCron,
    zone: str,
    start: datetime,
    end: datetime,
    dst_gap: Gap | None = None,
    dst_fold: Fold | None = None,
) -> list[datetime]:
    """Like :func:`expected_timestamps`, as aware UTC datetimes."""
    return [
        datetime.fromtimestamp(u, UTC)
        for u in expected_timestamps(expression, zone, start, end, dst_gap, dst_fold)
    ]


UTC_ZONE = ZoneInfo("UTC")
