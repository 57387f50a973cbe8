"""How many jobs fire in each bucket of a coming window, by team: the herd an operator sees coming.

Pure: jobs and a window go in, counts come out. A job's fires are its schedule's slots (DST rules,
``start_at``/``end_at``, calendars: a slot they close is recorded SKIPPED and fires nothing, a
shifted run fires) moved by its jitter offset, counted where they fire. The slots come from the
schedule, not from the job's cursor, so a slot already armed (its run written ahead, the cursor
moved past it) still counts.

The cost is bounded: jobs that walk the same slots (same expression, zone, options, bounds and
calendars; ``H`` hashes the job id, so such a job walks alone) are walked once as a group, the
jobs without jitter counted together, each jittered one at its own offsets; and no walk goes past
``cap`` slots (the jobs of one that does are counted as ``capped``). A herd of 100,000 jobs on a
few expressions costs a few walks and one pass over the jobs.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronwheel.model import DueJob
from cronwheel.schedule import CronSchedule
from cronwheel.scheduler.planner import Timeline, due_at, excluded, schedule_of, timeline_of

FIRES_PER_JOB = 3600  # slots walked per job per window: a job firing every second, for an hour
_EPSILON = timedelta(microseconds=1)


@dataclass(frozen=True)
class Window:
    """``[start, start + length)`` cut into buckets of ``bucket`` (``length`` a multiple of it)."""

    start: datetime
    length: timedelta
    bucket: timedelta

    @property
    def end(self) -> datetime:
        return self.start + self.length

    def index(self, moment: datetime) -> int | None:
        """The bucket ``moment`` falls in, or None outside the window."""
        if moment < self.start or moment >= self.end:
            return None
        return (moment - self.start) // self.bucket


@dataclass
class Upcoming:
    """Fires per bucket (index -> team -> count), the jobs counted and those cut at the cap."""

    buckets: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    jobs: int = 0
    capped: int = 0


def aligned(now: datetime, bucket: timedelta) -> datetime:
    """The start of the bucket ``now`` is in, buckets aligned on the Unix epoch (UTC)."""
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    return now - (now - epoch) % bucket


def count(jobs: Iterable[DueJob], window: Window, cap: int = FIRES_PER_JOB) -> Upcoming:
    """The fires of ``jobs`` in ``window``, per bucket and team (see the module's doc)."""
    upcoming = Upcoming()
    groups: dict[tuple[object, ...], list[DueJob]] = defaultdict(list)
    for job in jobs:  # by what their slots depend on, the job id aside (parsing per job costs most)
        upcoming.jobs += 1
        groups[_walk_key(job)].append(job)
    for members in groups.values():
        if _seeded(members[0]):  # H: each job's own slots
            for job in members:
                _count_group(upcoming, window, timeline_of(job), [job], cap)
        else:
            _count_group(upcoming, window, timeline_of(members[0]), members, cap)
    return upcoming


def _walk_key(job: DueJob) -> tuple[object, ...]:
    return (
        job.schedule, job.timezone, job.dst_gap, job.dst_fold, job.calendar_spec, job.calendar_shift,
        job.start_at, job.end_at,
    )  # fmt: skip


def _seeded(job: DueJob) -> bool:
    """Whether the job's schedule hashes its id (``H``): then no other job shares its slots."""
    schedule = schedule_of(job)
    return isinstance(schedule, CronSchedule) and schedule.seed is not None


def _count_group(
    upcoming: Upcoming, window: Window, timeline: Timeline, members: list[DueJob], cap: int
) -> None:
    """Jobs that walk the same slots: walked once, from as far back as the widest jitter window
    reaches (a jittered slot fires up to ``jitter_s`` after it); each jittered job's fires are its
    own, the others count together."""
    first = members[0]
    widest = max(job.jitter_s for job in members)
    lo = window.start - timedelta(seconds=widest)
    slots, capped = _slots(timeline, first.start_at, first.end_at, lo, window.end, cap)
    together = Counter(job.team for job in members if not job.jitter_s)
    if together:
        _tally(upcoming, window, slots, capped, together)
    for job in members:
        if job.jitter_s:
            _tally(upcoming, window, [due_at(job, slot) for slot in slots], capped, Counter({job.team: 1}))


def _tally(
    upcoming: Upcoming, window: Window, fires: list[datetime], capped: bool, teams: Counter[str]
) -> None:
    if capped:
        upcoming.capped += sum(teams.values())
    for moment in fires:
        index = window.index(moment)
        if index is not None:
            upcoming.buckets[index].update(teams)


def _slots(
    timeline: Timeline,
    start_at: datetime | None,
    end_at: datetime | None,
    lo: datetime,
    hi: datetime,
    cap: int,
) -> tuple[list[datetime], bool]:
    """The slots in ``[lo, hi)`` within ``[start_at, end_at]`` that fire (not closed by a
    calendar), and whether the walk stopped at ``cap`` slots with more in the range."""
    after = max(lo, start_at) if start_at is not None else lo
    slots: list[datetime] = []
    slot = _utc(timeline.next_after(after - _EPSILON))
    for _ in range(cap):
        if slot is None or slot >= hi or (end_at is not None and slot > end_at):
            return slots, False
        if not excluded(timeline, slot):
            slots.append(slot)
        slot = _utc(timeline.next_after(slot))
    return slots, slot is not None and slot < hi and (end_at is None or slot <= end_at)


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)
