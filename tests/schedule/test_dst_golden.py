"""Golden DST tables: exact fire times across real transitions in many zones.

Every row of ``CASES`` is one :class:`Case`: a zone, a cron expression, the explicit ``dst_gap`` /
``dst_fold`` options (``None`` = the cron default), an instant ``after`` (ISO 8601 with its UTC
offset) and the first fires strictly after it, each as ``(ISO time with offset, kind)``. Kinds are
abbreviated: ``N`` normal, ``S`` shifted (its wall time fell in a gap; fired when the gap ended),
``R1`` / ``R2`` the first / second pass of a repeated wall time.

Every expected value was derived by hand from the tz rules, not copied from the engine. The comment
above each zone's block states its transitions; they were checked with plain ``zoneinfo`` arithmetic,
e.g. ``datetime(2026, 3, 8, 7, tzinfo=UTC).astimezone(ZoneInfo("America/New_York"))``.
``test_table_agrees_with_tzdata`` re-checks every row against ``zoneinfo`` alone (offsets right for
the instant, R1/R2 on an ambiguous wall time, S exactly at a forward transition), so a typo in a
table fails there rather than being mistaken for an engine bug.

The contract (Vixie/ISC cron): a *fixed-time* schedule (neither the minute nor the hour field starts
with ``*``) whose wall time falls in a gap fires once when the gap ends, and fires once, on the first
pass, at a repeated wall time. A *wildcard* schedule follows elapsed time: skipped wall times do not
fire, repeated ones fire on both passes. ``dst_gap`` / ``dst_fold`` override either default.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from itertools import islice
from typing import NamedTuple
from zoneinfo import ZoneInfo

import pytest

from cronwheel.schedule import FireKind, parse_schedule
from cronwheel.schedule.schedule import DstFold, DstGap

N = FireKind.NORMAL
S = FireKind.SHIFTED
R1 = FireKind.REPEATED_FIRST
R2 = FireKind.REPEATED_SECOND


class Case(NamedTuple):
    zone: str
    expression: str
    after: str
    fires: tuple[tuple[str, FireKind], ...]
    dst_gap: DstGap | None = None
    dst_fold: DstFold | None = None


def _id(case: Case) -> str:
    options = "".join(
        f" {name}={value}" for name, value in (("gap", case.dst_gap), ("fold", case.dst_fold)) if value
    )
    return f"{case.zone} {case.expression!r}{options} after {case.after}"


# -- America/New_York -------------------------------------------------------------------------------
# 2026-03-08 07:00Z: 02:00 EST (-05:00) -> 03:00 EDT (-04:00); wall 02:00-02:59 does not exist.
# 2026-11-01 06:00Z: 02:00 EDT (-04:00) -> 01:00 EST (-05:00); wall 01:00-01:59 happens twice.
NEW_YORK = [
    Case(
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T00:00:00-05:00",
        (
            ("2026-03-07T02:30:00-05:00", N),
            ("2026-03-08T03:00:00-04:00", S),
            ("2026-03-09T02:30:00-04:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "30 2 * * *",
        "2026-03-07T00:00:00-05:00",
        (("2026-03-07T02:30:00-05:00", N), ("2026-03-09T02:30:00-04:00", N)),
        dst_gap="skip",
    ),
    # four slots inside the gap collapse into one fire at its end
    Case(
        "America/New_York",
        "0,15,30,45 2 * * *",
        "2026-03-07T03:00:00-05:00",
        (
            ("2026-03-08T03:00:00-04:00", S),
            ("2026-03-09T02:00:00-04:00", N),
            ("2026-03-09T02:15:00-04:00", N),
        ),
    ),
    # 02:00 is in the gap and 03:00 is a natural slot at its end: one single fire
    Case(
        "America/New_York",
        "0 2,3 * * *",
        "2026-03-07T12:00:00-05:00",
        (
            ("2026-03-08T03:00:00-04:00", N),
            ("2026-03-09T02:00:00-04:00", N),
            ("2026-03-09T03:00:00-04:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00-04:00",
        (("2026-11-01T01:30:00-04:00", R1), ("2026-11-02T01:30:00-05:00", N)),
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00-04:00",
        (("2026-11-01T01:30:00-05:00", R2), ("2026-11-02T01:30:00-05:00", N)),
        dst_fold="last",
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-10-31T12:00:00-04:00",
        (
            ("2026-11-01T01:30:00-04:00", R1),
            ("2026-11-01T01:30:00-05:00", R2),
            ("2026-11-02T01:30:00-05:00", N),
        ),
        dst_fold="both",
    ),
    # resuming between the two passes
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-11-01T01:45:00-04:00",
        (("2026-11-02T01:30:00-05:00", N),),
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-11-01T01:45:00-04:00",
        (("2026-11-01T01:30:00-05:00", R2), ("2026-11-02T01:30:00-05:00", N)),
        dst_fold="last",
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2026-11-01T01:30:00-04:00",
        (("2026-11-01T01:30:00-05:00", R2),),
        dst_fold="both",
    ),
    Case(
        "America/New_York",
        "*/30 * * * *",
        "2026-03-08T01:00:00-05:00",
        (
            ("2026-03-08T01:30:00-05:00", N),
            ("2026-03-08T03:00:00-04:00", N),
            ("2026-03-08T03:30:00-04:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "0 * * * *",
        "2026-03-08T00:30:00-05:00",
        (
            ("2026-03-08T01:00:00-05:00", N),
            ("2026-03-08T03:00:00-04:00", N),
            ("2026-03-08T04:00:00-04:00", N),
        ),
    ),
    # a fixed minute under a '*' hour is a wildcard schedule: 02:15 and 02:45 just do not happen
    Case(
        "America/New_York",
        "15,45 * * * *",
        "2026-03-08T01:30:00-05:00",
        (("2026-03-08T01:45:00-05:00", N), ("2026-03-08T03:15:00-04:00", N)),
    ),
    Case(
        "America/New_York",
        "15,45 * * * *",
        "2026-03-08T01:30:00-05:00",
        (
            ("2026-03-08T01:45:00-05:00", N),
            ("2026-03-08T03:00:00-04:00", S),
            ("2026-03-08T03:15:00-04:00", N),
        ),
        dst_gap="shift",
    ),
    # a '*' minute under a fixed hour is a wildcard schedule too: nothing at all on 2026-03-08
    Case(
        "America/New_York",
        "*/15 2 * * *",
        "2026-03-07T02:50:00-05:00",
        (("2026-03-09T02:00:00-04:00", N), ("2026-03-09T02:15:00-04:00", N)),
    ),
    Case(
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T00:30:00-04:00",
        (
            ("2026-11-01T01:00:00-04:00", R1),
            ("2026-11-01T01:30:00-04:00", R1),
            ("2026-11-01T01:00:00-05:00", R2),
            ("2026-11-01T01:30:00-05:00", R2),
            ("2026-11-01T02:00:00-05:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "0 * * * *",
        "2026-11-01T00:00:00-04:00",
        (
            ("2026-11-01T01:00:00-04:00", R1),
            ("2026-11-01T01:00:00-05:00", R2),
            ("2026-11-01T02:00:00-05:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "0 * * * *",
        "2026-11-01T00:00:00-04:00",
        (("2026-11-01T01:00:00-04:00", R1), ("2026-11-01T02:00:00-05:00", N)),
        dst_fold="first",
    ),
    Case(
        "America/New_York",
        "0 * * * *",
        "2026-11-01T00:00:00-04:00",
        (("2026-11-01T01:00:00-05:00", R2), ("2026-11-01T02:00:00-05:00", N)),
        dst_fold="last",
    ),
    # resuming between the passes of a wildcard schedule
    Case(
        "America/New_York",
        "*/30 * * * *",
        "2026-11-01T01:40:00-04:00",
        (("2026-11-01T01:00:00-05:00", R2), ("2026-11-01T01:30:00-05:00", R2)),
    ),
]

# -- Europe/London -----------------------------------------------------------------------------------
# 2026-03-29 01:00Z: 01:00 GMT (+00:00) -> 02:00 BST (+01:00); wall 01:00-01:59 does not exist.
# 2026-10-25 01:00Z: 02:00 BST (+01:00) -> 01:00 GMT (+00:00); wall 01:00-01:59 happens twice.
LONDON = [
    Case(
        "Europe/London",
        "30 1 * * *",
        "2026-03-28T00:00:00+00:00",
        (
            ("2026-03-28T01:30:00+00:00", N),
            ("2026-03-29T02:00:00+01:00", S),
            ("2026-03-30T01:30:00+01:00", N),
        ),
    ),
    Case(
        "Europe/London",
        "30 1 * * *",
        "2026-03-28T00:00:00+00:00",
        (("2026-03-28T01:30:00+00:00", N), ("2026-03-30T01:30:00+01:00", N)),
        dst_gap="skip",
    ),
    Case(
        "Europe/London",
        "30 1 * * *",
        "2026-10-24T12:00:00+01:00",
        (("2026-10-25T01:30:00+01:00", R1), ("2026-10-26T01:30:00+00:00", N)),
    ),
    Case(
        "Europe/London",
        "30 1 * * *",
        "2026-10-24T12:00:00+01:00",
        (("2026-10-25T01:30:00+00:00", R2), ("2026-10-26T01:30:00+00:00", N)),
        dst_fold="last",
    ),
    Case(
        "Europe/London",
        "30 1 * * *",
        "2026-10-24T12:00:00+01:00",
        (
            ("2026-10-25T01:30:00+01:00", R1),
            ("2026-10-25T01:30:00+00:00", R2),
            ("2026-10-26T01:30:00+00:00", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Europe/London",
        "*/30 * * * *",
        "2026-03-29T00:00:00+00:00",
        (
            ("2026-03-29T00:30:00+00:00", N),
            ("2026-03-29T02:00:00+01:00", N),
            ("2026-03-29T02:30:00+01:00", N),
        ),
    ),
    Case(
        "Europe/London",
        "0 * * * *",
        "2026-03-29T00:00:00+00:00",
        (("2026-03-29T02:00:00+01:00", N), ("2026-03-29T03:00:00+01:00", N)),
    ),
    Case(
        "Europe/London",
        "*/30 * * * *",
        "2026-10-25T00:30:00+01:00",
        (
            ("2026-10-25T01:00:00+01:00", R1),
            ("2026-10-25T01:30:00+01:00", R1),
            ("2026-10-25T01:00:00+00:00", R2),
            ("2026-10-25T01:30:00+00:00", R2),
            ("2026-10-25T02:00:00+00:00", N),
        ),
    ),
    Case(
        "Europe/London",
        "0 * * * *",
        "2026-10-25T00:00:00+01:00",
        (
            ("2026-10-25T01:00:00+01:00", R1),
            ("2026-10-25T01:00:00+00:00", R2),
            ("2026-10-25T02:00:00+00:00", N),
        ),
    ),
]

# -- Europe/Berlin -----------------------------------------------------------------------------------
# 2026-03-29 01:00Z: 02:00 CET (+01:00) -> 03:00 CEST (+02:00); wall 02:00-02:59 does not exist.
# 2026-10-25 01:00Z: 03:00 CEST (+02:00) -> 02:00 CET (+01:00); wall 02:00-02:59 happens twice.
BERLIN = [
    Case(
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-28T00:00:00+01:00",
        (
            ("2026-03-28T02:30:00+01:00", N),
            ("2026-03-29T03:00:00+02:00", S),
            ("2026-03-30T02:30:00+02:00", N),
        ),
    ),
    Case(
        "Europe/Berlin",
        "30 2 * * *",
        "2026-03-28T00:00:00+01:00",
        (("2026-03-28T02:30:00+01:00", N), ("2026-03-30T02:30:00+02:00", N)),
        dst_gap="skip",
    ),
    Case(
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24T12:00:00+02:00",
        (("2026-10-25T02:30:00+02:00", R1), ("2026-10-26T02:30:00+01:00", N)),
    ),
    Case(
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24T12:00:00+02:00",
        (("2026-10-25T02:30:00+01:00", R2), ("2026-10-26T02:30:00+01:00", N)),
        dst_fold="last",
    ),
    Case(
        "Europe/Berlin",
        "30 2 * * *",
        "2026-10-24T12:00:00+02:00",
        (
            ("2026-10-25T02:30:00+02:00", R1),
            ("2026-10-25T02:30:00+01:00", R2),
            ("2026-10-26T02:30:00+01:00", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Europe/Berlin",
        "*/30 * * * *",
        "2026-03-29T01:00:00+01:00",
        (
            ("2026-03-29T01:30:00+01:00", N),
            ("2026-03-29T03:00:00+02:00", N),
            ("2026-03-29T03:30:00+02:00", N),
        ),
    ),
    Case(
        "Europe/Berlin",
        "0 * * * *",
        "2026-03-29T01:00:00+01:00",
        (("2026-03-29T03:00:00+02:00", N), ("2026-03-29T04:00:00+02:00", N)),
    ),
    Case(
        "Europe/Berlin",
        "*/30 * * * *",
        "2026-10-25T01:30:00+02:00",
        (
            ("2026-10-25T02:00:00+02:00", R1),
            ("2026-10-25T02:30:00+02:00", R1),
            ("2026-10-25T02:00:00+01:00", R2),
            ("2026-10-25T02:30:00+01:00", R2),
            ("2026-10-25T03:00:00+01:00", N),
        ),
    ),
    Case(
        "Europe/Berlin",
        "0 * * * *",
        "2026-10-25T01:00:00+02:00",
        (
            ("2026-10-25T02:00:00+02:00", R1),
            ("2026-10-25T02:00:00+01:00", R2),
            ("2026-10-25T03:00:00+01:00", N),
        ),
    ),
]

# -- Australia/Lord_Howe: half-hour DST ------------------------------------------------------------------
# 2026-04-04 15:00Z: 02:00 (+11:00) -> 01:30 (+10:30); wall 01:30-01:59 happens twice (2026-04-05).
# 2026-10-03 15:30Z: 02:00 (+10:30) -> 02:30 (+11:00); wall 02:00-02:29 does not exist (2026-10-04).
LORD_HOWE = [
    Case(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-03T00:00:00+10:30",
        (
            ("2026-10-03T02:15:00+10:30", N),
            ("2026-10-04T02:30:00+11:00", S),
            ("2026-10-05T02:15:00+11:00", N),
        ),
    ),
    Case(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-03T00:00:00+10:30",
        (("2026-10-03T02:15:00+10:30", N), ("2026-10-05T02:15:00+11:00", N)),
        dst_gap="skip",
    ),
    Case(
        "Australia/Lord_Howe",
        "0,15 2 * * *",
        "2026-10-03T03:00:00+10:30",
        (
            ("2026-10-04T02:30:00+11:00", S),
            ("2026-10-05T02:00:00+11:00", N),
            ("2026-10-05T02:15:00+11:00", N),
        ),
    ),
    # 02:30 is a natural slot exactly at the end of the gap: 02:00 merges into it
    Case(
        "Australia/Lord_Howe",
        "0,30 2 * * *",
        "2026-10-03T03:00:00+10:30",
        (
            ("2026-10-04T02:30:00+11:00", N),
            ("2026-10-05T02:00:00+11:00", N),
            ("2026-10-05T02:30:00+11:00", N),
        ),
    ),
    Case(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T12:00:00+11:00",
        (("2026-04-05T01:45:00+11:00", R1), ("2026-04-06T01:45:00+10:30", N)),
    ),
    Case(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T12:00:00+11:00",
        (("2026-04-05T01:45:00+10:30", R2), ("2026-04-06T01:45:00+10:30", N)),
        dst_fold="last",
    ),
    Case(
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2026-04-04T12:00:00+11:00",
        (
            ("2026-04-05T01:45:00+11:00", R1),
            ("2026-04-05T01:45:00+10:30", R2),
            ("2026-04-06T01:45:00+10:30", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Australia/Lord_Howe",
        "*/30 * * * *",
        "2026-10-04T01:00:00+10:30",
        (
            ("2026-10-04T01:30:00+10:30", N),
            ("2026-10-04T02:30:00+11:00", N),
            ("2026-10-04T03:00:00+11:00", N),
        ),
    ),
    Case(
        "Australia/Lord_Howe",
        "0 * * * *",
        "2026-10-04T00:30:00+10:30",
        (("2026-10-04T01:00:00+10:30", N), ("2026-10-04T03:00:00+11:00", N)),
    ),
    Case(
        "Australia/Lord_Howe",
        "*/30 * * * *",
        "2026-04-05T00:30:00+11:00",
        (
            ("2026-04-05T01:00:00+11:00", N),
            ("2026-04-05T01:30:00+11:00", R1),
            ("2026-04-05T01:30:00+10:30", R2),
            ("2026-04-05T02:00:00+10:30", N),
        ),
    ),
    # whole hours are never repeated here: 01:00 is before the fold, 02:00 after it
    Case(
        "Australia/Lord_Howe",
        "0 * * * *",
        "2026-04-05T00:30:00+11:00",
        (
            ("2026-04-05T01:00:00+11:00", N),
            ("2026-04-05T02:00:00+10:30", N),
            ("2026-04-05T03:00:00+10:30", N),
        ),
    ),
]

# -- Pacific/Chatham: +12:45 / +13:45 --------------------------------------------------------------------
# 2026-04-04 14:00Z: 03:45 (+13:45) -> 02:45 (+12:45); wall 02:45-03:44 happens twice (2026-04-05).
# 2026-09-26 14:00Z: 02:45 (+12:45) -> 03:45 (+13:45); wall 02:45-03:44 does not exist (2026-09-27).
CHATHAM = [
    Case(
        "Pacific/Chatham",
        "0 3 * * *",
        "2026-09-26T00:00:00+12:45",
        (
            ("2026-09-26T03:00:00+12:45", N),
            ("2026-09-27T03:45:00+13:45", S),
            ("2026-09-28T03:00:00+13:45", N),
        ),
    ),
    Case(
        "Pacific/Chatham",
        "0 3 * * *",
        "2026-09-26T00:00:00+12:45",
        (("2026-09-26T03:00:00+12:45", N), ("2026-09-28T03:00:00+13:45", N)),
        dst_gap="skip",
    ),
    Case(
        "Pacific/Chatham",
        "0 3 * * *",
        "2026-04-04T12:00:00+13:45",
        (("2026-04-05T03:00:00+13:45", R1), ("2026-04-06T03:00:00+12:45", N)),
    ),
    Case(
        "Pacific/Chatham",
        "0 3 * * *",
        "2026-04-04T12:00:00+13:45",
        (("2026-04-05T03:00:00+12:45", R2), ("2026-04-06T03:00:00+12:45", N)),
        dst_fold="last",
    ),
    Case(
        "Pacific/Chatham",
        "0 3 * * *",
        "2026-04-04T12:00:00+13:45",
        (
            ("2026-04-05T03:00:00+13:45", R1),
            ("2026-04-05T03:00:00+12:45", R2),
            ("2026-04-06T03:00:00+12:45", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Pacific/Chatham",
        "*/30 * * * *",
        "2026-09-27T02:00:00+12:45",
        (
            ("2026-09-27T02:30:00+12:45", N),
            ("2026-09-27T04:00:00+13:45", N),
            ("2026-09-27T04:30:00+13:45", N),
        ),
    ),
    Case(
        "Pacific/Chatham",
        "*/30 * * * *",
        "2026-09-27T02:00:00+12:45",
        (
            ("2026-09-27T02:30:00+12:45", N),
            ("2026-09-27T03:45:00+13:45", S),
            ("2026-09-27T04:00:00+13:45", N),
        ),
        dst_gap="shift",
    ),
    Case(
        "Pacific/Chatham",
        "0 * * * *",
        "2026-09-27T01:30:00+12:45",
        (("2026-09-27T02:00:00+12:45", N), ("2026-09-27T04:00:00+13:45", N)),
    ),
    Case(
        "Pacific/Chatham",
        "*/30 * * * *",
        "2026-04-05T02:00:00+13:45",
        (
            ("2026-04-05T02:30:00+13:45", N),
            ("2026-04-05T03:00:00+13:45", R1),
            ("2026-04-05T03:30:00+13:45", R1),
            ("2026-04-05T03:00:00+12:45", R2),
            ("2026-04-05T03:30:00+12:45", R2),
            ("2026-04-05T04:00:00+12:45", N),
        ),
    ),
    Case(
        "Pacific/Chatham",
        "0 * * * *",
        "2026-04-05T01:30:00+13:45",
        (
            ("2026-04-05T02:00:00+13:45", N),
            ("2026-04-05T03:00:00+13:45", R1),
            ("2026-04-05T03:00:00+12:45", R2),
            ("2026-04-05T04:00:00+12:45", N),
        ),
    ),
]

# -- America/Santiago: transitions at local midnight --------------------------------------------------
# 2026-04-05 03:00Z: Sun 00:00 (-03:00) -> Sat 2026-04-04 23:00 (-04:00); Sat 23:00-23:59 happens twice.
# 2026-09-06 04:00Z: Sun 00:00 (-04:00) -> 01:00 (-03:00); Sun 2026-09-06 00:00-00:59 does not exist.
SANTIAGO = [
    # a daily midnight job: that Sunday's midnight never happens, so it runs at 01:00
    Case(
        "America/Santiago",
        "0 0 * * *",
        "2026-09-04T12:00:00-04:00",
        (
            ("2026-09-05T00:00:00-04:00", N),
            ("2026-09-06T01:00:00-03:00", S),
            ("2026-09-07T00:00:00-03:00", N),
        ),
    ),
    Case(
        "America/Santiago",
        "0 0 * * *",
        "2026-09-04T12:00:00-04:00",
        (("2026-09-05T00:00:00-04:00", N), ("2026-09-07T00:00:00-03:00", N)),
        dst_gap="skip",
    ),
    Case(
        "America/Santiago",
        "30 0 * * *",
        "2026-09-05T12:00:00-04:00",
        (("2026-09-06T01:00:00-03:00", S), ("2026-09-07T00:30:00-03:00", N)),
    ),
    Case(
        "America/Santiago",
        "30 23 * * *",
        "2026-04-04T12:00:00-03:00",
        (("2026-04-04T23:30:00-03:00", R1), ("2026-04-05T23:30:00-04:00", N)),
    ),
    Case(
        "America/Santiago",
        "30 23 * * *",
        "2026-04-04T12:00:00-03:00",
        (("2026-04-04T23:30:00-04:00", R2), ("2026-04-05T23:30:00-04:00", N)),
        dst_fold="last",
    ),
    Case(
        "America/Santiago",
        "30 23 * * *",
        "2026-04-04T12:00:00-03:00",
        (
            ("2026-04-04T23:30:00-03:00", R1),
            ("2026-04-04T23:30:00-04:00", R2),
            ("2026-04-05T23:30:00-04:00", N),
        ),
        dst_fold="both",
    ),
    # midnight itself is not repeated when the clocks go back: once a day as always
    Case(
        "America/Santiago",
        "0 0 * * *",
        "2026-04-03T12:00:00-03:00",
        (
            ("2026-04-04T00:00:00-03:00", N),
            ("2026-04-05T00:00:00-04:00", N),
            ("2026-04-06T00:00:00-04:00", N),
        ),
    ),
    Case(
        "America/Santiago",
        "0 * * * *",
        "2026-04-04T21:30:00-03:00",
        (
            ("2026-04-04T22:00:00-03:00", N),
            ("2026-04-04T23:00:00-03:00", R1),
            ("2026-04-04T23:00:00-04:00", R2),
            ("2026-04-05T00:00:00-04:00", N),
        ),
    ),
    Case(
        "America/Santiago",
        "*/30 * * * *",
        "2026-09-05T23:00:00-04:00",
        (
            ("2026-09-05T23:30:00-04:00", N),
            ("2026-09-06T01:00:00-03:00", N),
            ("2026-09-06T01:30:00-03:00", N),
        ),
    ),
    Case(
        "America/Santiago",
        "0 * * * *",
        "2026-09-05T22:30:00-04:00",
        (("2026-09-05T23:00:00-04:00", N), ("2026-09-06T01:00:00-03:00", N)),
    ),
]

# -- Africa/Cairo ------------------------------------------------------------------------------------
# 2026-04-23 22:00Z: Fri 00:00 (+02:00) -> 01:00 (+03:00); Fri 2026-04-24 00:00-00:59 does not exist.
# 2026-10-29 21:00Z: Fri 00:00 (+03:00) -> Thu 23:00 (+02:00); Thu 2026-10-29 23:00-23:59 happens twice.
CAIRO = [
    Case(
        "Africa/Cairo",
        "30 0 * * *",
        "2026-04-22T12:00:00+02:00",
        (
            ("2026-04-23T00:30:00+02:00", N),
            ("2026-04-24T01:00:00+03:00", S),
            ("2026-04-25T00:30:00+03:00", N),
        ),
    ),
    Case(
        "Africa/Cairo",
        "30 0 * * *",
        "2026-04-22T12:00:00+02:00",
        (("2026-04-23T00:30:00+02:00", N), ("2026-04-25T00:30:00+03:00", N)),
        dst_gap="skip",
    ),
    # Fridays at midnight: 2026-04-24 is a Friday whose midnight does not exist
    Case(
        "Africa/Cairo",
        "0 0 * * 5",
        "2026-04-20T00:00:00+02:00",
        (("2026-04-24T01:00:00+03:00", S), ("2026-05-01T00:00:00+03:00", N)),
    ),
    Case(
        "Africa/Cairo",
        "30 23 * * *",
        "2026-10-29T12:00:00+03:00",
        (("2026-10-29T23:30:00+03:00", R1), ("2026-10-30T23:30:00+02:00", N)),
    ),
    Case(
        "Africa/Cairo",
        "30 23 * * *",
        "2026-10-29T12:00:00+03:00",
        (("2026-10-29T23:30:00+02:00", R2), ("2026-10-30T23:30:00+02:00", N)),
        dst_fold="last",
    ),
    Case(
        "Africa/Cairo",
        "30 23 * * *",
        "2026-10-29T12:00:00+03:00",
        (
            ("2026-10-29T23:30:00+03:00", R1),
            ("2026-10-29T23:30:00+02:00", R2),
            ("2026-10-30T23:30:00+02:00", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Africa/Cairo",
        "*/30 * * * *",
        "2026-04-23T23:00:00+02:00",
        (
            ("2026-04-23T23:30:00+02:00", N),
            ("2026-04-24T01:00:00+03:00", N),
            ("2026-04-24T01:30:00+03:00", N),
        ),
    ),
    Case(
        "Africa/Cairo",
        "0 * * * *",
        "2026-10-29T22:00:00+03:00",
        (
            ("2026-10-29T23:00:00+03:00", R1),
            ("2026-10-29T23:00:00+02:00", R2),
            ("2026-10-30T00:00:00+02:00", N),
        ),
    ),
]

# -- Pacific/Apia: 2011-12-30 never happened ---------------------------------------------------------
# 2011-09-24 14:00Z: 03:00 (-11:00) -> 04:00 (-10:00); wall 03:00-03:59 does not exist.
# 2011-12-30 10:00Z: Thu 2011-12-29 24:00 (-10:00) -> Sat 2011-12-31 00:00 (+14:00); all of Fri 30 skipped.
# 2012-03-31 14:00Z: 2012-04-01 04:00 (+14:00) -> 03:00 (+13:00); wall 03:00-03:59 happens twice.
APIA = [
    Case(
        "Pacific/Apia",
        "0 12 * * *",
        "2011-12-29T00:00:00-10:00",
        (
            ("2011-12-29T12:00:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", S),
            ("2011-12-31T12:00:00+14:00", N),
        ),
    ),
    Case(
        "Pacific/Apia",
        "0 12 * * *",
        "2011-12-29T00:00:00-10:00",
        (("2011-12-29T12:00:00-10:00", N), ("2011-12-31T12:00:00+14:00", N)),
        dst_gap="skip",
    ),
    # the skipped midnight of the 30th merges into the natural midnight of the 31st
    Case(
        "Pacific/Apia",
        "0 0 * * *",
        "2011-12-28T12:00:00-10:00",
        (
            ("2011-12-29T00:00:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", N),
            ("2012-01-01T00:00:00+14:00", N),
        ),
    ),
    Case(
        "Pacific/Apia",
        "0 0 * * *",
        "2011-12-28T12:00:00-10:00",
        (
            ("2011-12-29T00:00:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", N),
            ("2012-01-01T00:00:00+14:00", N),
        ),
        dst_gap="skip",
    ),
    # three slots of the lost day collapse into one fire
    Case(
        "Pacific/Apia",
        "0 6,12,18 * * *",
        "2011-12-29T12:00:00-10:00",
        (
            ("2011-12-29T18:00:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", S),
            ("2011-12-31T06:00:00+14:00", N),
        ),
    ),
    # a job for the 30th of December only
    Case(
        "Pacific/Apia",
        "0 12 30 12 *",
        "2011-12-01T00:00:00-10:00",
        (("2011-12-31T00:00:00+14:00", S), ("2012-12-30T12:00:00+14:00", N)),
    ),
    Case(
        "Pacific/Apia",
        "0 12 30 12 *",
        "2011-12-01T00:00:00-10:00",
        (("2012-12-30T12:00:00+14:00", N),),
        dst_gap="skip",
    ),
    Case(
        "Pacific/Apia",
        "*/30 * * * *",
        "2011-12-29T23:00:00-10:00",
        (
            ("2011-12-29T23:30:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", N),
            ("2011-12-31T00:30:00+14:00", N),
        ),
    ),
    Case(
        "Pacific/Apia",
        "0 * * * *",
        "2011-12-29T22:30:00-10:00",
        (
            ("2011-12-29T23:00:00-10:00", N),
            ("2011-12-31T00:00:00+14:00", N),
            ("2011-12-31T01:00:00+14:00", N),
        ),
    ),
    Case(
        "Pacific/Apia",
        "30 3 * * *",
        "2011-09-23T12:00:00-11:00",
        (("2011-09-24T04:00:00-10:00", S), ("2011-09-25T03:30:00-10:00", N)),
    ),
    Case(
        "Pacific/Apia",
        "30 3 * * *",
        "2012-03-31T12:00:00+14:00",
        (("2012-04-01T03:30:00+14:00", R1), ("2012-04-02T03:30:00+13:00", N)),
    ),
    Case(
        "Pacific/Apia",
        "30 3 * * *",
        "2012-03-31T12:00:00+14:00",
        (("2012-04-01T03:30:00+13:00", R2), ("2012-04-02T03:30:00+13:00", N)),
        dst_fold="last",
    ),
    Case(
        "Pacific/Apia",
        "30 3 * * *",
        "2012-03-31T12:00:00+14:00",
        (
            ("2012-04-01T03:30:00+14:00", R1),
            ("2012-04-01T03:30:00+13:00", R2),
            ("2012-04-02T03:30:00+13:00", N),
        ),
        dst_fold="both",
    ),
    Case(
        "Pacific/Apia",
        "0 * * * *",
        "2012-04-01T02:30:00+14:00",
        (
            ("2012-04-01T03:00:00+14:00", R1),
            ("2012-04-01T03:00:00+13:00", R2),
            ("2012-04-01T04:00:00+13:00", N),
        ),
    ),
]

# -- Asia/Kolkata: +05:30 all year, no DST: the options change nothing --------------------------------
KOLKATA = [
    Case(
        "Asia/Kolkata",
        "30 2 * * *",
        "2026-03-07T00:00:00+05:30",
        (
            ("2026-03-07T02:30:00+05:30", N),
            ("2026-03-08T02:30:00+05:30", N),
            ("2026-03-09T02:30:00+05:30", N),
        ),
    ),
    Case(
        "Asia/Kolkata",
        "30 1 * * *",
        "2026-10-31T12:00:00+05:30",
        (("2026-11-01T01:30:00+05:30", N), ("2026-11-02T01:30:00+05:30", N)),
        dst_gap="skip",
        dst_fold="both",
    ),
    Case(
        "Asia/Kolkata",
        "0 * * * *",
        "2026-10-25T00:30:00+05:30",
        (
            ("2026-10-25T01:00:00+05:30", N),
            ("2026-10-25T02:00:00+05:30", N),
            ("2026-10-25T03:00:00+05:30", N),
        ),
    ),
    Case(
        "Asia/Kolkata",
        "*/30 * * * *",
        "2026-03-29T01:00:00+05:30",
        (
            ("2026-03-29T01:30:00+05:30", N),
            ("2026-03-29T02:00:00+05:30", N),
            ("2026-03-29T02:30:00+05:30", N),
        ),
    ),
]

# -- Leap days and the year 2100 (not a leap year: divisible by 100, not by 400) ----------------------
# New York's 2100 transitions: 2100-03-14 07:00Z (02:00 -> 03:00) and 2100-11-07 06:00Z (02:00 -> 01:00).
CALENDAR = [
    Case(
        "UTC",
        "0 0 29 2 *",
        "2026-01-01T00:00:00+00:00",
        (
            ("2028-02-29T00:00:00+00:00", N),
            ("2032-02-29T00:00:00+00:00", N),
            ("2036-02-29T00:00:00+00:00", N),
        ),
    ),
    Case(
        "UTC",
        "0 0 29 2 *",
        "2097-01-01T00:00:00+00:00",
        (("2104-02-29T00:00:00+00:00", N), ("2108-02-29T00:00:00+00:00", N)),
    ),
    Case("UTC", "0 0 29 2 *", "1997-01-01T00:00:00+00:00", (("2000-02-29T00:00:00+00:00", N),)),
    Case("UTC", "0 0 29 2 *", "2397-01-01T00:00:00+00:00", (("2400-02-29T00:00:00+00:00", N),)),
    Case(
        "America/New_York",
        "0 0 29 2 *",
        "2097-01-01T00:00:00-05:00",
        (("2104-02-29T00:00:00-05:00", N),),
    ),
    Case(
        "UTC",
        "0 12 L 2 *",
        "2099-12-31T00:00:00+00:00",
        (
            ("2100-02-28T12:00:00+00:00", N),
            ("2101-02-28T12:00:00+00:00", N),
            ("2102-02-28T12:00:00+00:00", N),
            ("2103-02-28T12:00:00+00:00", N),
            ("2104-02-29T12:00:00+00:00", N),
        ),
    ),
    Case("Europe/Berlin", "0 12 L 2 *", "2100-01-01T00:00:00+01:00", (("2100-02-28T12:00:00+01:00", N),)),
    Case(
        "UTC",
        "0 0 29-31 2 *",
        "2099-03-01T00:00:00+00:00",
        (("2104-02-29T00:00:00+00:00", N),),
    ),
    # the day after 2100-02-28 is 2100-03-01, a Monday
    Case(
        "UTC",
        "0 0 * 2-3 *",
        "2100-02-27T12:00:00+00:00",
        (("2100-02-28T00:00:00+00:00", N), ("2100-03-01T00:00:00+00:00", N)),
    ),
    Case(
        "UTC",
        "0 0 * * 1",
        "2100-02-23T00:00:00+00:00",
        (("2100-03-01T00:00:00+00:00", N), ("2100-03-08T00:00:00+00:00", N)),
    ),
    Case(
        "America/New_York",
        "30 2 * * *",
        "2100-03-13T00:00:00-05:00",
        (
            ("2100-03-13T02:30:00-05:00", N),
            ("2100-03-14T03:00:00-04:00", S),
            ("2100-03-15T02:30:00-04:00", N),
        ),
    ),
    Case(
        "America/New_York",
        "30 1 * * *",
        "2100-11-06T12:00:00-04:00",
        (("2100-11-07T01:30:00-04:00", R1), ("2100-11-08T01:30:00-05:00", N)),
    ),
    Case(
        "America/New_York",
        "0 * * * *",
        "2100-11-07T00:00:00-04:00",
        (
            ("2100-11-07T01:00:00-04:00", R1),
            ("2100-11-07T01:00:00-05:00", R2),
            ("2100-11-07T02:00:00-05:00", N),
        ),
    ),
]

# -- Searching from the last second before a gap ---------------------------------------------------
# The shifted fire is due at the very instant the gap ends, so a search from one second (or less)
# before it must still find it, and an iterator whose previous fire was that second must not skip it.
GAP_EDGE = [
    Case(
        "America/New_York",
        "30 2 * * *",
        "2026-03-08T01:59:59-05:00",
        (("2026-03-08T03:00:00-04:00", S), ("2026-03-09T02:30:00-04:00", N)),
    ),
    Case(
        "America/New_York",
        "30 2 * * *",
        "2026-03-08T01:59:59.500000-05:00",
        (("2026-03-08T03:00:00-04:00", S), ("2026-03-09T02:30:00-04:00", N)),
    ),
    Case(
        "America/New_York",
        "30 2 * * *",
        "2026-03-08T01:59:58-05:00",
        (("2026-03-08T03:00:00-04:00", S), ("2026-03-09T02:30:00-04:00", N)),
    ),
    # a natural slot at the gap end is found from there too
    Case(
        "America/New_York",
        "0 2,3 * * *",
        "2026-03-08T01:59:59-05:00",
        (("2026-03-08T03:00:00-04:00", N), ("2026-03-09T02:00:00-04:00", N)),
    ),
    Case(
        "America/New_York",
        "15,45 * * * *",
        "2026-03-08T01:59:59-05:00",
        (("2026-03-08T03:00:00-04:00", S), ("2026-03-08T03:15:00-04:00", N)),
        dst_gap="shift",
    ),
    # with a seconds field: 01:59:59 fires, then 02:59:59 (in the gap) is due when the gap ends
    Case(
        "America/New_York",
        "59 59 1,2 * * *",
        "2026-03-08T00:00:00-05:00",
        (
            ("2026-03-08T01:59:59-05:00", N),
            ("2026-03-08T03:00:00-04:00", S),
            ("2026-03-09T01:59:59-04:00", N),
        ),
    ),
    Case(
        "Pacific/Apia",
        "0 12 * * *",
        "2011-12-29T23:59:59-10:00",
        (("2011-12-31T00:00:00+14:00", S), ("2011-12-31T12:00:00+14:00", N)),
    ),
    Case(
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2026-10-04T01:59:59+10:30",
        (("2026-10-04T02:30:00+11:00", S), ("2026-10-05T02:15:00+11:00", N)),
    ),
]

# -- Transitions exactly at 1 January 00:00 UTC (historical, but in the data) ---------------------------
# Antarctica/Casey 1969-01-01 00:00Z: 00:00 (+00:00) -> 08:00 (+08:00); 1969-01-01 00:00-07:59 skipped.
# America/Cambridge_Bay 1920-01-01 00:00Z: 00:00 (+00:00) -> 1919-12-31 17:00 (-07:00); 17:00-23:59 twice.
YEAR_BOUNDARY = [
    Case(
        "Antarctica/Casey",
        "0 3 1 1 *",
        "1968-12-30T00:00:00+00:00",
        (("1969-01-01T08:00:00+08:00", S), ("1970-01-01T03:00:00+08:00", N)),
    ),
    Case(
        "Antarctica/Casey",
        "0 * * * *",
        "1968-12-31T22:30:00+00:00",
        (
            ("1968-12-31T23:00:00+00:00", N),
            ("1969-01-01T08:00:00+08:00", N),
            ("1969-01-01T09:00:00+08:00", N),
        ),
    ),
    Case(
        "America/Cambridge_Bay",
        "0 20 31 12 *",
        "1919-12-30T00:00:00+00:00",
        (("1919-12-31T20:00:00+00:00", R1), ("1920-12-31T20:00:00-07:00", N)),
    ),
    Case(
        "America/Cambridge_Bay",
        "0 20 31 12 *",
        "1919-12-30T00:00:00+00:00",
        (("1919-12-31T20:00:00-07:00", R2), ("1920-12-31T20:00:00-07:00", N)),
        dst_fold="last",
    ),
    Case(
        "America/Cambridge_Bay",
        "0 * * * *",
        "1919-12-31T21:30:00+00:00",
        (
            ("1919-12-31T22:00:00+00:00", R1),
            ("1919-12-31T23:00:00+00:00", R1),
            ("1919-12-31T17:00:00-07:00", R2),
            ("1919-12-31T18:00:00-07:00", R2),
        ),
    ),
]

CASES = [
    *NEW_YORK,
    *LONDON,
    *BERLIN,
    *LORD_HOWE,
    *CHATHAM,
    *SANTIAGO,
    *CAIRO,
    *APIA,
    *KOLKATA,
    *CALENDAR,
    *GAP_EDGE,
    *YEAR_BOUNDARY,
]


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_golden(case: Case) -> None:
    schedule = parse_schedule(case.expression, case.zone, dst_gap=case.dst_gap, dst_fold=case.dst_fold)
    after = datetime.fromisoformat(case.after)
    count = len(case.fires)
    got = [(fire.at.isoformat(), fire.kind) for fire in islice(schedule.fires_after(after), count)]
    assert got == list(case.fires)
    expected_times = [iso for iso, _ in case.fires]
    assert [moment.isoformat() for moment in islice(schedule.iter_after(after), count)] == expected_times
    first = schedule.next_after(after)
    assert first is not None
    assert first.isoformat() == expected_times[0]


def _offset(moment: datetime) -> timedelta:
    offset = moment.utcoffset()
    assert offset is not None
    return offset


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_table_agrees_with_tzdata(case: Case) -> None:
    """The tables checked against ``zoneinfo`` alone (no engine), to catch typos in them."""
    zone = ZoneInfo(case.zone)
    previous = datetime.fromisoformat(case.after)
    assert previous.astimezone(zone).isoformat() == case.after
    for iso, kind in case.fires:
        moment = datetime.fromisoformat(iso)
        assert moment.timestamp() > previous.timestamp(), f"{iso} is not after {previous.isoformat()}"
        previous = moment
        local = moment.astimezone(zone)
        assert local.isoformat() == iso, f"{iso} has the wrong offset: the zone says {local.isoformat()}"
        wall = local.replace(tzinfo=None)
        early = wall.replace(tzinfo=zone, fold=0)
        late = wall.replace(tzinfo=zone, fold=1)
        # PEP 495: a repeated wall time has the larger offset on its first pass (fold=0)
        repeated = _offset(early) > _offset(late)
        if kind is R1:
            assert repeated
            assert moment.timestamp() == early.timestamp()
        elif kind is R2:
            assert repeated
            assert moment.timestamp() == late.timestamp()
        elif kind is S:
            before = _offset((moment - timedelta(seconds=1)).astimezone(zone))
            assert before < _offset(local), f"{iso} is not the end of a gap"
        else:
            assert not repeated, f"{iso}: its wall time repeats, so it is not a normal fire"


# Shifted fires carry the nominal wall time that fell in the gap.
SHIFTED_WALLS = [
    ("America/New_York", "30 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T02:30:00"),
    ("Europe/London", "30 1 * * *", "2026-03-29T00:00:00+00:00", "2026-03-29T01:30:00"),
    ("Europe/Berlin", "30 2 * * *", "2026-03-29T00:00:00+01:00", "2026-03-29T02:30:00"),
    ("Australia/Lord_Howe", "15 2 * * *", "2026-10-04T00:00:00+10:30", "2026-10-04T02:15:00"),
    ("Pacific/Chatham", "0 3 * * *", "2026-09-27T00:00:00+12:45", "2026-09-27T03:00:00"),
    ("America/Santiago", "0 0 * * *", "2026-09-05T12:00:00-04:00", "2026-09-06T00:00:00"),
    ("Africa/Cairo", "0 0 * * 5", "2026-04-23T12:00:00+02:00", "2026-04-24T00:00:00"),
    ("Pacific/Apia", "0 12 * * *", "2011-12-29T13:00:00-10:00", "2011-12-30T12:00:00"),
]


@pytest.mark.parametrize(("zone", "expression", "after", "wall"), SHIFTED_WALLS)
def test_shifted_fire_keeps_its_nominal_wall_time(zone: str, expression: str, after: str, wall: str) -> None:
    fire = next(parse_schedule(expression, zone).fires_after(datetime.fromisoformat(after)))
    assert fire.kind is S
    assert fire.wall.isoformat() == wall


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_unshifted_fire_wall_is_its_local_time(case: Case) -> None:
    schedule = parse_schedule(case.expression, case.zone, dst_gap=case.dst_gap, dst_fold=case.dst_fold)
    for fire in islice(schedule.fires_after(datetime.fromisoformat(case.after)), len(case.fires)):
        if fire.kind is not S:
            assert fire.wall == fire.at.replace(tzinfo=None, fold=0)


# Which schedules cron treats as fixed-time and which as wildcard, and the policies that follow.
CLASSIFICATION = [
    ("30 2 * * *", False),
    ("0,15,30,45 2 * * *", False),
    ("0 2,3 * * *", False),
    ("0 12 L 2 *", False),
    ("0 0 * * 5", False),
    ("*/30 * * * *", True),
    ("0 * * * *", True),
    ("15,45 * * * *", True),
    ("*/15 2 * * *", True),
    ("0 */2 * * *", True),
]


@pytest.mark.parametrize(("expression", "wildcard"), CLASSIFICATION)
def test_default_policy_follows_cron(expression: str, wildcard: bool) -> None:
    schedule = parse_schedule(expression, "America/New_York")
    assert schedule.wildcard is wildcard
    assert (schedule.dst_gap, schedule.dst_fold) == (("skip", "both") if wildcard else ("shift", "first"))
    explicit = parse_schedule(expression, "America/New_York", dst_gap="skip", dst_fold="last")
    assert (explicit.dst_gap, explicit.dst_fold) == ("skip", "last")
