"""How many jobs fire in each bucket of a coming window, by team: the herd an operator sees coming.

Pure: groups of jobs that fire alike (``Store.fire_groups``, or :func:`groups_of` over jobs) and a
window go in, counts come out. A job's fires are its schedule's slots (DST rules,
``start_at``/``end_at``, calendars: a slot they close is recorded SKIPPED and fires nothing, a
shifted run fires) moved by its jitter offset, counted where they fire. The slots come from the
schedule, not from the job's cursor, so a slot already armed (its run written ahead, the cursor
moved past it) still counts.

The cost is bounded: groups that walk the same slots (same expression, zone, options, bounds and
calendars, whatever their team; ``H`` hashes the job id, so such a job walks alone) are walked
once, the groups without jitter counted together, each jittered job at its own offsets; and no
walk goes past ``cap`` slots (the jobs of one that does are counted as ``capped``). A herd of
100,000 jobs on a few expressions is a few thousand groups, read grouped from the store: a few
walks and one pass over the groups.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cronwheel.model import DueJob, FireGroup
from cronwheel.schedule import may_hash
from cronwheel.schedule.jitter import fire_at
from cronwheel.scheduler.planner import Timeline, excluded, timeline_of

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


def count(groups: Iterable[FireGroup], window: Window, cap: int = FIRES_PER_JOB) -> Upcoming:
    """The fires of the jobs of ``groups`` in ``window``, per bucket and team (see the module's doc)."""
    upcoming = Upcoming()
    walks: dict[tuple[object, ...], list[FireGroup]] = defaultdict(list)
    for group in groups:  # by what their slots depend on, the team and job id aside
        upcoming.jobs += group.jobs
        walks[_walk_key(group)].append(group)
    for members in walks.values():
        if may_hash(members[0].schedule):  # H: each job's own slots (each a group of one)
            for group in members:
                _count_walk(upcoming, window, timeline_of(group), [group], cap)
        else:
            _count_walk(upcoming, window, timeline_of(members[0]), members, cap)
    return upcoming


def groups_of(jobs: Iterable[DueJob]) -> list[FireGroup]:
    """``jobs`` grouped as ``Store.fire_groups`` groups them: by team and :func:`_walk_key`, a job
    with a jitter window or an expression that may hash its id alone."""
    counts: Counter[tuple[object, ...]] = Counter()
    first: dict[tuple[object, ...], DueJob] = {}
    for job in jobs:
        key = (job.team, _own(job), *_walk_key(job))
        counts[key] += 1
        first.setdefault(key, job)
    return [_group(first[key], n) for key, n in counts.items()]


def _own(job: DueJob) -> str | None:
    """The job's id if its fires are its own (a jitter window, or ``H`` perhaps), else None."""
    return job.id if job.jitter_s or may_hash(job.schedule) else None


def _group(job: DueJob, jobs: int) -> FireGroup:
    own = _own(job)
    return FireGroup(
        job.team, jobs, job.schedule, job.timezone, job.dst_gap, job.dst_fold, job.start_at, job.end_at,
        job.calendar_spec, job.calendar_shift, own, job.jitter_s if own else 0.0,
    )  # fmt: skip


def _walk_key(job: DueJob | FireGroup) -> tuple[object, ...]:
    return (
        job.schedule, job.timezone, job.dst_gap, job.dst_fold, job.start_at, job.end_at,
        job.calendar_spec, job.calendar_shift,
    )  # fmt: skip


def _count_walk(
    upcoming: Upcoming, window: Window, timeline: Timeline, members: list[FireGroup], cap: int
) -> None:
    """Groups that walk the same slots: walked once, from as far back as the widest jitter window
    reaches (a jittered slot fires up to ``jitter_s`` after it); each jittered job's fires are its
    own, the others count together."""
    first = members[0]
    widest = max(group.jitter_s for group in members)
    lo = window.start - timedelta(seconds=widest)
    slots, capped = _slots(timeline, first.start_at, first.end_at, lo, window.end, cap)
    together: Counter[str] = Counter()
    for group in members:
        if not group.jitter_s:
            together[group.team] += group.jobs
    if together:
        _tally(upcoming, window, slots, capped, together)
    for group in members:
        if group.jitter_s:
            fires = [_fire_at(group, slot) for slot in slots]
            _tally(upcoming, window, fires, capped, Counter({group.team: group.jobs}))


def _fire_at(group: FireGroup, slot: datetime) -> datetime:
    """When ``slot`` of the jittered job of ``group`` (a group of one naming it) fires."""
    if group.id is None:
        raise ValueError("a group with a jitter window is one job, named by its id")
    return fire_at(group.id, slot, group.jitter_s)


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
