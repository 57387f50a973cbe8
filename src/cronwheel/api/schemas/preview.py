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
    FireKindName,
    Instant,
    Integer,
    OutModel,
    ScheduleText,
    StrictModel,
    ZoneName,
)
from cronwheel.schedule import DstFold, DstGap, Fire, describe, parse_schedule
from cronwheel.schedule.jitter import MAX_JITTER_S, fire_at
from cronwheel.schedule.lint import schedule_warnings

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

    @classmethod
    def from_record(cls, fire: Fire, job_id: str | None = None, jitter_s: float = 0.0) -> FireOut:
        """``fire``; with ``jitter_s`` and the job's id, when it fires (``fires_at``)."""
        offset = fire.at.utcoffset()
        utc = fire.at.astimezone(UTC)
        return cls(
            at=fire.at,
            utc=utc,
            offset_s=0 if offset is None else int(offset.total_seconds()),
            kind=fire.kind,
            wall=fire.wall.isoformat(),
            fires_at=fire_at(job_id, utc, jitter_s) if jitter_s and job_id else None,
        )


def jitter_warnings(job_id: str | None, jitter_s: float) -> list[str]:
    """What a preview says of a jitter window whose offsets it cannot show (no job id)."""
    if not jitter_s or job_id:
        return []
    return [
        f"each slot fires up to {jitter_s:g} s after it, at an offset that depends on the job id: "
        "give the job's id as the seed to see when"
    ]


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
    def build(cls, request: PreviewIn, now: datetime) -> PreviewOut:
        """The preview ``request`` asks for (after ``request.after``, else after ``now``).

        The one builder of a preview: ``POST /v1/schedules/preview`` and ``cronwheel schedule
        preview`` (which runs locally, without a server) both answer with it, so their JSON is
        the same. Raises :class:`~cronwheel.schedule.ScheduleError` for an invalid expression,
        zone or option."""
        schedule = parse_schedule(
            request.expression,
            request.timezone,
            dst_gap=request.dst_gap,
            dst_fold=request.dst_fold,
            seed=request.seed,
        )
        after = (request.after if request.after is not None else now).astimezone(UTC)
        fires = itertools.islice(schedule.fires_after(after), request.count)
        return cls(
            expression=schedule.expression,
            timezone=schedule.timezone,
            dst_gap=schedule.dst_gap,
            dst_fold=schedule.dst_fold,
            wildcard=schedule.wildcard,
            description=describe(schedule),
            after=after,
            fires=[FireOut.from_record(fire, request.seed, request.jitter_s) for fire in fires],
            warnings=schedule_warnings(schedule, after) + jitter_warnings(request.seed, request.jitter_s),
        )
