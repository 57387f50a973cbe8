"""The timing wheel: the jobs due in the next few minutes, bucketed by second.

The wheel holds each entry once, by key, and files it under the second its ``due_of`` gives (an
entry's due second never changes: entries are frozen records, moved by replacing them). A dict of
entries, a dict of buckets (second -> keys) and a heap of bucket keys: adding, moving and removing
an entry is O(1) (amortized), draining everything due is proportional to what is due. It is a
cache of the store's ``next_run_at``: rebuilt from the store at start, on a job change and
periodically. One entry costs a dict slot and a set slot besides the entry itself (a synthetic
wheel of a million jobs, docs/performance.md: 383 bytes a job with its ``DueJob``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class TimingWheel(Generic[T]):
    def __init__(self, due_of: Callable[[T], int]) -> None:
        self._due_of = due_of
        self._entries: dict[str, T] = {}
        self._buckets: dict[int, set[str]] = {}
        self._keys: list[int] = []  # heap of bucket seconds; may hold stale (emptied) keys

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

    def add(self, key: str, entry: T) -> None:
        """File ``entry`` under its second (replacing, and so moving, any entry of ``key``)."""
        self.remove(key)
        due = self._due_of(entry)
        bucket = self._buckets.get(due)
        if bucket is None:
            bucket = self._buckets[due] = set()
            heapq.heappush(self._keys, due)
        bucket.add(key)
        self._entries[key] = entry

    def remove(self, key: str) -> T | None:
        """Take ``key``'s entry out; returns it (None if there was none)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            due = self._due_of(entry)
            bucket = self._buckets[due]
            bucket.discard(key)
            if not bucket:
                del self._buckets[due]
        return entry

    def pop_due(self, now: int) -> list[T]:
        """Remove and return every entry due at or before second ``now``."""
        out: list[T] = []
        keys = self._keys
        entries = self._entries
        while keys and keys[0] <= now:
            second = heapq.heappop(keys)
            bucket = self._buckets.pop(second, None)
            if bucket:
                out.extend(entries.pop(key) for key in bucket)
        return out

    def count_at(self, second: int) -> int:
        """How many entries are due at exactly ``second``."""
        bucket = self._buckets.get(second)
        return 0 if bucket is None else len(bucket)

    def next_due(self) -> int | None:
        """The earliest second with an entry, or None when empty."""
        keys = self._keys
        while keys and keys[0] not in self._buckets:
            heapq.heappop(keys)
        return keys[0] if keys else None

    def clear(self) -> None:
        self._entries.clear()
        self._buckets.clear()
        self._keys.clear()
