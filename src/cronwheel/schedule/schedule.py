"""The parsed, immutable schedule and its fire-time computation.

Instants are handled as integer UTC seconds and local wall-clock times as integer "wall seconds"
(seconds since 1970-01-01 00:00 on the zone's wall clock). Matching is done on wall seconds; the
zone, seen as constant-offset segments (:mod:`cronwheel.schedule.zone`), maps them to instants and
tells where the DST policy applies:

* in a segment, every matching wall time ``w`` fires at ``w - offset``;
* a *fold* (clocks go back) makes wall times at the start of a segment repeat those at the end of
  the previous one: ``first`` suppresses the second pass, ``last`` the first, ``both`` keeps both;
* a *gap* (clocks go forward) has wall times that never happen: ``skip`` drops them, ``shift`` fires
  once at the instant the gap ends if any of them matches.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from math import floor
from typing import Literal

from cronwheel.schedule.days import DayRule, days_in_month
from cronwheel.schedule.fields import ValueSet
from cronwheel.schedule.zone import MAX_YEAR, MIN_YEAR, Segment, ZoneModel, year_start

DstGap = Literal["shift", "skip"]
DstFold = Literal["first", "last", "both"]

_DAY = 86400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MIN_INSTANT = year_start(MIN_YEAR)
_MAX_INSTANT = year_start(MAX_YEAR)
_NEVER = 1 << 62


class FireKind(enum.Enum):
    """How a fire time relates to the wall clock (for previews and audit)."""

    NORMAL = "normal"
    SHIFTED = "shifted"  # its wall time fell in a DST gap; fired when the gap ended
    REPEATED_FIRST = "repeated-first"  # the first pass of a wall time that repeats
    REPEATED_SECOND = "repeated-second"  # the second pass of a repeated wall time


@dataclass(frozen=True, slots=True)
class Fire:
    """One fire time with the facts a preview shows."""

    at: datetime  # aware, in the schedule's zone
    kind: FireKind
    wall: datetime  # the nominal local wall time (naive); differs from ``at`` only when SHIFTED


class CronSchedule:
    """A parsed cron schedule in a time zone. Immutable and safe to share between threads.

    Create with :func:`cronwheel.schedule.parse_schedule`. Fire times are whole seconds.
    """

    # Read-only: every attribute is a private slot behind a property without a setter.
    __slots__ = (
        "_days",
        "_dst_fold",
        "_dst_gap",
        "_expression",
        "_hours",
        "_minutes",
        "_model",
        "_months",
        "_seconds",
        "_seed",
        "_start_tod",
        "_timezone",
        "_zone",
    )

    def __init__(
        self,
        *,
        expression: str,
        timezone: str,
        zone: tzinfo,
        model: ZoneModel,
        seconds: ValueSet,
        minutes: ValueSet,
        hours: ValueSet,
        days: DayRule,
        months: ValueSet,
        dst_gap: DstGap,
        dst_fold: DstFold,
        seed: str | None,
    ) -> None:
        self._expression = expression
        self._timezone = timezone
        self._zone = zone
        self._model = model
        self._seconds, self._minutes, self._hours = seconds, minutes, hours
        self._days, self._months = days, months
        self._start_tod = hours.first * 3600 + minutes.first * 60 + seconds.first
        self._dst_gap, self._dst_fold = dst_gap, dst_fold
        self._seed = seed

    @property
    def expression(self) -> str:
        """The expression as given."""
        return self._expression

    @property
    def timezone(self) -> str:
        """The IANA zone name."""
        return self._timezone

    @property
    def zone(self) -> tzinfo:
        """The zone object."""
        return self._zone

    @property
    def seconds(self) -> ValueSet:
        """Allowed seconds (only 0 for five-field expressions)."""
        return self._seconds

    @property
    def minutes(self) -> ValueSet:
        """Allowed minutes."""
        return self._minutes

    @property
    def hours(self) -> ValueSet:
        """Allowed hours."""
        return self._hours

    @property
    def days(self) -> DayRule:
        """The day rule (day-of-month and day-of-week together)."""
        return self._days

    @property
    def months(self) -> ValueSet:
        """Allowed months."""
        return self._months

    @property
    def dst_gap(self) -> DstGap:
        """Policy for local times skipped by DST (resolved: never None)."""
        return self._dst_gap

    @property
    def dst_fold(self) -> DstFold:
        """Policy for local times repeated by DST (resolved: never None)."""
        return self._dst_fold

    @property
    def seed(self) -> str | None:
        """What H was hashed from, or None."""
        return self._seed

    def __repr__(self) -> str:
        return (
            f"CronSchedule({self.expression!r}, timezone={self.timezone!r}, "
            f"dst_gap={self.dst_gap!r}, dst_fold={self.dst_fold!r})"
        )

    @property
    def wildcard(self) -> bool:
        """True when the minute or hour field starts with ``*``: cron's elapsed-time schedules."""
        return self._minutes.star or self._hours.star

    # -- public API ---------------------------------------------------------------------------

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire time strictly after ``instant`` (aware), in the schedule's zone, or
        ``None`` when there is none before the year 9998."""
        found = self.next_timestamp(_timestamp(instant))
        return None if found is None else datetime.fromtimestamp(found, self._zone)

    def iter_after(self, instant: datetime) -> Iterator[datetime]:
        """Successive fire times strictly after ``instant``."""
        ts: float = _timestamp(instant)
        while (found := self.next_timestamp(ts)) is not None:
            yield datetime.fromtimestamp(found, self._zone)
            ts = found

    def fires_after(self, instant: datetime) -> Iterator[Fire]:
        """Like :meth:`iter_after`, with each fire's DST facts."""
        ts: float = _timestamp(instant)
        while (found := self._next(floor(ts) + 1)) is not None:
            at, kind, wall = found
            moment = datetime.fromtimestamp(at, self._zone)
            yield Fire(moment, kind, _wall_datetime(wall))
            ts = at

    def next_timestamp(self, ts: float) -> int | None:
        """The first fire time strictly after ``ts`` (POSIX seconds), as POSIX seconds."""
        found = self._next(floor(ts) + 1)
        return None if found is None else found[0]

    def next_wall(self, wall: datetime) -> datetime | None:
        """The first naive wall-clock time at or after ``wall`` that matches the expression,
        ignoring DST (what a clock on the wall would show), or None."""
        base = (wall.toordinal() - _EPOCH_ORDINAL) * _DAY + wall.hour * 3600 + wall.minute * 60
        found = self._next_wall(base + wall.second + (1 if wall.microsecond else 0))
        return None if found is None else _wall_datetime(found)

    def matches_wall(self, wall: datetime) -> bool:
        """Whether a naive local wall-clock time matches the expression (ignoring DST)."""
        if wall.microsecond or not self._months.allows[wall.month]:
            return False
        tod = wall.hour * 3600 + wall.minute * 60 + wall.second
        if self._next_tod(tod) != tod:
            return False
        length = days_in_month(wall.year, wall.month)
        first = (wall.replace(day=1).weekday() + 1) % 7
        return bool(self._days.mask(length, first) >> wall.day & 1)

    # -- the search ---------------------------------------------------------------------------

    def _next(self, u0: int) -> tuple[int, FireKind, int] | None:
        """First fire at or after instant ``u0``: (instant, kind, nominal wall time)."""
        if u0 >= _MAX_INSTANT:
            return None
        u0 = max(u0, _MIN_INSTANT)
        fixed = self._model.fixed_offset
        if fixed is not None:
            wall = self._next_wall(u0 + fixed)
            return None if wall is None else (wall - fixed, FireKind.NORMAL, wall)
        # memo: the first match at or after memo_lo is memo_wall (_NEVER if there is none)
        memo_lo = memo_wall = -_NEVER
        seg = self._model.segment(u0)
        gap_shift = self._dst_gap == "shift"
        if gap_shift and u0 == seg.start and seg.offset_before < seg.offset:
            # u0 is the very end of a gap: the gap's shifted fire happens at u0
            memo_lo = seg.start + seg.offset_before
            found = self._next_wall(memo_lo)
            memo_wall = _NEVER if found is None else found
            if memo_wall < seg.start + seg.offset:
                return self._gap_fire(seg.start, seg.start + seg.offset, memo_wall)
        u = u0
        while True:
            lo, hi = self._window(seg, u)
            if not memo_lo <= lo <= memo_wall:
                found = self._next_wall(lo)
                memo_lo, memo_wall = lo, _NEVER if found is None else found
            wall = memo_wall
            if wall < hi:
                return wall - seg.offset, self._kind(seg, wall), wall
            # a gap follows: shift fires once at its end if a wall time inside it matches
            if gap_shift and wall < seg.end + seg.offset_after > seg.end + seg.offset:
                return self._gap_fire(seg.end, seg.end + seg.offset_after, wall)
            u = seg.end
            if wall == _NEVER or u >= _MAX_INSTANT:
                return None
            seg = self._model.segment(u)

    def _window(self, seg: Segment, u: int) -> tuple[int, int]:
        """Wall-time window [lo, hi) to search in ``seg`` from instant ``u`` under the fold
        policy."""
        lo = u + seg.offset
        hi = seg.end + seg.offset
        if self._dst_fold == "first" and seg.offset_before > seg.offset:
            lo = max(lo, seg.start + seg.offset_before)  # skip the second pass
        elif self._dst_fold == "last" and seg.offset_after < seg.offset:
            hi = min(hi, seg.end + seg.offset_after)  # leave the first pass to the second
        return lo, hi

    def _gap_fire(self, at: int, gap_end: int, wall: int) -> tuple[int, FireKind, int]:
        """The one fire at instant ``at`` where a gap ends (wall time ``gap_end``), for ``wall``,
        the first matching wall time inside the gap."""
        if self._next_wall(gap_end) == gap_end:  # a natural fire right at the end of the gap
            return at, FireKind.NORMAL, gap_end
        return at, FireKind.SHIFTED, wall

    @staticmethod
    def _kind(seg: Segment, wall: int) -> FireKind:
        if seg.offset_before > seg.offset and wall < seg.start + seg.offset_before:
            return FireKind.REPEATED_SECOND
        if seg.offset_after < seg.offset and wall >= seg.end + seg.offset_after:
            return FireKind.REPEATED_FIRST
        return FireKind.NORMAL

    def _next_tod(self, tod: int) -> int:
        """Smallest matching second-of-day >= ``tod``, or -1 if none is left in the day."""
        hour, rest = divmod(tod, 3600)
        minute, second = divmod(rest, 60)
        hours, minutes, seconds = (
            self._hours.following,
            self._minutes.following,
            self._seconds.following,
        )
        if hours[hour] == hour:
            if minutes[minute] == minute:
                s = seconds[second]
                if s >= 0:
                    return tod - second + s
            m = minutes[minute + 1]
            if m >= 0:
                return hour * 3600 + m * 60 + self._seconds.first
        h = hours[hour + 1]
        if h >= 0:
            return h * 3600 + self._minutes.first * 60 + self._seconds.first
        return -1

    def _next_wall(self, wall: int) -> int | None:
        """Smallest matching wall second >= ``wall`` (ignoring DST), or None before year 9998."""
        days, tod = divmod(wall, _DAY)
        today = date.fromordinal(days + _EPOCH_ORDINAL)
        year, month, day = today.year, today.month, today.day
        found_tod = self._next_tod(tod)
        if found_tod < 0:
            day += 1
        first_weekday = (today.weekday() - today.day + 2) % 7  # cron weekday (0 = Sunday) of the 1st
        every_day = self._days.every_day
        months = self._months.allows
        while year < MAX_YEAR:
            if months[month]:
                length = days_in_month(year, month)
                if every_day:
                    found_day = day if day <= length else 0
                else:
                    rest = self._days.mask(length, first_weekday) >> day
                    found_day = day + (rest & -rest).bit_length() - 1 if rest else 0
                if found_day:
                    if month == today.month and year == today.year:  # this month: no date needed
                        if found_day != today.day:
                            found_tod = self._start_tod
                        return (days + found_day - today.day) * _DAY + found_tod
                    ordinal = date(year, month, found_day).toordinal()
                    return (ordinal - _EPOCH_ORDINAL) * _DAY + self._start_tod
            first_weekday = (first_weekday + days_in_month(year, month)) % 7
            day = 1
            month += 1
            if month == 13:
                month, year = 1, year + 1
        return None


def _timestamp(instant: datetime) -> float:
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError("instant must be timezone-aware (a naive datetime has no defined instant)")
    return instant.timestamp()


def _wall_datetime(wall: int) -> datetime:
    days, tod = divmod(wall, _DAY)
    base = datetime.fromordinal(days + _EPOCH_ORDINAL)
    return base.replace(hour=tod // 3600, minute=tod // 60 % 60, second=tod % 60)
