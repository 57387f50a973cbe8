"""APScheduler's ``day_of_week`` (0 = Monday ... 6 = Sunday, or ``mon``-``sun``) in cron's
spelling (0 = Sunday): a naive copy of the numbers would move every job by a day. The field is
expanded to its days and written with names, so nothing is left to numbering."""

from __future__ import annotations

import re

NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")  # APScheduler's order: index = its number
_PART = re.compile(r"^(\*|[a-z]{3}|\d)(?:-([a-z]{3}|\d))?(?:/(\d+))?$")


def aps_days(text: str) -> set[int] | None:
    """The APScheduler day numbers ``text`` matches, or None when it is not a weekday field."""
    days: set[int] = set()
    for part in text.strip().lower().split(","):
        found = _PART.match(part.strip())
        if found is None:
            return None
        first, last, step = found.groups()
        start, stop = (0, 6) if first == "*" else (_day(first), _day(last or first))
        if start is None or stop is None or stop < start:
            return None
        if step and not last and first != "*":
            stop = 6  # a/n: from a to the end, as cron's
        days.update(range(start, stop + 1, int(step or 1)))
    return days


def _day(text: str) -> int | None:
    if text.isdigit():
        return int(text) if int(text) <= 6 else None
    upper = text.upper()
    return NAMES.index(upper) if upper in NAMES else None


def cron_days(days: set[int]) -> str:
    """Cron's day-of-week text for APScheduler day numbers: ``*``, or names with runs of three
    or more as ranges (``MON-FRI,SUN``; a range never wraps past Saturday)."""
    if days == set(range(7)):
        return "*"
    parts: list[str] = []
    ordered = sorted(days)
    run = [ordered[0]]
    for day in [*ordered[1:], None]:
        if day is not None and day == run[-1] + 1 and day != 6:
            run.append(day)
            continue
        parts.append(
            f"{NAMES[run[0]]}-{NAMES[run[-1]]}" if len(run) >= 3 else ",".join(NAMES[d] for d in run)
        )
        if day is not None:
            run = [day]
    return ",".join(parts)
