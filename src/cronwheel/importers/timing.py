"""Schedule pieces every importer needs: cronwheel's ``@every`` and ``@at`` texts, the zone
check, and whether a schedule meets a repeated DST hour (where cron-like sources that compute
the next time from the wall clock run twice and cronwheel's fixed-time schedules once)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from cronwheel.schedule import ScheduleError, load_zone, parse_cron, parse_schedule
from cronwheel.schedule.gaps import shortest_gap
from cronwheel.schedule.zone import zone_model

NO_LIMIT_S = 24 * 3600.0  # the API's largest timeout_s: what "no time limit" becomes
MAX_GRACE_S = 7 * 86_400.0  # the API's largest misfire grace
EVERY_FROM_EPOCH = "@every without 'from' fires at the Unix epoch plus whole intervals"
_UNITS = (("d", 86_400), ("h", 3600), ("m", 60), ("s", 1))
_LOOKAHEAD = timedelta(days=366)


def every(seconds: float, anchor: datetime | None = None) -> str:
    """``@every 1h30m`` (whole seconds, at least one), ``from`` the anchor when given."""
    left = max(1, round(seconds))
    parts = []
    for unit, size in _UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    text = "@every " + "".join(parts)
    return text if anchor is None else f"{text} from {instant(anchor)}"


def instant(value: datetime) -> str:
    """RFC 3339 with its offset (``Z`` for UTC), in whole seconds as ``@at`` and ``from`` take
    them (a fraction is dropped)."""
    text = value.replace(microsecond=0).isoformat()
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def known_zone(name: Any) -> str | None:
    """``name`` when it is an IANA zone cronwheel knows, else None."""
    if not isinstance(name, str) or not name:
        return None
    try:
        load_zone(name)
    except ScheduleError:
        return None
    return name


def folded_fires(expression: str, zone: str, now: datetime) -> str | None:
    """When ``expression`` is a fixed-time schedule (cronwheel runs it once in a repeated hour)
    and matches a wall time that a DST change repeats in ``zone`` within a year of ``now``: that
    span, as ``01:00-02:00 on 2027-11-07``; else None."""
    try:
        schedule = parse_cron(expression, zone)
    except ScheduleError:  # not cron (an interval or an instant: DST never moves them), or invalid
        return None
    if schedule.dst_fold == "both":
        return None
    model = zone_model(schedule.zone)
    if model.fixed_offset is not None:
        return None
    at = int(now.timestamp())
    end = int((now + _LOOKAHEAD).timestamp())
    while at < end:
        segment = model.segment(at)
        if segment.offset_after < segment.offset and segment.end < end:
            start = datetime.fromtimestamp(segment.end + segment.offset_after, UTC).replace(tzinfo=None)
            stop = datetime.fromtimestamp(segment.end + segment.offset, UTC).replace(tzinfo=None)
            hit = schedule.next_wall(start)
            if hit is not None and hit < stop:
                return f"{start:%H:%M}-{stop:%H:%M} on {start:%Y-%m-%d}"
        at = segment.end
    return None


def schedule_problem(expression: str, zone: str) -> str | None:
    """Why cronwheel refuses ``expression`` in ``zone``, or None."""
    try:
        parse_schedule(expression, zone)
    except ScheduleError as error:
        return str(error)
    return None


def fires_within(expression: str, zone: str, seconds: float, now: datetime) -> bool:
    """Whether two fire times of ``expression`` can be ``seconds`` or less apart (so that
    both can be missed within a grace period of that length)."""
    try:
        schedule = parse_schedule(expression, zone)
    except ScheduleError:
        return False
    return shortest_gap(schedule, now, below=int(seconds) + 1) is not None
