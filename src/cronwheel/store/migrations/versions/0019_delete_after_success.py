"""One-time jobs deleted after success: ``jobs.delete_after_success``.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07

A boolean, false for every existing job (``server_default``): when true (allowed only on ``@at``
jobs), the transaction that records the success of the job's slot run also deletes the job
(``cronwheel.store.sql.jobs.delete_succeeded``). The backfill state ``cancelled`` that cancelling a backfill
writes is in ``ck_backfills_state`` since 0016: no constraint changes. A frozen snapshot: later
changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # ALTER TABLE on both databases: a batch's copy of ``jobs`` on SQLite would drop the table
    # that the runs' foreign keys refer to
    column: sa.Column[bool] = sa.Column(
        "delete_after_success", sa.Boolean(), nullable=False, server_default=sa.false()
    )
    op.add_column("jobs", column)


def downgrade() -> None:
    op.drop_column("jobs", "delete_after_success")  # SQLite 3.35+ drops a plain column in place
