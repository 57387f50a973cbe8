"""What the job service judges of a backfill request before anything is written: the range (both
ends with an offset, ``from`` before ``to``, ``to`` not in the future), its slots within the job's
``start_at``/``end_at`` (at least one, at most :data:`BACKFILL_MAX_SLOTS`, more than
:data:`BACKFILL_CONFIRM_SLOTS` only when confirmed), and which of them already have a run.

Each refusal is a :class:`BackfillRefusedError` naming the request field to change, so the API answers
it as a problem with that field and the CLI says which option.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwheel.errors import InvalidInputError
from cronwheel.model import Job, utc_text
from cronwheel.scheduler.backfill import BACKFILL_CONFIRM_SLOTS, BACKFILL_MAX_SLOTS


class BackfillRefusedError(InvalidInputError):
    """A backfill request refused whole (422): ``field`` is the request field to change
    (``from``, ``to`` or ``confirm``), ``code`` says why, ``facts`` are numbers a client can use."""

    def __init__(self, field: str, code: str, message: str, **facts: Any) -> None:
        super().__init__(message)
        self.field = field
        self.code = code
        self.facts = facts


@dataclass(frozen=True, slots=True)
class BackfillPlan:
    """A backfill as it would be recorded now: the range's slots without a run (``missing``,
    what it would create) and those with one (``existing``), oldest first."""

    job: Job
    start: datetime
    end: datetime
    missing: tuple[datetime, ...]
    existing: tuple[datetime, ...]

    @property
    def total(self) -> int:
        return len(self.missing) + len(self.existing)

    @property
    def first(self) -> datetime:
        """The range's first slot: where the backfill's cursor starts."""
        return min(self.missing[:1] + self.existing[:1])


def check_range(start: datetime, end: datetime, now: datetime) -> None:
    """Refuse a range that is not [past instant, later past instant] with offsets."""
    for field, moment in (("from", start), ("to", end)):
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise BackfillRefusedError(field, "offset_required", f"{field} must be RFC 3339 with an offset")
    if start >= end:
        raise BackfillRefusedError(
            "to", "range_order", f"to ({_text(end)}) must be after from ({_text(start)})"
        )
    if end > now:
        raise BackfillRefusedError(
            "to",
            "in_future",
            f"to ({_text(end)}) is in the future (now {_text(now)}): only past slots are backfilled",
        )


def check_slots(job: Job, start: datetime, end: datetime, count: int) -> None:
    """Refuse a range with no slot of the job, or with more than :data:`BACKFILL_MAX_SLOTS`."""
    if count == 0:
        raise BackfillRefusedError(
            "from", "no_slot",
            f"no slot of {job.schedule!r} ({job.timezone}) lies in [{_text(start)}, {_text(end)}]"
            " within the job's start_at and end_at",
        )  # fmt: skip
    if count > BACKFILL_MAX_SLOTS:
        raise BackfillRefusedError(
            "from", "too_many_slots",
            f"the range holds more than {BACKFILL_MAX_SLOTS} slots: backfill it in shorter ranges",
            limit=BACKFILL_MAX_SLOTS,
        )  # fmt: skip


def check_confirmed(total: int, confirm: bool) -> None:
    """Refuse more than :data:`BACKFILL_CONFIRM_SLOTS` slots unless the caller confirmed them."""
    if total > BACKFILL_CONFIRM_SLOTS and not confirm:
        raise BackfillRefusedError(
            "confirm", "confirm_required",
            f"the range holds {total} slots, more than {BACKFILL_CONFIRM_SLOTS}: confirm to backfill all",
            slots=total, limit=BACKFILL_CONFIRM_SLOTS,
        )  # fmt: skip


def _text(moment: datetime) -> str:
    if moment.tzinfo is None:
        return moment.isoformat()
    return utc_text(moment)
