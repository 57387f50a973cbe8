"""Parsing of one cron field into the set of values it allows.

A field is a comma-separated list of elements. Every field accepts ``*``, a value, a range ``a-b``,
a step over either (``*/15``, ``5-59/15``, ``5/15`` meaning ``5-<max>/15``) and the hash forms ``H``,
``H/n``, ``H(a-b)`` and ``H(a-b)/n``. Day-of-month additionally accepts ``L``, ``LW`` and ``<d>W``;
day-of-week accepts ``<w>L`` and ``<w>#<n>``; both day fields accept ``?`` as a synonym of ``*``.

Parsed fields are cached by their text, so the thousands of schedules that share ``*/5`` or ``0``
share one parsed field.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
DAY_NAMES = {name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}
MAX_FIELD_LENGTH = 256


@dataclass(frozen=True, slots=True, eq=False)
class FieldKind:
    """The static facts about one kind of field."""

    name: str
    lo: int
    hi: int
    names: dict[str, int] | None = None
    hash_lo: int | None = None  # H picks from hash_lo..hash_hi (day-of-month: 1-28, as Jenkins)
    hash_hi: int | None = None

    @property
    def hash_range(self) -> tuple[int, int]:
        lo = self.lo if self.hash_lo is None else self.hash_lo
        hi = self.hi if self.hash_hi is None else self.hash_hi
        return lo, hi


SECOND = FieldKind("second", 0, 59)
MINUTE = FieldKind("minute", 0, 59)
HOUR = FieldKind("hour", 0, 23)
DAY_OF_MONTH = FieldKind("day-of-month", 1, 31, hash_hi=28)
MONTH = FieldKind("month", 1, 12, names=MONTH_NAMES)
DAY_OF_WEEK = FieldKind("day-of-week", 0, 7, names=DAY_NAMES, hash_hi=6)


class FieldSyntaxError(Exception):
    """Raised inside the field parser; turned into a ScheduleError with the position by the caller."""

    def __init__(self, reason: str, offset: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


@dataclass(frozen=True, slots=True, eq=False)  # shared via caches: identity is equality
class ValueSet:
    """The values a plain field allows, as a bitmask plus lookup tables for "next allowed >= v"."""

    mask: int
    star: bool  # the field's text starts with '*' (or '?'): cron's "unrestricted" rule
    first: int
    following: tuple[int, ...]  # following[v] = smallest allowed value >= v, or -1; len hi + 2
    allows: tuple[bool, ...]  # allows[v] = v is allowed; len hi + 1

    @staticmethod
    def of(mask: int, hi: int, star: bool) -> ValueSet:
        following = [-1] * (hi + 2)
        nxt = -1
        for v in range(hi, -1, -1):
            if mask >> v & 1:
                nxt = v
            following[v] = nxt
        allows = tuple(bool(mask >> v & 1) for v in range(hi + 1))
        return ValueSet(mask, star, following[0], tuple(following), allows)

    def __contains__(self, value: int) -> bool:
        return bool(self.mask >> value & 1)

    def values(self) -> list[int]:
        return [v for v in range(self.mask.bit_length()) if self.mask >> v & 1]


@dataclass(frozen=True, slots=True, eq=False)  # shared via caches: identity is equality
class DayOfMonthSpec:
    """Day-of-month: plain days plus the L / LW / nW extensions."""

    days: int  # bitmask of plain days 1..31
    last: bool  # L
    last_weekday: bool  # LW
    nearest_weekday: int  # bitmask of d in dW
    star: bool

    @property
    def everything(self) -> bool:
        return self.days == FULL_DAYS


@dataclass(frozen=True, slots=True, eq=False)  # shared via caches: identity is equality
class DayOfWeekSpec:
    """Day-of-week (0 = Sunday): plain weekdays plus the wL / w#n extensions."""

    weekdays: int  # bitmask of 0..6
    last_of: int  # bitmask of w in wL
    nth: frozenset[tuple[int, int]]  # (w, n) of w#n
    star: bool

    @property
    def everything(self) -> bool:
        return self.weekdays == 0x7F


FULL_DAYS = sum(1 << d for d in range(1, 32))

_NUMBER = re.compile(r"[0-9]{1,4}\Z")
_ELEMENT = re.compile(
    r"(?:(?P<star>\*)|H(?:\((?P<hlo>[^)]*)-(?P<hhi>[^)]*)\))?|(?P<lo>[A-Z0-9]+)(?:-(?P<hi>[A-Z0-9]+))?)"
    r"(?:/(?P<step>[^/]*))?\Z",
    re.IGNORECASE | re.ASCII,
)


def _value(text: str, kind: FieldKind, offset: int) -> int:
    if _NUMBER.match(text):
        value = int(text)
    elif kind.names is not None and text.isascii() and text.upper() in kind.names:
        value = kind.names[text.upper()]
    elif kind.names is not None and text.isalpha():
        raise FieldSyntaxError(f"unknown name {text!r} (expected one of {', '.join(kind.names)})", offset)
    elif text == "":
        raise FieldSyntaxError("missing value", offset)
    else:
        raise FieldSyntaxError(f"{text!r} is not a number", offset)
    if not kind.lo <= value <= kind.hi:
        raise FieldSyntaxError(f"{value} is out of range {kind.lo}-{kind.hi}", offset)
    return value


def _step(text: str | None, kind: FieldKind, offset: int) -> int:
    if text is None:
        return 1
    if not _NUMBER.match(text):
        raise FieldSyntaxError(f"step {text!r} is not a number", offset)
    step = int(text)
    if step == 0:
        raise FieldSyntaxError("step must not be zero", offset)
    if step > kind.hi - kind.lo:
        raise FieldSyntaxError(f"step {step} is larger than the range {kind.lo}-{kind.hi}", offset)
    return step


def _hash(seed: str, kind: FieldKind, index: int, modulus: int) -> int:
    digest = hashlib.blake2b(f"{kind.name}\0{index}\0{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % modulus


def _element_mask(element: str, kind: FieldKind, offset: int, seed: str, index: int) -> int:
    """Bitmask of one list element in its plain form (``*``, ``H...``, ``a``, ``a-b``, with step)."""
    match = _ELEMENT.match(element)
    if match is None:
        raise FieldSyntaxError(f"cannot read {element!r}", offset)
    step_text = match["step"]
    step_offset = offset + element.find("/") + 1
    step = _step(step_text, kind, step_offset)
    if match["star"]:
        lo, hi = kind.lo, kind.hi
    elif match["lo"] is not None:
        lo = _value(match["lo"], kind, offset)
        if match["hi"] is not None:
            hi = _value(match["hi"], kind, offset + len(match["lo"]) + 1)
            if hi < lo:
                raise FieldSyntaxError(f"range {lo}-{hi} is inverted (start after end)", offset)
        else:
            hi = kind.hi if step_text is not None else lo
    else:
        lo, hi = _hash_bounds(match, kind, offset)
        width = hi - lo + 1  # a hashed start stays inside H(a-b) even when the step is wider
        lo += _hash(seed, kind, index, min(step, width) if step_text is not None else width)
        if step_text is None:
            hi = lo
    mask = 0
    for v in range(lo, hi + 1, step):
        mask |= 1 << v
    return mask


def _hash_bounds(match: re.Match[str], kind: FieldKind, offset: int) -> tuple[int, int]:
    if match["hlo"] is None:
        return kind.hash_range
    lo = _value(match["hlo"], kind, offset + 2)
    hi = _value(match["hhi"], kind, offset + 3 + len(match["hlo"]))
    if hi < lo:
        raise FieldSyntaxError(f"range H({lo}-{hi}) is inverted (start after end)", offset)
    return lo, hi


def _elements(text: str) -> list[tuple[str, int]]:
    if text == "":
        raise FieldSyntaxError("empty field")
    if len(text) > MAX_FIELD_LENGTH:
        raise FieldSyntaxError(f"field is longer than {MAX_FIELD_LENGTH} characters")
    out: list[tuple[str, int]] = []
    offset = 0
    for element in text.split(","):
        if element == "":
            raise FieldSyntaxError("empty list element", offset)
        out.append((element, offset))
        offset += len(element) + 1
    return out


@lru_cache(maxsize=4096)
def parse_values(text: str, kind: FieldKind, seed: str) -> ValueSet:
    """Parse a plain field (second, minute, hour, month); names and letters in any case."""
    mask = 0
    for index, (element, offset) in enumerate(_elements(text)):
        mask |= _element_mask(element, kind, offset, seed, index)
    if kind is DAY_OF_WEEK and mask >> 7 & 1:  # Sunday as 7
        mask = (mask | 1) & 0x7F
    return ValueSet.of(mask, kind.hi, text[0] in "*?")


_NEAREST_WEEKDAY = re.compile(r"([0-9]{1,2})W\Z", re.IGNORECASE | re.ASCII)


@lru_cache(maxsize=4096)
def parse_day_of_month(text: str, seed: str) -> DayOfMonthSpec:
    """Parse the day-of-month field, with ``L``, ``LW`` and ``<d>W``."""
    if text == "?":
        return DayOfMonthSpec(FULL_DAYS, False, False, 0, True)
    days = nearest = 0
    last = last_weekday = False
    for index, (element, offset) in enumerate(_elements(text)):
        upper = element.upper()
        if upper == "L":
            last = True
        elif upper == "LW":
            last_weekday = True
        elif upper.endswith("W"):
            match = _NEAREST_WEEKDAY.match(element)
            if match is None:
                raise FieldSyntaxError(f"{element!r}: W needs a day before it, as in 15W", offset)
            nearest |= 1 << _value(match[1], DAY_OF_MONTH, offset)
        elif "L" in upper:
            raise FieldSyntaxError(f"{element!r}: L stands alone (last day) or as LW", offset)
        else:
            days |= _element_mask(element, DAY_OF_MONTH, offset, seed, index)
    return DayOfMonthSpec(days, last, last_weekday, nearest, text[0] in "*?")


_LAST_WEEKDAY = re.compile(r"([A-Z0-9]+)L\Z", re.IGNORECASE | re.ASCII)
_NTH_WEEKDAY = re.compile(r"([A-Z0-9]+)#([^#]*)\Z", re.IGNORECASE | re.ASCII)


@lru_cache(maxsize=4096)
def parse_day_of_week(text: str, seed: str) -> DayOfWeekSpec:
    """Parse the day-of-week field, with ``<w>L`` and ``<w>#<n>``; 0 and 7 are both Sunday."""
    if text == "?":
        return DayOfWeekSpec(0x7F, 0, frozenset(), True)
    weekdays = last_of = 0
    nth: set[tuple[int, int]] = set()
    for index, (element, offset) in enumerate(_elements(text)):
        if (match := _LAST_WEEKDAY.match(element)) is not None:
            last_of |= 1 << (_value(match[1], DAY_OF_WEEK, offset) % 7)
        elif (match := _NTH_WEEKDAY.match(element)) is not None:
            weekday = _value(match[1], DAY_OF_WEEK, offset) % 7
            n_offset = offset + len(match[1]) + 1
            if not _NUMBER.match(match[2]):
                raise FieldSyntaxError(f"{match[2]!r} after # is not a number", n_offset)
            n = int(match[2])
            if not 1 <= n <= 5:
                raise FieldSyntaxError(f"#{n}: a weekday occurs 1 to 5 times a month", n_offset)
            nth.add((weekday, n))
        elif element.upper() == "L":
            raise FieldSyntaxError("L in day-of-week needs a weekday before it, as in 5L", offset)
        else:
            weekdays |= _element_mask(element, DAY_OF_WEEK, offset, seed, index)
    if weekdays >> 7 & 1:
        weekdays = (weekdays | 1) & 0x7F
    return DayOfWeekSpec(weekdays, last_of, frozenset(nth), text[0] in "*?")
