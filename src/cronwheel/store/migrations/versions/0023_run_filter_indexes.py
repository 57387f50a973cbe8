"""Partial indexes of the runs list's reason and late filters.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-07

``GET /v1/runs?reason=...`` and ``?late=true`` keep few runs of a long history: walking the
(slot, id) index for them reads every run when none match. ``ix_runs_reasoned_slot_id`` holds the
runs with a reason (skipped, or failed without an attempt) and ``ix_runs_late_slot_id`` those whose
first attempt started more than 1 s (1,000,000 microseconds) after they were due, both in the
list's (slot, id) order. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | None = None
depends_on: str | None = None

REASONED = sa.text("reason IS NOT NULL")
LATE = sa.text("started_at - coalesce(due_at, slot) > 1000000")


def upgrade() -> None:
    op.create_index(
        "ix_runs_reasoned_slot_id", "runs", ["slot", "id"], sqlite_where=REASONED, postgresql_where=REASONED
    )
    op.create_index("ix_runs_late_slot_id", "runs", ["slot", "id"], sqlite_where=LATE, postgresql_where=LATE)


def downgrade() -> None:
    op.drop_index("ix_runs_late_slot_id", table_name="runs")
    op.drop_index("ix_runs_reasoned_slot_id", table_name="runs")
