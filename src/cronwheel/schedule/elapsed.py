"""Schedules of elapsed time rather than of the wall clock: ``@every`` and ``@at``.

* ``@every 90s``, ``@every 1h30m``, ``@every 6h from 2026-01-01T03:00:00+01:00``: fires ``N``
  seconds apart, on the instants ``anchor + k * N``. Without ``from`` the anchor is the Unix epoch
  (``@every 6h`` fires at 00:00, 06:00, 12:00 and 18:00 UTC), so a slot is a function of the
  expression alone: every scheduler, after any restart or failover, computes the same ones. With
  ``from``, the anchor is also the first slot. DST never moves a fire: ``@every 24h`` in a zone
  with DST fires at 03:00 local in winter and 04:00 in summer (``0 3 * * *`` keeps 03:00).
* ``@at 2026-12-24T18:00:00+01:00``: one fire at that instant, then none.

Instants are RFC 3339 with an offset (or ``Z``) and whole seconds. The zone only says how fires
are shown. Both kinds answer the same calls as :class:`~cronwheel.schedule.schedule.CronSchedule`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, tzinfo
from math import floor

from cronwheel.schedule.errors import ScheduleError
from cronwheel.schedule.schedule import DstFold, DstGap, Fire, FireKind
from cronwheel.schedule.zone import MAX_YEAR, year_start

EVERY = "@every"
AT = "@at"
MIN_EVERY_S = 1
MAX_EVERY_S = 3660 * 86_400  # ten years and then some
_UNITS = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
_DURATION = re.compile(r"(?:(\d{1,9})d)?(?:(\d{1,9})h)?(?:(\d{1,9})m)?(?:(\d{1,9})s)?")
_MAX_INSTANT = year_start(MAX_YEAR)


class _Elapsed:
    """What both kinds share: the text, the zone, and the DST answers of an elapsed-time schedule
    (nothing is skipped, a repeated wall time fires on each pass that a fire falls in)."""

    __slots__ = ("_expression", "_timezone", "_zone")

    def __init__(self, expression: str, timezone: str, zone: tzinfo) -> None:
        self._expression, self._timezone, self._zone = expression, timezone, zone

    @property
    def expression(self) -> str:
        return self._expression

    @property
    def timezone(self) -> str:
        return self._timezone

    @property
    def zone(self) -> tzinfo:
        return self._zone

    @property
    def dst_gap(self) -> DstGap:
        return "skip"

    @property
    def dst_fold(self) -> DstFold:
        return "both"

    @property
    def wildcard(self) -> bool:
        """Elapsed time, as cron's ``*`` minute or hour schedules are."""
        return True

    @property
    def seed(self) -> str | None:
        return None

    def next_timestamp(self, ts: float) -> int | None:  # pragma: no cover - each kind has its own
        raise NotImplementedError

    def next_after(self, instant: datetime) -> datetime | None:
        """The first fire time strictly after ``instant`` (aware), in the schedule's zone."""
        found = self.next_timestamp(instant.timestamp())
        return None if found is None else datetime.fromtimestamp(found, self._zone)

    def iter_after(self, instant: datetime) -> Iterator[datetime]:
        for fire in self.fires_after(instant):
            yield fire.at

    def fires_after(self, instant: datetime) -> Iterator[Fire]:
        """Successive fire times strictly after ``instant``, each marked when its local time is
        one that DST repeats (the first or the second pass)."""
        ts: float = instant.timestamp()
        while (found := self.next_timestamp(ts)) is not None:
            yield _fire(datetime.fromtimestamp(found, self._zone))
            ts = found

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._expression!r}, timezone={self._timezone!r})"


class IntervalSchedule(_Elapsed):
    """``@every``: fires every :attr:`every_s` seconds on ``anchor + k * every_s``."""

    __slots__ = ("_anchor", "_every", "_starts")

    def __init__(
        self, expression: str, timezone: str, zone: tzinfo, every_s: int, anchor: int, *, starts: bool
    ) -> None:
        super().__init__(expression, timezone, zone)
        self._every, self._anchor, self._starts = every_s, anchor, starts

    @property
    def every_s(self) -> int:
        return self._every

    @property
    def anchor(self) -> datetime:
        """The instant the fires count from (UTC)."""
        return datetime.fromtimestamp(self._anchor, UTC)

    @property
    def starts(self) -> bool:
        """Whether the anchor was given (``from``): then it is the first fire as well."""
        return self._starts

    def next_timestamp(self, ts: float) -> int | None:
        after = floor(ts)
        if self._starts and after < self._anchor:
            return self._anchor
        found = self._anchor + ((after - self._anchor) // self._every + 1) * self._every
        return found if found < _MAX_INSTANT else None


class OnceSchedule(_Elapsed):
    """``@at``: one fire, at :attr:`at`."""

    __slots__ = ("_at",)

    def __init__(self, expression: str, timezone: str, zone: tzinfo, at: int) -> None:
        super().__init__(expression, timezone, zone)
        self._at = at

    @property
    def at(self) -> datetime:
        return datetime.fromtimestamp(self._at, self._zone)

    def next_timestamp(self, ts: float) -> int | None:
        return self._at if ts < self._at else None


def is_elapsed(expression: str) -> bool:
    """Whether the text is an ``@every`` or ``@at`` schedule (by its first word)."""
    if not expression.lstrip().startswith("@"):  # cron: decided without a split (a cold parse's cost)
        return False
    return expression.split(maxsplit=1)[0].lower() in (EVERY, AT)


def is_once(expression: str) -> bool:
    """Whether the text is an ``@at`` schedule (by its first word): a one-time job's."""
    words = expression.split(maxsplit=1)
    return bool(words) and words[0].lower() == AT


def parse_elapsed(expression: str, timezone: str, zone: tzinfo) -> IntervalSchedule | OnceSchedule:
    """``@every DURATION [from INSTANT]`` or ``@at INSTANT``; a :class:`ScheduleError` says what
    is wrong, and where."""
    words = expression.split()
    if words[0].lower() == AT:
        if len(words) != 2:
            raise ScheduleError(expression, "expected '@at INSTANT', such as @at 2026-12-24T18:00:00+01:00")
        return OnceSchedule(expression, timezone, zone, _instant(expression, words[1]))
    if len(words) == 2:
        return IntervalSchedule(expression, timezone, zone, _duration(expression, words[1]), 0, starts=False)
    if len(words) == 4 and words[2].lower() == "from":
        every = _duration(expression, words[1])
        return IntervalSchedule(
            expression, timezone, zone, every, _instant(expression, words[3]), starts=True
        )
    raise ScheduleError(
        expression, "expected '@every DURATION' or '@every DURATION from INSTANT', such as @every 90m"
    )


def _duration(expression: str, text: str) -> int:
    """``90s``, ``15m``, ``1h30m``, ``2d``: days, hours, minutes and seconds, in that order."""
    match = _DURATION.fullmatch(text.lower())
    if not text or match is None:
        raise ScheduleError(
            expression,
            f"{text!r} is not a duration: whole numbers with d, h, m or s, largest first (90s, 1h30m, 2d)",
            field="interval",
        )
    seconds = sum(
        int(value) * unit for value, unit in zip(match.groups(), _UNITS.values(), strict=True) if value
    )
    if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
        raise ScheduleError(
            expression,
            f"an interval is {MIN_EVERY_S} s to {MAX_EVERY_S // 86_400} days, not {seconds} s",
            field="interval",
        )
    return seconds


def _instant(expression: str, text: str) -> int:
    """An RFC 3339 instant with its offset, in whole seconds, as POSIX seconds."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        parsed = None
    if parsed is None or "T" not in text.upper():
        reason = f"{text!r} is not an RFC 3339 instant, such as 2026-12-24T18:00:00+01:00"
    elif parsed.tzinfo is None:
        reason = f"{text!r} has no UTC offset: add one (+01:00, Z)"
    elif parsed.microsecond:
        reason = f"{text!r} has a fraction of a second: fire times are whole seconds"
    elif not 1970 <= parsed.astimezone(UTC).year < MAX_YEAR:
        reason = f"{text!r} is outside the years 1970 to {MAX_YEAR - 1}"
    else:
        return int(parsed.timestamp())
    raise ScheduleError(expression, reason, field="instant")


def _fire(at: datetime) -> Fire:
    """A fire of elapsed time: never shifted; marked when its wall time is one that repeats."""
    wall = at.replace(tzinfo=None)
    other = at.replace(fold=1 - at.fold)
    if other.utcoffset() == at.utcoffset():
        return Fire(at, FireKind.NORMAL, wall)
    return Fire(at, FireKind.REPEATED_SECOND if at.fold else FireKind.REPEATED_FIRST, wall)
