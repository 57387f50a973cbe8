"""How close together a schedule fires: the shortest time between two consecutive fire times.

An operator may refuse schedules that fire too often (``--min-interval``), so this must be exact
and quick, for ``* * * * * *`` (86,400 fires a day) as for ``0 0 29 2 *``. Walking the fire
times is neither, so the answer is worked out from the expression and checked where DST can
change it:

* **On the wall clock** a cron schedule fires at the same times of day (seconds x minutes x hours)
  on every day it matches. The shortest gap is therefore the smallest of: two allowed seconds in
  a minute; the last second of a minute to the first of the next allowed minute; the same across
  hours; and the last time of a day to the first time of the next matching day (which needs the
  matching days: scanned over :data:`DAY_YEARS` years, only when it could be the answer).
* **Across a DST change** the wall clock jumps, and only the fires next to the change see new
  neighbours: a skipped hour brings the fires on either side of it an hour closer; a shifted fire
  lands where the gap ends, next to the following one; a repeated hour fired on both passes puts
  the end of the first pass next to the start of the second. Those neighbours all lie within
  ``below`` seconds of the change when their gap is shorter than ``below``, so the engine itself
  lists the fires there, for each change of the zone's offset in the next :data:`DST_YEARS` years.

Everywhere else the offset is constant, so a gap in real time is the gap on the wall clock.
``start_at`` and ``end_at`` are not considered: the answer is the schedule's, not a job's window.
An ``@every`` schedule's gap is its interval, whatever the zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from itertools import pairwise

from cronwheel.schedule.days import days_in_month
from cronwheel.schedule.elapsed import IntervalSchedule, OnceSchedule
from cronwheel.schedule.kinds import Schedule
from cronwheel.schedule.schedule import CronSchedule
from cronwheel.schedule.zone import zone_model

DAY_YEARS = 28  # the calendar's cycle of weekdays and leap years (within a century)
DST_YEARS = 4  # DST changes fall on the same weekdays every year; a few years show every pairing
_DAY = 86_400
_MAX_FIRES_NEAR_CHANGE = 64  # never reached: fires at least `below` apart on the wall clock


@dataclass(frozen=True, slots=True)
class Gap:
    """Two consecutive fire times ``seconds`` apart (aware, in the schedule's zone)."""

    seconds: int
    first: datetime
    second: datetime


def shortest_gap(schedule: Schedule, after: datetime, *, below: int) -> Gap | None:
    """The shortest time between two consecutive fire times of ``schedule`` from ``after`` on, if
    it is shorter than ``below`` seconds (else None: no two fires are closer than ``below``).
    An interval's gap is its length; a one-time schedule has none."""
    if isinstance(schedule, OnceSchedule):
        return None
    if isinstance(schedule, IntervalSchedule):
        first = schedule.next_after(after)
        second = None if first is None else schedule.next_after(first)
        if first is None or second is None or schedule.every_s >= below:
            return None
        return Gap(schedule.every_s, first, second)
    wall = _wall_gap(schedule, after, below)
    near_changes = _dst_gap(schedule, after, below if wall is None else wall.seconds)
    return wall if near_changes is None else near_changes


# -- on the wall clock -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Pair:
    """Two consecutive times of day (seconds since midnight), ``days`` apart."""

    seconds: int
    first: int
    second: int
    days: int = 0


def _wall_gap(schedule: CronSchedule, after: datetime, below: int) -> Gap | None:
    closest = min(_pairs_in_a_day(schedule), key=lambda pair: pair.seconds, default=None)
    found = None
    if closest is not None and closest.seconds < below:
        below = closest.seconds
        found = _example(schedule, closest, _first_day(schedule, after))
    night = _night(schedule, after, below)
    return found if night is None else night


def _pairs_in_a_day(schedule: CronSchedule) -> list[_Pair]:
    """The closest pair of each kind: two seconds of a minute, the last second of a minute and
    the first of the next allowed one, the same for hours (every matching day has them all)."""
    seconds, minutes, hours = schedule.seconds.values(), schedule.minutes.values(), schedule.hours.values()
    pairs = [
        _Pair(b - a, _tod(hours[0], minutes[0], a), _tod(hours[0], minutes[0], b))
        for a, b in pairwise(seconds)
    ]
    for a, b in pairwise(minutes):
        first, second = _tod(hours[0], a, seconds[-1]), _tod(hours[0], b, seconds[0])
        pairs.append(_Pair(second - first, first, second))
    for a, b in pairwise(hours):
        first, second = _tod(a, minutes[-1], seconds[-1]), _tod(b, minutes[0], seconds[0])
        pairs.append(_Pair(second - first, first, second))
    return pairs


def _night(schedule: CronSchedule, after: datetime, below: int) -> Gap | None:
    """The last fire of a day to the first of the next matching day, if under ``below``."""
    first_of_day = _tod(schedule.hours.first, schedule.minutes.first, schedule.seconds.first)
    hours, minutes, seconds = schedule.hours.values(), schedule.minutes.values(), schedule.seconds.values()
    last_of_day = _tod(hours[-1], minutes[-1], seconds[-1])
    if _DAY + first_of_day - last_of_day >= below:  # not even on consecutive days
        return None
    days = _closest_days(schedule, after)
    if days is None:
        return None
    apart = (days[1] - days[0]).days
    night = _Pair(apart * _DAY + first_of_day - last_of_day, last_of_day, first_of_day, apart)
    return _example(schedule, night, days[0]) if night.seconds < below else None


def _tod(hour: int, minute: int, second: int) -> int:
    return hour * 3600 + minute * 60 + second


def _first_day(schedule: CronSchedule, after: datetime) -> date:
    """The first day after ``after``'s (local) day that the schedule fires on."""
    local = after.astimezone(schedule.zone).replace(tzinfo=None)
    tomorrow = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
    found = schedule.next_wall(tomorrow)
    return (found or tomorrow).date()


def _closest_days(schedule: CronSchedule, after: datetime) -> tuple[date, date] | None:
    """The first two consecutive matching days closest together, in the :data:`DAY_YEARS` years
    from ``after``'s day (None: fewer than two such days)."""
    start = after.astimezone(schedule.zone).date()
    year, month = start.year, start.month
    previous: date | None = None
    best: tuple[date, date] | None = None
    for _ in range(DAY_YEARS * 12):
        if schedule.months.allows[month]:
            first_weekday = (date(year, month, 1).weekday() + 1) % 7  # cron's: 0 = Sunday
            mask = schedule.days.mask(days_in_month(year, month), first_weekday)
            for day in (d for d in range(1, 32) if mask >> d & 1):
                current = date(year, month, day)
                if current < start:
                    continue
                if previous is not None and (best is None or current - previous < best[1] - best[0]):
                    best = (previous, current)
                    if current - previous == timedelta(days=1):
                        return best
                previous = current
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return best


def _example(schedule: CronSchedule, pair: _Pair, day: date) -> Gap:
    """``pair`` on ``day`` (and the days after), as aware times in the schedule's zone."""
    midnight = datetime.combine(day, datetime.min.time(), tzinfo=schedule.zone)
    first = midnight + timedelta(seconds=pair.first)
    second = midnight + timedelta(days=pair.days, seconds=pair.second)
    return Gap(pair.seconds, first, second)


# -- across DST changes ----------------------------------------------------------------------------


def _dst_gap(schedule: CronSchedule, after: datetime, below: int) -> Gap | None:
    model = zone_model(schedule.zone)
    if model.fixed_offset is not None:
        return None
    instant = int(after.timestamp())
    end = instant + DST_YEARS * 366 * _DAY
    closest: Gap | None = None
    while instant < end:
        segment = model.segment(instant)
        if segment.offset_after != segment.offset:
            found = _gap_near(schedule, segment.end, below)
            if found is not None and (closest is None or found.seconds < closest.seconds):
                closest = found
        instant = segment.end
    return closest


def _gap_near(schedule: CronSchedule, change: int, below: int) -> Gap | None:
    """The shortest gap under ``below`` between consecutive fires within ``below`` seconds of the
    instant ``change`` (where the zone's offset changes), or None."""
    fires: list[int] = []
    at = schedule.next_timestamp(change - below - 1)
    while at is not None and at <= change + below and len(fires) < _MAX_FIRES_NEAR_CHANGE:
        fires.append(at)
        at = schedule.next_timestamp(at)
    gaps = [(b - a, a, b) for a, b in pairwise(fires) if b - a < below]
    if not gaps:
        return None
    seconds, first, second = min(gaps)
    zone = schedule.zone
    return Gap(seconds, datetime.fromtimestamp(first, zone), datetime.fromtimestamp(second, zone))
