"""Calendars: the local days on which a job does not fire, and the schedule that knows them.

A :class:`CalendarSpec` lists closed days: dates, inclusive ranges of dates, weekdays, and the
public holidays of a country (and subdivision) from the ``holidays`` package. A slot is excluded
when its local date, in the job's zone, is closed. :class:`CalendarSchedule` wraps a job's
schedule: it yields every nominal slot (an excluded one too, so that it is recorded SKIPPED,
never silently absent) and, with a shift, the same local wall time on the next or previous open
day, in time order; :meth:`CalendarSchedule.excluded` tells which instants are excluded slots.

Pure: no I/O beyond the ``holidays`` package's own data, no clock.
"""

from __future__ import annotations

import bisect
import enum
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from cronwheel.errors import FieldRefusedError
from cronwheel.schedule.kinds import Schedule

SHIFT_DAYS = 31  # a shift looks this many days for an open day; beyond, the slot is only skipped
MAX_ITEMS = 1000  # dates, ranges: at most this many each in a calendar
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # ISO order: index + 1 is isoweekday
_EPSILON = timedelta(microseconds=1)
_DAY = timedelta(days=1)


class CalendarShift(enum.StrEnum):
    """Where an excluded slot's run goes: nowhere (only the SKIPPED record), or to the same local
    wall time on the next or previous day the job's calendars leave open."""

    NONE = "none"
    NEXT = "next"
    PREVIOUS = "previous"


class CalendarError(FieldRefusedError):
    """A calendar definition that cannot be accepted; ``field`` names the offending part."""

    slug = "invalid-calendar"
    title = "Invalid calendar"

    def __init__(self, field: str, reason: str, code: str = "invalid_calendar") -> None:
        super().__init__(field, reason, code)


@dataclass(frozen=True, slots=True)
class Holidays:
    """The public holidays of ``country`` (ISO 3166-1 alpha-2), and of ``subdivision`` when given."""

    country: str
    subdivision: str | None = None


@dataclass(frozen=True, slots=True)
class CalendarSpec:
    """Closed local days. Hashable (tuples): compiled once per distinct spec."""

    dates: tuple[date, ...] = ()
    ranges: tuple[tuple[date, date], ...] = ()  # inclusive
    weekdays: tuple[int, ...] = ()  # ISO weekday numbers, 1 = Monday
    holidays: tuple[Holidays, ...] = ()
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        """Computed once: a spec is a key of the planner's caches at every fire of its jobs, and
        hashing a thousand dates each time was most of a plan (measured: 93 us of it)."""
        if not self._hash:
            object.__setattr__(
                self, "_hash", hash((self.dates, self.ranges, self.weekdays, self.holidays)) or 1
            )
        return self._hash

    def union(self, other: CalendarSpec) -> CalendarSpec:
        """The days either spec closes."""
        return CalendarSpec(
            tuple(sorted({*self.dates, *other.dates})),
            tuple(sorted({*self.ranges, *other.ranges})),
            tuple(sorted({*self.weekdays, *other.weekdays})),
            tuple(dict.fromkeys((*self.holidays, *other.holidays))),
        )

    def excludes(self, day: date) -> bool:
        """Whether ``day`` (a local date) is closed."""
        return _compiled(self).excludes(day)


def union(specs: Iterable[CalendarSpec]) -> CalendarSpec | None:
    """The union of ``specs`` (None when there are none: a job without calendars)."""
    result: CalendarSpec | None = None
    for spec in specs:
        result = spec if result is None else result.union(spec)
    return result


# -- JSON ------------------------------------------------------------------------------------------


def spec_to_json(spec: CalendarSpec) -> dict[str, Any]:
    """The spec as stored (a job's resolved union): holidays as a list."""
    return {
        "dates": [each.isoformat() for each in spec.dates],
        "ranges": [{"from": lo.isoformat(), "to": hi.isoformat()} for lo, hi in spec.ranges],
        "weekdays": [WEEKDAYS[number - 1] for number in spec.weekdays],
        "holidays": [{"country": h.country, "subdivision": h.subdivision} for h in spec.holidays],
    }


def spec_from_json(data: Mapping[str, Any]) -> CalendarSpec:
    """A stored spec (written by :func:`spec_to_json`, so trusted)."""
    return CalendarSpec(
        tuple(date.fromisoformat(each) for each in data.get("dates", ())),
        tuple((date.fromisoformat(r["from"]), date.fromisoformat(r["to"])) for r in data.get("ranges", ())),
        tuple(WEEKDAYS.index(name) + 1 for name in data.get("weekdays", ())),
        tuple(Holidays(h["country"], h.get("subdivision")) for h in data.get("holidays", ())),
    )


# -- validation ------------------------------------------------------------------------------------


def check_spec(
    dates: Iterable[str],
    ranges: Iterable[tuple[str, str]],
    weekdays: Iterable[str],
    holidays: Holidays | None,
) -> CalendarSpec:
    """A calendar's spec from its parts as a client gives them, or :class:`CalendarError`."""
    day_list = [_iso_date(f"dates[{index}]", text) for index, text in enumerate(dates)]
    _check_unique("dates", day_list, MAX_ITEMS)
    range_list: list[tuple[date, date]] = []
    for index, (lo_text, hi_text) in enumerate(ranges):
        lo, hi = _iso_date(f"ranges[{index}].from", lo_text), _iso_date(f"ranges[{index}].to", hi_text)
        if lo > hi:
            raise CalendarError(f"ranges[{index}]", f"from {lo} is after to {hi}", "range_reversed")
        range_list.append((lo, hi))
    _check_unique("ranges", range_list, MAX_ITEMS)
    names = list(weekdays)
    for index, name in enumerate(names):
        if name not in WEEKDAYS:
            raise CalendarError(f"weekdays[{index}]", f"{name!r} is not one of {', '.join(WEEKDAYS)}")
    _check_unique("weekdays", names, len(WEEKDAYS))
    if holidays is not None:
        check_holidays(holidays)
    return CalendarSpec(
        tuple(sorted(day_list)),
        tuple(sorted(range_list)),
        tuple(sorted(WEEKDAYS.index(name) + 1 for name in names)),
        () if holidays is None else (holidays,),
    )


def _iso_date(field: str, text: str) -> date:
    try:
        if len(text) != 10:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise CalendarError(field, f"{text!r} is not an ISO date (YYYY-MM-DD)") from None


def _check_unique(field: str, items: list[Any], most: int) -> None:
    if len(items) > most:
        raise CalendarError(field, f"{len(items)} given; at most {most} are accepted", "too_many")
    seen: set[Any] = set()
    for index, item in enumerate(items):
        if item in seen:
            raise CalendarError(f"{field}[{index}]", "is listed twice", "duplicate")
        seen.add(item)


def supported() -> Mapping[str, Iterable[str]]:
    """The countries the installed ``holidays`` package knows, each with its subdivisions."""
    import holidays  # noqa: PLC0415 - a large package: loaded when a calendar names holidays

    return holidays.list_supported_countries()


def check_holidays(spec: Holidays) -> None:
    """Refuse a country or subdivision the ``holidays`` package does not know."""
    countries = supported()
    if spec.country not in countries:
        raise CalendarError(
            "holidays.country",
            f"{spec.country!r} is not a country the holidays data knows",
            "unknown_country",
        )
    if spec.subdivision is not None and spec.subdivision not in countries[spec.country]:
        known = ", ".join(sorted(countries[spec.country])) or "none"
        raise CalendarError(
            "holidays.subdivision",
            f"{spec.subdivision!r} is not a subdivision of {spec.country} (known: {known})",
            "unknown_subdivision",
        )


# -- compiled --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Compiled:
    dates: frozenset[date]
    starts: tuple[date, ...]  # ranges merged and sorted: starts[i] <= ends[i] < starts[i + 1]
    ends: tuple[date, ...]
    weekdays: frozenset[int]
    holidays: tuple[Holidays, ...]

    def excludes(self, day: date) -> bool:
        if day in self.dates or day.isoweekday() in self.weekdays:
            return True
        index = bisect.bisect_right(self.starts, day) - 1
        if index >= 0 and day <= self.ends[index]:
            return True
        return any(day in holiday_dates(h.country, h.subdivision, day.year) for h in self.holidays)


@functools.lru_cache(maxsize=4096)
def _compiled(spec: CalendarSpec) -> _Compiled:
    starts: list[date] = []
    ends: list[date] = []
    for lo, hi in sorted(spec.ranges):
        if ends and lo <= ends[-1] + _DAY:
            ends[-1] = max(ends[-1], hi)
        else:
            starts.append(lo)
            ends.append(hi)
    return _Compiled(
        frozenset(spec.dates), tuple(starts), tuple(ends), frozenset(spec.weekdays), spec.holidays
    )


@functools.lru_cache(maxsize=1024)
def holiday_dates(country: str, subdivision: str | None, year: int) -> frozenset[date]:
    """The public holidays of a country (and subdivision) in ``year`` (observed days included),
    built once: the package takes milliseconds per country and year."""
    import holidays  # noqa: PLC0415 - see supported()

    return frozenset(holidays.country_holidays(country, subdiv=subdivision, years=year).keys())


# -- the schedule ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CalendarSchedule:
    """``base``'s nominal slots and, with ``shift``, each excluded slot's shifted instant, in time
    order (an instant both is one). Hashable: the planner caches per (schedule, instant)."""

    base: Schedule
    spec: CalendarSpec
    shift: CalendarShift = CalendarShift.NONE

    def excluded(self, instant: datetime) -> bool:
        """Whether ``instant``'s local date (in the schedule's zone) is closed."""
        return self.spec.excludes(instant.astimezone(self.base.zone).date())

    def shifted(self, slot: datetime) -> datetime | None:
        """Where an excluded ``slot``'s run goes (UTC): the same local wall time on the nearest
        open day in the shift's direction, within :data:`SHIFT_DAYS`; None without a shift or
        when no open day is that near."""
        if self.shift is CalendarShift.NONE:
            return None
        zone = self.base.zone
        local = slot.astimezone(zone)
        step = _DAY if self.shift is CalendarShift.NEXT else -_DAY
        day = local.date()
        for _ in range(SHIFT_DAYS):
            day += step
            if not self.spec.excludes(day):
                wall = datetime.combine(day, local.timetz().replace(tzinfo=None), zone)
                return wall.astimezone(UTC)
        return None

    def shifted_from(self, instant: datetime) -> datetime | None:
        """The excluded slot whose shift lands on ``instant`` (UTC), if one does."""
        if self.shift is CalendarShift.NONE:
            return None
        span = timedelta(days=SHIFT_DAYS + 2)
        lo = instant - span if self.shift is CalendarShift.NEXT else instant - _EPSILON
        hi = instant if self.shift is CalendarShift.NEXT else instant + span
        for slot in _slots(self.base, lo, hi):
            if self.excluded(slot) and self.shifted(slot) == instant:
                return slot
        return None

    def next_after(self, instant: datetime) -> datetime | None:
        """The first instant after ``instant``: a nominal slot or a shifted run (UTC)."""
        nominal = _utc(self.base.next_after(instant))
        if self.shift is CalendarShift.NONE:
            return nominal
        span = timedelta(days=SHIFT_DAYS + 2)
        # a shifted instant after ``instant`` comes from a slot within a shift's reach of it
        if self.shift is CalendarShift.NEXT:  # from a slot at most a shift earlier
            lo, hi = instant - span, instant
        else:  # from a slot at most a shift later
            lo, hi = instant, instant + span
        best = nominal
        for slot in _slots(self.base, lo, hi):
            if not self.excluded(slot):
                continue
            moved = self.shifted(slot)
            if moved is not None and moved > instant and (best is None or moved < best):
                best = moved
        return best


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def _slots(schedule: Schedule, lo: datetime, hi: datetime) -> Iterable[datetime]:
    """``schedule``'s slots in (lo, hi] (UTC)."""
    slot = _utc(schedule.next_after(lo))
    while slot is not None and slot <= hi:
        yield slot
        slot = _utc(schedule.next_after(slot))
