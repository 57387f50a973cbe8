"""The chaos checker's own cron reference: which instants a cron expression fires at.

Independent of cronwheel by construction (it imports nothing from ``cronwheel``) and brute force on
purpose: every candidate instant of a window (each minute; each second of a matching minute for
six-field expressions) is converted to the zone's wall time with :mod:`zoneinfo` and its fields are
compared with the expression's value sets. No cleverness, so that it is obviously right.

The dialect is the subset the chaos workload uses: five fields (minute hour day-of-month month
day-of-week) or six (a leading second field); ``*``, numbers, ``a-b``, lists ``a,b``, steps
``*/n``, ``a/n`` (= ``a-max/n``), ``a-b/n``; day of week 0-7 with 0 and 7 Sunday; names JAN-DEC and
SUN-SAT in any case; and the Vixie cron day rule: when both day fields are restricted (their text
does not start with ``*``) a day fires if *either* matches, otherwise it must match both.

DST is out of scope: a window in which the zone's UTC offset changes raises :class:`ValueError`
instead of guessing gap and fold rules (the chaos workload keeps clear of transitions).

Elapsed time too, as plainly: ``@every Ns`` (or ``Nm``), optionally ``from`` an RFC 3339 instant,
fires at each whole second ``t`` with ``(t - anchor) % N == 0`` (the anchor: the epoch, else the
given instant, before which nothing fires), checked second by second; ``@at T`` fires at ``T``.

Jitter and calendars from their documented definitions (docs/schedules.md), written out again
here: :func:`jitter_offset` is the offset a jittered slot fires at, :func:`closed` whether a
calendar's listed dates close a slot's local day.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

_MONTHS = {
    name: number
    for number, name in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], start=1
    )
}
_DAYS = {name: number for number, name in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_NO_NAMES: dict[str, int] = {}
_MINUTE = timedelta(minutes=1)
_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class _Cron:
    """The value sets of one expression (day of week: 0-6, Sunday 0)."""

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]
    dom_star: bool
    dow_star: bool
    has_seconds: bool


def slots(expression: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """Every aware-UTC instant in (``start``, ``end``] at which ``expression`` fires in ``zone``.

    Raises ValueError for an expression outside the supported dialect, naive bounds, or a window
    that contains a change of the zone's UTC offset."""
    for bound in (start, end):
        if bound.tzinfo is None or bound.utcoffset() is None:
            raise ValueError(f"naive window bound {bound.isoformat()}: pass aware datetimes")
    return list(_slots(expression, zone, start.astimezone(UTC), end.astimezone(UTC)))


def fires_at(expression: str, zone: str, instant: datetime) -> bool:
    """Whether ``expression`` fires in ``zone`` exactly at the aware ``instant``: the same field
    match as :func:`slots`, on that one candidate. Raises ValueError like :func:`slots` for the
    window (``instant`` - 1 s, ``instant``]."""
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"naive instant {instant.isoformat()}: pass an aware datetime")
    if expression.startswith("@"):
        return _elapsed_fires(_elapsed(expression), instant.astimezone(UTC))
    tz = ZoneInfo(zone)
    local = instant.astimezone(tz)
    if _offset(tz, instant - _SECOND) != local.utcoffset():
        raise ValueError(f"the UTC offset of {zone} changes at {instant}: DST is out of scope")
    if _offset(tz, instant).total_seconds() % 60:
        raise ValueError(f"{zone} has a UTC offset that is not whole minutes: out of scope")
    return _matches(_parse(expression), local)


@functools.lru_cache(maxsize=8192)
def _slots(expression: str, zone: str, start: datetime, end: datetime) -> tuple[datetime, ...]:
    if expression.startswith("@"):
        elapsed = _elapsed(expression)
        candidates = (
            start.replace(microsecond=0) + _SECOND * step
            for step in range(int((end - start).total_seconds()) + 2)
        )
        return tuple(t for t in candidates if start < t <= end and _elapsed_fires(elapsed, t))
    cron = _parse(expression)
    tz = ZoneInfo(zone)
    offset = _offset(tz, start)
    if _offset(tz, end) != offset:
        raise ValueError(f"the UTC offset of {zone} changes within ({start}, {end}]: DST is out of scope")
    if offset.total_seconds() % 60:
        raise ValueError(f"{zone} has a UTC offset of {offset} (not whole minutes): out of scope")
    found: list[datetime] = []
    minute = start.replace(second=0, microsecond=0)
    while minute <= end:
        local = minute.astimezone(tz)
        if local.utcoffset() != offset:
            raise ValueError(f"the UTC offset of {zone} changes within ({start}, {end}]: DST is out of scope")
        if _minute_matches(cron, local):
            found.extend(instant for instant in _candidates(cron, minute) if start < instant <= end)
        minute += _MINUTE
    return tuple(instant for instant in found if _matches(cron, instant.astimezone(tz)))


def _offset(tz: ZoneInfo, instant: datetime) -> timedelta:
    offset = instant.astimezone(tz).utcoffset()
    assert offset is not None
    return offset


def _candidates(cron: _Cron, minute: datetime) -> list[datetime]:
    """The instants of one (matching) minute to test: its start, or each of its 60 seconds."""
    if not cron.has_seconds:
        return [minute]
    return [minute + second * _SECOND for second in range(60)]


def _minute_matches(cron: _Cron, local: datetime) -> bool:
    return (
        local.minute in cron.minutes
        and local.hour in cron.hours
        and local.month in cron.months
        and _day_matches(cron, local)
    )


def _matches(cron: _Cron, local: datetime) -> bool:
    return local.microsecond == 0 and local.second in cron.seconds and _minute_matches(cron, local)


def _day_matches(cron: _Cron, local: datetime) -> bool:
    dom = local.day in cron.doms
    dow = (local.weekday() + 1) % 7 in cron.dows  # Python: Monday 0; cron: Sunday 0
    if cron.dom_star or cron.dow_star:
        return dom and dow
    return dom or dow


@functools.lru_cache(maxsize=1024)
def _parse(expression: str) -> _Cron:
    fields = expression.split()
    if len(fields) not in (5, 6):
        raise ValueError(f"{expression!r}: expected 5 or 6 fields, got {len(fields)}")
    has_seconds = len(fields) == 6
    if not has_seconds:
        fields = ["0", *fields]
    second, minute, hour, dom, month, dow = fields
    return _Cron(
        seconds=_field(second, 0, 59, _NO_NAMES),
        minutes=_field(minute, 0, 59, _NO_NAMES),
        hours=_field(hour, 0, 23, _NO_NAMES),
        doms=_field(dom, 1, 31, _NO_NAMES),
        months=_field(month, 1, 12, _MONTHS),
        dows=frozenset(day % 7 for day in _field(dow, 0, 7, _DAYS)),
        dom_star=dom.startswith("*"),
        dow_star=dow.startswith("*"),
        has_seconds=has_seconds,
    )


def _field(text: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        values |= _part(part, low, high, names)
    return frozenset(values)


def _part(part: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    body, slash, step_text = part.partition("/")
    step = _value(step_text, _NO_NAMES) if slash else 1
    if body == "*":
        first, last = low, high
    elif "-" in body:
        first_text, _, last_text = body.partition("-")
        first, last = _value(first_text, names), _value(last_text, names)
    else:
        first = _value(body, names)
        last = high if slash else first
    if step < 1 or not low <= first <= last <= high:
        raise ValueError(f"cron part {part!r} is outside {low}-{high} or has a bad step")
    return set(range(first, last + 1, step))


def _value(text: str, names: dict[str, int]) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ValueError(f"cron value {text!r} is not a number or a known name")
    return int(text)


@dataclass(frozen=True)
class _Elapsed:
    """``@every``: ``every`` seconds from ``anchor`` (none before it when ``starts``); ``@at``:
    ``every`` 0 and the one instant as ``anchor``."""

    every: int
    anchor: datetime
    starts: bool


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_UNIT = {"s": 1, "m": 60}


@functools.lru_cache(maxsize=256)
def _elapsed(expression: str) -> _Elapsed:
    words = expression.split()
    if words[0] == "@at" and len(words) == 2:
        return _Elapsed(0, _instant(words[1]), True)
    if words[0] == "@every" and len(words) in (2, 4) and words[1][-1] in _UNIT and words[1][:-1].isdigit():
        every = int(words[1][:-1]) * _UNIT[words[1][-1]]
        if len(words) == 2:
            return _Elapsed(every, _EPOCH, False)
        if words[2] == "from":
            return _Elapsed(every, _instant(words[3]), True)
    raise ValueError(f"not in the reference's dialect: {expression!r}")


def _instant(text: str) -> datetime:
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"an instant without its offset: {text!r}")
    return parsed.astimezone(UTC)


def _elapsed_fires(elapsed: _Elapsed, instant: datetime) -> bool:
    if instant.microsecond or (elapsed.starts and instant < elapsed.anchor):
        return False
    if elapsed.every == 0:
        return instant == elapsed.anchor
    return int((instant - elapsed.anchor).total_seconds()) % elapsed.every == 0


def jitter_offset(job_id: str, slot: datetime, jitter_s: float) -> timedelta:
    """How long after ``slot`` a job with ``jitter_s`` fires it (zero without jitter)."""
    if jitter_s <= 0:
        return timedelta(0)
    micros = (slot.astimezone(UTC) - _EPOCH) // timedelta(microseconds=1)
    digest = hashlib.blake2b(f"{job_id}|{micros}".encode(), digest_size=8).digest()
    return timedelta(milliseconds=int.from_bytes(digest, "big") % int(jitter_s * 1000))


def closed(dates: frozenset[str], zone: str, slot: datetime) -> bool:
    """Whether ``slot``'s local date in ``zone`` is one of ``dates`` (ISO dates)."""
    return slot.astimezone(ZoneInfo(zone)).date().isoformat() in dates
