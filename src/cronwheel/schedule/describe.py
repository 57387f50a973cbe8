"""A parsed schedule explained in one English sentence ("at 09:00 on Monday through Friday").

:func:`describe` reads the parsed fields (the values each allows, the day rules), not the text, so
that ``*/15`` and ``0,15,30,45`` read alike and ``H`` reads as the value it hashed to (marked
``(H)``). The DST policy is mentioned only when it is not the schedule kind's default. The zone is
not part of the sentence: the dashboard and the CLI show it beside it.

Pure: no clock, no I/O; the same schedule always gives the same sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from itertools import pairwise

from cronwheel.schedule.days import DayRule
from cronwheel.schedule.elapsed import IntervalSchedule, OnceSchedule
from cronwheel.schedule.fields import FULL_DAYS, DayOfMonthSpec, DayOfWeekSpec, ValueSet
from cronwheel.schedule.kinds import Schedule
from cronwheel.schedule.schedule import CronSchedule

WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NTH = ("first", "second", "third", "fourth", "fifth")
_EVERY_WEEKDAY = 0x7F


@lru_cache(maxsize=65_536)  # schedules are cached objects: the thousands of jobs that share one share this
def describe(schedule: Schedule) -> str:
    """The schedule in words, such as ``"every 15 minutes"`` or ``"at 02:30 every day"``."""
    if isinstance(schedule, IntervalSchedule):
        return _interval(schedule)
    if isinstance(schedule, OnceSchedule):
        return f"once, at {_local(schedule.at)}"
    return _cron(schedule)


def _interval(schedule: IntervalSchedule) -> str:
    """``every 1 hour 30 minutes`` (elapsed time), with its anchor when one was given."""
    left, parts = schedule.every_s, []
    for name, size in (("day", 86_400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}" if count == 1 else f"{count} {name}s")
    text = "every " + " ".join(parts) + " of elapsed time"
    if schedule.starts:
        text += f", from {_local(schedule.anchor.astimezone(schedule.zone))}"
    return text


def _local(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S %Z").rstrip()


def _cron(schedule: CronSchedule) -> str:
    time = _time(schedule.seconds, schedule.minutes, schedule.hours)
    days = _days(schedule.days, schedule.months)
    months = "" if _all(schedule.months, 1, 12) or days.names_month else _months(schedule.months)
    if not days.text and time.at_times:
        days = _Days("every day")
    sentence = " ".join(part for part in (time.text, days.text, months) if part)
    if _hashed(schedule.expression):
        sentence += " (H)"
    return sentence + _dst(schedule)


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Step:
    start: int
    end: int
    step: int


def _all(values: ValueSet, lo: int, hi: int) -> bool:
    return values.mask == sum(1 << v for v in range(lo, hi + 1))


def _step(values: Sequence[int], lo: int, hi: int) -> _Step | None:
    """The values as an arithmetic progression of step > 1 (two values only when they split the
    field evenly: ``*/30``, but not ``0,40``)."""
    if len(values) < 2:
        return None
    step = values[1] - values[0]
    if step < 2 or any(b - a != step for a, b in pairwise(values)):
        return None
    if len(values) == 2 and not (values[0] == lo and (hi - lo + 1) % step == 0 and values[1] + step > hi):
        return None
    return _Step(values[0], values[-1], step)


def _runs(values: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive values as (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for value in values:
        if runs and runs[-1][1] == value - 1:
            runs[-1] = (runs[-1][0], value)
        else:
            runs.append((value, value))
    return runs


def _listed(values: Sequence[int], show: Callable[[int], str] = str) -> str:
    """``1, 3 through 7 and 9``: runs of three or more as ranges."""
    items: list[str] = []
    for first, last in _runs(values):
        if last - first >= 2:
            items.append(f"{show(first)} through {show(last)}")
        else:
            items.extend(show(v) for v in range(first, last + 1))
    return _join(items)


def _join(items: Sequence[str], word: str = "and") -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {word} {items[-1]}"


def _plural(count: int, one: str, many: str | None = None) -> str:
    return one if count == 1 else (many or one + "s")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# -- time of day -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Time:
    text: str
    at_times: bool  # names times of day ("at 02:30"): "every day" reads well after it


def _clock(hour: int, minute: int, second: int = 0) -> str:
    return f"{hour:02d}:{minute:02d}" + (f":{second:02d}" if second else "")


def _time(seconds: ValueSet, minutes: ValueSet, hours: ValueSet) -> _Time:
    s, m, h = seconds.values(), minutes.values(), hours.values()
    if len(s) == len(m) == len(h) == 1:
        return _Time(f"at {_clock(h[0], m[0], s[0])}", True)
    if len(s) * len(m) * len(h) <= 4 and _step(h, 0, 23) is None:  # a few times of day: list them
        times = [_clock(hour, minute, second) for hour in h for minute in m for second in s]
        return _Time(f"at {_join(times)}", True)
    if len(s) == 1 and len(m) == 1:
        return _Time(_hourly(s[0], m[0], hours), False)
    if len(s) == 1:
        within = _within_hour(m, "minute", s[0])
    else:
        within = _within_hour(s, "second", None) + _minutes_context(minutes)
    return _Time(within + _hours_context(hours, s, m), False)


def _hourly(second: int, minute: int, hours: ValueSet) -> str:
    """One minute (and second) of several hours."""
    h = hours.values()
    past = f"minute {minute}" + (f", second {second}" if second else "")
    if _all(hours, 0, 23):
        return "every hour" if minute == second == 0 else f"hourly at {past}"
    step = _step(h, 0, 23)
    if step is not None or len(_runs(h)) == 1:
        every = "every hour" if step is None else f"every {step.step} hours"
        first, last = h[0], h[-1]
        bounded = step is None or first >= step.step or last + step.step <= 23
        start = _clock(first, minute, second)
        if not bounded:
            return every if start == "00:00" else f"{every} from {start}"
        return f"{every} from {start} to {_clock(last, minute, second)}"
    return f"at {past} past hours {_listed(h)}"


def _within_hour(values: Sequence[int], unit: str, second: int | None) -> str:
    """What happens within a minute (seconds) or an hour (minutes): ``every 15 minutes``."""
    at_second = "" if not second else f" at second {second}"
    if len(values) == 60:
        return f"every {unit}{at_second}"
    step = _step(values, 0, 59)
    if step is not None:
        every = f"every {step.step} {unit}s{at_second}"
        bounded = step.end + step.step <= 59
        if step.start or bounded:
            every += f" from {unit} {step.start}"
        return every + (f" through {step.end}" if bounded else "")
    if len(_runs(values)) == 1:
        return f"every {unit}{at_second} from {unit} {values[0]} through {values[-1]}"
    return f"at {unit}s {_listed(values)}{at_second}"


def _minutes_context(minutes: ValueSet) -> str:
    """The minutes that a sub-minute pattern runs in."""
    m = minutes.values()
    if len(m) == 60:
        return ""
    step = _step(m, 0, 59)
    if step is not None and step.start == 0 and step.end + step.step > 59:
        return f" during every {_ordinal(step.step)} minute"
    return f" during {_plural(len(m), 'minute')} {_listed(m)}"


def _hours_context(hours: ValueSet, s: Sequence[int], m: Sequence[int]) -> str:
    """The hours that a sub-hour pattern runs in: ``from 09:00 to 17:45``."""
    h = hours.values()
    if len(h) == 24:
        return ""
    if len(_runs(h)) == 1:
        return f" from {_clock(h[0], m[0], s[0])} to {_clock(h[-1], m[-1], s[-1])}"
    step = _step(h, 0, 23)
    if step is not None and step.start == 0 and step.end + step.step > 23:
        return f" during every {_ordinal(step.step)} hour"
    return f" during hours {_listed(h)}"


# -- days ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Days:
    text: str
    names_month: bool = False  # "on January 1": the months need no phrase of their own


def _days(rule: DayRule, months: ValueSet) -> _Days:
    dom_restricted = rule.dom.days != FULL_DAYS
    dow_restricted = rule.dow.weekdays != _EVERY_WEEKDAY
    if rule.either:  # both restricted in the text: a day of either kind fires
        if not (dom_restricted and dow_restricted):
            return _Days("")
        return _Days(f"on {_day_of_month(rule.dom)} or on {_day_of_week(rule.dow)}")
    if dom_restricted and dow_restricted:
        return _Days(f"on {_day_of_month(rule.dom)} if it is {_day_of_week(rule.dow, article=True)}")
    if dow_restricted:
        return _Days(f"on {_day_of_week(rule.dow)}")
    if dom_restricted:
        return _month_day(rule.dom, months) or _Days(f"on {_day_of_month(rule.dom)}")
    return _Days("")


def _month_day(dom: DayOfMonthSpec, months: ValueSet) -> _Days | None:
    """``on January 1``: one plain day of one month."""
    days = _bits(dom.days)
    month = months.values()
    if len(month) != 1 or len(days) != 1 or dom.last or dom.last_weekday or dom.nearest_weekday:
        return None
    return _Days(f"on {MONTHS[month[0] - 1]} {days[0]}", names_month=True)


def _bits(mask: int) -> list[int]:
    return [v for v in range(mask.bit_length()) if mask >> v & 1]


def _day_of_month(dom: DayOfMonthSpec) -> str:
    days = _bits(dom.days)
    step = _step(days, 1, 31)
    phrases: list[str] = []
    items: list[str] = []  # read with "of the month" after them
    if step is not None and len(days) > 4:
        every = f"every {_ordinal(step.step)} day of the month"
        if step.start != 1:
            every += f" from day {step.start}"
        phrases.append(every + (f" through day {step.end}" if step.end + step.step <= 31 else ""))
    elif days:
        items.append(f"{_plural(len(days), 'day')} {_listed(days)}")
    items.extend(f"the weekday nearest day {day}" for day in _bits(dom.nearest_weekday))
    if dom.last_weekday:
        items.append("the last weekday")
    if dom.last:
        items.append("the last day")
    if items:
        phrases.append(f"{_join(items)} of the month")
    return _join(phrases)


def _day_of_week(dow: DayOfWeekSpec, *, article: bool = False) -> str:
    items: list[str] = []
    weekdays = _bits(dow.weekdays)
    if weekdays:
        names = _weekday_list(weekdays)
        items.append(f"a {names}" if article and len(weekdays) == 1 else names)
    month_wise = [f"the last {WEEKDAYS[w]}" for w in _bits(dow.last_of)]
    month_wise += [f"the {_NTH[n - 1]} {WEEKDAYS[w]}" for w, n in sorted(dow.nth, key=lambda p: (p[1], p[0]))]
    if month_wise:
        items.append(f"{_join(month_wise)} of the month")
    return _join(items)


def _weekday_list(weekdays: list[int]) -> str:
    """Weekdays in the order with the fewer runs: Monday first (``Friday through Sunday``), or
    Sunday first when that reads shorter (``Sunday through Wednesday``)."""
    monday_first = sorted((w + 6) % 7 for w in weekdays)
    if len(_runs(weekdays)) < len(_runs(monday_first)):
        return _listed(weekdays, WEEKDAYS.__getitem__)
    return _listed(monday_first, lambda position: WEEKDAYS[(position + 1) % 7])


def _months(months: ValueSet) -> str:
    return f"in {_listed(months.values(), lambda month: MONTHS[month - 1])}"


# -- H and DST -------------------------------------------------------------------------------------


def _hashed(expression: str) -> bool:
    """Some field has an ``H`` element (no macro has one, and no name starts with H)."""
    text = expression.strip()
    if text.startswith("@"):
        return False
    return any(element.upper().startswith("H") for field in text.split() for element in field.split(","))


_GAP = {
    "skip": "not run when DST skips its time",
    "shift": "run once when a DST gap ends if it skips its time",
}
_FOLD = {
    "first": "run on the first pass only when DST repeats its time",
    "last": "run on the second pass only when DST repeats its time",
    "both": "run twice when DST repeats its time",
}


def _dst(schedule: CronSchedule) -> str:
    """The DST policy, when it is not the kind's default (wildcard: skip and both; else shift and
    first)."""
    wildcard = schedule.wildcard
    notes: list[str] = []
    if schedule.dst_gap != ("skip" if wildcard else "shift"):
        notes.append(_GAP[schedule.dst_gap])
    if schedule.dst_fold != ("both" if wildcard else "first"):
        notes.append(_FOLD[schedule.dst_fold])
    return f"; {_join(notes)}" if notes else ""
