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


class Schedule:
    """A parsed cron schedule in a time zone. Immutable and safe to share between threads.

    Create with :func:`cronwheel.schedule.parse_schedule`. Fire times are whole seconds.
    """

    __slots__ = (
        "_gap_shift",
        "_model",
        "_months",
        "_start_tod",
        "days",
        "dst_fold",
        "dst_gap",
        "expression",
        "hours",
        "minutes",
        "months",
        "seconds",
        "seed",
        "timezone",
        "wildcard",
        "zone",
    )

    expression: str
    timezone: str
    seed: str | None
    dst_gap: DstGap
    dst_fold: DstFold
    wildcard: bool

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
        self.expression = expression
        self.timezone = timezone
        self.zone = zone
        self._model = model
        self.seconds, self.minutes, self.hours = seconds, minutes, hours
        self.days, self.months = days, months
        self._months = months.allows
        self._start_tod = hours.first * 3600 + minutes.first * 60 + seconds.first
        self.wildcard = minutes.star or hours.star
        self.dst_gap, self.dst_fold = dst_gap, dst_fold
        self._gap_shift = dst_gap == "shift"
        self.seed = seed

    def __repr__(self) -> str:
        return (
            f"Schedule({self.expression!r}, timezone={self.timezone!r}, "
            f"dst_gap={self.dst_gap!r}, dst_fold={self.dst_fold!r})"
        )

    # -- public API ---------------------------------------------------------------------------

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire time strictly after ``instant`` (aware), in the schedule's zone, or
        ``None`` when there is none before the year 9998."""
        found = self.next_timestamp(_timestamp(instant))
        return None if found is None else datetime.fromtimestamp(found, self.zone)

    def iter_after(self, instant: datetime) -> Iterator[datetime]:
        """Successive fire times strictly after ``instant``."""
        ts: float = _timestamp(instant)
        while (found := self.next_timestamp(ts)) is not None:
            yield datetime.fromtimestamp(found, self.zone)
            ts = found

    def fires_after(self, instant: datetime) -> Iterator[Fire]:
        """Like :meth:`iter_after`, with each fire's DST facts."""
        ts: float = _timestamp(instant)
        while (found := self._next(floor(ts) + 1)) is not None:
            at, kind, wall = found
            moment = datetime.fromtimestamp(at, self.zone)
            yield Fire(moment, kind, _wall_datetime(wall))
            ts = at

    def next_timestamp(self, ts: float) -> int | None:
        """The first fire time strictly after ``ts`` (POSIX seconds), as POSIX seconds."""
        found = self._next(floor(ts) + 1)
        return None if found is None else found[0]

    def matches_wall(self, wall: datetime) -> bool:
        """Whether a naive local wall-clock time matches the expression (ignoring DST)."""
        if wall.microsecond or not self._months[wall.month]:
            return False
        tod = wall.hour * 3600 + wall.minute * 60 + wall.second
        if self._next_tod(tod) != tod:
            return False
        length = days_in_month(wall.year, wall.month)
        first = (wall.replace(day=1).weekday() + 1) % 7
        return bool(self.days.mask(length, first) >> wall.day & 1)

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
        u = u0
        while u < _MAX_INSTANT:
            seg = self._model.segment(u)
            lo, hi = self._window(seg, u)
            if not memo_lo <= lo <= memo_wall:
                found = self._next_wall(lo)
                memo_lo, memo_wall = lo, _NEVER if found is None else found
            wall = memo_wall
            if wall < hi:
                return wall - seg.offset, self._kind(seg, wall), wall
            # a gap follows: shift fires once at its end if a wall time inside it matches
            if self._gap_shift and wall < seg.end + seg.offset_after > seg.end + seg.offset:
                return self._shifted(seg, wall)
            if wall == _NEVER:
                return None
            u = seg.end
        return None

    def _window(self, seg: Segment, u: int) -> tuple[int, int]:
        """Wall-time window [lo, hi) to search in ``seg`` from instant ``u`` under the fold
        policy."""
        lo = u + seg.offset
        hi = seg.end + seg.offset
        if self.dst_fold == "first" and seg.offset_before > seg.offset:
            lo = max(lo, seg.start + seg.offset_before)  # skip the second pass
        elif self.dst_fold == "last" and seg.offset_after < seg.offset:
            hi = min(hi, seg.end + seg.offset_after)  # leave the first pass to the second
        return lo, hi

    def _shifted(self, seg: Segment, wall: int) -> tuple[int, FireKind, int]:
        """The fire at the end of the gap after ``seg``, for ``wall``, a matching time inside it."""
        gap_end = seg.end + seg.offset_after
        if self._next_wall(gap_end) == gap_end:  # a natural fire right at the end of the gap
            return seg.end, FireKind.NORMAL, gap_end
        return seg.end, FireKind.SHIFTED, wall

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
            self.hours.following,
            self.minutes.following,
            self.seconds.following,
        )
        if hours[hour] == hour:
            if minutes[minute] == minute:
                s = seconds[second]
                if s >= 0:
                    return tod - second + s
            m = minutes[minute + 1]
            if m >= 0:
                return hour * 3600 + m * 60 + self.seconds.first
        h = hours[hour + 1]
        if h >= 0:
            return h * 3600 + self.minutes.first * 60 + self.seconds.first
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
        every_day = self.days.every_day
        while year < MAX_YEAR:
            if self._months[month]:
                length = days_in_month(year, month)
                if every_day:
                    found_day = day if day <= length else 0
                else:
                    rest = self.days.mask(length, first_weekday) >> day
                    found_day = day + (rest & -rest).bit_length() - 1 if rest else 0
                if found_day:
                    if found_day != today.day or year != today.year or month != today.month:
                        found_tod = self._start_tod
                    ordinal = date(year, month, found_day).toordinal()
                    return (ordinal - _EPOCH_ORDINAL) * _DAY + found_tod
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
