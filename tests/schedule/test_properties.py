"""Property tests of the schedule engine against the brute-force reference in ``reference.py``.

* Generated valid expressions (the whole dialect: 5 and 6 fields, lists, ranges, steps, names in any
  case, ``L`` ``LW`` ``dW`` ``w#n`` ``wL`` ``?``, macros) in DST zones, from instants in 1990-2090,
  under every DST policy: the fire times strictly increase (compared as instants), every one
  matches the expression on the wall clock on an allowed pass of a fold (or is the end of a gap
  with a matching time in it), ``matches_wall`` and ``fires_after``'s kinds agree with the
  reference, and inside a window (a few days, or two hours for six-field expressions; three in
  four straddle a real DST transition) the fire times are exactly the reference's brute force.
* Deterministic sweeps: every policy around every transition of two years per DST zone for
  expressions aimed at the skipped and repeated hours, and Pacific/Apia's 24-hour gap of 2011.
* Valid input never raises (``H`` forms with random seeds included), except a schedule that can
  never fire, refused as such.
* Fuzzing: random text, cron-alphabet text, mutated expressions and ill-typed arguments either parse
  or raise ``ScheduleError`` (nothing else) within 200 ms; whatever parses answers ``next_after``
  within the same deadline.

Profiles: ``cronwheel-ci`` (the default, CI-friendly) runs deterministically (``derandomize``, no
example database), so a CI failure reproduces locally with the same command, and prints the
reproduction blob. ``CRONWHEEL_HYPOTHESIS=deep`` selects ``cronwheel-deep``: random exploration with
ten times the examples, for a local bug hunt.
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from typing import Literal, cast, get_args
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from reference import (
    DAY_NAMES,
    MACROS,
    MONTH_NAMES,
    ReferenceCron,
    expected_timestamps,
    instants_of,
    matching_walls,
    offset_at,
    parse_reference,
    policies,
    transitions,
)

from cronwheel.schedule import FireKind, Schedule, ScheduleError, parse_cron, parse_schedule

# -- profiles ---------------------------------------------------------------------------------

settings.register_profile(
    "cronwheel-ci",
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "cronwheel-deep",
    derandomize=False,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
_DEEP = os.environ.get("CRONWHEEL_HYPOTHESIS", "ci") == "deep"
_BASE = settings.get_profile("cronwheel-deep" if _DEEP else "cronwheel-ci")


def tuned(examples: int, deadline_ms: int | None = None) -> settings:
    """The profile's settings with this test's example count (x10 when deep) and deadline."""
    return settings(
        _BASE,
        max_examples=examples * (10 if _DEEP else 1),
        deadline=None if deadline_ms is None else timedelta(milliseconds=deadline_ms),
    )


# -- the grammar ------------------------------------------------------------------------------

Gap = Literal["shift", "skip"]
Fold = Literal["first", "last", "both"]

ZONES = (
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",  # 30-minute DST
    "America/Santiago",  # transitions at midnight: whole days start at 01:00
    "Pacific/Chatham",  # +12:45 / +13:45, transitions at 02:45 / 03:45 local
    "Asia/Kolkata",  # +05:30, no DST since 1945
)
DST_ZONES = ZONES[1:6]
FIRST_YEAR, LAST_YEAR = 1990, 2090
_T_MIN = int(datetime(FIRST_YEAR, 1, 1, tzinfo=UTC).timestamp())
_T_MAX = int(datetime(LAST_YEAR, 12, 31, tzinfo=UTC).timestamp())


class Kind:
    """The static facts of one field, for generating it."""

    def __init__(self, lo: int, hi: int, names: tuple[str, ...] = (), first: int = 0) -> None:
        self.lo, self.hi, self.names, self.first = lo, hi, names, first


SECOND = Kind(0, 59)
MINUTE = Kind(0, 59)
HOUR = Kind(0, 23)
DOM = Kind(1, 31)
MONTH = Kind(1, 12, MONTH_NAMES, 1)
DOW = Kind(0, 7, DAY_NAMES, 0)


@st.composite
def cased(draw: st.DrawFn, word: str) -> str:
    """A name in any case: MON, mon, Mon, mOn."""
    flips = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    return "".join(c.lower() if flip else c.upper() for c, flip in zip(word, flips, strict=True))


@st.composite
def value_text(draw: st.DrawFn, kind: Kind, value: int) -> str:
    """A value as a number or, where the field has names, sometimes as its name."""
    index = value - kind.first
    if kind.names and 0 <= index < len(kind.names) and draw(st.booleans()):
        return draw(cased(kind.names[index]))
    return str(value)


@st.composite
def element(draw: st.DrawFn, kind: Kind) -> str:
    """``*``, ``*/s``, ``a``, ``a-b``, ``a-b/s`` or ``a/s``; steps never exceed the field's span."""
    shape = draw(st.sampled_from(("star-step", "value", "value", "range", "range-step", "start-step")))
    step = draw(st.integers(1, kind.hi - kind.lo))
    if shape == "star-step":
        return f"*/{step}"
    a = draw(st.integers(kind.lo, kind.hi))
    b = draw(st.integers(a, kind.hi))
    first, last = draw(value_text(kind, a)), draw(value_text(kind, b))
    if shape == "value":
        return first
    if shape == "range":
        return f"{first}-{last}"
    if shape == "range-step":
        return f"{first}-{last}/{step}"
    return f"{first}/{step}"


def plain_field(kind: Kind) -> st.SearchStrategy[str]:
    listed = st.lists(element(kind), min_size=1, max_size=3).map(",".join)
    return st.one_of(st.just("*"), listed, listed)


@st.composite
def dom_element(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(cased("L"))
    if choice == 1:
        return draw(cased("LW"))
    if choice == 2:  # the month's edges are where W gets interesting
        day = draw(st.one_of(st.integers(1, 31), st.sampled_from((1, 2, 3, 28, 29, 30, 31))))
        return f"{day}{draw(cased('W'))}"
    return draw(element(DOM))


@st.composite
def dow_element(draw: st.DrawFn) -> str:
    choice = draw(st.integers(0, 7))
    weekday = draw(st.integers(0, 7))
    if choice == 0:
        return f"{draw(value_text(DOW, weekday))}{draw(cased('L'))}"
    if choice == 1:
        return f"{draw(value_text(DOW, weekday))}#{draw(st.integers(1, 5))}"
    return draw(element(DOW))


def day_field(elements: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    listed = st.lists(elements, min_size=1, max_size=3).map(",".join)
    return st.one_of(st.just("*"), st.just("?"), listed, listed)


@st.composite
def separator(draw: st.DrawFn) -> str:
    return draw(st.sampled_from((" ", " ", " ", "  ", "\t", " \t ")))


@st.composite
def raw_expressions(draw: st.DrawFn, hashed: bool = False) -> str:
    """Any expression of the grammar (``hashed`` adds ``H`` forms); may be one that never fires."""
    if draw(st.integers(0, 19)) == 0:
        return draw(st.sampled_from(sorted(MACROS)).flatmap(cased))

    def plain(kind: Kind) -> st.SearchStrategy[str]:
        return st.one_of(plain_field(kind), hash_field(kind)) if hashed else plain_field(kind)

    fields = [
        draw(plain(MINUTE)),
        draw(plain(HOUR)),
        draw(day_field(dom_element())),
        draw(plain(MONTH)),
        draw(day_field(dow_element())),
    ]
    if draw(st.integers(0, 3)) == 0:
        fields.insert(0, draw(plain(SECOND)))
    text = fields[0]
    for field in fields[1:]:
        text += draw(separator()) + field
    return draw(st.sampled_from(("", " ", "\t"))) + text + draw(st.sampled_from(("", " ", "\n")))


@st.composite
def hash_field(draw: st.DrawFn, kind: Kind) -> str:
    """``H``, ``H/n``, ``H(a-b)``, ``H(a-b)/n`` (n may exceed the range's size: see
    ``test_hash_step_wider_than_its_range_is_refused_or_clamped``)."""
    h = draw(cased("H"))
    a = draw(st.integers(kind.lo, kind.hi))
    b = draw(st.integers(a, kind.hi))
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return h
    if shape == 1:
        return f"{h}/{draw(st.integers(1, kind.hi - kind.lo))}"
    if shape == 2:
        return f"{h}({a}-{b})"
    return f"{h}({a}-{b})/{draw(st.integers(1, kind.hi - kind.lo))}"


def _can_fire(expression: str) -> bool:
    return parse_reference(expression).can_fire()


def valid_expressions() -> st.SearchStrategy[str]:
    """Valid expressions the reference understands (no ``H``) and that fire at all."""
    return raw_expressions().filter(_can_fire)


instants = st.integers(_T_MIN, _T_MAX).map(lambda t: datetime.fromtimestamp(t, UTC))
precise_instants = st.builds(
    lambda t, us: datetime.fromtimestamp(t, UTC) + timedelta(microseconds=us),
    st.integers(_T_MIN, _T_MAX),
    st.sampled_from((0, 0, 1, 500_000, 999_999)),
)
gaps = st.sampled_from((None, "shift", "skip"))
folds = st.sampled_from((None, "first", "last", "both"))


@st.composite
def windows(draw: st.DrawFn, zone: str, six: bool) -> tuple[int, int]:
    """(start, end) in UTC seconds: a few days (two hours for six-field expressions), three times
    in four around a real UTC-offset change of the zone when it has any that year."""
    span = 3600 if six else 3 * 86400
    year = draw(st.integers(FIRST_YEAR, LAST_YEAR - 1))
    changes = transitions(zone, year)
    if changes and draw(st.integers(0, 3)) > 0:
        at = draw(st.sampled_from(changes)).at
        # every shape of window: starting/ending exactly at the change, or a second off it
        before = draw(st.one_of(st.sampled_from((0, 1, 60)), st.integers(0, span)))
        after = draw(st.one_of(st.sampled_from((0, 1, 60)), st.integers(0, span)))
        return at - before, max(at + after, at - before + 1)
    start = int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) + draw(st.integers(0, 365 * 86400))
    return start, start + draw(st.integers(1, 2 * span))


# -- helpers ----------------------------------------------------------------------------------


def engine_timestamps(schedule: Schedule, start: int, end: int) -> list[int]:
    """The engine's fire instants in (start, end]."""
    found: list[int] = []
    ts: float = start
    while (nxt := schedule.next_timestamp(ts)) is not None and nxt <= end:
        found.append(nxt)
        ts = nxt
    return found


def show(timestamps: list[int], zone: str) -> list[str]:
    tz = ZoneInfo(zone)
    return [datetime.fromtimestamp(t, tz).isoformat() for t in timestamps]


def local_wall(instant: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(instant, zone).replace(tzinfo=None)


def check_fire_is_justified(cron: ReferenceCron, zone: str, fire: int, gap: Gap, fold: Fold) -> None:
    """A fire is a matching wall time on the pass(es) the fold policy allows, or the end of a
    gap that holds a matching wall time under ``shift``."""
    tz = ZoneInfo(zone)
    wall = local_wall(fire, tz)
    if cron.matches(wall):
        passes = instants_of(wall, tz)
        assert fire in passes
        if len(passes) == 2 and fold != "both":
            wanted = passes[0] if fold == "first" else passes[1]
            assert fire == wanted, f"{wall} fired on the wrong pass of a fold under {fold!r}"
        return
    before, after = offset_at(fire - 1, tz), offset_at(fire, tz)
    assert gap == "shift", f"{wall} does not match and gaps are skipped"
    assert after > before, f"{wall} does not match and is not the end of a gap"
    gap_walls = matching_walls(
        cron,
        local_wall(fire - 1, tz) + timedelta(seconds=1),
        local_wall(fire, tz) - timedelta(seconds=1),
    )
    assert next(iter(gap_walls), None) is not None, f"nothing in the gap before {wall} matches"


# -- properties -------------------------------------------------------------------------------


@tuned(examples=300)
@given(
    expression=valid_expressions(),
    zone=st.sampled_from(ZONES),
    start=precise_instants,
    gap=gaps,
    fold=folds,
)
@example("30 2 * * *", "America/New_York", datetime(2026, 3, 8, 6, 59, 59, 999_999, tzinfo=UTC), None, None)
@example("*/20 1 * * *", "America/New_York", datetime(2026, 11, 1, 5, tzinfo=UTC), None, None)
@example("0 0 * * *", "America/Santiago", datetime(2026, 9, 5, 12, tzinfo=UTC), None, "last")
def test_fire_times_strictly_increase_and_match(
    expression: str, zone: str, start: datetime, gap: Gap | None, fold: Fold | None
) -> None:
    schedule = parse_cron(expression, zone, dst_gap=gap, dst_fold=fold)
    cron = parse_reference(expression)
    fires = list(islice(schedule.iter_after(start), 40))
    stamps = [f.timestamp() for f in fires]
    # compare instants, never aware datetimes of one zone: those comparisons ignore fold
    assert all(a < b for a, b in pairwise([start.timestamp(), *stamps])), show([int(s) for s in stamps], zone)
    assert all(f.utcoffset() is not None and f.microsecond == 0 for f in fires)
    first = schedule.next_after(start)
    assert (first.timestamp() if first else None) == (stamps[0] if stamps else None)
    assert schedule.next_timestamp(start.timestamp()) == (int(stamps[0]) if stamps else None)
    in_force = policies(cron, gap, fold)
    tz = ZoneInfo(zone)
    for stamp in stamps:
        check_fire_is_justified(cron, zone, int(stamp), *in_force)
        wall = local_wall(int(stamp), tz)
        for near in (
            wall,
            wall - timedelta(seconds=1),
            wall + timedelta(minutes=1),
            wall + timedelta(days=1),
        ):
            assert schedule.matches_wall(near) == cron.matches(near), near


@tuned(examples=200)
@given(
    data=st.data(),
    expression=valid_expressions(),
    zone=st.sampled_from(DST_ZONES),
    policy=st.tuples(gaps, folds),
)
def test_fire_kinds_tell_the_dst_facts(
    data: st.DataObject, expression: str, zone: str, policy: tuple[Gap | None, Fold | None]
) -> None:
    """``fires_after`` gives the same instants as ``iter_after``, each with the right kind (normal,
    shifted, repeated-first, repeated-second) and nominal wall time."""
    gap, fold = policy
    cron = parse_reference(expression)
    start, _ = data.draw(windows(zone, cron.six), label="window")
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
    begin = datetime.fromtimestamp(start, UTC)
    fires = list(islice(schedule.fires_after(begin), 12))
    assert [f.at.timestamp() for f in fires] == [
        f.timestamp() for f in islice(schedule.iter_after(begin), 12)
    ]
    tz = ZoneInfo(zone)
    for fire in fires:
        stamp = int(fire.at.timestamp())
        wall = local_wall(stamp, tz)
        passes = instants_of(wall, tz)
        if not cron.matches(wall):
            assert fire.kind is FireKind.SHIFTED, fire
            gap_walls = matching_walls(cron, local_wall(stamp - 1, tz) + timedelta(seconds=1), wall)
            assert fire.wall == next(iter(gap_walls)), fire
            continue
        assert fire.wall == wall, fire
        if len(passes) == 1:
            assert fire.kind is FireKind.NORMAL, fire
        else:
            want = FireKind.REPEATED_FIRST if stamp == passes[0] else FireKind.REPEATED_SECOND
            assert fire.kind is want, fire


@tuned(examples=400)
@given(data=st.data(), expression=valid_expressions(), zone=st.sampled_from(DST_ZONES), gap=gaps, fold=folds)
def test_fire_times_equal_the_brute_force_reference(
    data: st.DataObject, expression: str, zone: str, gap: Gap | None, fold: Fold | None
) -> None:
    cron = parse_reference(expression)
    start, end = data.draw(windows(zone, cron.six), label="window")
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
    got = engine_timestamps(schedule, start, end)
    want = expected_timestamps(
        cron, zone, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC), gap, fold
    )
    extra, missing = sorted(set(got) - set(want)), sorted(set(want) - set(got))
    assert got == want, f"extra {show(extra, zone)}, missing {show(missing, zone)}"


@tuned(examples=100)
@given(data=st.data(), expression=valid_expressions(), zone=st.sampled_from(("UTC", "Asia/Kolkata")))
def test_fire_times_equal_the_reference_without_dst(data: st.DataObject, expression: str, zone: str) -> None:
    cron = parse_reference(expression)
    start, end = data.draw(windows(zone, cron.six), label="window")
    got = engine_timestamps(parse_schedule(expression, zone), start, end)
    want = expected_timestamps(
        cron, zone, datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC)
    )
    assert got == want


@tuned(examples=300)
@given(
    dom=day_field(dom_element()),
    dow=day_field(dow_element()),
    month=plain_field(MONTH),
    year=st.integers(FIRST_YEAR, LAST_YEAR),
)
def test_day_rules_equal_the_reference(dom: str, dow: str, month: str, year: int) -> None:
    """Day by day through a whole year: the engine's day matching (L, LW, dW, wL, w#n, the
    OR-unless-star rule) is the reference's."""
    expression = f"0 0 {dom} {month} {dow}"
    cron = parse_reference(expression)
    if not cron.can_fire():
        with pytest.raises(ScheduleError, match="never fire"):
            parse_schedule(expression)
        return
    schedule = parse_cron(expression)
    day = datetime(year, 1, 1)  # noqa: DTZ001 - a naive wall time, as matches_wall takes
    while day.year == year:
        assert schedule.matches_wall(day) == cron.matches(day), (expression, day.date())
        day += timedelta(days=1)


# Every policy, around every transition of two years per zone, for expressions aimed at the
# tricky spots (the hours that DST changes skip or repeat, midnight for Santiago, :45 for Chatham).
SWEEP_EXPRESSIONS = (
    "30 2 * * *",
    "0,30 1-3 * * *",
    "45 2,3 * * *",
    "*/15 * * * *",
    "*/20 0-3 * * *",
    "0 0 * * *",
    "59 23 * * *",
    "30 1 L * *",
    "0,30 2 * * * *",
    "*/30 45 2 * * *",
)


@pytest.mark.parametrize("zone", DST_ZONES)
def test_sweep_of_transitions_equals_the_reference(zone: str) -> None:
    for year in (1997, 2031):
        for change in transitions(zone, year):
            start = datetime.fromtimestamp(change.at - 8 * 3600, UTC)
            end = datetime.fromtimestamp(change.at + 8 * 3600, UTC)
            for expression in SWEEP_EXPRESSIONS:
                cron = parse_reference(expression)
                for gap in (*get_args(Gap), None):
                    for fold in (*get_args(Fold), None):
                        schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
                        got = engine_timestamps(schedule, int(start.timestamp()), int(end.timestamp()))
                        want = expected_timestamps(cron, zone, start, end, gap, fold)
                        assert got == want, (expression, zone, gap, fold, show(got, zone), show(want, zone))


@tuned(examples=300)
@given(
    expression=raw_expressions(hashed=True),
    zone=st.sampled_from(ZONES),
    start=instants,
    policy=st.tuples(gaps, folds),
    seed=st.one_of(st.none(), st.text(max_size=12)),
)
def test_valid_input_never_raises_except_for_never_firing(
    expression: str, zone: str, start: datetime, policy: tuple[Gap | None, Fold | None], seed: str | None
) -> None:
    """Every expression of the grammar parses, except the ones that can never fire, and those are
    refused with a ScheduleError that says so. What parses answers and agrees with itself."""
    gap, fold = policy
    refusal: ScheduleError | None = None
    try:
        schedule = parse_cron(expression, zone, dst_gap=gap, dst_fold=fold, seed=seed)
    except ScheduleError as error:
        refusal = error
    if refusal is not None:
        assert "never fire" in refusal.reason, refusal
        return
    tz = ZoneInfo(zone)
    stamps = [f.timestamp() for f in islice(schedule.iter_after(start), 10)]
    assert all(a < b for a, b in pairwise([start.timestamp(), *stamps]))
    for stamp in stamps:  # a fire either matches on the wall clock or ends a gap
        wall = local_wall(int(stamp), tz)
        if not schedule.matches_wall(wall):
            assert schedule.dst_gap == "shift"
            assert offset_at(int(stamp) - 1, tz) < offset_at(int(stamp), tz), (wall, expression)


# -- fuzzing ----------------------------------------------------------------------------------

CRON_ALPHABET = string.digits + "*/-,#?LWHlwh()@ \t" + "JANFEBMONSUNDECTHU" + "xyz\u00a0\u0131\u017f"


def _parse_or_refuse(expression: object, zone: object = "UTC", **options: object) -> Schedule | None:
    parse = cast(Callable[..., Schedule], parse_schedule)  # deliberately ill-typed input
    try:
        return parse(expression, zone, **options)
    except ScheduleError:
        return None


def _answers_fast(schedule: Schedule | None, start: datetime) -> None:
    if schedule is None:
        return
    found = schedule.next_after(start)
    assert found is None or found.timestamp() > start.timestamp()
    stamps = [f.timestamp() for f in islice(schedule.iter_after(start), 3)]
    assert all(a < b for a, b in pairwise(stamps))


@tuned(examples=500, deadline_ms=200)
@given(text=st.text(max_size=60), start=instants)
def test_fuzz_random_text(text: str, start: datetime) -> None:
    _answers_fast(_parse_or_refuse(text), start)


@tuned(examples=500, deadline_ms=200)
@given(text=st.text(alphabet=CRON_ALPHABET, max_size=40), zone=st.sampled_from(ZONES), start=instants)
def test_fuzz_cron_alphabet(text: str, zone: str, start: datetime) -> None:
    _answers_fast(_parse_or_refuse(text, zone), start)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A generated expression with a few random edits: insertions, deletions, duplications,
    numbers made huge, fields dropped or added."""
    text = draw(raw_expressions(hashed=True))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(text)))
        edit = draw(st.integers(0, 6))
        if edit == 0:
            text = text[:at] + draw(st.text(alphabet=CRON_ALPHABET, min_size=1, max_size=3)) + text[at:]
        elif edit == 1:
            text = text[:at] + text[at + draw(st.integers(1, 4)) :]
        elif edit == 2:
            text = text[:at] + text[at : at + 6] + text[at:]
        elif edit == 3:
            big = draw(st.sampled_from(("60", "24", "32", "13", "8", "0", "99999", "-1", "007", "1e3", "٣")))
            text = text[:at] + big + text[at:]
        elif edit == 4:
            fields = text.split()
            if fields:
                fields.pop(draw(st.integers(0, len(fields) - 1)))
            text = " ".join(fields)
        elif edit == 5:
            text = text + " " + draw(st.sampled_from(("*", "0", "L", "?", "1#1", "H")))
        else:
            text = text.replace(" ", draw(st.sampled_from(("", ",", "/", "-", "  "))), 1)
    return text


@tuned(examples=800, deadline_ms=200)
@given(
    text=mutated(),
    zone=st.sampled_from(ZONES),
    start=instants,
    policy=st.tuples(gaps, folds),
    seed=st.one_of(st.none(), st.text(max_size=8)),
)
def test_fuzz_mutated_expressions(
    text: str, zone: str, start: datetime, policy: tuple[Gap | None, Fold | None], seed: str | None
) -> None:
    gap, fold = policy
    _answers_fast(_parse_or_refuse(text, zone, dst_gap=gap, dst_fold=fold, seed=seed), start)


@tuned(examples=150, deadline_ms=200)
@given(
    expression=st.one_of(st.none(), st.integers(), st.binary(max_size=8), st.lists(st.text(max_size=3))),
    zone=st.one_of(st.sampled_from(ZONES), st.text(max_size=20), st.none(), st.integers()),
    gap=st.one_of(gaps, st.text(max_size=6), st.integers()),
    fold=st.one_of(folds, st.text(max_size=6), st.booleans()),
    seed=st.one_of(st.none(), st.text(max_size=4), st.integers(), st.binary(max_size=4)),
)
def test_fuzz_wrong_types_and_options(
    expression: object, zone: object, gap: object, fold: object, seed: object
) -> None:
    """Arguments of the wrong type or value are refused with ScheduleError, nothing else."""
    _parse_or_refuse(expression, zone, dst_gap=gap, dst_fold=fold, seed=seed)
    _parse_or_refuse("0 0 * * *", zone, dst_gap=gap, dst_fold=fold, seed=seed)


# -- regressions: engine bugs the properties found --------------------------------------------


@pytest.mark.parametrize(
    ("expression", "seed", "hours", "minutes"),
    [
        ("H(50-59)/30 5 * * *", "b", {5}, set(range(50, 60))),
        ("H(50-59)/30 5 * * *", "c", {5}, set(range(50, 60))),
        ("0 H(20-23)/10 * * *", "a", set(range(20, 24)), {0}),
        ("0 H(20-23)/10 * * *", "f", set(range(20, 24)), {0}),
    ],
)
def test_hash_step_wider_than_its_range_is_refused_or_clamped(
    expression: str, seed: str, hours: set[int], minutes: set[int]
) -> None:
    """``H(50-59)/30`` must hash its start over 0..9, not 0..29: added to 50, a start over 0..29
    lands on 50..79, past 59 the minute field allows nothing, yet the schedule parses and its
    "fires" come from minute -1 (``next_after(2026-01-01T00:00Z)`` 04:59, hour 4, not 5, and
    ``next_after(04:59)`` 04:59 again, so ``iter_after`` repeats one instant forever). The start
    must stay inside a..b (the hash taken modulo ``min(n, b - a + 1)``), or the expression be
    refused."""
    try:
        schedule = parse_schedule(expression, seed=seed)
    except ScheduleError:
        return  # refusing it would be a fix too
    start = datetime(2026, 1, 1, tzinfo=UTC)
    fires = list(islice(schedule.iter_after(start), 3))
    assert all(a.timestamp() < b.timestamp() for a, b in pairwise(fires)), fires
    assert all(f.hour in hours and f.minute in minutes for f in fires), fires


@pytest.mark.parametrize("expression", [*SWEEP_EXPRESSIONS, "0 12 * * *", "0 0 30 12 *", "*/7 */5 * * *"])
def test_a_whole_day_gap_equals_the_reference(expression: str) -> None:
    """Pacific/Apia skipped 2011-12-30 entirely (-10:00 -> +14:00): a 24-hour gap."""
    zone = "Pacific/Apia"
    start = datetime(2011, 12, 29, 0, tzinfo=UTC)
    end = datetime(2012, 1, 1, 12, tzinfo=UTC)
    cron = parse_reference(expression)
    for gap in (*get_args(Gap), None):
        for fold in (*get_args(Fold), None):
            schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
            got = engine_timestamps(schedule, int(start.timestamp()), int(end.timestamp()))
            want = expected_timestamps(cron, zone, start, end, gap, fold)
            assert got == want, (gap, fold, show(got, zone), show(want, zone))


@pytest.mark.parametrize("zone", DST_ZONES)
@pytest.mark.parametrize("before", [1, 0.5, 0.000_001])
def test_gap_fire_found_when_searching_from_the_last_instant_before_it(zone: str, before: float) -> None:
    """A search from just before a gap's end must find the gap's shifted fire at that end (found by
    the reference comparison as ``* 0 0-2 * * *`` in New York from 1990-04-01T06:59:59Z: the engine
    skipped the shifted fire at 07:00:00Z when the search began exactly there)."""
    tz = ZoneInfo(zone)
    for year in (1990, 2026, 2089):
        for change in transitions(zone, year):
            if change.after <= change.before:
                continue
            gap_start = local_wall(change.at - 1, tz) + timedelta(seconds=1)
            expression = f"{gap_start.minute} {gap_start.hour} * * *"
            schedule = parse_schedule(expression, zone)
            assert schedule.next_timestamp(change.at - before) == change.at, (expression, gap_start)
            six = parse_schedule(f"* {gap_start.minute} {gap_start.hour} * * *", zone)
            assert six.next_timestamp(change.at - before) == change.at, (expression, gap_start)


@pytest.mark.parametrize("expression", ["0 0 * * \u017fun", "0 0 * * fr\u0131", "0 0 * \u017fep *"])
def test_names_are_ascii_only(expression: str) -> None:
    """'\u017fun' (LATIN SMALL LETTER LONG S + 'un') is accepted as Sunday and 'fr\u0131' (DOTLESS I)
    as Friday: ``"\u017f".upper() == "S"`` and ``"\u0131".upper() == "I"``. A name that only looks
    like one must be refused."""
    with pytest.raises(ScheduleError, match=r"cannot read|unknown name"):
        parse_schedule(expression)
