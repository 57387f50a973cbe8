"""The schedule preview: an expression in a zone, its next fire times with their DST effects,
warnings and the schedule in words."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Annotated

from pydantic import (
    Field,
    StringConstraints,
)

from cronwheel.api.schemas.base import (
    CalendarShiftChoice,
    FireKindName,
    Instant,
    Integer,
    Name,
    OutModel,
    ScheduleText,
    StrictModel,
    ZoneName,
)
from cronwheel.schedule import DstFold, DstGap, Fire, FireKind, Schedule, describe, parse_schedule
from cronwheel.schedule.calendar import CalendarSchedule, CalendarShift, CalendarSpec
from cronwheel.schedule.jitter import MAX_JITTER_S, fire_at
from cronwheel.schedule.lint import schedule_warnings

MAX_PREVIEW_CALENDARS = 16  # as a job's (cronwheel.jobs.service.MAX_JOB_CALENDARS)

# -- schedule preview --------------------------------------------------------------------------


class PreviewIn(StrictModel):
    expression: ScheduleText
    timezone: ZoneName = "UTC"
    count: Integer = Field(default=10, ge=1, le=1000)
    after: Instant | None = Field(default=None, description="Start after this instant; default: now.")
    dst_gap: DstGap | None = None
    dst_fold: DstFold | None = None
    seed: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="What H hashes (a job's id, for that job's own schedule)."
    )
    jitter_s: float = Field(
        default=0.0,
        ge=0,
        le=MAX_JITTER_S,
        description="A job's jitter window: with a seed (the job's id), each fire's `fires_at`.",
    )
    team: Name | None = Field(None, description="The team whose `calendars` apply (with `calendars`).")
    calendars: list[Name] = Field(
        default_factory=list,
        max_length=MAX_PREVIEW_CALENDARS,
        description="Calendars of `team` whose closed days mark fires skipped, as a job listing them would.",
    )
    calendar_shift: CalendarShiftChoice = Field(
        default=CalendarShift.NONE, description="As a job's: where a skipped fire's run goes."
    )


class FireOut(OutModel):
    at: datetime = Field(description="The fire time in the schedule's zone.")
    utc: datetime
    offset_s: int = Field(description="UTC offset of the zone at that time, in seconds.")
    kind: FireKindName
    wall: str = Field(description="The nominal local wall time (differs from `at` when shifted).")
    fires_at: datetime | None = Field(
        default=None,
        description="With jitter, when this slot fires (UTC): the slot plus the job's offset; null "
        "without jitter, or when the job id (the seed) is not known.",
    )
    calendar: str | None = Field(
        default=None,
        description="`skipped`: its local date is closed by the calendars (recorded SKIPPED, reason "
        "`calendar`); `shifted`: a run a calendar shift moved here (from `shifted_from`); null: neither.",
    )
    shifted_from: datetime | None = Field(
        default=None, description="The skipped slot a shifted run stands for."
    )

    @classmethod
    def from_record(
        cls,
        fire: Fire,
        fires_at: datetime | None = None,
        calendar: str | None = None,
        shifted_from: datetime | None = None,
    ) -> FireOut:
        """``fire``, with when it fires (``fires_at``, with jitter) and its calendar mark."""
        offset = fire.at.utcoffset()
        utc = fire.at.astimezone(UTC)
        return cls(
            at=fire.at,
            utc=utc,
            offset_s=0 if offset is None else int(offset.total_seconds()),
            kind=fire.kind,
            wall=fire.wall.isoformat(),
            calendar=calendar,
            shifted_from=shifted_from,
            fires_at=fires_at,
        )


def jitter_warnings(job_id: str | None, jitter_s: float) -> list[str]:
    """What a preview says of a jitter window whose offsets it cannot show (no job id)."""
    if not jitter_s or job_id:
        return []
    return [
        f"each slot fires up to {jitter_s:g} s after it, at an offset that depends on the job id: "
        "give the job's id as the seed to see when"
    ]


def fires_of(
    schedule: Schedule,
    after: datetime,
    count: int,
    calendar: CalendarSpec | None,
    shift: CalendarShift,
    jitter: tuple[str | None, float] = (None, 0.0),
) -> list[FireOut]:
    """The first ``count`` fires after ``after``; with ``calendar``, each slot on a closed day
    marked ``skipped`` and the shifted runs among them, marked ``shifted``; with ``jitter`` (the
    job's id and window), when each fire that runs fires."""
    job_id, jitter_s = jitter

    def fires(fire: Fire, mark: str | None = None, origin: datetime | None = None) -> FireOut:
        at = None  # a skipped fire does not fire; without the job's id its offset is unknown
        if jitter_s and job_id is not None and mark != "skipped":
            at = fire_at(job_id, fire.at.astimezone(UTC), jitter_s)
        return FireOut.from_record(fire, at, mark, origin)

    if calendar is None:
        return [fires(fire) for fire in itertools.islice(schedule.fires_after(after), count)]
    timeline = CalendarSchedule(schedule, calendar, shift)
    nominal = schedule.fires_after(after)
    pending = next(nominal, None)
    found: list[FireOut] = []
    at = timeline.next_after(after)
    while at is not None and len(found) < count:
        while pending is not None and pending.at < at:
            pending = next(nominal, None)
        local = at.astimezone(schedule.zone)
        fire = (
            pending
            if pending is not None and pending.at == at
            else Fire(local, FireKind.NORMAL, local.replace(tzinfo=None))
        )
        origin = None if timeline.excluded(at) else timeline.shifted_from(at)
        mark = "skipped" if timeline.excluded(at) else ("shifted" if origin is not None else None)
        found.append(fires(fire, mark, origin))
        at = timeline.next_after(at)
    return found


class PreviewOut(OutModel):
    expression: str
    timezone: str
    dst_gap: DstGap
    dst_fold: DstFold
    wildcard: bool
    description: str = Field(description='The schedule in words, such as "every 15 minutes".')
    after: datetime = Field(description="The instant the fire times follow, in UTC.")
    fires: list[FireOut]
    warnings: list[str]

    @classmethod
    def build(cls, request: PreviewIn, now: datetime, calendar: CalendarSpec | None = None) -> PreviewOut:
        """The preview ``request`` asks for (after ``request.after``, else after ``now``).

        The one builder of a preview: ``POST /v1/schedules/preview`` and ``cronwheel schedule
        preview`` (which runs locally, without a server) both answer with it, so their JSON is
        the same. Raises :class:`~cronwheel.schedule.ScheduleError` for an invalid expression,
        zone or option. ``calendar``: the union of the request's calendars, which the caller
        resolved (None: none)."""
        schedule = parse_schedule(
            request.expression,
            request.timezone,
            dst_gap=request.dst_gap,
            dst_fold=request.dst_fold,
            seed=request.seed,
        )
        after = (request.after if request.after is not None else now).astimezone(UTC)
        jitter = (request.seed, request.jitter_s)
        fires = fires_of(schedule, after, request.count, calendar, request.calendar_shift, jitter)
        return cls(
            expression=schedule.expression,
            timezone=schedule.timezone,
            dst_gap=schedule.dst_gap,
            dst_fold=schedule.dst_fold,
            wildcard=schedule.wildcard,
            description=describe(schedule),
            after=after,
            fires=fires,
            warnings=schedule_warnings(schedule, after) + jitter_warnings(request.seed, request.jitter_s),
        )
