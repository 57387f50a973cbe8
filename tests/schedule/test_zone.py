"""The zone model (:mod:`cronwheel.schedule.zone`) against the compiled zone data.

The model finds transitions by probing each zone once a day and bisecting. That is exact only while
no zone changes its UTC offset twice within a probe interval, so these tests compare the model with
an independent oracle, for every zone: the transitions read straight from the TZif data by the
pure-Python ``zoneinfo`` implementation (``zoneinfo._zoneinfo``, used here and nowhere else), and,
after the last transition in the file, the instants given by the file's POSIX TZ footer rule,
checked against ``datetime.fromtimestamp`` one second either side.
"""

from __future__ import annotations

import importlib
import zoneinfo
from bisect import bisect_left, bisect_right
from datetime import UTC, datetime, timedelta, timezone
from functools import cache
from itertools import pairwise
from typing import Any, NamedTuple

import pytest

from cronwheel.schedule.zone import Segment, ZoneModel, year_of, year_start

_PURE: Any = importlib.import_module("zoneinfo._zoneinfo")  # the pure-Python implementation

FIRST_YEAR, LAST_YEAR = 1970, 2040  # the span compared segment by segment
SPACING_SINCE = 1900
SPACING_UNTIL = 2100
MIN_SPACING = 2 * 86400  # what the once-a-day probe needs, with a margin
STRIDE = 6  # besides the irregular years, every sixth year of each zone is compared (offset per zone)

ZONES = sorted(zoneinfo.available_timezones())


class Change(NamedTuple):
    """An offset-changing transition: from ``at`` (UTC seconds) on, ``after`` replaces ``before``."""

    at: int
    before: int
    after: int


class Oracle(NamedTuple):
    initial: int  # the offset before the first change
    changes: list[Change]
    ats: list[int]

    def offset_at(self, instant: int) -> int:
        i = bisect_right(self.ats, instant)
        return self.changes[i - 1].after if i else self.initial

    def changes_in(self, lo: int, hi: int) -> list[Change]:
        """Changes with ``lo <= at < hi``."""
        return self.changes[bisect_left(self.ats, lo) : bisect_left(self.ats, hi)]


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


def _c_offset(zone: zoneinfo.ZoneInfo, instant: int) -> int:
    offset = datetime.fromtimestamp(instant, zone).utcoffset()
    assert offset is not None
    return _seconds(offset)


@cache
def oracle(key: str, until_year: int = SPACING_UNTIL) -> Oracle:
    """Every offset change of ``key`` from the compiled data, through the end of ``until_year``."""
    pure = _PURE.ZoneInfo.no_cache(key)
    trans_utc: list[int] = list(pure._trans_utc)
    after_rule = pure._tz_after
    has_rule = isinstance(after_rule, _PURE._TZStr)
    if pure._tti_before is not None:
        initial = _seconds(pure._tti_before.utcoff)
    elif has_rule:
        initial = _seconds(after_rule.std.utcoff)
    else:
        initial = _seconds(after_rule.utcoff)
    changes: list[Change] = []
    previous = initial
    for at, info in zip(trans_utc, pure._ttinfos, strict=True):
        offset = _seconds(info.utcoff)
        if offset != previous:
            changes.append(Change(at, previous, offset))
        previous = offset
    if has_rule:
        # Beyond the table the footer rule decides, evaluated per UTC year: the offset can change
        # only at the rule's two instants of each year and at year boundaries. Which of them do
        # is read from the C implementation one second either side.
        zone = zoneinfo.ZoneInfo(key)
        std, dst = _seconds(after_rule.std.utcoff), _seconds(after_rule.dst.utcoff)
        last = trans_utc[-1] if trans_utc else year_start(1900)
        candidates: set[int] = set()
        for year in range(max(year_of(last) - 1, 1900), until_year + 2):
            start, end = after_rule.transitions(year)
            candidates.update((start - std, end - dst, year_start(year)))
        for at in sorted(t for t in candidates if last < t < year_start(until_year + 1)):
            before, offset = _c_offset(zone, at - 1), _c_offset(zone, at)
            if before != offset:
                assert before == previous, f"{key}: the footer rule disagrees with the table at {at}"
                assert offset in (std, dst), f"{key}: {offset} is neither offset of the footer rule"
                changes.append(Change(at, before, offset))
                previous = offset
    return Oracle(initial, changes, [change.at for change in changes])


def _years_to_compare(index: int, found: Oracle) -> list[int]:
    """A subset of FIRST_YEAR..LAST_YEAR, enough to stay fast and still cover every year somewhere:
    the first and last years, every year whose changes differ in shape from the year before or
    after (rule changes, one-off changes), and every STRIDE-th year (offset by the zone's index)."""
    years = range(FIRST_YEAR, LAST_YEAR + 1)

    def shape(year: int) -> tuple[tuple[int, int], ...]:
        return tuple((c.before, c.after) for c in found.changes_in(year_start(year), year_start(year + 1)))

    shapes = {year: shape(year) for year in range(FIRST_YEAR - 1, LAST_YEAR + 2)}
    chosen = {FIRST_YEAR, LAST_YEAR}
    chosen.update(year for year in years if (year + index) % STRIDE == 0)
    chosen.update(year for year in years if not shapes[year - 1] == shapes[year] == shapes[year + 1])
    return sorted(chosen)


def _check_year(key: str, model: ZoneModel, found: Oracle, year: int) -> list[str]:
    """Walk the model's segments across ``year``; describe every disagreement with the oracle."""
    problems: list[str] = []
    lo, hi = year_start(year), year_start(year + 1)
    u = lo
    boundaries: set[int] = set()
    while u < hi:
        seg = model.segment(u)
        where = f"{key} {year} segment {seg}"
        if not seg.start <= u < seg.end:
            return [f"{where} does not contain {u}"]
        boundaries.add(seg.start)
        expected = (found.offset_at(seg.start), found.offset_at(seg.start - 1), found.offset_at(seg.end))
        if (seg.offset, seg.offset_before, seg.offset_after) != expected:
            problems.append(f"{where}: (offset, before, after) should be {expected}")
        inside = found.changes_in(seg.start + 1, seg.end)
        if inside:
            problems.append(f"{where} contains the change {inside[0]}")
        u = seg.end
    missed = [c for c in found.changes_in(lo, hi) if c.at not in boundaries]
    problems.extend(f"{key} {year}: the change {c} is no segment boundary" for c in missed)
    return problems


def test_model_matches_compiled_data_for_every_zone() -> None:
    problems: list[str] = []
    compared = 0
    for index, key in enumerate(ZONES):
        found = oracle(key)
        model = ZoneModel(zoneinfo.ZoneInfo(key))  # a private model: no cache shared with other tests
        for year in _years_to_compare(index, found):
            problems.extend(_check_year(key, model, found, year))
            compared += 1
    assert compared >= len(ZONES) * (LAST_YEAR - FIRST_YEAR + 1) // STRIDE
    assert not problems, "\n".join(problems[:50])


def test_every_year_is_compared_in_some_zone() -> None:
    covered: set[int] = set()
    for index, key in enumerate(ZONES[:STRIDE]):
        covered.update(_years_to_compare(index, oracle(key)))
    assert covered == set(range(FIRST_YEAR, LAST_YEAR + 1))


def test_no_two_offset_changes_are_closer_than_two_days() -> None:
    """The claim the once-a-day probe rests on, checked in the compiled data of every zone."""
    too_close: list[str] = []
    since = year_start(SPACING_SINCE)
    for key in ZONES:
        changes = [c for c in oracle(key).changes if c.at >= since]
        for first, second in pairwise(changes):
            if second.at - first.at < MIN_SPACING:
                too_close.append(f"{key}: {first} and {second}")
    assert not too_close, "\n".join(too_close)


def test_oracle_sees_the_known_transitions() -> None:
    """The oracle itself, on transitions known by heart (table and footer-rule years)."""
    new_york = oracle("America/New_York")
    expected = [
        Change(int(datetime(2026, 3, 8, 7, tzinfo=UTC).timestamp()), -5 * 3600, -4 * 3600),
        Change(int(datetime(2026, 11, 1, 6, tzinfo=UTC).timestamp()), -4 * 3600, -5 * 3600),
    ]
    assert new_york.changes_in(year_start(2026), year_start(2027)) == expected
    assert len(new_york.changes_in(year_start(2040), year_start(2041))) == 2  # the footer rule's years
    assert oracle("Asia/Kolkata").changes_in(year_start(1946), year_start(2101)) == []
    apia = oracle("Pacific/Apia").changes_in(year_start(2011), year_start(2012))
    lost_day = int(datetime(2011, 12, 30, 10, tzinfo=UTC).timestamp())
    assert Change(lost_day, -10 * 3600, 14 * 3600) in apia


def _at_year_start(change: Change) -> bool:
    return change.at >= year_start(SPACING_SINCE) and change.at == year_start(year_of(change.at))


def test_change_at_a_year_start_is_seen_from_both_sides() -> None:
    """A change exactly at 1 January 00:00 UTC (several zones have one, all before 1970) must be the
    ``offset_after`` of the segment that ends there, not only the ``offset_before`` of the one that
    starts there: the engine reads a gap or a fold from the segment before it."""
    problems: list[str] = []
    for key in ZONES:
        changes = [c for c in oracle(key).changes if _at_year_start(c)]
        model = ZoneModel(zoneinfo.ZoneInfo(key)) if changes else None
        for change in changes:
            assert model is not None
            before, after = model.segment(change.at - 1), model.segment(change.at)
            if (after.start, after.offset_before, after.offset) != (change.at, change.before, change.after):
                problems.append(f"{key} {change}: the segment from it is {after}")
            if (before.end, before.offset, before.offset_after) != (change.at, change.before, change.after):
                problems.append(f"{key} {change}: the segment before it is {before}")
    assert not problems, "\n".join(problems)


# -- unit tests ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("zone", [zoneinfo.ZoneInfo("UTC"), zoneinfo.ZoneInfo("Etc/UTC"), UTC])
def test_utc_has_a_fixed_offset(zone: timezone | zoneinfo.ZoneInfo) -> None:
    model = ZoneModel(zone)
    assert model.fixed_offset == 0
    assert model.offset_at(0) == 0
    assert model.offset_at(year_start(2026)) == 0


def test_fixed_offset_of_other_zones() -> None:
    assert ZoneModel(timezone(timedelta(hours=5, minutes=30))).fixed_offset == 19800
    assert ZoneModel(timezone(timedelta(hours=-3))).fixed_offset == -10800
    assert ZoneModel(zoneinfo.ZoneInfo("America/New_York")).fixed_offset is None


def test_year_helpers() -> None:
    assert year_start(1970) == 0
    assert year_start(2026) == int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert year_of(year_start(2026)) == 2026
    assert year_of(year_start(2026) - 1) == 2025
    assert year_of(-1) == 1969


def _ts(year: int, month: int, day: int, hour: int) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp())


SPRING_2026 = _ts(2026, 3, 8, 7)  # 02:00 EST -> 03:00 EDT
FALL_2026 = _ts(2026, 11, 1, 6)  # 02:00 EDT -> 01:00 EST
FALL_2025 = _ts(2025, 11, 2, 6)
EST, EDT = -5 * 3600, -4 * 3600


@pytest.mark.parametrize(
    ("instant", "expected"),
    [
        # the first 2026 segment starts at the artificial year boundary: equal offsets there
        (year_start(2026), Segment(year_start(2026), SPRING_2026, EST, EST, EDT)),
        (SPRING_2026 - 1, Segment(year_start(2026), SPRING_2026, EST, EST, EDT)),
        (SPRING_2026, Segment(SPRING_2026, FALL_2026, EDT, EST, EST)),
        (_ts(2026, 7, 1, 12), Segment(SPRING_2026, FALL_2026, EDT, EST, EST)),
        (FALL_2026 - 1, Segment(SPRING_2026, FALL_2026, EDT, EST, EST)),
        (FALL_2026, Segment(FALL_2026, year_start(2027), EST, EDT, EST)),
        (year_start(2027) - 1, Segment(FALL_2026, year_start(2027), EST, EDT, EST)),
        (year_start(2026) - 1, Segment(FALL_2025, year_start(2026), EST, EDT, EST)),
    ],
)
def test_new_york_2026_segments(instant: int, expected: Segment) -> None:
    model = ZoneModel(zoneinfo.ZoneInfo("America/New_York"))
    assert model.segment(instant) == expected
    assert model.offset_at(instant) == expected.offset


def test_new_york_segments_in_any_order() -> None:
    """The model's two-entry lookup cache must not leak between unrelated instants."""
    model = ZoneModel(zoneinfo.ZoneInfo("America/New_York"))
    instants = [FALL_2026, SPRING_2026 - 1, FALL_2026 - 1, SPRING_2026, year_start(2026), FALL_2026]
    offsets = [model.offset_at(instant) for instant in instants]
    assert offsets == [EST, EST, EDT, EDT, EST, EST]
