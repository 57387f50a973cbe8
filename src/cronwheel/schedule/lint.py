"""Warnings about schedules that are valid but often surprise people (shown by previews)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from cronwheel.schedule.elapsed import IntervalSchedule, OnceSchedule
from cronwheel.schedule.fields import ValueSet
from cronwheel.schedule.kinds import Schedule
from cronwheel.schedule.schedule import CronSchedule
from cronwheel.schedule.zone import zone_model

_LOOKAHEAD = timedelta(days=366)


def schedule_warnings(schedule: Schedule, after: datetime) -> list[str]:
    """Plain-language warnings for ``schedule``; DST effects are looked for in the year after
    ``after``."""
    if isinstance(schedule, OnceSchedule):
        return [] if schedule.at > after else [f"{schedule.at.isoformat()} is past: it has no fire left"]
    if isinstance(schedule, IntervalSchedule):
        return _elapsed_warnings(schedule, after)
    found: list[str] = []
    if schedule.days.either:
        found.append(
            "day-of-month and day-of-week are both restricted, so cron fires on days matching "
            "EITHER of them, not both (write one of them as '*' to use only the other, or use "
            "the # form, such as MON#1, for 'first Monday')"
        )
    for name, values, span in (
        ("second", schedule.seconds, 60),
        ("minute", schedule.minutes, 60),
        ("hour", schedule.hours, 24),
    ):
        uneven = _uneven_step(values, span)
        if uneven:
            found.append(f"{name} field: {uneven}")
    long_days = [day for day in (29, 30, 31) if schedule.days.dom.days >> day & 1]
    if long_days and not schedule.days.dom.star:
        days = ", ".join(str(day) for day in long_days)
        found.append(f"day {days} does not exist in every month; months without it have no run then")
    text = schedule.expression.strip()
    if not text.startswith("@") and "H" in text.upper() and schedule.seed is None:
        found.append("H is hashed from an empty seed here; cronwheel jobs hash their job id")
    found.extend(_dst_warnings(schedule, after))
    return found


def _uneven_step(values: ValueSet, span: int) -> str | None:
    """A step that does not divide the field's span fires at uneven intervals across the wrap."""
    allowed = values.values()
    if len(allowed) < 3:
        return None
    step = allowed[1] - allowed[0]
    if step == 1 or allowed[0] >= step or any(b - a != step for a, b in pairwise(allowed)):
        return None  # a plain range, or a step that does not start over the whole field
    wrap = span - allowed[-1] + allowed[0]
    if wrap == step:
        return None
    return (
        f"every {step} does not divide {span}: after {allowed[-1]} the next is {allowed[0]}, "
        f"{wrap} later, not {step}"
    )


def _dst_warnings(schedule: CronSchedule, after: datetime) -> list[str]:
    model = zone_model(schedule.zone)
    elapsed_time = schedule.dst_gap == "skip" and schedule.dst_fold == "both"
    if model.fixed_offset is not None or (schedule.wildcard and elapsed_time):
        return []  # wildcard schedules follow elapsed time across DST: nothing to warn about
    out: list[str] = []
    instant = int(after.timestamp())
    end = int((after + _LOOKAHEAD).timestamp())
    while instant < end:
        seg = model.segment(instant)
        if seg.offset_after != seg.offset and seg.end < end:
            note = _transition_note(schedule, seg.end, seg.offset, seg.offset_after)
            if note:
                out.append(note)
        instant = seg.end
    return out


def _transition_note(schedule: CronSchedule, at: int, before: int, after: int) -> str | None:
    lo, hi = sorted((at + before, at + after))
    wall_lo = datetime.fromtimestamp(lo, UTC).replace(tzinfo=None)
    wall_hi = datetime.fromtimestamp(hi, UTC).replace(tzinfo=None)
    hit = schedule.next_wall(wall_lo)
    if hit is None or hit >= wall_hi:
        return None
    span = f"{wall_lo:%H:%M}-{wall_hi:%H:%M} on {wall_lo:%Y-%m-%d}"
    if after > before:
        action = "fire once when the gap ends" if schedule.dst_gap == "shift" else "do not fire"
        return f"DST: {span} does not exist in {schedule.timezone}; matching times {action}"
    passes = {"first": "on the first pass only", "last": "on the second pass only", "both": "twice"}
    return (
        f"DST: {span} happens twice in {schedule.timezone}; matching times fire {passes[schedule.dst_fold]}"
    )


def _elapsed_warnings(schedule: IntervalSchedule, after: datetime) -> list[str]:
    """An interval of whole days keeps a time of day only while the zone's offset does: say when
    a DST change in the coming year moves it (``@every 24h`` is not ``0 3 * * *``)."""
    model = zone_model(schedule.zone)
    if schedule.every_s % 3600 or schedule.every_s == 3600 or model.fixed_offset is not None:
        return []  # not a time of day that an hour's shift would move
    instant, end = int(after.timestamp()), int((after + _LOOKAHEAD).timestamp())
    while (seg := model.segment(instant)).offset_after == seg.offset and seg.end < end:
        instant = seg.end
    if seg.offset_after == seg.offset or seg.end >= end:
        return []
    when = datetime.fromtimestamp(seg.end, UTC).astimezone(schedule.zone)
    return [
        f"an interval counts elapsed time: from the DST change on {when:%Y-%m-%d} its fires come at "
        "another local time of day (a cron schedule such as '0 3 * * *' keeps the wall-clock time)"
    ]
