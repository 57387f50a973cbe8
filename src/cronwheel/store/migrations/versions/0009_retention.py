"""Run history retention and attempt output tails: ``jobs.retention``, ``attempts.output_tail``
and the index ``ix_runs_job_id_state_slot``.

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-01

``jobs.retention`` holds a job's own retention policy (JSON ``{"keep_days", "keep_runs"}``; NULL:
the server's default). ``attempts.output_tail`` keeps the last bytes of an attempt's output beyond
the 1 KiB excerpt in ``output`` (NULL when the excerpt held it all). The index finds each job's
latest run of each state at once, which the purge never deletes. A frozen snapshot: later changes
get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("retention", sa.JSON(), nullable=True))
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("output_tail", sa.Text(), nullable=True))
    op.create_index("ix_runs_job_id_state_slot", "runs", ["job_id", "state", "slot"])


def downgrade() -> None:
    op.drop_index("ix_runs_job_id_state_slot", table_name="runs")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("output_tail")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("retention")
