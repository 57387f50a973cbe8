"""Differential tests: cronwheel against cronsim (2.x) and croniter (7.x).

Each peer is compared on the next 20 fire times, from several start instants, for many generated
expressions: in UTC (and Asia/Kolkata, a fixed +05:30), and in DST zones with start instants biased
toward real DST transitions. The agreement tests generate only from the sub-dialect in which the
semantics are claimed equal; every place where they are *not* equal is listed in
:data:`DISAGREEMENTS`, and each entry has a test (``@demonstrates``) that shows the difference
concretely, asserting what each engine does, so the table stays truthful: if a peer changes, the
demonstration fails and the entry must be revisited. A last test checks that every entry is
demonstrated.

What the peers do at DST transitions (found by reading their source and by comparing):

* cronsim, for a *five-field fixed-time* expression (minute and hour not starting with ``*``),
  walks the naive wall clock and then mends the result: a non-existent time moves forward a minute
  at a time until it exists (the gap's end), an ambiguous one is taken with ``fold=0`` (the first
  pass). That is cronwheel's default for fixed-time schedules (``shift`` / ``first``), and the two
  agree in every zone tried, Lord Howe and Chatham included, except when the search *starts* inside
  a fold's second pass (see ``fold-start-in-second-pass``).
* cronsim, for anything else (``*`` at the start of the minute or hour, or six fields), steps
  through real instants, so skipped times never fire and repeated ones fire on both passes:
  cronwheel's ``skip`` / ``both``. They agree where every transition is on a whole hour and not at
  midnight (New York, Berlin); elsewhere cronsim's ``replace(minute=0)`` / ``combine(day,
  midnight)`` steps land on non-existent or wrong wall times (three entries below).
* croniter fires repeated wall times on both passes (``both``) for every expression, and moves a
  non-existent time to the gap's end (``shift``) unless the hour field covers all 24 hours, in
  which case it skips it; it moves in whole minutes, so a six-field time keeps its seconds. In
  those terms it agrees with cronwheel in New York, Berlin and Santiago, whose folds start on the
  hour; in the folds of Lord Howe (01:30) and Chatham (02:45) it misses some second-pass times.

Note: cronsim 2.x *does* have a seconds field (six fields, leading, as cronwheel); croniter needs
``second_at_beginning=True`` for that, and ``implement_cron_bug=True`` for Vixie's day rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import Literal, TypeVar
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterBadCronError, CroniterBadDateError, croniter
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from reference import DAY_NAMES, MACROS, MONTH_NAMES, parse_reference, transitions

from cronwheel.schedule import ScheduleError, parse_cron, parse_schedule

# -- the table of known disagreements ---------------------------------------------------------

Peer = Literal["cronsim", "croniter", "cronsim+croniter"]


@dataclass(frozen=True)
class Disagreement:
    key: str
    peer: Peer
    explanation: str


DISAGREEMENTS: tuple[Disagreement, ...] = (
    # syntax one side has and the other refuses
    Disagreement(
        "question-mark",
        "cronsim",
        "cronsim refuses '?' in the day fields; cronwheel (and croniter) read it as '*'.",
    ),
    Disagreement(
        "nearest-weekday",
        "cronsim",
        "cronsim has no 'dW' (nearest weekday); cronwheel has Quartz's rule.",
    ),
    Disagreement(
        "named-last-weekday",
        "cronsim",
        "cronsim takes only a digit before L in day-of-week ('5L'); cronwheel also takes 'FRIL'.",
    ),
    Disagreement("macros", "cronsim", "cronsim has no @yearly/@daily/... macros."),
    Disagreement(
        "hash",
        "cronsim",
        "cronsim has no H (hashed values); cronwheel spreads H from the job's seed.",
    ),
    Disagreement(
        "step-wider-than-range",
        "cronsim+croniter",
        "Both peers accept a step wider than the field's range ('*/100' = only the start); "
        "cronwheel refuses it as a probable mistake.",
    ),
    Disagreement(
        "last-weekday-spelling",
        "croniter",
        "croniter spells 'last Friday' as 'L5' and refuses '5L'; cronwheel spells it '5L' (or "
        "'FRIL') and refuses 'L5'. The meaning is the same (compared in the agreement tests).",
    ),
    Disagreement("last-weekday-of-month", "croniter", "croniter refuses 'LW' (last weekday of the month)."),
    Disagreement(
        "nearest-weekday-list",
        "croniter",
        "croniter takes 'dW' only alone, refusing lists such as '1W,15W'; cronwheel takes lists.",
    ),
    Disagreement(
        "mixed-nth-weekday",
        "croniter",
        "croniter refuses mixing plain weekdays with 'w#n' in one field ('1,MON#2'); cronwheel "
        "takes the union.",
    ),
    Disagreement(
        "wrapping-range",
        "croniter",
        "croniter accepts a range that wraps around ('FRI-MON' = Fri, Sat, Sun, Mon); cronwheel "
        "refuses an inverted range.",
    ),
    # same text, different fire times
    Disagreement(
        "single-value-range-step",
        "cronsim",
        "cronsim reads 'a-a/n' as 'a/n' (a to the field's maximum, step n): '5-5/20' in the "
        "minute field is 5,25,45. cronwheel reads the range as written: minute 5 only.",
    ),
    Disagreement(
        "seconds-last",
        "croniter",
        "croniter puts the seconds field of a six-field expression LAST unless "
        "second_at_beginning=True; cronwheel (like cronsim and Quartz) puts it first.",
    ),
    Disagreement(
        "equal-range-is-whole-field",
        "croniter",
        "croniter reads an equal range 'a-a' as the whole field ('5-5' in the minute field = "
        "every minute); cronwheel reads it as the single value a.",
    ),
    Disagreement(
        "day-of-week-start-step",
        "croniter",
        "croniter's day-of-week range is 0-6, so 'a/n' runs a..6: '1/3' is Mon, Thu. In Vixie "
        "cron and cronwheel the range is 0-7, so '1/3' is Mon, Thu and 7 = Sunday.",
    ),
    Disagreement(
        "day-rule-default",
        "croniter",
        "By default croniter ORs day-of-month and day-of-week whenever both are restricted after "
        "expansion, so '*/2' with 'MON' is odd days OR Mondays. Vixie cron (and cronwheel) AND "
        "them when either field's text starts with '*'. croniter's implement_cron_bug=True gives "
        "Vixie's rule (used in the agreement tests).",
    ),
    Disagreement(
        "full-range-collapses-to-star",
        "croniter",
        "croniter collapses a day field whose values cover the whole range to '*' when the other "
        "day field's text contains '*' anywhere, then ANDs: '1-31' with '1,*/7' is Sundays and "
        "Mondays only. cronwheel ORs (neither text starts with '*'): every day.",
    ),
    Disagreement(
        "last-day-fills-the-range",
        "croniter",
        "croniter counts 'L' as one more day-of-month value and collapses a list that then has 31 "
        "values to '*': 'L,2/1' (the 2nd to the 31st, and the last day) fires on the 1st too. "
        "cronwheel fires on the days listed only.",
    ),
    Disagreement(
        "nth-weekday-is-anded",
        "croniter",
        "croniter keeps 'w#n' and 'Lw' as a condition on BOTH sides of its day OR, so with a "
        "restricted day-of-month they intersect: '1' with 'MON#2' never fires and croniter raises "
        "CroniterBadDateError. cronwheel fires on the 1st and on the second Monday.",
    ),
    Disagreement(
        "nearest-weekday-clamped",
        "croniter",
        "croniter clamps 'dW' to the month's last day: '31W' fires on Apr 30 and Feb 28/29. "
        "cronwheel (Quartz) does not fire 'dW' in a month without a day d.",
    ),
    Disagreement(
        "hash-function",
        "croniter",
        "H differs: croniter hashes with CRC32 of hash_id (shifted by the field index) and "
        "requires hash_id; cronwheel hashes with BLAKE2b of the seed and the field. With a "
        "hash_id croniter also turns the macros into hashed times ('@daily' = 'H H * * *'); "
        "cronwheel's macros are fixed.",
    ),
    # DST
    Disagreement(
        "six-field-dst",
        "cronsim",
        "cronsim applies its Debian-style DST mending to five-field expressions only: a six-field "
        "fixed-time expression skips a time in a gap and fires a repeated time twice, where "
        "cronwheel's fixed-time default fires once at the gap's end and once in a fold.",
    ),
    Disagreement(
        "fold-start-in-second-pass",
        "cronsim",
        "For a five-field fixed-time expression cronsim works on the naive wall clock; started "
        "during a fold's second pass it returns the FIRST-pass instant of the next matching wall "
        "time, which is earlier than the start.",
    ),
    Disagreement(
        "midnight-gap",
        "cronsim",
        "Where a DST gap starts at midnight (America/Santiago) cronsim's day step lands on the "
        "non-existent 00:00 and returns it (its instant is the gap's end) even for a wildcard "
        "schedule, which cronwheel skips there.",
    ),
    Disagreement(
        "sub-hour-dst-hour-steps",
        "cronsim",
        "In zones whose clocks change by 30 minutes (Australia/Lord_Howe) cronsim steps hours "
        "on real instants after replace(minute=0) lands in the gap, arriving at :30 and missing "
        "the fires at :00-:29 of the next matching hour (wildcard schedules).",
    ),
    Disagreement(
        "off-hour-fold-loops",
        "cronsim",
        "In a fold that does not start on the hour (Pacific/Chatham, 02:45-03:44 repeated) "
        "cronsim's replace(minute=0) leaves the fold's second pass for the first, and can return "
        "the same instant over and over (wildcard schedules).",
    ),
    Disagreement(
        "fixed-time-fold",
        "croniter",
        "croniter fires a repeated wall time on both passes for every expression; cronwheel's "
        "default for a fixed-time one ('30 1 * * *') is the first pass only.",
    ),
    Disagreement(
        "gap-shift-by-hour-field",
        "croniter",
        "croniter moves a non-existent time to the gap's end unless the hour field is all 24 "
        "hours, so '*/20 2 * * *' fires at 03:00 on the spring-forward day. cronwheel's default "
        "for a schedule whose minute or hour starts with '*' skips it.",
    ),
    Disagreement(
        "off-hour-fold",
        "croniter",
        "In folds that do not start on the hour croniter misses some second-pass times of wildcard "
        "schedules: in Lord Howe (01:30-01:59 repeats) '*/20 * * * *' fires 01:40 (+11:00) but "
        "not 01:40 (+10:30); in Chatham (02:45-03:44 repeats) '* */2 * * *' from 03:43 (+13:45) "
        "skips 02:45-02:59 (+12:45) and goes on at 04:00.",
    ),
    Disagreement(
        "gap-shift-keeps-seconds",
        "croniter",
        "croniter moves a non-existent time forward in whole minutes, so a six-field time in a gap "
        "keeps its seconds: '1 * 2 * * *' fires at 03:00:01 on the spring-forward day. cronwheel "
        "fires a gap's times at the instant the gap ends, 03:00:00.",
    ),
)

_DEMONSTRATED: dict[str, str] = {}
_F = TypeVar("_F", bound=Callable[..., None])


def demonstrates(key: str) -> Callable[[_F], _F]:
    """Marks the test that shows one table entry."""
    assert key in {d.key for d in DISAGREEMENTS}, key

    def mark(test: _F) -> _F:
        assert key not in _DEMONSTRATED, f"{key} demonstrated twice"
        _DEMONSTRATED[key] = test.__name__
        return test

    return mark


# -- running the three engines ----------------------------------------------------------------

N = 20
UTC_LIKE = ("UTC", "Asia/Kolkata")
NY, BERLIN, SANTIAGO, LORD_HOWE, CHATHAM = (
    "America/New_York",
    "Europe/Berlin",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Pacific/Chatham",
)
DST_ZONES = (NY, BERLIN, SANTIAGO, LORD_HOWE, CHATHAM)


def at(zone: str, text: str) -> datetime:
    """An aware instant from an ISO text with its offset, e.g. '2024-11-03T01:30:00-05:00'."""
    return datetime.fromisoformat(text).astimezone(ZoneInfo(zone))


def iso(stamps: list[float], zone: str) -> list[str]:
    return [datetime.fromtimestamp(s, ZoneInfo(zone)).isoformat() for s in stamps]


def ours(
    expression: str,
    zone: str,
    start: datetime,
    n: int = N,
    gap: Literal["shift", "skip"] | None = None,
    fold: Literal["first", "last", "both"] | None = None,
) -> list[float]:
    schedule = parse_schedule(expression, zone, dst_gap=gap, dst_fold=fold)
    return [f.timestamp() for f in islice(schedule.iter_after(start), n)]


def cronsim(expression: str, zone: str, start: datetime, n: int = N) -> list[float]:
    return [f.timestamp() for f in islice(CronSim(expression, start.astimezone(ZoneInfo(zone))), n)]


def cronsim_walls(expression: str, zone: str, start: datetime, n: int = N) -> list[str]:
    return [f.isoformat() for f in islice(CronSim(expression, start.astimezone(ZoneInfo(zone))), n)]


def croniter_next(
    expression: str, zone: str, start: datetime, n: int = N, *, vixie: bool = True, seconds_first: bool = True
) -> list[float]:
    iterator = croniter(
        expression,
        start.astimezone(ZoneInfo(zone)),
        implement_cron_bug=vixie,
        second_at_beginning=seconds_first,
    )
    found: list[float] = []
    try:
        for _ in range(n):
            found.append(iterator.get_next(float))
    except CroniterBadDateError:
        pass
    return found


# -- generating the shared sub-dialects -------------------------------------------------------

_PROFILE_DEEP = os.environ.get("CRONWHEEL_HYPOTHESIS", "ci") == "deep"


def tuned(examples: int) -> settings:
    """Deterministic and without an example database (reproducible CI); x10 and random when
    CRONWHEEL_HYPOTHESIS=deep."""
    return settings(
        max_examples=examples * (10 if _PROFILE_DEEP else 1),
        derandomize=not _PROFILE_DEEP,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@dataclass(frozen=True)
class Dialect:
    """What one peer shares with cronwheel (see the table for why each switch exists)."""

    name: str
    dow_hi: int  # the largest day-of-week value written (7 = Sunday again)
    dow_start_step: bool  # 'a/n' in day-of-week (croniter runs it to 6, not 7)
    star_anywhere_in_day_fields: bool  # croniter: only as the first element
    question_mark: bool
    last_day_weekday: bool  # 'LW'
    nearest_weekday: bool  # 'dW' alone, d <= 28, day-of-week '*'
    nth_with_day_of_month: bool  # 'w#n' / 'wL' next to a restricted day-of-month
    macros: bool


CRONSIM = Dialect("cronsim", 7, True, True, False, True, False, True, False)
CRONITER = Dialect("croniter", 7, False, False, True, False, True, False, True)


@dataclass(frozen=True)
class Kind:
    lo: int
    hi: int
    names: tuple[str, ...] = ()
    first: int = 0


SECOND, MINUTE, HOUR = Kind(0, 59), Kind(0, 59), Kind(0, 23)
DOM, MONTH = Kind(1, 31), Kind(1, 12, MONTH_NAMES, 1)


def dow_kind(dialect: Dialect) -> Kind:
    return Kind(0, dialect.dow_hi, DAY_NAMES, 0)


@st.composite
def rendered(draw: st.DrawFn, kind: Kind, value: int) -> str:
    index = value - kind.first
    if kind.names and 0 <= index < len(kind.names) and draw(st.booleans()):
        name = kind.names[index]
        return draw(st.sampled_from((name, name.lower(), name.capitalize())))
    return str(value)


@st.composite
def element(draw: st.DrawFn, kind: Kind, start_step: bool = True, star: bool = True) -> str:
    """One list element both sides read alike: ranges are never equal ('a-a'), steps never wider
    than the field."""
    shapes = ["value", "value", "range", "range-step"]
    if star:
        shapes.append("star-step")
    if start_step:
        shapes.append("start-step")
    shape = draw(st.sampled_from(shapes))
    step = draw(st.integers(1, kind.hi - kind.lo))
    if shape == "star-step":
        return f"*/{step}"
    if shape in {"value", "start-step"}:
        a = draw(st.integers(kind.lo, kind.hi))
        text = draw(rendered(kind, a))
        return text if shape == "value" else f"{text}/{step}"
    a = draw(st.integers(kind.lo, kind.hi - 1))
    b = draw(st.integers(a + 1, kind.hi))
    text = f"{draw(rendered(kind, a))}-{draw(rendered(kind, b))}"
    return text if shape == "range" else f"{text}/{step}"


@st.composite
def plain_field(
    draw: st.DrawFn, kind: Kind, *, fixed: bool = False, star_anywhere: bool = True, start_step: bool = True
) -> str:
    """A list; ``fixed`` = not starting with '*' (a fixed-time minute or hour)."""
    if not fixed and draw(st.integers(0, 3)) == 0:
        return "*"
    head = draw(element(kind, start_step, star=not fixed))
    tail = draw(st.lists(element(kind, start_step, star=star_anywhere), max_size=2))
    return ",".join([head, *tail])


@st.composite
def day_fields(draw: st.DrawFn, dialect: Dialect) -> tuple[str, str, str, str]:
    """(dom, dow) as cronwheel spells them, then as the peer does."""
    dow = dow_kind(dialect)
    star = st.sampled_from(("*", "?") if dialect.question_mark else ("*",))
    shape = draw(st.integers(0, 9))
    if shape == 0 and dialect.nearest_weekday:
        dom_text = f"{draw(st.integers(1, 28))}W"
        day_star = draw(star)
        return dom_text, day_star, dom_text, day_star
    if shape <= 2:  # special day-of-week forms
        items: list[tuple[str, str]] = []
        for _ in range(draw(st.integers(1, 2))):
            weekday = draw(st.integers(0, dialect.dow_hi))
            if draw(st.booleans()):
                n = draw(st.integers(1, 5))
                text = f"{draw(rendered(dow, weekday))}#{n}"
                items.append((text, text))
            elif dialect.name == "croniter":
                items.append((f"{draw(rendered(dow, weekday))}L", f"L{weekday}"))
            else:
                items.append((f"{weekday}L", f"{weekday}L"))
        dom_text = draw(st.one_of(star, dom_field(dialect)) if dialect.nth_with_day_of_month else star)
        return dom_text, ",".join(o for o, _ in items), dom_text, ",".join(t for _, t in items)
    dom_text = draw(st.one_of(star, dom_field(dialect)))
    dow_text = draw(
        st.one_of(
            star,
            plain_field(
                dow, star_anywhere=dialect.star_anywhere_in_day_fields, start_step=dialect.dow_start_step
            ),
        )
    )
    return dom_text, dow_text, dom_text, dow_text


@st.composite
def dom_field(draw: st.DrawFn, dialect: Dialect) -> str:
    head = draw(element(DOM))
    extras = ["L", "LW"] if dialect.last_day_weekday else ["L"]
    tail = draw(
        st.lists(
            st.one_of(element(DOM, star=dialect.star_anywhere_in_day_fields), st.sampled_from(extras)),
            max_size=2,
        )
    )
    if draw(st.integers(0, 4)) == 0:
        head = draw(st.sampled_from(extras))
    return ",".join([head, *tail])


@st.composite
def peer_expressions(
    draw: st.DrawFn, dialect: Dialect, *, fixed: bool | None = None, six: bool | None = None
) -> tuple[str, str]:
    """(cronwheel's spelling, the peer's spelling) of one expression of the shared sub-dialect,
    that can fire. ``fixed``: minute and hour not starting with '*' (None: either); ``six``:
    with a leading seconds field (None: either)."""
    if dialect.macros and fixed is None and six is None and draw(st.integers(0, 19)) == 0:
        macro = draw(st.sampled_from(sorted(MACROS)))
        return macro, macro
    is_fixed = draw(st.booleans()) if fixed is None else fixed
    is_six = draw(st.integers(0, 3)) == 0 if six is None else six
    minute = draw(plain_field(MINUTE, fixed=is_fixed))
    hour = draw(plain_field(HOUR, fixed=is_fixed))
    if not is_fixed and not minute.startswith("*") and not hour.startswith("*"):
        minute = "*" if draw(st.booleans()) else f"*/{draw(st.integers(1, 59))}"
    dom_ours, dow_ours, dom_theirs, dow_theirs = draw(day_fields(dialect))
    month = draw(plain_field(MONTH))
    fields_ours = [minute, hour, dom_ours, month, dow_ours]
    fields_theirs = [minute, hour, dom_theirs, month, dow_theirs]
    if is_six:
        second = draw(plain_field(SECOND))
        fields_ours.insert(0, second)
        fields_theirs.insert(0, second)
    return " ".join(fields_ours), " ".join(fields_theirs)


def fires_at_all(pair: tuple[str, str]) -> bool:
    return parse_reference(pair[0]).can_fire()


def croniter_reads_alike(pair: tuple[str, str]) -> bool:
    """False for the peer's text that croniter reads as the table's "last-day-fills-the-range"."""
    fields = pair[1].split()
    if len(fields) < 5:  # a macro
        return True
    dom = len(fields) - 3  # day-of-month is third from the end, with or without seconds
    items = fields[dom].split(",")
    if "L" not in items:
        return True
    rest = [item for item in items if item != "L"]
    if not rest or _croniter_days(fields) != ["*"]:
        return True
    return 1 in _croniter_days([*fields[:dom], ",".join(rest), *fields[dom + 1 :]])


def _croniter_days(fields: list[str]) -> Sequence[object]:
    """The day-of-month values croniter expands ``fields`` to (seconds first, as the tests use it)."""
    expanded: Sequence[Sequence[object]] = croniter(" ".join(fields), second_at_beginning=True).expanded
    return expanded[len(fields) - 3]


CRONITER_PAIRS = peer_expressions(CRONITER).filter(fires_at_all).filter(croniter_reads_alike)


@st.composite
def starts(draw: st.DrawFn, zone: str) -> datetime:
    """An instant in 1990-2089, three times in four within two days of one of the zone's
    UTC-offset changes (when it has any that year)."""
    year = draw(st.integers(1990, 2089))
    changes = transitions(zone, year)
    if changes and draw(st.integers(0, 3)) > 0:
        stamp = draw(st.sampled_from(changes)).at + draw(st.integers(-2 * 86400, 2 * 86400))
    else:
        stamp = int(datetime(year, 1, 1, tzinfo=UTC).timestamp()) + draw(st.integers(0, 365 * 86400))
    return datetime.fromtimestamp(stamp, UTC)


def out_of_second_pass(start: datetime, zone: str) -> datetime:
    """``start``, or the end of the fold whose second pass it lies in (see
    ``fold-start-in-second-pass``)."""
    stamp = int(start.timestamp())
    for change in transitions(zone, start.year):
        length = change.before - change.after
        if length > 0 and change.at <= stamp < change.at + length:
            return datetime.fromtimestamp(change.at + length, UTC)
    return start


def assert_same(mine: list[float], theirs: list[float], zone: str, label: str) -> None:
    assert mine == theirs, f"{label}\n  cronwheel: {iso(mine, zone)}\n  peer:      {iso(theirs, zone)}"


# -- agreement: cronsim -----------------------------------------------------------------------


@tuned(examples=120)
@given(data=st.data(), pair=peer_expressions(CRONSIM).filter(fires_at_all), zone=st.sampled_from(UTC_LIKE))
def test_cronsim_agrees_without_dst(data: st.DataObject, pair: tuple[str, str], zone: str) -> None:
    mine, theirs = pair
    for start in (data.draw(starts(zone)), data.draw(starts(zone))):
        assert_same(ours(mine, zone, start), cronsim(theirs, zone, start), zone, f"{mine!r} from {start}")


@tuned(examples=120)
@given(
    data=st.data(),
    pair=peer_expressions(CRONSIM, fixed=True, six=False).filter(fires_at_all),
    zone=st.sampled_from(DST_ZONES),
)
def test_cronsim_agrees_across_dst_for_five_field_fixed_times(
    data: st.DataObject, pair: tuple[str, str], zone: str
) -> None:
    """Debian-style mending = cronwheel's fixed-time default (shift, first), in every DST zone."""
    mine, theirs = pair
    for drawn in (data.draw(starts(zone)), data.draw(starts(zone))):
        start = out_of_second_pass(drawn, zone)
        assert_same(ours(mine, zone, start), cronsim(theirs, zone, start), zone, f"{mine!r} from {start}")


@tuned(examples=120)
@given(
    data=st.data(), pair=peer_expressions(CRONSIM).filter(fires_at_all), zone=st.sampled_from((NY, BERLIN))
)
def test_cronsim_agrees_across_dst_on_real_instants(
    data: st.DataObject, pair: tuple[str, str], zone: str
) -> None:
    """Wildcard and six-field expressions: cronsim steps real instants = cronwheel's skip/both
    (five-field fixed-time ones keep the mended defaults), in zones changing on whole hours."""
    mine, theirs = pair
    cron = parse_reference(mine)
    mended = cron.fixed and not cron.six
    for drawn in (data.draw(starts(zone)), data.draw(starts(zone))):
        if mended:
            start = out_of_second_pass(drawn, zone)
            got = ours(mine, zone, start)
        else:
            start = drawn
            got = ours(mine, zone, start, gap="skip", fold="both")
        assert_same(got, cronsim(theirs, zone, start), zone, f"{mine!r} from {start}")


# -- agreement: croniter ----------------------------------------------------------------------


@tuned(examples=120)
@given(data=st.data(), pair=CRONITER_PAIRS, zone=st.sampled_from(UTC_LIKE))
def test_croniter_agrees_without_dst(data: st.DataObject, pair: tuple[str, str], zone: str) -> None:
    mine, theirs = pair
    for start in (data.draw(starts(zone)), data.draw(starts(zone))):
        assert_same(
            ours(mine, zone, start), croniter_next(theirs, zone, start), zone, f"{mine!r} from {start}"
        )


@tuned(examples=150)
@given(
    data=st.data(),
    pair=CRONITER_PAIRS,
    zone=st.sampled_from((NY, BERLIN, SANTIAGO)),
)
def test_croniter_agrees_across_dst_under_its_own_policy(
    data: st.DataObject, pair: tuple[str, str], zone: str
) -> None:
    """croniter's DST behaviour in cronwheel's terms: fold 'both' always; gap 'skip' when the hour
    field is all 24 hours, else 'shift' (six-field expressions with second 0, see
    ``gap-shift-keeps-seconds``), in zones whose folds start on the hour (see ``off-hour-fold``)."""
    mine, theirs = pair
    cron = parse_reference(mine)
    every_hour = len(cron.hours) == 24
    assume(0 in cron.seconds)
    for start in (data.draw(starts(zone)), data.draw(starts(zone))):
        got = ours(mine, zone, start, gap="skip" if every_hour else "shift", fold="both")
        assert_same(got, croniter_next(theirs, zone, start), zone, f"{mine!r} from {start}")


# -- demonstrations: syntax -------------------------------------------------------------------

JAN_2026 = datetime(2026, 1, 1, tzinfo=UTC)  # a Thursday


def test_cronsim_has_a_leading_seconds_field() -> None:
    """Not a disagreement (a common belief is that cronsim has no seconds field)."""
    expected = ["2026-01-01T12:00:30+00:00", "2026-01-02T12:00:30+00:00"]
    assert iso(cronsim("30 0 12 * * *", "UTC", JAN_2026, 2), "UTC") == expected
    assert iso(ours("30 0 12 * * *", "UTC", JAN_2026, 2), "UTC") == expected


@demonstrates("question-mark")
def test_cronsim_refuses_question_mark() -> None:
    with pytest.raises(CronSimError):
        CronSim("0 0 ? * MON", JAN_2026)
    assert iso(ours("0 0 ? * MON", "UTC", JAN_2026, 1), "UTC") == ["2026-01-05T00:00:00+00:00"]
    assert croniter_next("0 0 ? * MON", "UTC", JAN_2026, 1) == ours("0 0 ? * MON", "UTC", JAN_2026, 1)


@demonstrates("nearest-weekday")
def test_cronsim_has_no_nearest_weekday() -> None:
    with pytest.raises(CronSimError):
        CronSim("0 0 15W * *", JAN_2026)
    # 2026-02-15 is a Sunday: the nearest weekday is Monday the 16th
    assert iso(ours("0 0 15W * *", "UTC", datetime(2026, 2, 1, tzinfo=UTC), 1), "UTC") == [
        "2026-02-16T00:00:00+00:00"
    ]


@demonstrates("named-last-weekday")
def test_cronsim_takes_only_a_digit_before_l() -> None:
    with pytest.raises(CronSimError):
        CronSim("0 0 * * FRIL", JAN_2026)
    assert cronsim("0 0 * * 5L", "UTC", JAN_2026, 3) == ours("0 0 * * FRIL", "UTC", JAN_2026, 3)


@demonstrates("macros")
def test_cronsim_has_no_macros() -> None:
    for macro in MACROS:
        with pytest.raises(CronSimError):
            CronSim(macro, JAN_2026)
    assert ours("@daily", "UTC", JAN_2026, 3) == croniter_next("@daily", "UTC", JAN_2026, 3)


@demonstrates("hash")
def test_cronsim_has_no_hash() -> None:
    with pytest.raises(CronSimError):
        CronSim("H * * * *", JAN_2026)
    assert len(ours("H * * * *", "UTC", JAN_2026, 3)) == 3


@demonstrates("step-wider-than-range")
def test_peers_accept_a_step_wider_than_the_range() -> None:
    assert iso(cronsim("*/100 * * * *", "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-01T01:00:00+00:00",
        "2026-01-01T02:00:00+00:00",
    ]
    assert croniter_next("*/100 * * * *", "UTC", JAN_2026, 2) == cronsim("*/100 * * * *", "UTC", JAN_2026, 2)
    with pytest.raises(ScheduleError, match="larger than the range"):
        parse_schedule("*/100 * * * *")


@demonstrates("last-weekday-spelling")
def test_croniter_spells_last_weekday_l_first() -> None:
    with pytest.raises(CroniterBadCronError):
        croniter("0 0 * * 5L", JAN_2026)
    with pytest.raises(ScheduleError):
        parse_schedule("0 0 * * L5")
    last_fridays = ["2026-01-30T00:00:00+00:00", "2026-02-27T00:00:00+00:00"]
    assert iso(croniter_next("0 0 * * L5", "UTC", JAN_2026, 2), "UTC") == last_fridays
    assert iso(ours("0 0 * * 5L", "UTC", JAN_2026, 2), "UTC") == last_fridays


@demonstrates("last-weekday-of-month")
def test_croniter_refuses_lw() -> None:
    with pytest.raises(CroniterBadCronError):
        croniter("0 0 LW * *", JAN_2026)
    # 2026-05-31 is a Sunday: the last weekday of May is Friday the 29th
    may = datetime(2026, 5, 1, tzinfo=UTC)
    assert iso(ours("0 0 LW * *", "UTC", may, 1), "UTC") == ["2026-05-29T00:00:00+00:00"]
    assert cronsim("0 0 LW * *", "UTC", may, 1) == ours("0 0 LW * *", "UTC", may, 1)


@demonstrates("nearest-weekday-list")
def test_croniter_refuses_nearest_weekday_lists() -> None:
    with pytest.raises(CroniterBadCronError):
        croniter("0 0 1W,15W * *", JAN_2026)
    # 2026-02-01 is a Sunday (-> Mon 2nd), 2026-02-15 a Sunday (-> Mon 16th)
    feb = datetime(2026, 2, 1, tzinfo=UTC)
    assert iso(ours("0 0 1W,15W * *", "UTC", feb, 2), "UTC") == [
        "2026-02-02T00:00:00+00:00",
        "2026-02-16T00:00:00+00:00",
    ]


@demonstrates("mixed-nth-weekday")
def test_croniter_refuses_mixed_nth_weekday() -> None:
    with pytest.raises(CroniterBadCronError):
        croniter("0 0 * * 3,MON#2", JAN_2026)
    assert iso(ours("0 0 * * 3,MON#2", "UTC", JAN_2026, 3), "UTC") == [
        "2026-01-07T00:00:00+00:00",  # a Wednesday
        "2026-01-12T00:00:00+00:00",  # the second Monday
        "2026-01-14T00:00:00+00:00",
    ]


@demonstrates("wrapping-range")
def test_croniter_accepts_wrapping_ranges() -> None:
    assert iso(croniter_next("0 0 * * FRI-MON", "UTC", JAN_2026, 4), "UTC") == [
        "2026-01-02T00:00:00+00:00",
        "2026-01-03T00:00:00+00:00",
        "2026-01-04T00:00:00+00:00",
        "2026-01-05T00:00:00+00:00",
    ]
    with pytest.raises(ScheduleError, match="inverted"):
        parse_schedule("0 0 * * FRI-MON")


# -- demonstrations: same text, different times -----------------------------------------------


@demonstrates("single-value-range-step")
def test_cronsim_reads_a_single_value_range_step_as_start_step() -> None:
    assert iso(cronsim("5-5/20 * * * *", "UTC", JAN_2026, 3), "UTC") == [
        "2026-01-01T00:05:00+00:00",
        "2026-01-01T00:25:00+00:00",
        "2026-01-01T00:45:00+00:00",
    ]
    assert iso(ours("5-5/20 * * * *", "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-01T00:05:00+00:00",
        "2026-01-01T01:05:00+00:00",
    ]


@demonstrates("seconds-last")
def test_croniter_puts_seconds_last() -> None:
    expression = "30 0 12 * * *"  # cronwheel: 12:00:30 daily; croniter: 00:30 on the 12th, every second
    assert iso(ours(expression, "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-01T12:00:30+00:00",
        "2026-01-02T12:00:30+00:00",
    ]
    assert iso(croniter_next(expression, "UTC", JAN_2026, 2, seconds_first=False), "UTC") == [
        "2026-01-12T00:30:00+00:00",
        "2026-01-12T00:30:01+00:00",
    ]
    assert croniter_next(expression, "UTC", JAN_2026, 2, seconds_first=True) == ours(
        expression, "UTC", JAN_2026, 2
    )


@demonstrates("equal-range-is-whole-field")
def test_croniter_reads_an_equal_range_as_the_whole_field() -> None:
    assert iso(croniter_next("5-5 * * * *", "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-01T00:01:00+00:00",
        "2026-01-01T00:02:00+00:00",
    ]
    assert iso(ours("5-5 * * * *", "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-01T00:05:00+00:00",
        "2026-01-01T01:05:00+00:00",
    ]


@demonstrates("day-of-week-start-step")
def test_croniter_day_of_week_start_step_never_reaches_seven() -> None:
    # 2026-01-01 is a Thursday; Sunday the 4th is 7 in 1/3 = 1,4,7
    assert iso(ours("0 0 * * 1/3", "UTC", JAN_2026, 3), "UTC") == [
        "2026-01-04T00:00:00+00:00",
        "2026-01-05T00:00:00+00:00",
        "2026-01-08T00:00:00+00:00",
    ]
    assert cronsim("0 0 * * 1/3", "UTC", JAN_2026, 3) == ours("0 0 * * 1/3", "UTC", JAN_2026, 3)
    assert iso(croniter_next("0 0 * * 1/3", "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-05T00:00:00+00:00",
        "2026-01-08T00:00:00+00:00",
    ]


@demonstrates("day-rule-default")
def test_croniter_day_rule_without_implement_cron_bug() -> None:
    expression = "0 0 */2 * MON"  # Vixie: odd days that are Mondays
    assert iso(ours(expression, "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-05T00:00:00+00:00",
        "2026-01-19T00:00:00+00:00",
    ]
    assert croniter_next(expression, "UTC", JAN_2026, 2, vixie=True) == ours(expression, "UTC", JAN_2026, 2)
    assert iso(croniter_next(expression, "UTC", JAN_2026, 2, vixie=False), "UTC") == [
        "2026-01-03T00:00:00+00:00",  # odd days OR Mondays
        "2026-01-05T00:00:00+00:00",
    ]


@demonstrates("last-day-fills-the-range")
def test_croniter_fills_a_day_list_with_the_last_day() -> None:
    expression = "0 1 L,2/1 * *"  # found by test_croniter_agrees_without_dst (1990-01-01, UTC)
    start = datetime(1990, 1, 1, tzinfo=UTC)
    assert iso(ours(expression, "UTC", start, 2), "UTC") == [
        "1990-01-02T01:00:00+00:00",
        "1990-01-03T01:00:00+00:00",
    ]
    assert iso(croniter_next(expression, "UTC", start, 2), "UTC") == [
        "1990-01-01T01:00:00+00:00",  # not in the list
        "1990-01-02T01:00:00+00:00",
    ]
    assert not croniter_reads_alike((expression, expression))
    assert croniter_reads_alike(("0 1 L,1-30 * *", "0 1 L,1-30 * *"))  # every day, rightly '*'


@demonstrates("full-range-collapses-to-star")
def test_croniter_collapses_a_full_day_field_to_star() -> None:
    expression = "0 0 1-31 * 1,*/7"  # neither day field starts with '*': OR -> every day
    assert iso(ours(expression, "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-02T00:00:00+00:00",
        "2026-01-03T00:00:00+00:00",
    ]
    assert cronsim(expression, "UTC", JAN_2026, 2) == ours(expression, "UTC", JAN_2026, 2)
    assert iso(croniter_next(expression, "UTC", JAN_2026, 2), "UTC") == [
        "2026-01-04T00:00:00+00:00",  # a Sunday
        "2026-01-05T00:00:00+00:00",  # a Monday
    ]


@demonstrates("nth-weekday-is-anded")
def test_croniter_ands_nth_weekday_with_day_of_month() -> None:
    expression = "0 0 1 * MON#2"
    assert iso(ours(expression, "UTC", JAN_2026, 3), "UTC") == [
        "2026-01-12T00:00:00+00:00",
        "2026-02-01T00:00:00+00:00",
        "2026-02-09T00:00:00+00:00",
    ]
    assert cronsim(expression, "UTC", JAN_2026, 3) == ours(expression, "UTC", JAN_2026, 3)
    with pytest.raises(CroniterBadDateError):
        croniter(expression, JAN_2026, implement_cron_bug=True).get_next(float)


@demonstrates("nearest-weekday-clamped")
def test_croniter_clamps_nearest_weekday_to_the_month() -> None:
    feb = datetime(2026, 2, 1, tzinfo=UTC)
    # 2026-02-28 is a Saturday: croniter takes Friday the 27th; April 30 is a Thursday
    assert iso(croniter_next("0 0 31W * *", "UTC", feb, 3), "UTC") == [
        "2026-02-27T00:00:00+00:00",
        "2026-03-31T00:00:00+00:00",
        "2026-04-30T00:00:00+00:00",
    ]
    assert iso(ours("0 0 31W * *", "UTC", feb, 2), "UTC") == [
        "2026-03-31T00:00:00+00:00",
        "2026-05-29T00:00:00+00:00",  # May 31 is a Sunday: Friday the 29th
    ]


@demonstrates("hash-function")
def test_croniter_hashes_differently() -> None:
    with pytest.raises(CroniterBadCronError):
        croniter("H * * * *", JAN_2026)  # no hash_id
    seeds = [f"job-{i}" for i in range(8)]
    theirs = [croniter("H * * * *", JAN_2026, hash_id=s).get_next(datetime).minute for s in seeds]
    mine = [parse_cron("H * * * *", seed=s).minutes.values() for s in seeds]
    assert [[m] for m in theirs] != mine
    daily = croniter("@daily", JAN_2026, hash_id="job-1").get_next(datetime)
    assert (daily.hour, daily.minute) != (0, 0)
    assert iso(ours("@daily", "UTC", JAN_2026, 1), "UTC") == ["2026-01-02T00:00:00+00:00"]


# -- demonstrations: DST ----------------------------------------------------------------------


@demonstrates("six-field-dst")
def test_cronsim_does_not_mend_six_field_expressions() -> None:
    spring = at(NY, "2024-03-09T12:00:00-05:00")  # 02:00-02:59 is skipped on 2024-03-10
    assert iso(ours("0 30 2 * * *", NY, spring, 2), NY) == [
        "2024-03-10T03:00:00-04:00",
        "2024-03-11T02:30:00-04:00",
    ]
    assert iso(cronsim("0 30 2 * * *", NY, spring, 1), NY) == ["2024-03-11T02:30:00-04:00"]
    assert cronsim("30 2 * * *", NY, spring, 2) == ours("30 2 * * *", NY, spring, 2)  # five fields: mended
    autumn = at(NY, "2024-11-02T12:00:00-04:00")  # 01:00-01:59 repeats on 2024-11-03
    assert iso(ours("0 30 1 * * *", NY, autumn, 2), NY) == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-04T01:30:00-05:00",
    ]
    assert iso(cronsim("0 30 1 * * *", NY, autumn, 2), NY) == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:30:00-05:00",
    ]


@demonstrates("fold-start-in-second-pass")
def test_cronsim_started_in_a_second_pass_goes_back() -> None:
    start = at(NY, "2024-11-03T01:30:00-05:00")  # the second pass of 01:00-01:59
    assert cronsim_walls("45 1 * * *", NY, start, 1) == ["2024-11-03T01:45:00-04:00"]
    assert cronsim("45 1 * * *", NY, start, 1)[0] < start.timestamp()
    assert iso(ours("45 1 * * *", NY, start, 1), NY) == ["2024-11-04T01:45:00-05:00"]


@demonstrates("midnight-gap")
def test_cronsim_returns_a_nonexistent_midnight() -> None:
    start = at(SANTIAGO, "2024-09-07T00:00:00-04:00")  # 2024-09-08 00:00-00:59 does not exist
    assert cronsim_walls("*/30 0 8 * *", SANTIAGO, start, 1) == ["2024-09-08T00:00:00-04:00"]
    assert iso(cronsim("*/30 0 8 * *", SANTIAGO, start, 1), SANTIAGO) == ["2024-09-08T01:00:00-03:00"]
    assert iso(ours("*/30 0 8 * *", SANTIAGO, start, 1), SANTIAGO) == ["2024-10-08T00:00:00-03:00"]


@demonstrates("sub-hour-dst-hour-steps")
def test_cronsim_misses_the_top_of_the_hour_after_a_half_hour_gap() -> None:
    start = at(LORD_HOWE, "2024-10-06T02:50:00+11:00")  # 02:00-02:29 was skipped
    assert iso(ours("*/30 3 * * *", LORD_HOWE, start, 2), LORD_HOWE) == [
        "2024-10-06T03:00:00+11:00",
        "2024-10-06T03:30:00+11:00",
    ]
    assert iso(cronsim("*/30 3 * * *", LORD_HOWE, start, 2), LORD_HOWE) == [
        "2024-10-06T03:30:00+11:00",
        "2024-10-07T03:00:00+11:00",
    ]


@demonstrates("off-hour-fold-loops")
def test_cronsim_repeats_one_instant_in_an_off_hour_fold() -> None:
    start = at(CHATHAM, "2024-04-07T02:45:00+13:45")  # 02:45-03:44 repeats
    assert iso(ours("*/56 3 * * *", CHATHAM, start, 3), CHATHAM) == [
        "2024-04-07T03:00:00+13:45",
        "2024-04-07T03:00:00+12:45",
        "2024-04-07T03:56:00+12:45",
    ]
    assert iso(cronsim("*/56 3 * * *", CHATHAM, start, 3), CHATHAM) == ["2024-04-07T03:00:00+13:45"] * 3


@demonstrates("fixed-time-fold")
def test_croniter_fires_fixed_times_on_both_passes() -> None:
    start = at(NY, "2024-11-02T12:00:00-04:00")
    assert iso(ours("30 1 * * *", NY, start, 2), NY) == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-04T01:30:00-05:00",
    ]
    assert iso(croniter_next("30 1 * * *", NY, start, 2), NY) == [
        "2024-11-03T01:30:00-04:00",
        "2024-11-03T01:30:00-05:00",
    ]
    assert croniter_next("30 1 * * *", NY, start, 2) == ours("30 1 * * *", NY, start, 2, fold="both")


@demonstrates("gap-shift-by-hour-field")
def test_croniter_shifts_wildcard_gap_times_unless_every_hour() -> None:
    start = at(NY, "2024-03-09T23:00:00-05:00")
    assert iso(ours("*/20 2 * * *", NY, start, 1), NY) == ["2024-03-11T02:00:00-04:00"]
    assert iso(croniter_next("*/20 2 * * *", NY, start, 2), NY) == [
        "2024-03-10T03:00:00-04:00",
        "2024-03-11T02:00:00-04:00",
    ]
    assert croniter_next("*/20 2 * * *", NY, start, 3) == ours("*/20 2 * * *", NY, start, 3, gap="shift")
    # with every hour, croniter skips like cronwheel
    late = at(NY, "2024-03-10T01:50:00-05:00")
    assert croniter_next("*/20 * * * *", NY, late, 3) == ours("*/20 * * * *", NY, late, 3)


@demonstrates("off-hour-fold")
def test_croniter_misses_second_pass_times_in_off_hour_folds() -> None:
    start = at(LORD_HOWE, "2024-04-07T01:00:00+11:00")  # 01:30-01:59 repeats
    assert iso(ours("*/20 * * * *", LORD_HOWE, start, 4), LORD_HOWE) == [
        "2024-04-07T01:20:00+11:00",
        "2024-04-07T01:40:00+11:00",
        "2024-04-07T01:40:00+10:30",
        "2024-04-07T02:00:00+10:30",
    ]
    assert iso(croniter_next("*/20 * * * *", LORD_HOWE, start, 3), LORD_HOWE) == [
        "2024-04-07T01:20:00+11:00",
        "2024-04-07T01:40:00+11:00",
        "2024-04-07T02:00:00+10:30",
    ]
    late = at(CHATHAM, "2024-04-07T03:43:00+13:45")  # the last minute of the first pass
    assert iso(ours("* */2 * * *", CHATHAM, late, 2), CHATHAM) == [
        "2024-04-07T02:45:00+12:45",
        "2024-04-07T02:46:00+12:45",
    ]
    assert iso(croniter_next("* */2 * * *", CHATHAM, late, 2), CHATHAM) == [
        "2024-04-07T04:00:00+12:45",
        "2024-04-07T04:01:00+12:45",
    ]


@demonstrates("gap-shift-keeps-seconds")
def test_croniter_shifts_gap_times_by_whole_minutes() -> None:
    start = at(NY, "2024-03-10T01:59:00-05:00")
    assert iso(ours("1 * 2 * * *", NY, start, 2, gap="shift"), NY) == [
        "2024-03-10T03:00:00-04:00",
        "2024-03-11T02:00:01-04:00",
    ]
    assert iso(croniter_next("1 * 2 * * *", NY, start, 2), NY) == [
        "2024-03-10T03:00:01-04:00",
        "2024-03-11T02:00:01-04:00",
    ]


def test_every_disagreement_is_demonstrated() -> None:
    keys = [d.key for d in DISAGREEMENTS]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(_DEMONSTRATED), set(keys) ^ set(_DEMONSTRATED)
