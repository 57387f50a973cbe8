"""A time zone as a sequence of constant-offset segments.

The schedule engine needs more than ``utcoffset``: for an instant it needs the segment of time
around it during which the zone's UTC offset is constant, and the offsets just before and just after
that segment, to tell a DST gap (clocks jump forward) from a fold (clocks go back).

``zoneinfo`` does not publish its transitions, so they are found by probing the zone once a day and
bisecting every change down to the second, one calendar year at a time, cached. This is exact because
no zone in the IANA database since 1900 has two offset changes less than two days apart (the test
suite checks this claim against the compiled zone files for every zone). Year boundaries (UTC) are
used as artificial segment boundaries where the offset does not change, which the engine treats like
any other boundary with equal offsets on both sides.
"""

from __future__ import annotations

import threading
from bisect import bisect_right
from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from typing import NamedTuple

_DAY = 86400
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
MIN_YEAR = 2  # keep one year of margin inside datetime's range on both sides
MAX_YEAR = 9998


class Segment(NamedTuple):
    """Instants ``start <= u < end`` (UTC seconds) share ``offset``; neighbours' offsets given."""

    start: int
    end: int
    offset: int
    offset_before: int
    offset_after: int


class _Transition(NamedTuple):
    at: int
    before: int
    after: int


class _Year(NamedTuple):
    """Transitions in [start, end) of one UTC year, and the offsets just before and at the ends."""

    ats: list[int]
    transitions: list[_Transition]
    start_offset: int  # offset at start - 1
    end_offset: int  # offset at end (a transition exactly at end belongs to the next year)


def year_start(year: int) -> int:
    return (date(year, 1, 1).toordinal() - _EPOCH_ORDINAL) * _DAY


def year_of(instant: int) -> int:
    return date.fromordinal(instant // _DAY + _EPOCH_ORDINAL).year


class ZoneModel:
    """Segments of one zone, computed lazily per year and cached; safe to share between threads."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self.fixed_offset = _fixed_offset(zone)
        self._years: dict[int, _Year] = {}
        self._lock = threading.Lock()
        self._last = self._before_last = Segment(0, 0, 0, 0, 0)

    def offset_at(self, instant: int) -> int:
        if self.fixed_offset is not None:
            return self.fixed_offset
        return self.segment(instant).offset

    def segment(self, instant: int) -> Segment:
        """The constant-offset segment that contains ``instant`` (UTC seconds)."""
        last = self._last
        if last.start <= instant < last.end:
            return last
        last = self._before_last
        if last.start <= instant < last.end:
            self._last, self._before_last = last, self._last
            return last
        year = year_of(instant)
        ats, transitions, start_offset, end_offset = self._year(year)
        i = bisect_right(ats, instant)
        if i:
            t = transitions[i - 1]
            start, offset, before = t.at, t.after, t.before
        else:
            start, offset, before = year_start(year), start_offset, start_offset
        if i < len(transitions):
            end, after = transitions[i].at, transitions[i].after
        else:
            end, after = year_start(year + 1), end_offset
        found = Segment(start, end, offset, before, after)
        self._last, self._before_last = found, self._last
        return found

    def _year(self, year: int) -> _Year:
        found = self._years.get(year)
        if found is None:
            with self._lock:
                found = self._years.get(year)
                if found is None:
                    found = self._probe_year(year)
                    self._years[year] = found
        return found

    def _probe_year(self, year: int) -> _Year:
        start, end = year_start(year), year_start(year + 1)
        points = [start - 1, *range(start, end, _DAY), end - 1]
        transitions: list[_Transition] = []
        previous_point, previous_offset = points[0], self._probe(points[0])
        start_offset = previous_offset
        for point in points[1:]:
            offset = self._probe(point)
            if offset != previous_offset:
                at = self._bisect(previous_point, point, previous_offset)
                transitions.append(_Transition(at, previous_offset, offset))
            previous_point, previous_offset = point, offset
        if transitions and transitions[0].at == start:
            start_offset = transitions[0].before
        return _Year([t.at for t in transitions], transitions, start_offset, self._probe(end))

    def _bisect(self, lo: int, hi: int, lo_offset: int) -> int:
        """First instant in (lo, hi] whose offset differs from ``lo_offset``."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self._probe(mid) == lo_offset:
                lo = mid
            else:
                hi = mid
        return hi

    def _probe(self, instant: int) -> int:
        moment = datetime.fromtimestamp(instant, UTC).astimezone(self.zone)
        offset = moment.utcoffset()
        return 0 if offset is None else int(offset.total_seconds())


def _fixed_offset(zone: tzinfo) -> int | None:
    """The zone's offset if it can never change (UTC and fixed-offset zones), else None."""
    key = getattr(zone, "key", None)
    if key in (
        "UTC",
        "Etc/UTC",
        "Etc/UCT",
        "UCT",
        "Etc/Universal",
        "Universal",
        "Zulu",
        "Etc/Zulu",
    ):
        return 0
    if key is None:
        offset = zone.utcoffset(None)
        if isinstance(offset, timedelta):
            return int(offset.total_seconds())
    return None


@lru_cache(maxsize=1024)
def zone_model(zone: tzinfo) -> ZoneModel:
    """One shared model per zone object (``ZoneInfo`` objects are themselves cached per key)."""
    return ZoneModel(zone)
