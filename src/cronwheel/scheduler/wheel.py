"""The timing wheel: jobs due in the next few minutes, bucketed by second.

A dict of buckets (second -> job ids) plus a heap of bucket keys: adding, moving and removing a
job is O(1) (amortized), draining everything due is proportional to what is due. It is a cache of
the store's ``next_run_at``: rebuilt from the store at start, on a job change and periodically.
"""

from __future__ import annotations

import heapq


class TimingWheel:
    def __init__(self) -> None:
        self._buckets: dict[int, set[str]] = {}
        self._due: dict[str, int] = {}
        self._keys: list[int] = []  # heap of bucket seconds; may hold stale (emptied) keys

    def __len__(self) -> int:
        return len(self._due)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._due

    def add(self, job_id: str, due: int) -> None:
        """Put ``job_id`` at second ``due`` (moving it if already present)."""
        self.remove(job_id)
        bucket = self._buckets.get(due)
        if bucket is None:
            bucket = self._buckets[due] = set()
            heapq.heappush(self._keys, due)
        bucket.add(job_id)
        self._due[job_id] = due

    def remove(self, job_id: str) -> None:
        due = self._due.pop(job_id, None)
        if due is not None:
            bucket = self._buckets[due]
            bucket.discard(job_id)
            if not bucket:
                del self._buckets[due]

    def pop_due(self, now: int) -> list[str]:
        """Remove and return every job due at or before second ``now``."""
        out: list[str] = []
        keys = self._keys
        while keys and keys[0] <= now:
            second = heapq.heappop(keys)
            bucket = self._buckets.pop(second, None)
            if bucket:
                out.extend(bucket)
                for job_id in bucket:
                    del self._due[job_id]
        return out

    def next_due(self) -> int | None:
        """The earliest second with a job, or None when empty."""
        keys = self._keys
        while keys and keys[0] not in self._buckets:
            heapq.heappop(keys)
        return keys[0] if keys else None

    def clear(self) -> None:
        self._buckets.clear()
        self._due.clear()
        self._keys.clear()
