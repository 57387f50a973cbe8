"""Jitter: each slot of a job fires at a deterministic offset after it, within the job's window.

A herd of jobs on the same expression (every job ``0 * * * *``) fires at once; a window of
``jitter_s`` seconds spreads them. The offset of a slot is a function of the job id and the slot
alone, so every scheduler that ever fires the slot (after a restart, on another node after a
failover) fires it at the same instant. The slot stays the run's identity (its dedup key);
the offset only moves when it fires.

The offset is whole milliseconds in ``[0, jitter_s)``: the BLAKE2b digest of
``"{job_id}|{slot as Unix microseconds}"``, read as an integer, modulo the window in
milliseconds. A window shorter than the schedule's shortest gap between two slots keeps the
jittered fire times in the slots' order (:func:`too_wide` finds a gap that is not longer).
"""

from __future__ import annotations

import hashlib
import math
from datetime import UTC, datetime, timedelta

from cronwheel.schedule.gaps import Gap, shortest_gap
from cronwheel.schedule.kinds import Schedule

MAX_JITTER_S = 86_400.0  # a day: a wider window would only say "some time this week"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def jitter_offset(job_id: str, slot: datetime, jitter_s: float) -> timedelta:
    """How long after ``slot`` (aware) the job ``job_id`` fires it, with a window of
    ``jitter_s`` seconds: whole milliseconds, at least 0 and less than ``jitter_s``."""
    window_ms = int(jitter_s * 1000)
    if window_ms <= 0:
        return timedelta(0)
    micros = (slot - _EPOCH) // _MICROSECOND
    digest = hashlib.blake2b(f"{job_id}|{micros}".encode(), digest_size=8).digest()
    return timedelta(milliseconds=int.from_bytes(digest, "big") % window_ms)


def fire_at(job_id: str, slot: datetime, jitter_s: float) -> datetime:
    """The instant the slot fires: the slot itself without jitter, else later by its offset."""
    if not jitter_s:
        return slot
    return slot + jitter_offset(job_id, slot, jitter_s)


def too_wide(schedule: Schedule, jitter_s: float, after: datetime) -> Gap | None:
    """Two consecutive fire times of ``schedule`` (from ``after`` on) no further apart than
    ``jitter_s``, if there are: a window that wide could fire a slot after the next one. None:
    every gap is longer (a one-time schedule has none). Gaps are whole seconds."""
    if jitter_s <= 0:
        return None
    return shortest_gap(schedule, after, below=math.floor(jitter_s) + 1)
