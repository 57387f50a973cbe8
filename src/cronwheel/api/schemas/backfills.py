"""A backfill as the API takes and gives it: the request (a range of past slots, a dry run, a
confirmation), the backfill and its progress, and a dry run's plan."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, Strict

from cronwheel.api.schemas.base import Instant, OutModel, StrictModel
from cronwheel.jobs.backfill import BackfillPlan
from cronwheel.model import Backfill, BackfillState
from cronwheel.scheduler.backfill import BACKFILL_CONFIRM_SLOTS, BACKFILL_MAX_SLOTS

BackfillStateName = Annotated[BackfillState, Strict(False)]


class BackfillIn(StrictModel):
    """Record a run for every slot of the job in [``from``, ``to``] (within its ``start_at`` and
    ``end_at``) that has none yet."""

    start: Instant = Field(alias="from", description="The range's first instant (RFC 3339, with an offset).")
    end: Instant = Field(
        alias="to", description="The range's last instant (RFC 3339, with an offset); not in the future."
    )
    dry_run: bool = Field(
        default=False, description="Answer the slots it would create and those that have runs; write nothing."
    )
    confirm: bool = Field(
        default=False,
        description=f"Required for a range of more than {BACKFILL_CONFIRM_SLOTS} slots "
        f"(at most {BACKFILL_MAX_SLOTS} are taken).",
    )


class BackfillOut(OutModel):
    """A backfill and its progress: of ``total`` slots, ``created`` got their run from it and
    ``existing`` already had one; ``next_slot`` is where it goes on (null once through)."""

    id: str
    job_id: str
    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    state: BackfillStateName
    total: int
    created: int
    existing: int
    remaining: int = Field(description="Slots not decided yet: total - created - existing (at least 0).")
    next_slot: datetime | None
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def from_record(cls, backfill: Backfill) -> BackfillOut:
        return cls.model_validate(
            {
                "id": backfill.id, "job_id": backfill.job_id, "from": backfill.start, "to": backfill.end,
                "state": backfill.state.value, "total": backfill.total, "created": backfill.created,
                "existing": backfill.existing, "remaining": max(0, backfill.total - backfill.decided),
                "next_slot": backfill.cursor, "created_at": backfill.created_at,
                "updated_at": backfill.updated_at,
            }
        )  # fmt: skip


class BackfillPage(OutModel):
    items: list[BackfillOut]


class BackfillPlanOut(OutModel):
    """A dry run: what the backfill would do now. Nothing was written."""

    job_id: str
    start: datetime = Field(alias="from")
    end: datetime = Field(alias="to")
    total: int
    create: list[datetime] = Field(description="The slots without a run, which it would create.")
    existing: list[datetime] = Field(description="The slots that already have a run, left alone.")
    confirm_required: bool = Field(
        description=f"More than {BACKFILL_CONFIRM_SLOTS} slots: confirm to run it."
    )

    @classmethod
    def from_plan(cls, plan: BackfillPlan) -> BackfillPlanOut:
        return cls.model_validate(
            {
                "job_id": plan.job.id, "from": plan.start, "to": plan.end, "total": plan.total,
                "create": list(plan.missing), "existing": list(plan.existing),
                "confirm_required": plan.total > BACKFILL_CONFIRM_SLOTS,
            }
        )  # fmt: skip
