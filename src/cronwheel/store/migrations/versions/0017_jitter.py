"""Jitter: ``jobs.jitter_s`` and ``runs.due_at``.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07

``jobs.jitter_s`` is a job's jitter window in seconds (0, every existing job's value: each slot
fires at the slot). ``runs.due_at`` is the instant a scheduled run's slot fires, the slot plus its
jitter offset (NULL: the slot itself, as for every existing run). Both are added and dropped in
place: SQLite does either without copying the table (whose copy would break the foreign keys). A
frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("jitter_s", sa.Float(), nullable=False, server_default="0"))
    op.add_column("runs", sa.Column("due_at", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "due_at")
    op.drop_column("jobs", "jitter_s")
