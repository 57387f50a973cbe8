"""The schedule engine: cron expressions in any IANA time zone, right across DST, and schedules
of elapsed time (``@every 90m``, ``@at 2026-12-24T18:00:00+01:00``).

A pure library: no I/O beyond loading zone data, no clock. Instants go in and come out.

>>> from datetime import datetime, UTC
>>> from cronwheel.schedule import parse_schedule
>>> schedule = parse_schedule("30 2 * * *", "America/New_York")
>>> schedule.next_after(datetime(2026, 3, 7, 12, tzinfo=UTC)).isoformat()
'2026-03-08T03:00:00-04:00'

(02:30 does not exist in New York on 2026-03-08: a fixed-time job runs once, when the gap ends.)
See ``docs/schedules.md`` for the dialect and the DST rules.
"""

from cronwheel.schedule.describe import describe
from cronwheel.schedule.elapsed import IntervalSchedule, OnceSchedule
from cronwheel.schedule.errors import ScheduleError
from cronwheel.schedule.kinds import Schedule
from cronwheel.schedule.parse import MACROS, load_zone, may_hash, parse_cron, parse_schedule
from cronwheel.schedule.schedule import CronSchedule, DstFold, DstGap, Fire, FireKind

__all__ = [
    "MACROS",
    "CronSchedule",
    "DstFold",
    "DstGap",
    "Fire",
    "FireKind",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "ScheduleError",
    "describe",
    "load_zone",
    "may_hash",
    "parse_cron",
    "parse_schedule",
]
