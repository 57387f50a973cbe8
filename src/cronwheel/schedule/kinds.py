"""Every kind of schedule the engine parses, as one type: what :func:`~cronwheel.schedule.parse_schedule`
returns. Each answers ``next_after``, ``iter_after``, ``fires_after`` and ``next_timestamp``; what
only cron has (its fields, for the words and the warnings) is read after an ``isinstance``."""

from __future__ import annotations

from cronwheel.schedule.elapsed import IntervalSchedule, OnceSchedule
from cronwheel.schedule.schedule import CronSchedule

Schedule = CronSchedule | IntervalSchedule | OnceSchedule
