"""Which days of a month a schedule fires on.

The days that match depend only on the month's *layout*: its length (28-31) and the weekday of its
first day. There are 28 layouts, so the matching days of each are computed once per day rule and
kept as a bitmask (bit ``d`` set = day ``d`` fires).

Combination rule (Vixie/ISC cron): when both day-of-month and day-of-week are restricted, a day
matches if *either* matches; when either field's text starts with ``*`` (or is ``?``) a day must
match both (and ``*`` matches every day, so the other field decides alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cronwheel.schedule.fields import DayOfMonthSpec, DayOfWeekSpec

# _EVERY_SEVENTH[k] = days d in 1..31 with (d - 1) % 7 == k
_EVERY_SEVENTH = tuple(sum(1 << d for d in range(1 + k, 32, 7)) for k in range(7))
_DAYS_IN_MONTH = (0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2 and is_leap(year):
        return 29
    return _DAYS_IN_MONTH[month]


def possible_lengths(month: int) -> tuple[int, ...]:
    return (28, 29) if month == 2 else (_DAYS_IN_MONTH[month],)


def _weekday_of(day: int, first_weekday: int) -> int:
    return (first_weekday + day - 1) % 7


@dataclass(frozen=True, slots=True, eq=False)  # shared via a cache: identity is equality
class DayRule:
    """Day-of-month and day-of-week together; ``mask(length, first_weekday)`` gives the days."""

    dom: DayOfMonthSpec
    dow: DayOfWeekSpec
    every_day: bool = field(init=False)
    _cache: dict[tuple[int, int], int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        every = self.dom.everything and self.dow.everything and self.dom.star and self.dow.star
        object.__setattr__(self, "every_day", every)
        object.__setattr__(self, "_cache", {})

    @property
    def either(self) -> bool:
        """True when a day fires if day-of-month OR day-of-week matches (both restricted)."""
        return not (self.dom.star or self.dow.star)

    def mask(self, length: int, first_weekday: int) -> int:
        """Days 1..length that fire in a month of ``length`` days starting on ``first_weekday``
        (0 = Sunday)."""
        key = (length, first_weekday)
        cached = self._cache.get(key)
        if cached is None:
            dom = _dom_mask(self.dom, length, first_weekday)
            dow = _dow_mask(self.dow, length, first_weekday)
            cached = (dom | dow) if self.either else (dom & dow)
            self._cache[key] = cached
        return cached

    def can_fire_in(self, month: int) -> bool:
        return any(self.mask(length, first) for length in possible_lengths(month) for first in range(7))


def _valid(length: int) -> int:
    return (1 << (length + 1)) - 2


def _dom_mask(spec: DayOfMonthSpec, length: int, first_weekday: int) -> int:
    mask = spec.days & _valid(length)
    if spec.last:
        mask |= 1 << length
    if spec.last_weekday:
        day = length
        while _weekday_of(day, first_weekday) in (0, 6):
            day -= 1
        mask |= 1 << day
    nearest = spec.nearest_weekday & _valid(length)
    while nearest:
        low = nearest & -nearest
        nearest ^= low
        mask |= 1 << _nearest_weekday(low.bit_length() - 1, length, first_weekday)
    return mask


def _nearest_weekday(day: int, length: int, first_weekday: int) -> int:
    """Quartz's ``dW``: the weekday nearest ``day`` without leaving the month."""
    weekday = _weekday_of(day, first_weekday)
    if weekday == 6:  # Saturday: Friday before, or Monday after when the 1st is a Saturday
        return day - 1 if day > 1 else day + 2
    if weekday == 0:  # Sunday: Monday after, or Friday before when the last day is a Sunday
        return day + 1 if day < length else day - 2
    return day


def _dow_mask(spec: DayOfWeekSpec, length: int, first_weekday: int) -> int:
    mask = 0
    for weekday in range(7):
        first_day = (weekday - first_weekday) % 7 + 1
        if spec.weekdays >> weekday & 1:
            mask |= _EVERY_SEVENTH[first_day - 1]
        if spec.last_of >> weekday & 1:
            mask |= 1 << (first_day + 7 * ((length - first_day) // 7))
    for weekday, n in spec.nth:
        day = (weekday - first_weekday) % 7 + 1 + 7 * (n - 1)
        if day <= length:
            mask |= 1 << day
    return mask & _valid(length)
