"""The upcoming fires: how many jobs of the caller's teams fire in each bucket of the coming
window, by team (``GET /v1/schedules/upcoming``)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from pydantic import Field

from cronwheel.api.schemas.base import OutModel
from cronwheel.scheduler.upcoming import Upcoming, Window

MAX_WINDOW_S = 86_400  # a day

UpcomingKey = tuple[int, int, tuple[str, ...] | None]  # window_s, bucket_s, the teams (None: every team)


class UpcomingBucket(OutModel):
    at: datetime = Field(
        description="The bucket's start (UTC): fires in [at, at + bucket_s), up to the window's end."
    )
    total: int = Field(description="Fires in the bucket, every team's.")
    teams: dict[str, int] = Field(description="Fires in the bucket by team (teams with none left out).")


class UpcomingOut(OutModel):
    computed_at: datetime = Field(
        description="When the count was made (UTC): callers asking the same window, buckets and "
        "teams within a few seconds share one count."
    )
    start: datetime = Field(description="The window's start: then, down to a whole bucket (UTC).")
    window_s: int
    bucket_s: int
    jobs: int = Field(
        description="Live, unpaused, not complete jobs of the caller's teams that were counted."
    )
    capped: int = Field(
        description="Jobs with more fires in the window than are counted per job (their first ones are)."
    )
    fires: int = Field(description="Fires in the window, every bucket's.")
    teams: dict[str, int] = Field(description="Fires in the window by team.")
    buckets: list[UpcomingBucket] = Field(description="The buckets that hold a fire, in time order.")

    @classmethod
    def of(cls, upcoming: Upcoming, window: Window, computed_at: datetime) -> UpcomingOut:
        buckets = [
            UpcomingBucket(
                at=window.start + index * window.bucket, total=sum(teams.values()), teams=dict(teams)
            )
            for index, teams in sorted(upcoming.buckets.items())
        ]
        teams: Counter[str] = Counter()
        for bucket in buckets:
            teams.update(bucket.teams)
        return cls(
            computed_at=computed_at,
            start=window.start,
            window_s=int(window.length.total_seconds()),
            bucket_s=int(window.bucket.total_seconds()),
            jobs=upcoming.jobs,
            capped=upcoming.capped,
            fires=teams.total(),
            teams=dict(sorted(teams.items())),
            buckets=buckets,
        )
