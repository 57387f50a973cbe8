"""The timing wheel: the jobs due within the horizon, filed by second in three rings.

A hierarchical timing wheel (Varghese and Lauck) with digit-aligned rings. The wheel has a cursor,
the last second it has drained. An entry due at second ``d`` after the cursor ``c`` is filed in
the lowest ring whose span holds both: the **seconds** ring (60 slots of a second) when ``d`` is in
``c``'s minute, the **minutes** ring (60 slots of a minute) when in ``c``'s hour, the **hours** ring
(24 slots of an hour) when in ``c``'s UTC day, else the **overflow** (by second, with a heap of its
seconds). An entry due at or before the cursor (added after a backward clock jump, or overdue when
read) is filed in the **past** set, also by second with a heap. Where an entry is filed is thus a
function of its second and the cursor: nothing is stored per entry but its key in one slot.

When the cursor moves into a new minute, that minute's slot is **cascaded**: what is due is
drained, the rest goes into the seconds ring; a new hour cascades its hour slot into the minutes
and seconds rings, a new day the overflow's seconds of that day. A jump of hours or days drains
the slots it passes whole, without visiting each second.

Costs: ``add``, ``remove`` and ``count_at`` are O(1) (a few integer divisions, a set and a dict);
``pop_due`` is proportional to what it drains plus what it cascades (each entry is cascaded at
most twice, from an hour to a minute to a second) plus the slots it passes; ``next_due`` looks at
ring slots (at most 144) and, in the first occupied one, at most its width in seconds or its entries,
whichever is fewer. Per entry the wheel keeps a dict slot (key -> entry) and a set slot (its key in
a slot): a million jobs with their ``DueJob``, docs/performance.md "The wheel".

It is a cache of the store's ``next_run_at``: rebuilt from the store at start, on a job change
and periodically. Entries are frozen records: an entry's second never changes, it is moved by
adding a new entry under the same key.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")

MINUTE = 60
HOUR = 3600
DAY = 86_400
SECONDS_SLOTS = 60
MINUTES_SLOTS = 60
HOURS_SLOTS = 24


class _Heaped:
    """Keys by second, with a heap of the seconds (lazily cleaned): the past and the overflow."""

    __slots__ = ("buckets", "heap")

    def __init__(self) -> None:
        self.buckets: dict[int, set[str]] = {}
        self.heap: list[int] = []

    def add(self, second: int, key: str) -> None:
        bucket = self.buckets.get(second)
        if bucket is None:
            bucket = self.buckets[second] = set()
            heap = self.heap
            if len(heap) > 2 * len(self.buckets) + 64:  # emptied seconds pile up: rebuild
                heap[:] = self.buckets
                heapq.heapify(heap)
            else:
                heapq.heappush(heap, second)
        bucket.add(key)

    def discard(self, second: int, key: str) -> None:
        bucket = self.buckets[second]
        bucket.discard(key)
        if not bucket:
            del self.buckets[second]

    def first(self) -> int | None:
        heap, buckets = self.heap, self.buckets
        while heap and heap[0] not in buckets:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def take_until(self, last: int) -> Iterator[tuple[int, set[str]]]:
        """Remove and yield every (second, keys) up to ``last``, in order."""
        heap, buckets = self.heap, self.buckets
        while heap and heap[0] <= last:
            second = heapq.heappop(heap)
            bucket = buckets.pop(second, None)
            if bucket:
                yield second, bucket

    def clear(self) -> None:
        self.buckets.clear()
        self.heap.clear()


class TimingWheel(Generic[T]):
    def __init__(self, due_of: Callable[[T], int]) -> None:
        self._due_of = due_of
        self._entries: dict[str, T] = {}
        self._counts: dict[int, int] = {}  # second -> entries due then (seconds with none absent)
        self._seconds: list[set[str]] = [set() for _ in range(SECONDS_SLOTS)]
        self._minutes: list[set[str]] = [set() for _ in range(MINUTES_SLOTS)]
        self._hours: list[set[str]] = [set() for _ in range(HOURS_SLOTS)]
        self._past = _Heaped()  # due at or before the cursor
        self._overflow = _Heaped()  # due after the cursor's day
        self._cursor: int | None = None  # the last second drained; set by the first add or pop
        self._unsorted = False  # a drain filled its list out of order

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    @property
    def entries(self) -> Mapping[str, T]:
        """Every entry by key (a read-only view)."""
        return self._entries

    @property
    def cursor(self) -> int | None:
        """The last second drained (None before the first add or drain)."""
        return self._cursor

    # -- adding and removing ------------------------------------------------------------------

    def add(self, key: str, entry: T) -> None:
        """File ``entry`` under its second (replacing, and so moving, any entry of ``key``)."""
        entries = self._entries
        old = entries.get(key)
        if old is not None:
            self._unfile(key, self._due_of(old))
        due = self._due_of(entry)
        entries[key] = entry
        counts = self._counts
        counts[due] = counts.get(due, 0) + 1
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = due - 1
        # as _file does, inline: the hot path of a load
        if due <= cursor:
            self._past.add(due, key)
        elif due // MINUTE == cursor // MINUTE:
            self._seconds[due % SECONDS_SLOTS].add(key)
        elif due // HOUR == cursor // HOUR:
            self._minutes[due // MINUTE % MINUTES_SLOTS].add(key)
        elif due // DAY == cursor // DAY:
            self._hours[due // HOUR % HOURS_SLOTS].add(key)
        else:
            self._overflow.add(due, key)

    def remove(self, key: str) -> T | None:
        """Take ``key``'s entry out; returns it (None if there was none)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unfile(key, self._due_of(entry))
        return entry

    def _file(self, key: str, due: int) -> None:
        slot = self._ring_slot(due)
        if slot is None:
            self._heaped(due).add(due, key)
        else:
            slot.add(key)

    def _unfile(self, key: str, due: int) -> None:
        counts = self._counts
        left = counts[due] - 1
        if left:
            counts[due] = left
        else:
            del counts[due]
        slot = self._ring_slot(due)
        if slot is None:
            self._heaped(due).discard(due, key)
        else:
            slot.discard(key)

    def _ring_slot(self, due: int) -> set[str] | None:
        """The ring slot where an entry due at ``due`` is filed, given the cursor; None when it is
        filed by second instead (:meth:`_heaped`)."""
        cursor = self._cursor
        assert cursor is not None
        if due <= cursor:
            return None
        if due // MINUTE == cursor // MINUTE:
            return self._seconds[due % SECONDS_SLOTS]
        if due // HOUR == cursor // HOUR:
            return self._minutes[due // MINUTE % MINUTES_SLOTS]
        if due // DAY == cursor // DAY:
            return self._hours[due // HOUR % HOURS_SLOTS]
        return None

    def _heaped(self, due: int) -> _Heaped:
        """Where an entry not in a ring is filed: the past (due at or before the cursor), else
        the overflow (after the cursor's day)."""
        cursor = self._cursor
        assert cursor is not None
        return self._past if due <= cursor else self._overflow

    # -- counting -----------------------------------------------------------------------------

    def count_at(self, second: int) -> int:
        """How many entries are due in exactly ``second``."""
        return self._counts.get(second, 0)

    def counts(self, start: int, stop: int) -> list[int]:
        """How many entries are due in each second of ``range(start, stop)``."""
        get = self._counts.get
        return [get(second, 0) for second in range(start, stop)]

    # -- draining -----------------------------------------------------------------------------

    def pop_due(self, now: int) -> list[T]:
        """Remove and return every entry due at or before second ``now``, earliest seconds first
        (after a backward clock jump, only those; the cursor stays where it was)."""
        out: list[T] = []
        take = self._entries.pop
        counts = self._counts
        if self._past.heap:
            for second, keys in self._past.take_until(now):
                out.extend(map(take, keys))
                del counts[second]
        cursor = self._cursor
        if cursor is None:
            self._cursor = now
        elif now > cursor:
            self._unsorted = False
            self._advance(cursor, now, out)
            if self._unsorted:  # whole minutes or hours drained, or a cascade drained several seconds
                out.sort(key=self._due_of)
        return out

    def _advance(self, cursor: int, now: int, out: list[T]) -> None:
        """Move the cursor from ``cursor`` to ``now``: drain what falls due, cascade the slots
        entered."""
        self._cursor = now
        # the seconds ring: the rest of the cursor's minute, or up to ``now`` within it
        last = now % SECONDS_SLOTS if now // MINUTE == cursor // MINUTE else SECONDS_SLOTS - 1
        self._drain(self._seconds, cursor % SECONDS_SLOTS + 1, last + 1, cursor // MINUTE * MINUTE, 1, out)
        if now // MINUTE == cursor // MINUTE:
            return
        # the minutes ring: whole minutes passed, then ``now``'s minute cascades
        same_hour = now // HOUR == cursor // HOUR
        stop = now // MINUTE % MINUTES_SLOTS if same_hour else MINUTES_SLOTS
        base = cursor // HOUR * HOUR
        self._drain(self._minutes, cursor // MINUTE % MINUTES_SLOTS + 1, stop, base, MINUTE, out)
        if same_hour:
            self._cascade(self._minutes, stop, now // MINUTE * MINUTE, now, out)
            return
        # the hours ring: whole hours passed, then ``now``'s hour cascades
        same_day = now // DAY == cursor // DAY
        stop = now // HOUR % HOURS_SLOTS if same_day else HOURS_SLOTS
        base = cursor // DAY * DAY
        self._drain(self._hours, cursor // HOUR % HOURS_SLOTS + 1, stop, base, HOUR, out)
        if same_day:
            self._cascade(self._hours, stop, now // HOUR * HOUR, now, out)
            return
        # the overflow: what is due is drained; the rest of ``now``'s day goes into the rings
        take, counts = self._entries.pop, self._counts
        overflow = self._overflow
        for second, keys in overflow.take_until(now):
            out.extend(map(take, keys))
            del counts[second]
        for second, keys in overflow.take_until(now // DAY * DAY + DAY - 1):
            for key in keys:
                self._file(key, second)

    def _drain(
        self, ring: list[set[str]], first: int, stop: int, base: int, width: int, out: list[T]
    ) -> None:
        """Drain whole slots ``first`` to ``stop - 1`` of ``ring`` (slot ``i`` holds the seconds
        ``base + i * width`` onwards, ``width`` of them)."""
        take, counts = self._entries.pop, self._counts
        for index in range(first, stop):
            keys = ring[index]
            if keys:
                ring[index] = set()
                out.extend(map(take, keys))
                start = base + index * width
                if width == 1:
                    del counts[start]
                else:
                    self._unsorted = True
                    for second in range(start, start + width):
                        counts.pop(second, None)

    def _cascade(self, ring: list[set[str]], index: int, start: int, now: int, out: list[T]) -> None:
        """Empty slot ``index`` of ``ring`` (the one the cursor entered, from second ``start``):
        what is due by ``now`` is drained, the rest filed into the lower rings. A slot due whole
        (the seconds' counts say so: a herd at the top of the minute) is drained as it is."""
        keys = ring[index]
        if not keys:
            return
        ring[index] = set()
        entries, counts, due_of = self._entries, self._counts, self._due_of
        seconds = [second for second in range(start, now + 1) if second in counts]
        if sum(counts[second] for second in seconds) == len(keys):
            out.extend(map(entries.pop, keys))
            for second in seconds:
                del counts[second]
            if len(seconds) > 1:
                self._unsorted = True
            return
        for key in keys:
            due = due_of(entries[key])
            if due <= now:
                out.append(entries.pop(key))
                if due != now:
                    self._unsorted = True
                left = counts[due] - 1
                if left:
                    counts[due] = left
                else:
                    del counts[due]
            else:
                self._file(key, due)

    # -- looking ahead ------------------------------------------------------------------------

    def next_due(self) -> int | None:
        """The earliest second with an entry, or None when empty."""
        if not self._entries:
            return None
        first = self._past.first()
        if first is not None:
            return first
        cursor = self._cursor
        assert cursor is not None
        seconds = self._seconds
        for index in range(cursor % SECONDS_SLOTS + 1, SECONDS_SLOTS):
            if seconds[index]:
                return cursor // MINUTE * MINUTE + index
        minutes = self._minutes
        for index in range(cursor // MINUTE % MINUTES_SLOTS + 1, MINUTES_SLOTS):
            if minutes[index]:
                return self._earliest(minutes[index], cursor // HOUR * HOUR + index * MINUTE, MINUTE)
        hours = self._hours
        for index in range(cursor // HOUR % HOURS_SLOTS + 1, HOURS_SLOTS):
            if hours[index]:
                return self._earliest(hours[index], cursor // DAY * DAY + index * HOUR, HOUR)
        return self._overflow.first()

    def _earliest(self, keys: set[str], start: int, width: int) -> int:
        """The earliest second of a slot's entries: by its seconds' counts or by its entries,
        whichever are fewer."""
        if len(keys) < width:
            entries, due_of = self._entries, self._due_of
            return min(due_of(entries[key]) for key in keys)
        counts = self._counts
        for second in range(start, start + width):
            if second in counts:
                return second
        raise AssertionError("an occupied slot with no counted second")  # pragma: no cover

    def clear(self) -> None:
        self._entries.clear()
        self._counts.clear()
        for ring in (self._seconds, self._minutes, self._hours):
            ring[:] = [set() for _ in ring]
        self._past.clear()
        self._overflow.clear()
        self._cursor = None
