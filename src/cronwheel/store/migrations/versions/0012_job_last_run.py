"""Each job's latest run and its state: ``job_last_run``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04

One row per job that has runs: the job's latest run by (slot, id), that run's state and the job's
team (a copy, for the index), written by
the store's statements that insert runs, change their state or delete them
(``cronwheel.store.sql.last_runs``), never by triggers. The upgrade fills it from the runs (each
job's latest by ``ix_runs_job_id_slot``). A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None

_BACKFILL = """
INSERT INTO job_last_run (job_id, team, slot, run_id, state)
SELECT runs.job_id, jobs.team, runs.slot, runs.id, runs.state
FROM jobs JOIN runs ON runs.id = (
    SELECT latest.id FROM runs AS latest WHERE latest.job_id = jobs.id
    ORDER BY latest.slot DESC, latest.id DESC LIMIT 1
)
"""


def upgrade() -> None:
    op.create_table(
        "job_last_run",
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_last_run_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_last_run"),
    )
    op.create_index("ix_job_last_run_state_job_id_team", "job_last_run", ["state", "job_id", "team"])
    op.execute(_BACKFILL)


def downgrade() -> None:
    op.drop_index("ix_job_last_run_state_job_id_team", table_name="job_last_run")
    op.drop_table("job_last_run")
